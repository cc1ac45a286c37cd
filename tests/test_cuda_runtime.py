"""dynograph.cuda and the driver module (runtime/cuda_driver.py) on machines without a GPU: each
reason CUDA can be unavailable (simulated by replacing the import of pycuda and its driver calls)
and its message; torch's answers without CUDA; a fake pycuda driver for the paths a GPU takes
(devices, properties, events, memory through the caching allocator); ``import dynograph`` loads
neither pycuda nor the driver module."""
import json
import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import dynograph
from dynograph.runtime import cuda_driver
from dynograph.runtime.device import NoCudaError

sys.path.insert(0, os.path.dirname(__file__))


# -- a fake pycuda.driver ----------------------------------------------------------------------
class FakeDriver(types.ModuleType):
    """What cuda_driver uses of pycuda.driver, over ``devices`` [(name, (major, minor), memory)]."""

    def __init__(self, devices=(("NVIDIA Fake", (8, 6), 24 << 30),), init_error=None,
                 capacity=1 << 40):
        super().__init__("pycuda.driver")
        drv = self
        self.devices, self.init_error = list(devices), init_error
        self.capacity, self.used = capacity, 0
        self.memory = {}                     # address -> bytearray
        self.calls = []
        self.clock = 0.0

        class Error(Exception):
            pass

        class MemoryError_(Error):
            pass

        self.Error, self.MemoryError = Error, MemoryError_
        self.device_attribute = types.SimpleNamespace(**{n: n for n in (
            "MULTIPROCESSOR_COUNT", "INTEGRATED", "MULTI_GPU_BOARD", "MAX_THREADS_PER_MULTIPROCESSOR",
            "MAX_THREADS_PER_BLOCK", "MAX_REGISTERS_PER_MULTIPROCESSOR", "MAX_SHARED_MEMORY_PER_BLOCK",
            "WARP_SIZE", "L2_CACHE_SIZE", "PCI_BUS_ID", "PCI_DEVICE_ID", "PCI_DOMAIN_ID")})
        self.event_flags = types.SimpleNamespace(DEFAULT=0, BLOCKING_SYNC=1, DISABLE_TIMING=2)

        class Context:
            def __init__(self, index):
                self.index = index

            def push(self):
                drv.calls.append(("push", self.index))

            @staticmethod
            def pop():
                drv.calls.append(("pop",))

            @staticmethod
            def synchronize():
                drv.calls.append(("synchronize",))

        class Device:
            def __init__(self, index):
                self.index = index

            @staticmethod
            def count():
                return len(drv.devices)

            def name(self):
                return drv.devices[self.index][0]

            def compute_capability(self):
                return drv.devices[self.index][1]

            def total_memory(self):
                return drv.devices[self.index][2]

            def get_attribute(self, attr):
                return {"MULTIPROCESSOR_COUNT": 84, "WARP_SIZE": 32, "L2_CACHE_SIZE": 6 << 20,
                        "PCI_BUS_ID": 65}.get(attr, 0)

            def retain_primary_context(self):
                return Context(self.index)

        class Event:
            def __init__(self, flags=0):
                self.flags, self.time = flags, None

            def record(self):
                drv.clock += 1.5
                self.time = drv.clock

            def synchronize(self):
                drv.calls.append(("event synchronize",))

            def query(self):
                return True

            def time_till(self, end):
                if self.flags & 2 or end.flags & 2:
                    raise Error("cuEventElapsedTime failed: invalid resource handle")
                return end.time - self.time

        class Allocation:
            def __init__(self, address, nbytes):
                self.address, self.nbytes = address, nbytes

            def __int__(self):
                return self.address

            def free(self):
                drv.used -= self.nbytes
                del drv.memory[self.address]

        self.Context, self.Device, self.Event, self.Allocation = Context, Device, Event, Allocation

    def init(self, flags=0):
        if self.init_error:
            raise self.Error(self.init_error)

    def get_driver_version(self):
        return 13000

    def mem_get_info(self):
        return (self.capacity - self.used, self.capacity)

    def mem_alloc(self, nbytes):
        if self.used + nbytes > self.capacity:
            raise self.MemoryError("cuMemAlloc failed: out of memory")
        address = 0x7F0000000000 + sum(len(m) for m in self.memory.values()) + len(self.memory) * 4096
        self.memory[address] = bytearray(nbytes)
        self.used += nbytes
        return self.Allocation(address, nbytes)

    def _span(self, address, n):
        for base, mem in self.memory.items():
            if base <= address and address + n <= base + len(mem):
                return mem, address - base
        raise self.Error("invalid device pointer")

    def module_from_buffer(self, image):
        drv = self

        class Function:
            def prepare(self, arg_format):
                self.arg_format = arg_format

            def prepared_call(self, grid, block, *addresses):
                assert len(addresses) == len(self.arg_format)
                drv.calls.append(("launch", self.name, grid, block, addresses))
                if self.name.endswith("_divides"):          # a divisor was 0: raise the flag
                    drv.memcpy_htod(addresses[-1], np.ones(1, np.uint8))

        class Module:
            def get_function(self, name):
                fn = Function()
                fn.name = name
                return fn
        drv.calls.append(("load", image))
        return Module()

    def memcpy_htod(self, address, array):
        mem, at = self._span(address, array.nbytes)
        mem[at:at + array.nbytes] = array.tobytes()

    def memcpy_dtoh(self, array, address):
        mem, at = self._span(address, array.nbytes)
        array[...] = np.frombuffer(bytes(mem[at:at + array.nbytes]), array.dtype).reshape(array.shape)


@pytest.fixture
def fresh(monkeypatch):
    """The driver module with nothing probed yet (restored afterwards)."""
    monkeypatch.setattr(cuda_driver, "_state", {})
    monkeypatch.setattr(cuda_driver, "_devices", {})
    monkeypatch.setattr(cuda_driver, "_thread", threading.local())
    monkeypatch.setattr(dynograph.cuda, "_seeds", {})
    return monkeypatch


def use_driver(monkeypatch, driver=None, import_error=None):
    """pycuda importable, its driver module ``driver`` (or an import failing with ``import_error``)."""
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))

    def import_driver():
        if import_error:
            raise ImportError(import_error)
        return driver
    monkeypatch.setattr(cuda_driver, "_import_driver", import_driver)
    return driver


@pytest.fixture
def gpu(fresh):
    """A fake driver with two devices."""
    return use_driver(fresh, FakeDriver(devices=[("NVIDIA Fake A", (8, 6), 24 << 30),
                                                 ("NVIDIA Fake B", (9, 0), 80 << 30)]))


# -- unavailable: each reason ------------------------------------------------------------------
def no_pycuda(mp):
    mp.setitem(sys.modules, "pycuda", None)         # import pycuda raises ImportError


def no_driver_library(mp):
    use_driver(mp, import_error="libcuda.so.1: cannot open shared object file: No such file or directory")


def init_failed(mp):
    use_driver(mp, FakeDriver(init_error="cuInit failed: system has unsupported display driver / cuda "
                                         "driver combination"))


def no_device_at_init(mp):
    use_driver(mp, FakeDriver(init_error="cuInit failed: no CUDA-capable device is detected"))


def zero_devices(mp):
    use_driver(mp, FakeDriver(devices=[]))


REASONS = [
    (no_pycuda, cuda_driver.NO_PYCUDA, r"pip install 'dynograph\[cuda\]'"),
    (no_driver_library, cuda_driver.NO_DRIVER, r"libcuda.so.1: cannot open shared object file"),
    (init_failed, cuda_driver.INIT_FAILED, r"unsupported display driver.*nvidia-smi"),
    (no_device_at_init, cuda_driver.NO_DEVICE, r"no CUDA-capable device is detected"),
    (zero_devices, cuda_driver.NO_DEVICE, r"the driver reports 0 devices.*CUDA_VISIBLE_DEVICES"),
]


@pytest.mark.parametrize("setup,kind,detail", REASONS, ids=[r[0].__name__ for r in REASONS])
def test_each_reason_and_its_message(fresh, setup, kind, detail):
    setup(fresh)
    reason = cuda_driver.unavailable()
    assert reason.kind == kind
    message = reason.message()
    assert message.startswith(f"dynograph: no CUDA device is available: {kind}")
    assert "Use device='cpu'" in message
    import re
    assert re.search(detail, message), message
    assert not dynograph.cuda.is_available() and dynograph.cuda.device_count() == 0
    x = dynograph.ones(2)
    for use in (lambda: dynograph.zeros(2, device="cuda"), lambda: x.cuda(), lambda: x.to("cuda"),
                lambda: x.to(dynograph.device("cuda", 0)), dynograph.cuda.current_device,
                dynograph.cuda.get_device_name, dynograph.cuda.synchronize, dynograph.cuda.init,
                lambda: dynograph.cuda.Event(enable_timing=True)):
        with pytest.raises(NoCudaError) as info:
            use()
        assert str(info.value) == message


def test_reason_is_found_once(fresh):
    calls = []

    def driver():
        calls.append(1)
        raise ImportError("libcuda.so.1: cannot open shared object file")
    fresh.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    fresh.setattr(cuda_driver, "_import_driver", driver)
    for _ in range(3):
        assert not dynograph.cuda.is_available()
    assert calls == [1]


def test_other_import_errors_of_pycuda_are_not_hidden(fresh):
    use_driver(fresh, import_error="cannot import name '_driver' (a broken install)")
    with pytest.raises(ImportError, match="broken install"):
        dynograph.cuda.is_available()


def test_without_cuda_as_torch_without_cuda(fresh):
    """torch 2.13 on a machine without CUDA: the queries that answer (False, 0, {}, None) answer
    the same; the ones that raise raise (torch's message names its own build)."""
    torch = pytest.importorskip("torch")
    no_pycuda(fresh)
    if torch.cuda.is_available():
        pytest.skip("torch has a GPU here")
    for name, args in [("is_available", ()), ("device_count", ()), ("is_initialized", ()),
                       ("memory_allocated", ()), ("max_memory_allocated", ()),
                       ("memory_reserved", ()), ("max_memory_reserved", ()), ("memory_stats", ()),
                       ("empty_cache", ()), ("manual_seed", (3,)), ("manual_seed_all", (3,)),
                       ("set_device", (-1,))]:
        assert getattr(dynograph.cuda, name)(*args) == getattr(torch.cuda, name)(*args), name
    for name, args in [("current_device", ()), ("get_device_name", ()), ("get_device_name", (0,)),
                       ("get_device_properties", (0,)), ("get_device_capability", ()),
                       ("synchronize", ()), ("set_device", (0,)), ("reset_peak_memory_stats", ()),
                       ("init", ()), ("mem_get_info", ()), ("initial_seed", ())]:
        with pytest.raises((AssertionError, AttributeError, RuntimeError)):
            getattr(torch.cuda, name)(*args)
        with pytest.raises(NoCudaError):
            getattr(dynograph.cuda, name)(*args)
    for T in (torch, dynograph):
        with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
            T.cuda.set_device("cpu")
        with pytest.raises(ValueError, match="Expected a torch.device with a specified index"):
            T.cuda.set_device(None)
        with pytest.raises(RuntimeError):
            T.cuda.Event(enable_timing=True)


def test_import_loads_neither_pycuda_nor_the_driver_module():
    code = ("import sys, json, dynograph; x = dynograph.ones(3) * 2; "
            "print(json.dumps([m for m in ('pycuda', 'dynograph.runtime.cuda_driver', "
            "'dynograph.runtime.cuda_nvrtc', 'dynograph.compiler.cuda.backend') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# -- with a (fake) GPU -------------------------------------------------------------------------
def test_devices_and_properties(gpu):
    cuda = dynograph.cuda
    assert cuda.is_available() and cuda.is_initialized() and cuda.device_count() == 2
    assert cuda.current_device() == 0
    assert cuda.get_device_name() == "NVIDIA Fake A"
    assert cuda.get_device_name("cuda:1") == cuda.get_device_name(dynograph.device("cuda", 1)) \
        == "NVIDIA Fake B"
    assert cuda.get_device_capability(1) == (9, 0)
    p = cuda.get_device_properties(0)
    assert (p.name, p.major, p.minor, p.total_memory, p.multi_processor_count, p.warp_size) == \
        ("NVIDIA Fake A", 8, 6, 24 << 30, 84, 32)
    assert repr(p) == ("_CudaDeviceProperties(name='NVIDIA Fake A', major=8, minor=6, "
                       "total_memory=24576MB, multi_processor_count=84, pci_bus_id=65, "
                       "pci_device_id=0, pci_domain_id=0, L2_cache_size=6MB)")
    cuda.set_device(1)
    assert cuda.current_device() == 1 and cuda.get_device_name() == "NVIDIA Fake B"
    cuda.set_device(-1)                      # ignored, as in torch
    assert cuda.current_device() == 1
    seen = []
    threading.Thread(target=lambda: seen.append(cuda.current_device())).start()
    while not seen:
        pass
    assert seen == [0]                       # the current device is the thread's
    for bad in (2, -1):
        with pytest.raises(AssertionError, match="Invalid device id"):
            cuda.get_device_name(bad)
    with pytest.raises(AssertionError, match="Invalid device id"):
        cuda.set_device(5)
    with pytest.raises(ValueError, match="Expected a cuda device"):
        cuda.get_device_name("cpu")
    assert cuda.mem_get_info(0) == (1 << 40, 1 << 40)
    assert cuda_driver.driver_version() == 13000


def test_contexts_are_made_current_once(gpu):
    dynograph.cuda.synchronize()
    dynograph.cuda.synchronize(0)
    assert gpu.calls == [("push", 0), ("synchronize",), ("synchronize",)]
    dynograph.cuda.synchronize(1)            # another device: its context replaces the first
    assert gpu.calls[3:] == [("pop",), ("push", 1), ("synchronize",)]


def test_events(gpu):
    start, end = dynograph.cuda.Event(enable_timing=True), dynograph.cuda.Event(enable_timing=True)
    assert start.query()
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        start.elapsed_time(end)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) == pytest.approx(1.5)
    plain = dynograph.cuda.Event()
    plain.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        start.elapsed_time(plain)


def test_memory_statistics_through_the_allocator(gpu):
    from dynograph.runtime.cuda_memory import DeviceArray
    cuda = dynograph.cuda
    assert cuda.memory_stats() == {}         # nothing asked of CUDA yet, as torch before its init
    cuda.init()
    assert cuda.memory_allocated() == 0 and cuda.memory_stats()["segment.all.current"] == 0
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = DeviceArray.from_host(host)
    np.testing.assert_array_equal(a.to_host(), host)
    assert a.strides == host.strides and a.size == 12 and "cuda:0" in repr(a)
    b = DeviceArray((1000, 1000), np.float64)
    assert cuda.memory_allocated() == 512 + 8_000_000
    assert cuda.memory_reserved() == (2 << 20) + (20 << 20) == gpu.used
    del b
    assert cuda.memory_allocated() == 512 and cuda.max_memory_allocated() == 512 + 8_000_000
    cuda.reset_peak_memory_stats()
    assert cuda.max_memory_allocated() == 512
    c = DeviceArray((500, 1000), np.float64)     # reuses b's cached block: no new segment
    assert len(gpu.memory) == 2
    del c
    cuda.empty_cache()
    assert cuda.memory_reserved() == 2 << 20 and len(gpu.memory) == 1
    assert cuda.memory_allocated(1) == 0     # another device's allocator
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        a.copy_from_host(np.zeros(2, np.float32))
    empty = DeviceArray((0, 3), np.float32)
    assert empty.address == 0 and empty.to_host().shape == (0, 3)


def test_out_of_memory(fresh):
    use_driver(fresh, FakeDriver(capacity=8 << 20))
    from dynograph.runtime.cuda_memory import DeviceArray
    with pytest.raises(dynograph.cuda.OutOfMemoryError, match="Tried to allocate 20.00 MiB"):
        DeviceArray((5 << 20,), np.float32)


def test_seeds(gpu):
    cuda = dynograph.cuda
    assert cuda.initial_seed() == cuda.DEFAULT_SEED
    cuda.manual_seed(7)
    assert cuda.initial_seed() == 7
    cuda.manual_seed_all(9)
    cuda.set_device(1)
    assert cuda.initial_seed() == 9


def test_backend_loads_and_launches_through_the_driver(gpu):
    """The cuda backend's load, launch, allocate and address on the fake driver: the launch shape
    is the kernel's mapping's, and a kernel dividing integers gets a device flag whose value comes
    back into the host flag the program passes."""
    from dynograph.compiler.cuda.backend import CudaBackend
    from dynograph.compiler.cuda.mapping import launch_shape, mapping_of
    from dynograph.compiler.lowering.kernel import describe
    from test_llvm_backend import graph_of, sample

    x = sample(np.int32, (40, 50))
    for op, divides in [("add", False), ("remainder", True)]:
        _, arrays, node = graph_of(op, (x, x))
        kernel = describe(node, [(tuple(s // 4 for s in a.strides), 0) for a in arrays])
        assert kernel.divides_integers == divides
        gpu.calls.clear()
        backend = CudaBackend(0)
        assert backend.arch == 86 and backend.name == "cuda:0"
        name = "dg_k" + ("_divides" if divides else "")
        fn = backend.load(b"cubin", name, kernel)
        inputs = [backend.allocate(a.shape, a.dtype) for a in arrays]
        out = backend.allocate((40, 50), np.int32)
        fault = np.zeros(1, np.uint8)
        addresses = [backend.address(a) for a in [*inputs, out]]
        backend.launch(fn, kernel, addresses + ([fault.ctypes.data] if divides else []))
        launches = [c for c in gpu.calls if c[0] == "launch"]
        grid, block = launch_shape(mapping_of(kernel))
        assert launches[0][1:4] == (name, (grid, 1), (block, 1, 1))
        assert launches[0][4][:3] == tuple(addresses)
        if divides:
            assert launches[0][4][3] == backend._flag.address != fault.ctypes.data
        assert fault[0] == divides


def test_pycuda_wheel_script_checks_its_arguments():
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                          "build_pycuda_wheel.sh")
    assert subprocess.run(["bash", "-n", script]).returncode == 0
    out = subprocess.run(["bash", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage:" in out.stderr and "OUT_DIR [PYTHON]" in out.stderr

"""Every call into the NVIDIA driver, through pycuda: the only module that imports pycuda, and only
when CUDA is first used (``import dynograph`` loads neither).

``unavailable()`` says why CUDA cannot be used here, or None: pycuda is not installed, the
driver library (libcuda.so.1) is missing, the driver failed to initialize, or it found no
device; ``require()`` raises ``NoCudaError`` with that reason's message.  The answer is worked out
once per process (as torch's is), on the first question.

Devices run in their primary context (the one the CUDA runtime and so torch and cupy use too),
made current on the calling thread by each call that needs it; ``current_device()`` is the
calling thread's, 0 until ``set_device``.  Device memory comes from one caching allocator per
device (runtime/cuda_allocator.py); kernels are launched on the default stream, in order, with no
host synchronization.
"""
import threading
from dataclasses import dataclass

from . import config
from .cuda_allocator import CachingAllocator
from .device import NoCudaError

# why CUDA is unavailable (Unavailable.kind)
NO_PYCUDA = "pycuda is not installed"
NO_DRIVER = "the NVIDIA driver library is missing"
INIT_FAILED = "the NVIDIA driver failed to initialize"
NO_DEVICE = "no CUDA device was found"

_ADVICE = {
    NO_PYCUDA: "install the CUDA extra (pip install 'dynograph[cuda]', with pycuda built for this "
               "Python)",
    NO_DRIVER: "libcuda.so.1 comes with the NVIDIA driver, which needs an NVIDIA GPU",
    INIT_FAILED: "check the driver with nvidia-smi",
    NO_DEVICE: "CUDA_VISIBLE_DEVICES may hide every device, or this machine has no NVIDIA GPU",
}


@dataclass(frozen=True)
class Unavailable:
    """Why CUDA cannot be used: one of the reasons above and what the failing call said."""
    kind: str
    detail: str = ""

    def message(self):
        detail = f" ({self.detail})" if self.detail else ""
        return (f"dynograph: no CUDA device is available: {self.kind}{detail}; "
                f"{_ADVICE[self.kind]}. Use device='cpu' to run on the CPU.")


_lock = threading.RLock()
_state = {}                 # "probed": Unavailable or None, "driver": pycuda.driver
_devices = {}               # index -> {"device", "context", "allocator"}
_thread = threading.local() # .index (current device), .active (the index whose context is current)


def _import_driver():
    """pycuda.driver, imported (a function, so tests can put a failing import in its place)."""
    import pycuda.driver
    return pycuda.driver


def _probe():
    """(Unavailable or None, the driver module or None)."""
    emulated = int(config.get("CUDA_EMULATE") or 0)
    if emulated > 0:
        from .cuda_emulated import Driver
        return None, Driver(emulated)
    try:
        import pycuda  # noqa: F401  (the package alone: its driver module needs libcuda)
    except ImportError:
        return Unavailable(NO_PYCUDA), None
    try:
        drv = _import_driver()
    except ImportError as e:
        if "libcuda" in str(e):
            return Unavailable(NO_DRIVER, str(e)), None
        raise
    try:
        drv.init()
    except drv.Error as e:       # every driver error pycuda raises derives from it
        text = str(e)
        if "no CUDA-capable device" in text or "NO_DEVICE" in text:
            return Unavailable(NO_DEVICE, text), None
        return Unavailable(INIT_FAILED, text), None
    if drv.Device.count() == 0:
        return Unavailable(NO_DEVICE, "the driver reports 0 devices"), None
    return None, drv


def unavailable():
    """Why CUDA cannot be used (an ``Unavailable``), or None when it can."""
    if "probed" not in _state:
        with _lock:
            if "probed" not in _state:
                reason, drv = _probe()
                _state.update(probed=reason, driver=drv)
    return _state["probed"]


def require():
    """The driver module; raises NoCudaError naming the reason when CUDA is unavailable."""
    reason = unavailable()
    if reason is not None:
        raise NoCudaError(reason.message())
    return _state["driver"]


def emulated():
    """Whether the devices are emulated ones (runtime/cuda_emulated.py)."""
    from .cuda_emulated import Driver
    return isinstance(_state.get("driver"), Driver)


def is_initialized():
    """Whether CUDA was probed and found usable."""
    return _state.get("driver") is not None


# -- devices -----------------------------------------------------------------------------------
def device_count():
    return 0 if unavailable() is not None else _state["driver"].Device.count()


def check_index(index):
    """``index`` if it names a device; else torch's AssertionError."""
    if not 0 <= index < device_count():
        raise AssertionError("Invalid device id")
    return index


def current_device():
    require()
    return getattr(_thread, "index", 0)


def set_device(index):
    require()
    _thread.index = check_index(index)


def _device(index):
    entry = _devices.get(index)
    if entry is None:
        with _lock:
            entry = _devices.get(index)
            if entry is None:
                drv = require()
                device = drv.Device(check_index(index))
                entry = _devices[index] = {"device": device, "context": None, "allocator": None}
    return entry


def activate(index=None):
    """Make device ``index``'s primary context current on this thread; returns the index."""
    index = current_device() if index is None else index
    if getattr(_thread, "active", None) == index:
        return index
    entry = _device(index)
    if entry["context"] is None:
        with _lock:
            if entry["context"] is None:
                entry["context"] = entry["device"].retain_primary_context()
    drv = _state["driver"]
    if getattr(_thread, "active", None) is not None:
        drv.Context.pop()
    entry["context"].push()
    _thread.active = index
    return index


def name(index):
    return _device(index)["device"].name()


def capability(index):
    """(major, minor) compute capability."""
    return tuple(_device(index)["device"].compute_capability())


def properties(index):
    """What torch's device properties hold, from the driver's attributes."""
    drv = require()
    device = _device(index)["device"]
    attr = drv.device_attribute
    get = device.get_attribute
    major, minor = device.compute_capability()
    return {
        "name": device.name(), "major": major, "minor": minor,
        "total_memory": device.total_memory(),
        "multi_processor_count": get(attr.MULTIPROCESSOR_COUNT),
        "is_integrated": int(get(attr.INTEGRATED)),
        "is_multi_gpu_board": int(get(attr.MULTI_GPU_BOARD)),
        "max_threads_per_multi_processor": get(attr.MAX_THREADS_PER_MULTIPROCESSOR),
        "max_threads_per_block": get(attr.MAX_THREADS_PER_BLOCK),
        "regs_per_multiprocessor": get(attr.MAX_REGISTERS_PER_MULTIPROCESSOR),
        "shared_memory_per_block": get(attr.MAX_SHARED_MEMORY_PER_BLOCK),
        "warp_size": get(attr.WARP_SIZE),
        "L2_cache_size": get(attr.L2_CACHE_SIZE),
        "pci_bus_id": get(attr.PCI_BUS_ID),
        "pci_device_id": get(attr.PCI_DEVICE_ID),
        "pci_domain_id": get(attr.PCI_DOMAIN_ID),
    }


def driver_version():
    """The driver's CUDA version as an int (12040 for 12.4)."""
    return require().get_driver_version()


def synchronize(index=None):
    activate(index)
    _state["driver"].Context.synchronize()


def mem_get_info(index=None):
    """(free, total) bytes of the device."""
    activate(index)
    return tuple(_state["driver"].mem_get_info())


# -- memory ------------------------------------------------------------------------------------
class _DeviceMemory:
    """What the caching allocator asks of a device: whole segments from cuMemAlloc."""

    def __init__(self, index):
        self.index = index
        self.live = {}              # address -> pycuda DeviceAllocation (freed when dropped)

    def malloc(self, nbytes):
        drv = _state["driver"]
        activate(self.index)
        try:
            allocation = drv.mem_alloc(nbytes)
        except drv.MemoryError as e:
            raise MemoryError(str(e)) from None
        self.live[int(allocation)] = allocation
        return int(allocation)

    def free(self, address):
        activate(self.index)
        self.live.pop(address).free()


def allocator(index=None):
    """The caching allocator of device ``index`` (the current device by default)."""
    index = current_device() if index is None else check_index(index)
    entry = _device(index)
    if entry["allocator"] is None:
        with _lock:
            if entry["allocator"] is None:
                entry["allocator"] = CachingAllocator(_DeviceMemory(index), name=f"CUDA {index}")
    return entry["allocator"]


def allocators():
    """The allocators made so far, by device index (none before the first allocation)."""
    return {i: e["allocator"] for i, e in _devices.items() if e["allocator"] is not None}


def copy_to_device(address, array):
    """Copy a contiguous host array into device memory at ``address``."""
    require().memcpy_htod(address, array)


def copy_to_host(array, address):
    """Copy device memory at ``address`` into a contiguous host array."""
    require().memcpy_dtoh(array, address)


def copy_to_device_async(address, array):
    """Queue a copy of a contiguous host array in page-locked memory into device memory at
    ``address`` on the default stream (the kernels queued after it see the data)."""
    require().memcpy_htod_async(address, array)


def pinned_empty(shape, dtype):
    """A new host array in page-locked memory: copies from it can run asynchronously."""
    return require().pagelocked_empty(shape, dtype)


def copy_on_device(dst, src, nbytes):
    require().memcpy_dtod(dst, src, nbytes)


# -- events ------------------------------------------------------------------------------------
def event(enable_timing=False, blocking=False):
    """A driver event (record, synchronize, query, time_till)."""
    drv = require()
    activate()
    flags = 0 if enable_timing else int(drv.event_flags.DISABLE_TIMING)
    if blocking:
        flags |= int(drv.event_flags.BLOCKING_SYNC)
    return drv.Event(flags)


# -- modules and launches ----------------------------------------------------------------------
def load_module(image, index=None):
    """A loaded module of a cubin (or PTX) image, on device ``index``."""
    drv = require()
    activate(index)
    return drv.module_from_buffer(image)


def function(module, name, pointers):
    """Kernel ``name`` of ``module``, prepared to take ``pointers`` device addresses."""
    fn = module.get_function(name)
    fn.prepare("P" * pointers)
    return fn


def launch(fn, grid, block, addresses):
    """Queue ``fn`` over ``grid`` blocks of ``block`` threads on the default stream."""
    fn.prepared_call((grid, 1), (block, 1, 1), *addresses)

"""An emulated CUDA device: what runtime/cuda_driver.py uses of pycuda.driver, over host memory,
running kernels compiled for the CPU emulation (compiler/cuda/emulate.py).

``DYNOGRAPH_CUDA_EMULATE=N`` (a developer setting) makes ``cuda_driver`` use this driver with N
devices instead of pycuda's, so the whole CUDA path (cuda tensors, copies, the caching allocator,
single-op and compiled kernels, their launches) runs and is tested on machines without a GPU.  The
kernels are the renderer's CUDA C, compiled by the host C++ compiler with the emulation's header;
a "module" is that shared object, and a launch runs its grid on the CPU, in order, at once.

Device memory is host memory (one numpy buffer per allocation), so device addresses are host
addresses: an emulated kernel reads and writes them directly.  Nothing here is used on a machine
with a real GPU unless the variable is set.
"""
import atexit
import ctypes
import os
import shutil
import tempfile
import threading
import time
import types

import numpy as np

NAME = "dynograph CUDA emulation"
CAPABILITY = (8, 0)
TOTAL_MEMORY = 16 << 30


class Error(Exception):
    pass


class MemoryError_(Error):
    pass


device_attribute = types.SimpleNamespace(**{n: n for n in (
    "MULTIPROCESSOR_COUNT", "INTEGRATED", "MULTI_GPU_BOARD", "MAX_THREADS_PER_MULTIPROCESSOR",
    "MAX_THREADS_PER_BLOCK", "MAX_REGISTERS_PER_MULTIPROCESSOR", "MAX_SHARED_MEMORY_PER_BLOCK",
    "WARP_SIZE", "L2_CACHE_SIZE", "PCI_BUS_ID", "PCI_DEVICE_ID", "PCI_DOMAIN_ID")})
event_flags = types.SimpleNamespace(DEFAULT=0, BLOCKING_SYNC=1, DISABLE_TIMING=2)
_ATTRIBUTES = {"MULTIPROCESSOR_COUNT": 1, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
               "MAX_THREADS_PER_BLOCK": 1024, "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
               "MAX_SHARED_MEMORY_PER_BLOCK": 48 << 10, "WARP_SIZE": 32, "L2_CACHE_SIZE": 1 << 20}


class Driver(types.ModuleType):
    """pycuda.driver's calls that cuda_driver makes, for ``count`` emulated devices."""

    Error, MemoryError = Error, MemoryError_
    device_attribute, event_flags = device_attribute, event_flags

    def __init__(self, count):
        super().__init__("dynograph.runtime.cuda_emulated.driver")
        self.count = count
        self.used = 0
        self._memory = {}           # address -> the numpy buffer holding it
        self._lock = threading.Lock()
        drv = self

        class Device:
            def __init__(self, index):
                self.index = index

            @staticmethod
            def count():
                return drv.count

            def name(self):
                return NAME

            def compute_capability(self):
                return CAPABILITY

            def total_memory(self):
                return TOTAL_MEMORY

            def get_attribute(self, attr):
                return _ATTRIBUTES.get(attr, 0)

            def retain_primary_context(self):
                return Context()

        self.Device = Device

    # -- the driver ---------------------------------------------------------------------------
    def init(self, flags=0):
        pass

    def get_driver_version(self):
        return 13000

    def mem_get_info(self):
        return (TOTAL_MEMORY - self.used, TOTAL_MEMORY)

    # -- memory: host buffers at their own addresses ------------------------------------------
    def mem_alloc(self, nbytes):
        if self.used + nbytes > TOTAL_MEMORY:
            raise MemoryError_("cuMemAlloc failed: out of memory")
        buffer = np.empty(max(int(nbytes), 1), np.uint8)
        with self._lock:
            self._memory[buffer.ctypes.data] = buffer
            self.used += nbytes
        return _Allocation(self, buffer.ctypes.data, nbytes)

    def _free(self, address, nbytes):
        with self._lock:
            del self._memory[address]
            self.used -= nbytes

    def memcpy_htod(self, address, array):
        ctypes.memmove(address, array.ctypes.data, array.nbytes)

    def memcpy_dtoh(self, array, address):
        ctypes.memmove(array.ctypes.data, address, array.nbytes)

    def memcpy_htod_async(self, address, array, stream=None):
        self.memcpy_htod(address, array)        # launches run at once: so do copies

    def pagelocked_empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def memcpy_dtod(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), nbytes)

    # -- modules: shared objects of the emulation ---------------------------------------------
    def module_from_buffer(self, image):
        return _Module(image)

    Context = None      # set below (static methods used on the class)
    Event = None


class _Allocation:
    __slots__ = ("driver", "address", "nbytes")

    def __init__(self, driver, address, nbytes):
        self.driver, self.address, self.nbytes = driver, address, nbytes

    def __int__(self):
        return self.address

    def free(self):
        self.driver._free(self.address, self.nbytes)


class Context:
    """Contexts change nothing on an emulated device (launches run at once, in order)."""

    def push(self):
        pass

    @staticmethod
    def pop():
        pass

    @staticmethod
    def synchronize():
        pass


class Event:
    """Launches finish before they return, so an event records the host clock."""

    def __init__(self, flags=0):
        self.flags, self.time = flags, None

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        pass

    def query(self):
        return True

    def time_till(self, end):
        if self.flags & event_flags.DISABLE_TIMING or end.flags & event_flags.DISABLE_TIMING:
            raise Error("cuEventElapsedTime failed: invalid resource handle")
        return (end.time - self.time) * 1000.0


Driver.Context, Driver.Event = Context, Event

_folder = {}


def _library(image):
    """The image (a shared object's bytes) loaded from a file of this process's folder."""
    pid = os.getpid()
    if pid not in _folder:
        _folder[pid] = tempfile.mkdtemp(prefix="dynograph-cuda-emulated-")
        atexit.register(shutil.rmtree, _folder[pid], True)
    fd, path = tempfile.mkstemp(suffix=".so", dir=_folder[pid])
    with os.fdopen(fd, "wb") as f:
        f.write(image)
    return ctypes.CDLL(path)


class _Module:
    def __init__(self, image):
        self.lib = _library(image)

    def get_function(self, name):
        return _Function(getattr(self.lib, name + "__launch"))


class _Function:
    """A kernel's launcher: ``prepared_call(grid, block, *addresses)`` runs the grid now."""

    def __init__(self, launcher):
        launcher.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]
        launcher.restype = ctypes.c_int
        self.launcher = launcher

    def prepare(self, arg_format):
        self.arg_format = arg_format

    def prepared_call(self, grid, block, *addresses):
        args = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        if self.launcher(args, grid[0], block[0]):
            raise Error(f"cuLaunchKernel failed: the emulation could not start {block[0]} threads")

"""dynograph.cuda: torch.cuda's device queries, events, memory statistics and seeds.

Every driver call goes through runtime/cuda_driver.py, imported on first use (so ``import
dynograph`` loads neither it nor pycuda).  Where CUDA cannot be used (no pycuda, no driver
library, a driver that fails to initialize, no device) the functions answer as torch's do without
CUDA: ``is_available()`` is False, ``device_count()`` and the memory statistics are 0,
``empty_cache`` and ``manual_seed`` do nothing, and the rest raise ``NoCudaError`` (a
RuntimeError) whose message names the reason and suggests device='cpu'.
"""
from dynograph.runtime.cuda_allocator import OutOfMemoryError
from dynograph.runtime.device import device as _Device

__all__ = ["is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
           "get_device_name", "get_device_properties", "get_device_capability", "synchronize",
           "Event", "Stream", "StreamContext", "stream", "current_stream", "default_stream",
           "set_stream", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_stats", "reset_peak_memory_stats", "empty_cache",
           "mem_get_info", "manual_seed", "manual_seed_all", "initial_seed", "OutOfMemoryError"]

DEFAULT_SEED = 67280421310721       # torch's CUDA generators start from this seed too
_seeds = {}                         # device index -> seed given to manual_seed (None: every device)
_offsets = {}                       # device index -> Philox counters used since it was seeded


def _driver():
    from dynograph.runtime import cuda_driver
    return cuda_driver


def _index(device):
    """The device index ``device`` (None, int, 'cuda:1', device) names; None is the current one."""
    if device is None:
        return _driver().current_device()
    if isinstance(device, str):
        device = _Device(device)
    if isinstance(device, _Device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return _driver().current_device() if device.index is None else device.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")


def _checked(device):
    drv = _driver()
    drv.require()
    return drv.check_index(_index(device))


# -- availability and devices ------------------------------------------------------------------
def is_available():
    """Whether a CUDA device can be used (never raises)."""
    return _driver().unavailable() is None


def is_initialized():
    return _driver().is_initialized()


def init():
    """Initialize CUDA now; raises the reason it cannot be used."""
    _driver().require()


def device_count():
    return _driver().device_count()


def current_device():
    return _driver().current_device()


def set_device(device):
    """Make ``device`` the current one of this thread (a negative index does nothing, as in torch)."""
    if device is None:
        raise ValueError("Expected a torch.device with a specified index or an integer, but got:None")
    index = _index(device)
    if index >= 0:
        _driver().set_device(index)


def get_device_name(device=None):
    return _driver().name(_checked(device))


def get_device_capability(device=None):
    """(major, minor) compute capability."""
    return _driver().capability(_checked(device))


class _CudaDeviceProperties:
    """What get_device_properties returns; prints as torch's does."""

    def __init__(self, fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2 ** 20}MB, "
                f"multi_processor_count={self.multi_processor_count}, pci_bus_id={self.pci_bus_id}, "
                f"pci_device_id={self.pci_device_id}, pci_domain_id={self.pci_domain_id}, "
                f"L2_cache_size={self.L2_cache_size // 2 ** 20}MB)")


def get_device_properties(device=None):
    return _CudaDeviceProperties(_driver().properties(_checked(device)))


def synchronize(device=None):
    """Wait for everything queued on ``device`` to finish."""
    _driver().synchronize(_checked(device))


def mem_get_info(device=None):
    """(free, total) bytes of the device's memory, as the driver counts them."""
    return _driver().mem_get_info(_checked(device))


# -- events ------------------------------------------------------------------------------------
class Event:
    """A point in the device's queue of work: ``record()`` it, ``synchronize()`` on it, and with
    ``enable_timing=True`` measure ``start.elapsed_time(end)`` in milliseconds."""

    def __init__(self, enable_timing=False, blocking=False):
        self._event = _driver().event(enable_timing, blocking)
        self.enable_timing, self.blocking = enable_timing, blocking
        self._recorded = False

    def record(self, stream=None):
        """Record the event after the work queued so far on ``stream`` (the current one)."""
        self._event.record()
        self._recorded = True

    def wait(self, stream=None):
        """Make the work queued on ``stream`` after this call wait for the recorded point:
        already so, since every stream's work runs in order on the device's one queue."""

    def synchronize(self):
        """Wait until the work before the recorded point is done."""
        if self._recorded:
            self._event.synchronize()

    def query(self):
        """Whether the work before the recorded point is done."""
        return not self._recorded or bool(self._event.query())

    def elapsed_time(self, end_event):
        """Milliseconds from this event to ``end_event`` (both recorded, both timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return self._event.time_till(end_event._event)

    def __repr__(self):
        return f"<dynograph.cuda.Event {'recorded' if self._recorded else 'uninitialized'}>"


# -- streams -----------------------------------------------------------------------------------
class Stream:
    """A queue of device work.  dynograph runs every stream's work in order on the device's
    default stream: a stricter order than separate streams promise (nothing overlaps), so
    waits and events between streams always hold and a program written for several streams
    computes what it would on them."""

    def __init__(self, device=None, priority=0):
        self.device_index = _checked(device)
        self.priority = priority

    @property
    def device(self):
        return _Device("cuda", self.device_index)

    def synchronize(self):
        """Wait for the work queued so far."""
        _driver().synchronize(self.device_index)

    def query(self):
        """Whether the work queued so far is done."""
        event = Event()
        event.record(self)
        return event.query()

    def wait_stream(self, stream):
        """Make the work queued here after this call wait for ``stream``'s work (it does)."""

    def wait_event(self, event):
        """Make the work queued here after this call wait for ``event`` (it does)."""

    def record_event(self, event=None):
        """Record ``event`` (a new Event by default) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __repr__(self):
        return f"<dynograph.cuda.Stream device=cuda:{self.device_index} cuda_stream=0x0>"


_current_streams = {}               # device index -> the Stream ``stream()`` made current
_default_streams = {}               # device index -> its default Stream


def default_stream(device=None):
    """The device's default stream."""
    index = _checked(device)
    if index not in _default_streams:
        _default_streams[index] = Stream(index)
    return _default_streams[index]


def current_stream(device=None):
    """The stream ``stream(s)`` made current on the device (its default stream otherwise)."""
    index = _checked(device)
    return _current_streams.get(index) or default_stream(index)


def set_stream(stream):
    """Make ``stream`` current on its device."""
    if stream is not None:
        _current_streams[stream.device_index] = stream


class StreamContext:
    """``with dynograph.cuda.stream(s):`` makes ``s`` current on its device for the block."""

    def __init__(self, stream):
        self.stream = stream
        self._before = None

    def __enter__(self):
        if self.stream is not None:
            self._before = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self._before)
        return False


def stream(stream):
    return StreamContext(stream)


# -- memory ------------------------------------------------------------------------------------
def memory_stats(device=None):
    """The caching allocator's counters in torch's names; {} before CUDA is initialized."""
    drv = _driver()
    if not drv.is_initialized():
        return {}
    return drv.allocator(_index(device)).stats()


def memory_allocated(device=None):
    """Bytes held by live tensors on ``device`` (sizes rounded as the allocator rounds them)."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the device, live or cached."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    """Start the peaks over from what is held now."""
    _driver().allocator(_checked(device)).reset_peak_stats()


def empty_cache():
    """Give the cached, unused device memory back to the driver (other processes can then use it)."""
    drv = _driver()
    if drv.is_initialized():
        for alloc in drv.allocators().values():
            alloc.empty_cache()


# -- seeds -------------------------------------------------------------------------------------
def manual_seed(seed):
    """Seed the current device's random numbers (kept until CUDA is used, as torch does)."""
    seed = int(seed)
    drv = _driver()
    index = drv.current_device() if drv.is_initialized() else 0
    _seeds[index] = seed
    _offsets[index] = 0


def manual_seed_all(seed):
    """Seed every device's random numbers."""
    seed = int(seed)
    _seeds.clear()
    _offsets.clear()
    _seeds[None] = seed


def initial_seed():
    """The seed of the current device's random numbers."""
    return _seed_of(_checked(None))


def _seed_of(index):
    return _seeds.get(index, _seeds.get(None, DEFAULT_SEED))


def philox_state(index, counters):
    """(seed, offset) of device ``index``'s generator for a random kernel that uses ``counters``
    Philox counters; the offset advances past them, so the next kernel draws new numbers."""
    offset = _offsets.get(index, 0)
    _offsets[index] = offset + counters
    return _seed_of(index), offset

"""How the C allocator treats the host memory of freed arrays (glibc only).

An eager training step frees and allocates again the same large arrays every step: the
activations, their gradients, the products' results (a 784 x 512 float32 gradient is 1.6 MB).
glibc's malloc serves such sizes from fresh ``mmap``s, or from the top of its heap, which it
gives back to the kernel whenever more than a few MB there are free (glibc adapts both limits
to the sizes it sees freed, so whether it does depends on the order of the program's
allocations); the next step then touches new pages, and the kernel maps and zeroes each one (a
page fault per 4 KiB).  The eager MLP of the benchmarks (784-512-512-10, batch 128), forward and
backward without an optimizer step, took 1400 faults and 7.0 ms a step that way, and 35 faults
and 4.5 ms with the settings below.

``keep_freed_memory()`` (called when dynograph is imported) asks malloc to serve allocations
under ``MMAP_THRESHOLD`` from its heap and to keep up to ``DYNOGRAPH_KEEP_FREED_MB`` of free
memory at the heap's top for reuse.  That memory stays part of the process (it is reused by
the next allocations of any library, not lost); ``DYNOGRAPH_KEEP_FREED_MB=0`` leaves glibc's
own behaviour.  Elsewhere (another C library, another system) nothing is changed.

The memory a process touches for the first time still faults: a compiled step's first call
(its trace runs the step eagerly and keeps what the backward needs) touched 60 MB of new heap
in the char transformer's, 15,000 faults at 2.3 µs each on a virtual machine, a sixth of the
call.  ``populating()``, held around such a call, has a helper thread map the heap's new
pages in (``madvise(MADV_POPULATE_WRITE)``, which writes nothing: the main thread may use the
same memory meanwhile) as the heap grows, on another core; malloc then grows the heap
``TOP_PAD`` beyond each request, so that the helper works ahead of the main thread.
"""
import ctypes
import os
import sys
import threading

from dynograph.runtime import config
from dynograph.runtime.threads import usable_cores

__all__ = ["keep_freed_memory", "populating"]

# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
# glibc's own ceiling for the threshold it adapts by itself (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
MMAP_THRESHOLD = 32 << 20
# how much further than a request malloc grows its heap (the helper's lead; virtual memory
# until a page is touched or populated)
TOP_PAD = 16 << 20
_MADV_POPULATE_WRITE = 23           # Linux 5.14
_POLL_S = 0.001                     # how often the helper looks at the heap's end
_CHUNK = 4 << 20                    # populated at a time (the helper stops between two)

_applied = []       # the settings made, for tests and for a second call


def keep_freed_memory():
    """Apply the settings above once; True when they are in force."""
    if _applied:
        return True
    keep = config.get("KEEP_FREED_MB")
    if keep <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version       # glibc's: musl and others have other knobs
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    trim = int(keep * (1 << 20))
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, trim)
            and mallopt(_M_TOP_PAD, TOP_PAD)):
        return False
    _applied.append((MMAP_THRESHOLD, trim))
    return True


class _Heap:
    """glibc's program break and madvise, through ctypes."""

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self.sbrk = libc.sbrk
        self.sbrk.restype, self.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
        self.madvise = libc.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.works = None           # whether the kernel knows MADV_POPULATE_WRITE

    def end(self):
        return self.sbrk(0) or 0

    def populate(self, start, end):
        """Map in the pages of [start, end); False where the kernel cannot."""
        start -= start % self.page
        if self.madvise(start, end - start, _MADV_POPULATE_WRITE) == 0:
            return True
        # EINVAL: a kernel before 5.14; ENOMEM: part of the range went (a trim meanwhile)
        return ctypes.get_errno() != 22


_HEAP = []


class _Populating:
    __slots__ = ("stop", "thread")

    def __enter__(self):
        self.thread = None
        if not _applied or usable_cores() < 2:
            return self
        if not _HEAP:
            _HEAP.append(_Heap())
        heap = _HEAP[0]
        if heap.works is False:
            return self
        self.stop = threading.Event()
        # from the last TOP_PAD of the heap on: what lies below was touched already
        start = max(heap.end() - TOP_PAD, 0)
        self.thread = threading.Thread(target=_populate, args=(heap, start, self.stop),
                                       name="dynograph-populate", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
        return False


def _populate(heap, done, stop):
    while not stop.is_set():
        end = heap.end()
        if end > done:
            upto = min(end, done + _CHUNK)
            if not heap.populate(done, upto):
                heap.works = False
                return
            done = upto
            continue
        done = end                  # (below: the heap was trimmed; populated as it grows)
        stop.wait(_POLL_S)


def populating():
    """A context manager: while it is held, the heap's new pages are mapped in by a helper
    thread (see the module's notes); nothing where the settings above are not in force, on
    one core, or on a kernel without MADV_POPULATE_WRITE."""
    return _Populating()


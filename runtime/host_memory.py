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
"""
import ctypes
import sys

from dynograph.runtime import config

__all__ = ["keep_freed_memory"]

# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's own ceiling for the threshold it adapts by itself (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
MMAP_THRESHOLD = 32 << 20

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
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, trim)):
        return False
    _applied.append((MMAP_THRESHOLD, trim))
    return True

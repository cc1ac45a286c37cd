"""How many threads host code splits work over, shared by every backend.

``set_threads(n)`` (dynograph.set_num_threads) sets it; the default is ``OMP_NUM_THREADS``
where set, else one per core this process may run on (its CPU affinity: a process pinned to
one core gets one thread).  The
threads themselves belong to the backend that runs kernels on them (compiler/llvm/pool.py
keeps its pool at this count).
"""
import os



def usable_cores():
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_count():
    """``OMP_NUM_THREADS`` where it is a positive integer (as torch reads it: launchers of
    several processes per machine set it), else the usable cores."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return usable_cores()


_count = [default_count()]


def set_threads(n):
    """Split work over ``n`` threads from now on."""
    _count[:] = [n]


def count():
    """The number of threads work is split over (the calling one included)."""
    return _count[0]

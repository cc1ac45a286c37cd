"""The worker threads host code runs kernels on, shared by every backend.

One pool per process, of ``set_threads(n)`` threads (default: one per core); a call split into
ranges runs them on the pool while the calling thread waits (the compiled CPU kernels release
the GIL, so the ranges run in parallel).  A forked child (a DataLoader worker) inherits the pool
without its threads: it makes its own on first use.
"""
import os
from concurrent.futures import ThreadPoolExecutor

_pool = []
os.register_at_fork(after_in_child=_pool.clear)


def set_threads(n):
    """Split work over ``n`` threads from now on (dynograph.set_num_threads)."""
    if _pool and _pool[0][1] is not None:
        _pool[0][1].shutdown(wait=False)
    _pool[:] = [(n, _make(n))]


def _make(n):
    return ThreadPoolExecutor(n, thread_name_prefix="dynograph-kernel") if n > 1 else None


def threads():
    """(thread count, executor or None for one thread)."""
    if not _pool:
        n = os.cpu_count() or 1
        _pool.append((n, _make(n)))
    return _pool[0]


def run_split(fn, args, extent, parts):
    """``fn(*args, lo, hi)`` over ``parts`` contiguous ranges of ``[0, extent)``, in parallel."""
    _, pool = threads()
    if parts <= 1 or pool is None:
        fn(*args, 0, extent)
        return
    bounds = [extent * i // parts for i in range(parts + 1)]
    futures = [pool.submit(fn, *args, lo, hi) for lo, hi in zip(bounds, bounds[1:])]
    for f in futures:
        f.result()

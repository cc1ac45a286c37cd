"""Intra-op parallelism: ``get_num_threads`` / ``set_num_threads``.

The count is the number of threads dynograph's compiled CPU kernels split their work over
(runtime/threads.py) and the number numpy's BLAS (matmul, conv through numpy) uses.
The BLAS limit is applied through threadpoolctl when it is installed; without it numpy keeps
its own thread count.
"""
import builtins

from dynograph.runtime import threads

__all__ = ["get_num_threads", "set_num_threads"]


def get_num_threads():
    """The number of threads used for parallel work on the CPU."""
    return threads.count()


def set_num_threads(num_threads):
    """Use ``num_threads`` threads for kernels and numpy's BLAS from now on."""
    if not isinstance(num_threads, builtins.int) or isinstance(num_threads, builtins.bool):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num_threads).__name__}")
    if num_threads <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    threads.set_threads(num_threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(num_threads, user_api="blas")  # stays in force: not used as a context

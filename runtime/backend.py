"""The interface a code generator implements to run compiled programs; the executor
(runtime/executor.py) and the program builder (compiler/lowering/program.py) do the rest.

A backend renders kernel descriptions (compiler/lowering/description.py, laid out by
compiler/lowering/schedule.py) to its own code and runs them:

* ``name``                            a short name ("llvm"), part of every cache key;
* ``render(kernel, name)``            the kernel as source text (LLVM IR, CUDA C...);
* ``compile(source, name, kernel)``   object code as bytes (what the disk cache keeps);
* ``load(obj, name, kernel)``         a callable taking one address per buffer (and the
                                      fault flag of kernels that divide integers);
* ``launch(fn, kernel, addresses)``   run the whole kernel (split over threads, or a grid);
* ``allocate(shape, dtype)``          a new array for a result (host or device memory);
* ``address(array)``                  what ``fn`` takes for a buffer;
* ``matmul(a, b, out, ...)``          optional: a matrix product by the backend's own means;
* ``running()``                       optional: a context held while a program runs;
* ``disk``                            a runtime.cache.DiskCache for its object code, or None.

``kernel_function(backend, kernel)`` caches loaded kernels in memory and compiled ones on disk
for every backend, by the description's hash.
"""
import abc
import contextlib
import os
import sys
import threading

STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}
_loaded = {}                    # (backend name, kernel key) -> loaded function
_lock = threading.RLock()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have."""
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)


class Backend(abc.ABC):
    name = None
    disk = None
    # direct kernels compute a few output channels per step, sharing each input load (CPU
    # register tiling); a backend whose own mapping tiles contractions (CUDA's GEMM) keeps one
    tiles_channels = False

    @abc.abstractmethod
    def render(self, kernel, name):
        """Source text of ``kernel`` as a function called ``name``."""

    @abc.abstractmethod
    def compile(self, source, name, kernel):
        """Object code (bytes) of ``source``."""

    @abc.abstractmethod
    def load(self, obj, name, kernel):
        """A callable running the function ``name`` of ``obj``."""

    @abc.abstractmethod
    def launch(self, fn, kernel, addresses):
        """Run ``fn`` (from ``load``) over the whole of ``kernel``'s domain."""

    @abc.abstractmethod
    def allocate(self, shape, dtype):
        """A new, uninitialized array of ``shape`` and numpy ``dtype`` in this backend's memory."""

    @abc.abstractmethod
    def address(self, array):
        """The address ``fn`` takes for ``array``'s buffer."""

    def running(self):
        """A context manager held while a program runs on this backend (settings that hold
        for the whole run)."""
        return contextlib.nullcontext()

    def matmul(self, a, b, out, bias=None, alpha=1, beta=1):
        """``out = a @ b`` of 2-D arrays (with ``bias``: ``beta * bias + alpha * (a @ b)``) by
        the backend's own means; returns ``out``, or None where it has none for these operands
        (the caller then uses numpy)."""
        return None


def kernel_function(backend, kernel):
    """The loaded function of ``kernel`` on ``backend``: from memory, from the backend's disk
    cache, or rendered and compiled now."""
    key = (backend.name, kernel.key)
    fn = _loaded.get(key)
    if fn is not None:
        STATS["memory_hits"] += 1
        return fn
    with _lock:
        fn = _loaded.get(key)
        if fn is not None:
            return fn
        with unwatched():
            fn = _loaded[key] = _get(backend, kernel)
        return fn


@contextlib.contextmanager
def unwatched():
    """Work done inside a user's call that is not the user's (getting a kernel, starting the
    worker pool, the tracer's own walks) with the profile and trace hooks off: a trace's watcher
    (compiler/watch.py) must not see it (the clock, a temporary file's random name, llvmlite's
    objects, the runtime's own caches would look like the program's side effects)."""
    hooks = sys.getprofile(), sys.gettrace()
    sys.setprofile(None)
    sys.settrace(None)
    try:
        yield
    finally:
        sys.setprofile(hooks[0])
        sys.settrace(hooks[1])


def _get(backend, kernel):
    name = f"dg_{kernel.key}"
    obj = backend.disk.read(kernel.key) if backend.disk is not None else None
    if obj is not None:
        STATS["disk_hits"] += 1
    else:
        obj = backend.compile(backend.render(kernel, name), name, kernel)
        STATS["compiled"] += 1
        if backend.disk is not None:
            backend.disk.write(kernel.key, obj)
    return backend.load(obj, name, kernel)

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
* ``extern(op, args, attrs)``         optional: an op without a kernel step run on the backend's
                                      own arrays (device memory); None: numpy on host arrays;
* ``running()``                       optional: a context held while a program runs;
* ``disk``                            a runtime.cache.DiskCache for its object code, or None;
* ``parallel_compile``                True where ``compile`` may run on several threads at once.

``kernel_function(backend, kernel)`` caches loaded kernels in memory and compiled ones on disk
for every backend, by the description's hash; within a process, kernels whose descriptions
differ but render to the same source (updates of tensors of other shapes, each flattened to
one loop over the range a call is given) share one compilation, where the backend names every
kernel's function alike (``symbol``).  ``compile_ahead(backend, kernels)`` starts
compiling the kernels a program is about to need on a few threads (at most one fewer than
``threads.count()``: the calling thread compiles too); ``kernel_function`` then takes each
result when its kernel is first run, or compiles it itself where no thread has started on it.
"""
import abc
import contextlib
import functools
import hashlib
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from . import threads

# compiled: kernels not found on disk, of which shared: those whose object code an earlier
# kernel of the same source gave
STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "shared": 0}
_loaded = {}                    # (backend name, kernel key) -> loaded function
_ahead = {}                     # (backend name, kernel key) -> Future of its loaded function
_sources = {}                   # (backend name, hash of a source) -> Future of its object code
_lock = threading.RLock()
_stats_lock = threading.Lock()
_sources_lock = threading.Lock()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have, and compilations
    running ahead on threads it does not have."""
    global _lock, _stats_lock, _sources_lock
    _lock = threading.RLock()
    _stats_lock = threading.Lock()
    _sources_lock = threading.Lock()
    _ahead.clear()
    _sources.clear()                        # (one may be compiling on a thread it does not have)
    _pool.clear()                           # (its threads are the parent's)


def settle_compilations():
    """Wait for the compilations running on helper threads; those not started yet are left to
    the kernels' first runs.  Before a fork: the child would inherit the locks a compiler holds
    meanwhile, held by threads it does not have.  The backend whose compilations run in
    parallel calls it from its own before-fork hook (compiler/llvm/jit.py), ahead of taking its
    compiler's lock: a hook here would run after that one (they run last registered first),
    and wait, holding that lock, for any compilation started in between, which needs it."""
    for future in list(_ahead.values()):
        if not future.cancel():
            try:
                future.result()
            except Exception:       # noqa: BLE001  (raised again where the kernel is needed)
                pass


os.register_at_fork(after_in_child=_new_lock_in_child)


def _cancel_waiting():
    """At exit: the helper threads are joined only once their queue is empty, so kernels no
    call will run are not compiled first."""
    for future in list(_ahead.values()):
        future.cancel()


# (threading's exit callbacks run last registered first: before concurrent.futures joins them)
threading._register_atexit(_cancel_waiting)


class Backend(abc.ABC):
    name = None
    disk = None
    # direct kernels compute a few output channels per step, sharing each input load (CPU
    # register tiling); a backend whose own mapping tiles contractions (CUDA's GEMM) keeps one
    tiles_channels = False
    # extern(op, args, attrs) -> result (an array or a list): what runs a program's extern steps
    # whose operands live in this backend's memory (None: they are host arrays, numpy runs them)
    extern = None
    parallel_compile = False

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

    def bind(self, fn, kernel, addresses):
        """A callable of no arguments that does ``launch(fn, kernel, addresses)``: a program
        step that sees the same buffers at every call launches through it."""
        return functools.partial(self.launch, fn, kernel, addresses)

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

    def symbol(self, kernel):
        """The name of ``kernel``'s function in its source and object code.  A backend whose
        objects are loaded each on its own may name every kernel alike: kernels that render to
        the same source then share one compilation."""
        return f"dg_{kernel.key}"

    def matmul(self, a, b, out, bias=None, alpha=1, beta=1):
        """``out = a @ b`` of 2-D arrays (with ``bias``: ``beta * bias + alpha * (a @ b)``) by
        the backend's own means; returns ``out``, or None where it has none for these operands
        (the caller then uses numpy)."""
        return None

    def binds_matmul(self):
        """Whether ``bind_matmul`` may give launchers now (asked before a product's operands
        are gathered for it)."""
        return False

    def bind_matmul(self, products):
        """A launcher (a callable of no arguments) of one product, or of two independent ones
        at once, each ``(a, b, out, bias, alpha, beta)`` as ``matmul`` takes them, on these
        buffers; it returns False, having run nothing, where it no longer applies (the caller
        then binds again).  None where the backend has none (the caller runs each product as
        its own step)."""
        return None


def kernel_function(backend, kernel):
    """The loaded function of ``kernel`` on ``backend``: from memory, from a compilation started
    ahead, from the backend's disk cache, or rendered and compiled now."""
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
            ahead = _ahead.pop(key, None)
            if ahead is not None and not ahead.cancel():
                while not ahead.done() and _help():
                    pass
                fn = ahead.result()         # a failed compilation raises here, as it would below
            else:                           # (no thread has started on it: this one compiles it)
                fn = _function(backend, kernel)
            _loaded[key] = fn
        return fn


def ready(backend, kernel):
    """Whether ``kernel``'s function can be had without compiling it: loaded in this process,
    or in the backend's disk cache."""
    if (backend.name, kernel.key) in _loaded:
        return True
    return backend.disk is not None and backend.disk.holds(kernel.key)


def _help():
    """While a thread compiles the kernel this one needs: compile the next kernel no thread has
    started on (its result waits in its Future).  False when there is none."""
    for key, future in list(_ahead.items()):
        if future.cancel():                 # taken from the queue: this thread runs it
            done = _ahead[key] = Future()
            # running, as a helper thread's would be: settle_compilations (before a fork) and
            # _cancel_waiting (at exit) wait for it rather than cancel it under this thread
            done.set_running_or_notify_cancel()
            try:
                done.set_result(_function(*future.work))
            except Exception as e:          # raised when (if ever) the kernel is needed
                done.set_exception(e)
            return True
    return False


def compile_ahead(backend, kernels):
    """Start compiling those of ``kernels`` that are neither loaded nor on their way, on up to
    ``threads.count() - 1`` threads, disk cache first; ``kernel_function`` collects them.  A
    kernel never asked for is still compiled and cached on disk."""
    helpers = threads.count() - 1
    if not backend.parallel_compile or helpers < 1:
        return
    todo = {}
    with _lock:
        for kernel in kernels:
            key = (backend.name, kernel.key)
            if key not in _loaded and key not in _ahead and key not in todo:
                todo[key] = kernel
        if not todo:
            return
        with unwatched():
            pool = _helpers(helpers)
            for key, kernel in todo.items():
                future = _ahead[key] = pool.submit(_function, backend, kernel)
                future.work = (backend, kernel)


_pool = []              # [the helper threads (an executor), their number]


def _helpers(n):
    """The executor of ``n`` helper threads, one for every compile_ahead (idle threads wait on
    its queue)."""
    if not _pool or _pool[1] != n:
        if _pool:
            _pool[0].shutdown(wait=False)
        _pool[:] = [ThreadPoolExecutor(n, thread_name_prefix="dynograph-compile"), n]
    return _pool[0]


@contextlib.contextmanager
def unwatched():
    """Work done inside a user's call that is not the user's (getting a kernel, starting the
    worker pool, the tracer's own walks) with the profile and trace hooks off: a trace's watcher
    (compiler/watch.py) must not see it (the clock, a temporary file's random name, llvmlite's
    objects, the runtime's own caches would look like the program's side effects).  Hooks that
    are not a watcher's (cProfile, a debugger, coverage) stay on: they see everything, and
    cProfile's could not be put back by ``sys.setprofile``."""
    hooks = sys.getprofile(), sys.gettrace()
    if not getattr(hooks[1], "watching", False):
        yield
        return
    sys.setprofile(None)
    sys.settrace(None)
    try:
        yield
    finally:
        sys.setprofile(hooks[0])
        sys.settrace(hooks[1])


def _function(backend, kernel):
    """``kernel`` loaded (the threads of compile_ahead load what they compile or read, which
    overlaps the loading with the calling thread's own work)."""
    return backend.load(_object(backend, kernel), backend.symbol(kernel), kernel)


def _object(backend, kernel):
    """Object code of ``kernel``: from the backend's disk cache, else compiled now (and written
    there)."""
    obj = backend.disk.read(kernel.key) if backend.disk is not None else None
    if obj is not None:
        _count("disk_hits")
        return obj
    name = backend.symbol(kernel)
    obj = _compiled(backend, backend.render(kernel, name), name, kernel)
    _count("compiled")
    if backend.disk is not None:
        backend.disk.write(kernel.key, obj)
    return obj


def _compiled(backend, source, name, kernel):
    """Object code of ``source``, compiled once per process: a thread that finds the same
    source compiled, or compiling on another thread, takes (or waits for) that object code.
    A failed compilation raises in the thread that ran it and is forgotten (the next kernel of
    that source tries again)."""
    key = (backend.name, hashlib.sha256(source.encode()).digest())
    with _sources_lock:
        future = _sources.get(key)
        if future is None:
            future = _sources[key] = Future()
            future.set_running_or_notify_cancel()
            mine = True
        else:
            mine = False
    if not mine:
        obj = future.result()
        _count("shared")
        return obj
    try:
        obj = backend.compile(source, name, kernel)
    except BaseException as e:
        with _sources_lock:
            del _sources[key]
        future.set_exception(e)
        raise
    future.set_result(obj)
    return obj


def _count(what):
    with _stats_lock:
        STATS[what] += 1

"""The ``llvm`` backend: kernel descriptions rendered as LLVM IR (render.py), compiled and
loaded by the JIT (jit.py), launched on the host's cores.

A launch splits a kernel's lead axes (schedule.lead, flattened) into pieces run by the worker pool
(pool.py) when the kernel has at least ``PIECE_MIN`` domain elements per piece (reduce axes
included: they are work too); smaller kernels run whole on the calling thread.  The compiled
functions take the range ``[begin, end)`` and run without the GIL.
"""
import contextlib
import ctypes
import functools
import math

import numpy as np

from dynograph.runtime import executor, threads
from dynograph.runtime.backend import Backend
from ..lowering.ahead import compile_ahead
from ..lowering.program import run as run_program
from ..lowering.schedule import schedule
from . import blas, jit, pool
from .render import render

# the fewest domain elements worth a piece of its own (a launch on the pool costs a few µs)
PIECE_MIN = 1 << 15
PIECES_PER_THREAD = 4       # more pieces than threads: a worker that starts late takes fewer


class LLVMBackend(Backend):
    name = "llvm"
    disk = jit.DISK
    tiles_channels = True
    parallel_compile = True         # jit.emit_object runs on several threads at once

    def render(self, kernel, name):
        return render(kernel, name, jit.triple())

    def symbol(self, kernel):
        # one name for every kernel: kernels that render alike then compile once
        # (runtime/backend.py); jit.load_all takes each object's own definition of it
        return "dg_kernel"

    def compile(self, source, name, kernel):
        dims = "x".join(str(n) for n in kernel.domain)
        return jit.emit_object(source, kernel.key, describe=f"({kernel.name}, domain [{dims}])",
                               **options(kernel))

    def load(self, obj, name, kernel):
        # the kernel is a task (render.py): it takes its buffers' addresses in one block
        address = jit.load_all(obj, [name])[name]
        fn = pool.TASK(address)
        fn.address = address            # what the pool's threads call
        fn.block = ctypes.c_void_p * (len(kernel.buffers) + kernel.divides_integers)
        return fn

    def launch(self, fn, kernel, addresses):
        _launch(fn, fn.block(*addresses), schedule(kernel).extent, math.prod(kernel.domain))

    def bind(self, fn, kernel, addresses):
        # the argument block and the sizes made once
        return functools.partial(_launch, fn, fn.block(*addresses), schedule(kernel).extent,
                                 math.prod(kernel.domain))

    def running(self):
        # with a pool of several threads, numpy's BLAS runs on one: products split over the pool
        # (asked without building the pool: a first call's trace runs in this too, while
        # warm_up's thread may still be building it)
        return blas.single_threaded() if threads.count() > 1 else contextlib.nullcontext()

    def matmul(self, a, b, out, bias=None, alpha=1, beta=1):
        if pool.building():         # (numpy's meanwhile: see pool.building)
            return None
        workers = pool.pool()
        if workers is None:         # one thread: numpy's BLAS at its own thread count
            return None
        return blas.gemm(workers, a, b, out, bias, alpha, beta)

    def binds_matmul(self):
        return pool.pool() is not None and blas.usable()

    def bind_matmul(self, products):
        workers = pool.pool()
        return None if workers is None else blas.bind(workers, products)

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return executor.address(array)

    def optimized_source(self, kernel):
        """The optimized LLVM IR of ``kernel`` (the ``llvm`` dump stage)."""
        return str(jit.optimize(self.render(kernel, self.symbol(kernel)), **options(kernel)))


LLVM = LLVMBackend()


def _launch(fn, block, extent, elements):
    """The kernel ``fn`` on its argument block over ``[0, extent)`` of its lead axes (a domain
    of ``elements`` elements): in pieces on the pool where it has enough work, else here."""
    workers = pool.pool()
    if workers is not None:
        pieces = min(extent, workers.threads * PIECES_PER_THREAD, elements // PIECE_MIN)
        if pieces > 1:
            workers.run_kernel(fn, block, extent, pieces)
            return
    fn(block, 0, extent)


# fused kernels of fewer domain elements compile without LLVM's vectorizers: scalar code
# costs them under a microsecond a call, and the vectorizers took a third of their compile time
# (a bias's gradient summed over a batch of 4 and its SGD update: 44 -> 25 ms)
SCALAR_BELOW = 1 << 10


def options(kernel):
    """How LLVM optimizes ``kernel`` (jit.optimize's keywords)."""
    return {"unroll": unrolled(kernel),
            "vectorize": kernel.unroll or math.prod(kernel.domain) >= SCALAR_BELOW}


def unrolled(kernel):
    """Whether LLVM unrolls ``kernel``'s loops: where the kernel asks for it (``Kernel.unroll``:
    a direct kernel's small constant loops), and for rows reduced in one loop (softmax over
    4096 columns runs 5% faster unrolled).  Elsewhere unrolling only gives LLVM more code to
    compile (the fused kernels took twice as long; a bias gradient's sum over the batch was
    copied once per row), for no measurable speed."""
    s = schedule(kernel)
    return kernel.unroll or (bool(kernel.reductions) and not s.columnwise and len(s.red_axes) == 1)


def prepare(graph, inputs, batch=None, writable=()):
    """Start compiling the kernels ``graph`` will need to run on ``inputs`` (lowering/ahead.py),
    on a few threads, before it runs."""
    writable = writable if isinstance(writable, frozenset) else frozenset(writable)
    compile_ahead(graph, inputs, batch, writable, LLVM)


def run(graph, inputs, batch=None, writable=()):
    """Execute ``graph`` with LLVM kernels where its nodes lower (compiler/lowering/program.py);
    before its first run, its kernels start compiling on a few threads (lowering/ahead.py)."""
    writable = writable if isinstance(writable, frozenset) else frozenset(writable)
    prepare(graph, inputs, batch, writable)
    return run_program(graph, inputs, batch, writable, backend=LLVM)

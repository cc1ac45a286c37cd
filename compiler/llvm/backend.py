"""The ``llvm`` backend: kernel descriptions rendered as LLVM IR (render.py), compiled and
loaded by the JIT (jit.py), launched on the host's cores.

A launch splits the outermost kept axis of a kernel into one range per thread of the runtime's
pool when the kernel has at least ``PARALLEL_MIN`` domain elements (the compiled functions take
the range ``[begin, end)`` and release the GIL while they run).
"""
import ctypes
import math

import numpy as np

from dynograph.runtime import threads
from dynograph.runtime.backend import Backend
from ..lowering.program import run as run_program
from ..lowering.schedule import schedule
from . import jit
from .render import render

# kernels with at least this many domain elements are split across the CPU cores
PARALLEL_MIN = 1 << 21


class LLVMBackend(Backend):
    name = "llvm"
    disk = jit.DISK

    def render(self, kernel, name):
        return render(kernel, name, jit.triple())

    def compile(self, source, name, kernel):
        dims = "x".join(str(n) for n in kernel.domain)
        return jit.emit_object(source, name, describe=f"({kernel.name}, domain [{dims}])")

    def load(self, obj, name, kernel):
        pointers = len(kernel.buffers) + kernel.divides_integers
        return jit.load(obj, name, [ctypes.c_void_p] * pointers + [ctypes.c_int64] * 2)

    def launch(self, fn, kernel, addresses):
        extent = schedule(kernel).extent
        n, _ = threads.threads()
        parts = min(n, extent) if math.prod(kernel.domain) >= PARALLEL_MIN else 1
        threads.run_split(fn, addresses, extent, parts)

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data

    def optimized_source(self, kernel):
        """The optimized LLVM IR of ``kernel`` (the ``llvm`` dump stage)."""
        return str(jit.optimize(self.render(kernel, f"dg_{kernel.key}")))


LLVM = LLVMBackend()


def run(graph, inputs, batch=None, writable=()):
    """Execute ``graph`` with LLVM kernels where its nodes lower (compiler/lowering/program.py)."""
    return run_program(graph, inputs, batch, writable, backend=LLVM)

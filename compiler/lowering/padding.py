"""Padded copies by a generated kernel: an array's values inside a border of a fill value, for
the direct kernels that read around an array's edges (padded convolutions, the transposed
convolution of an input gradient, a weight gradient's flat lines, max pooling's backward).

The copy is an elementwise Kernel from the array (any element strides) into the interior of a
contiguous buffer, split over the threads like every kernel (numpy's padding copies were
serial work in every training step).  The border is filled once, when a buffer is made: a
``Padding`` keeps its buffers (up to ``KEEP_BYTES`` each; an eager call's plans live as long as
its owner) and hands them out call after call, one per caller at a time.  A larger buffer is
made per call, by ``np.zeros`` where the fill is 0: pages the kernel does not write stay the
system's zero pages.  A bound launch (launch.py) holds buffers while it is kept (``kept``) and
gives them back to ``free`` when its step drops it.
"""
import math

import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.executor import address
from .description import Kernel, Load, Recorder, Store

KEEP_BYTES = 16 << 20


def copy_kernel(shape, strides, padded, lo, dtype):
    """The Kernel storing an array of ``shape`` (element ``strides``) at index ``lo`` of a
    contiguous array of shape ``padded``; buffers in0 the array, out0 the padded array."""
    rows = [math.prod(padded[i + 1:]) for i in range(len(padded))]
    b = Recorder()
    x = b.load(0, dtype, 0)
    store = Store(1, x.index, tuple(rows), sum(a * r for a, r in zip(lo, rows)))
    return Kernel("pad", tuple(shape), (), [("in0", dtype, "in"), ("out0", dtype, "out")],
                  b.exprs, [Load(0, tuple(strides), 0)], [], [store])


class Padding:
    """Copies of arrays of one shape and layout with ``lo``/``hi`` more elements before/after
    each of their last dims, filled with ``fill``::

        with padding(x) as xp:      # xp: contiguous, x inside it
            ...
    """

    def __init__(self, x, lo, hi, fill, compile_kernel):
        lead = x.ndim - len(lo)
        self.lo = (0,) * lead + tuple(lo)
        self.shape = tuple(n + a + b for n, a, b in zip(x.shape, self.lo, (0,) * lead + tuple(hi)))
        self.dtype, self.fill = x.dtype, fill
        self.keep = math.prod(self.shape) * x.itemsize <= KEEP_BYTES
        strides = tuple(s // x.itemsize for s in x.strides)
        self.plan = compile_kernel(copy_kernel(x.shape, strides, self.shape, self.lo,
                                               D.from_numpy_dtype(x.dtype)))
        self.free = []          # buffers with their border filled, not in use

    def __call__(self, x):
        return _Lease(self, x)

    def kept(self, x):
        """(a buffer, a callable copying ``x`` into it, or None where the copy has no bound
        form): for a bound launch (launch.py), which holds the buffer until it gives it back
        to ``free``."""
        try:
            buffer = self.free.pop()
        except IndexError:      # (another thread may take the last one between test and pop)
            buffer = self.bordered()
        return buffer, self.plan.bound([address(x), address(buffer)])

    def bordered(self):
        """A new buffer, its border filled (its inside too)."""
        return np.zeros(self.shape, self.dtype) if self.fill == 0 else \
            np.full(self.shape, self.fill, self.dtype)


class _Lease:
    __slots__ = ("padding", "x", "buffer")

    def __init__(self, padding, x):
        self.padding, self.x = padding, x

    def __enter__(self):
        p = self.padding
        try:
            self.buffer = p.free.pop()
        except IndexError:      # the first call, another thread holds the others, or too big
            self.buffer = p.bordered()
        p.plan([address(self.x), address(self.buffer)])
        return self.buffer

    def __exit__(self, *exc):
        if self.padding.keep:
            self.padding.free.append(self.buffer)


def padding_of(x, lo, hi, fill, compile_kernel):
    """A Padding of x with ``fill``, or None where x needs none (contiguous, no padding)."""
    if x.flags.c_contiguous and not any(lo) and not any(hi):
        return None
    return Padding(x, lo, hi, fill, compile_kernel)


def usable(x):
    """Whether a copy kernel can read ``x``: a non-empty array whose strides are whole elements."""
    return x.size > 0 and all(s % x.itemsize == 0 for s in x.strides)

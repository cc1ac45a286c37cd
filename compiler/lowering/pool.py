"""Max pooling as a loop-level Kernel (kernel.py's description, rendered by any backend).

The domain is (planes, *out[:-1], *kernel, out[-1]), the kernel axes reduced twice: ``max`` gives each
window's value (a NaN propagates) and ``argmax_pool`` the row-major position of the chosen
element within the window under PyTorch's max-pool rule (the first largest element, or the
last NaN).  The caller turns positions into flat indices in the plane.  Windows must lie
inside the input (no padding, no ceil-mode overhang).
"""
import math

from dynograph.runtime import dtypes as D
from .kernel import Kernel, Load, Recorder, ReductionStep, Store
from .scalar import Unsupported


def max_pool_windows(planes, spatial, out, ksize, stride, dilation, dtype):
    """The Kernel over a contiguous input of ``planes`` planes of ``spatial`` sizes; buffers
    in0 the input, out0 the values and out1 the positions (int64), both (planes, *out)."""
    if dtype not in (D.float32, D.float64):
        raise Unsupported(f"max pooling of {dtype}")
    nd = len(spatial)
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]        # element strides of the input
    out_row = [math.prod(out[i + 1:]) for i in range(nd)]        # and of the output
    plane, count = math.prod(spatial), math.prod(out)
    # (planes, out[:-1], kernel, out[-1]): the last output axis innermost, so that a row of
    # windows is reduced side by side (column-wise)
    domain = (planes,) + tuple(out[:-1]) + tuple(ksize) + (out[-1],)
    windows = tuple(s * r for s, r in zip(stride, row))
    loads = [Load(0, (plane,) + windows[:-1] + tuple(d * r for d, r in zip(dilation, row)) +
                  windows[-1:], 0)]
    store = (count,) + tuple(out_row[:-1]) + (0,) * nd + (out_row[-1],)
    b = Recorder()
    x = b.load(0, dtype, 1)
    reductions = [ReductionStep("max", float("-inf"), dtype, x.index),
                  ReductionStep("argmax_pool", float("-inf"), dtype, x.index)]
    stores = [Store(1, b.acc(0, dtype).index, store), Store(2, b.acc(1, D.int64).index, store)]
    return Kernel("max_pool", domain, tuple(range(nd, 2 * nd)),
                  [("in0", dtype, "in"), ("out0", dtype, "out"), ("out1", D.int64, "out")],
                  b.exprs, loads, reductions, stores)

"""Max pooling as a loop-level Kernel (kernel.py's description, rendered by any backend).

The domain is (planes, *out, *kernel), the kernel axes reduced twice: ``max`` gives each
window's value (a NaN propagates) and ``argmax_pool`` the row-major position of the chosen
element within the window under PyTorch's max-pool rule (the first largest element, or the
last NaN).  The caller turns positions into flat indices in the plane.  Windows must lie
inside the input (no padding, no ceil-mode overhang).
"""
import math
import weakref

import numpy as np

from dynograph.runtime import dtypes as D
from .description import Kernel, Load, Recorder, ReductionStep, Store
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
    # (planes, out, kernel): one window after another, its few elements in registers
    domain = (planes,) + tuple(out) + tuple(ksize)
    windows = tuple(s * r for s, r in zip(stride, row))
    loads = [Load(0, (plane,) + windows + tuple(d * r for d, r in zip(dilation, row)), 0)]
    store = (count,) + tuple(out_row) + (0,) * nd
    b = Recorder()
    x = b.load(0, dtype, 1)
    reductions = [ReductionStep("max", float("-inf"), dtype, x.index),
                  ReductionStep("argmax_pool", float("-inf"), dtype, x.index)]
    stores = [Store(1, b.acc(0, dtype).index, store), Store(2, b.acc(1, D.int64).index, store)]
    return Kernel("max_pool", domain, tuple(range(nd + 1, 2 * nd + 1)),
                  [("in0", dtype, "in"), ("out0", dtype, "out"), ("out1", D.int64, "out")],
                  b.exprs, loads, reductions, stores)


# ---------------------------------------------------------------- the direct rule
# ``max_pool{2,3}d_with_indices`` of float32/float64 whose windows lie inside the input (no
# padding, no ceil-mode overhang), any stride and dilation; other cases return None and run
# the op's impl.

# node -> {input shape: (compiled plan or None, flat index offset of each window start and
# of each kernel position)}
_PLANS = weakref.WeakKeyDictionary()


def run_max_pool(node, args, attrs, out, compile_kernel):
    """``max_pool*_with_indices(x, **attrs)`` -> [values, indices], or None when not covered."""
    (x,) = args
    nd = len(attrs["kernel_size"])
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float32, np.float64) or \
            x.ndim not in (nd + 1, nd + 2) or 0 in x.shape:
        return None
    plans = _PLANS.setdefault(node, {})
    if x.shape not in plans:
        plans[x.shape] = _plan(x, attrs, nd, compile_kernel)
    plan, sizes, starts, offsets = plans[x.shape]
    if plan is None:
        return None
    x = np.ascontiguousarray(x)
    shape = x.shape[:-nd] + sizes
    values = out if out is not None and out.shape == shape else np.empty(shape, x.dtype)
    positions = np.empty(shape, np.int64)
    plan([x.ctypes.data, values.ctypes.data, positions.ctypes.data])
    return [values, offsets[positions] + starts]


def _plan(x, attrs, nd, compile_kernel):
    from ..ops.pooling import axis_index, overhang, pool_output_size   # the op set imports this module
    ksize, stride = tuple(attrs["kernel_size"]), tuple(attrs["stride"])
    dilation, padding = tuple(attrs["dilation"]), tuple(attrs["padding"])
    spatial = x.shape[-nd:]
    if any(padding) or any(s <= 0 for s in stride):
        return None, None, None, None
    sizes = tuple(pool_output_size(n, k, 0, s, d, attrs["ceil_mode"])
                  for n, k, s, d in zip(spatial, ksize, stride, dilation))
    # every window inside the input (ceil mode may add one that hangs over the end)
    if min(sizes) < 1 or any(overhang(spatial, sizes, ksize, stride, padding, dilation)):
        return None, None, None, None
    try:
        kernel = max_pool_windows(math.prod(x.shape[:-nd]), spatial, sizes, ksize, stride,
                                  dilation, D.from_numpy_dtype(x.dtype))
    except Unsupported:
        return None, None, None, None
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]
    starts = sum(axis_index(i, nd, sizes[i]) * stride[i] * row[i] for i in range(nd))
    offsets = np.zeros(math.prod(ksize), np.int64)
    for t, position in enumerate(np.ndindex(*ksize)):
        offsets[t] = sum(p * d * r for p, d, r in zip(position, dilation, row))
    return compile_kernel(kernel), sizes, np.asarray(starts, np.int64), offsets

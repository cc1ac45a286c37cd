"""Max pooling in the ``llvm`` executor as a generated kernel (compiler/lowering/pool.py).

Covered: ``max_pool{2,3}d_with_indices`` of float32/float64 whose windows lie inside the input
(no padding, no ceil-mode overhang), any stride and dilation.  Other cases return None and
run on the interpreter."""
import math
import weakref

import numpy as np

from ..lowering.pool import max_pool_windows
from ..lowering.scalar import Unsupported
from ..ops.pooling import _axis, _overhang, pool_output_size
from dynograph.runtime import dtypes as D

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
    ksize, stride = tuple(attrs["kernel_size"]), tuple(attrs["stride"])
    dilation, padding = tuple(attrs["dilation"]), tuple(attrs["padding"])
    spatial = x.shape[-nd:]
    if any(padding) or any(s <= 0 for s in stride):
        return None, None, None, None
    sizes = tuple(pool_output_size(n, k, 0, s, d, attrs["ceil_mode"])
                  for n, k, s, d in zip(spatial, ksize, stride, dilation))
    # every window inside the input (ceil mode may add one that hangs over the end)
    if min(sizes) < 1 or any(_overhang(spatial, sizes, ksize, stride, padding, dilation)):
        return None, None, None, None
    try:
        kernel = max_pool_windows(math.prod(x.shape[:-nd]), spatial, sizes, ksize, stride,
                                  dilation, D.from_numpy_dtype(x.dtype))
    except Unsupported:
        return None, None, None, None
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]
    starts = sum(_axis(i, nd, sizes[i]) * stride[i] * row[i] for i in range(nd))
    offsets = np.zeros(math.prod(ksize), np.int64)
    for t, position in enumerate(np.ndindex(*ksize)):
        offsets[t] = sum(p * d * r for p, d, r in zip(position, dilation, row))
    return compile_kernel(kernel), sizes, np.asarray(starts, np.int64), offsets

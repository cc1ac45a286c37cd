"""Max pooling and its backward as loop-level Kernels (kernel.py's description, rendered by
any backend).

Forward: the domain is (planes, *out, *kernel), the kernel axes reduced twice: ``max`` gives
each window's value (a NaN propagates) and ``argmax_pool`` the row-major position t of the
chosen element within the window under PyTorch's max-pool rule (the first largest element, or
the last NaN).  The kernel stores the flat index in the plane itself: the window's start (a
small table per output position) plus the offset of position t, found from t with a few
comparisons (no integer division).  Windows must lie inside the input (no padding, no
ceil-mode overhang).

Backward: rather than scatter each output gradient to its index (serial, and a race when
threads share an element), every input element gathers the gradients of the windows that
chose it.  Along each dim an input position is p = a * stride + r (r < stride), and the
windows that may hold it are o = a - (J - 1) + j for j < J = (k - 1) * dilation // stride + 1;
a window chose the element when its index equals p's flat position (a table).  J = 1 (windows
that cannot overlap) stores the one gradient or 0, as numpy's plain scatter; overlapping
windows sum in float64 in the order of the windows, rounded once, as ``np.bincount`` adds them
(the op's impl).
"""
import math
import sys
import weakref

import numpy as np

from dynograph.runtime import dtypes as D
from .description import Kernel, Load, Recorder, ReductionStep, Store
from . import launch
from .padding import padding_of, usable
from .scalar import Unsupported

# candidate windows times the last dim's stride above which the backward runs its impl (each
# is a load pair and a comparison per element)
MAX_GATHER_TERMS = 64


def max_pool_windows(planes, spatial, out, ksize, stride, dilation, dtype):
    """The Kernel over a contiguous input of ``planes`` planes of ``spatial`` sizes; buffers
    in0 the input, in1 each window's flat start (int64, ``out``), out0 the values and out1 the
    flat indices in the plane (int64), both (planes, *out)."""
    if dtype not in (D.float32, D.float64):
        raise Unsupported(f"max pooling of {dtype}")
    nd = len(spatial)
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]        # element strides of the input
    out_row = [math.prod(out[i + 1:]) for i in range(nd)]        # and of the output
    plane, count = math.prod(spatial), math.prod(out)
    # (planes, out, kernel): one window after another, its few elements in registers
    domain = (planes,) + tuple(out) + tuple(ksize)
    windows = tuple(s * r for s, r in zip(stride, row))
    store = (count,) + tuple(out_row) + (0,) * nd
    loads = [Load(0, (plane,) + windows + tuple(d * r for d, r in zip(dilation, row)), 0),
             Load(1, (0,) + store[1:], 0)]
    b = Recorder()
    x = b.load(0, dtype, 1)
    reductions = [ReductionStep("max", float("-inf"), dtype, x.index),
                  ReductionStep("argmax_pool", float("-inf"), dtype, x.index)]
    steps = [d * r for d, r in zip(dilation, row)]
    index = b.add(b.load(1, D.int64, 0), _offset(b, b.acc(1, D.int64), ksize, steps))
    stores = [Store(2, b.acc(0, dtype).index, store), Store(3, index.index, store)]
    return Kernel("max_pool", domain, tuple(range(nd + 1, 2 * nd + 1)),
                  [("in0", dtype, "in"), ("in1", D.int64, "in"), ("out0", dtype, "out"),
                   ("out1", D.int64, "out")], b.exprs, loads, reductions, stores, unroll=True)


def _offset(b, t, ksize, steps):
    """sum over dims i of t_i * steps[i], t the row-major position (t_0, .., t_n-1) in a
    window of ``ksize``: with q_i = t // prod(ksize[i+1:]) (counted by comparisons, so no
    division), t_i = q_i - ksize[i] * q_i-1."""
    i64 = D.int64
    total = b.mul(t, b.const(steps[-1], i64))
    inner = 1
    for i in range(len(ksize) - 2, -1, -1):
        inner *= ksize[i + 1]
        q = None
        for j in range(1, math.prod(ksize[:i + 1])):
            ge = b.cast(b.cmp("ge", t, b.const(j * inner, i64)), i64)
            q = ge if q is None else b.add(q, ge)
        if q is not None:
            weight = steps[i] - ksize[i + 1] * steps[i + 1]
            total = b.add(total, b.mul(q, b.const(weight, i64)))
    return total


def max_pool_gather(planes, spatial, blocks, out, ksize, stride, dilation, dtype):
    """The Kernel of max pooling's backward over ``blocks`` (a per dim, blocks * stride <=
    spatial) of a contiguous input; buffers in0 the output gradient, in1 the indices (both
    padded to (planes, J - 1 + max(out, blocks)) per dim, index -1 in the padding), in2 the
    flat position of each element at r = 0 of the last dim (int64, ``gather_positions``), out0
    the input gradient (planes, *spatial; the rows past blocks * stride are not written).

    The domain is (planes, a0, r0, .., a_last), with no reduce axes: each candidate window j
    is a load of its own and the sum over them one chain of additions in the windows' order
    (a loop over j would sum in blocks per reduce axis, another association).  The last dim's
    r is unrolled into one value (and store) per r, all sharing the loads of the windows'
    gradients and indices, so that the innermost loop (a_last) loads them contiguously and
    stores whole groups of ``stride`` elements: LLVM vectorizes it (left scalar, the selects
    became mispredicted branches)."""
    if dtype not in (D.float32, D.float64):
        raise Unsupported(f"max pooling's backward of {dtype}")
    nd = len(spatial)
    reach = [(k - 1) * d // s + 1 for k, s, d in zip(ksize, stride, dilation)]      # J
    if math.prod(reach) * stride[-1] > MAX_GATHER_TERMS:
        raise Unsupported("max pooling's backward over many overlapping windows")
    sizes = [j - 1 + max(o, a) for j, o, a in zip(reach, out, blocks)]
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]
    grow = [math.prod(sizes[i + 1:]) for i in range(nd)]
    names = ["p"] + [f"{c}{i}" for i in range(nd - 1) for c in "ar"] + [f"a{nd - 1}"]
    extent = {"p": planes}
    extent.update({f"r{i}": stride[i] for i in range(nd - 1)})
    extent.update({f"a{i}": blocks[i] for i in range(nd)})
    element = {"p": math.prod(spatial)}
    element.update({f"r{i}": row[i] for i in range(nd - 1)})
    element.update({f"a{i}": stride[i] * row[i] for i in range(nd)})
    window = {"p": math.prod(sizes)}                 # o + J - 1 = a + j in the padded arrays
    window.update({f"a{i}": grow[i] for i in range(nd)})
    position = {a: math.prod(extent[b] for b in names[k + 1:]) for k, a in enumerate(names)}
    position["p"] = 0

    def strides(table):
        return tuple(table.get(a, 0) for a in names)
    b = Recorder()
    loads = [Load(2, strides(position), 0)]
    at = b.load(0, D.int64, 0)
    overlap = math.prod(reach) > 1
    acc = D.float64 if overlap else dtype
    zero = b.const(0.0, acc)
    totals = [None] * stride[-1]
    for j in np.ndindex(*reach):                    # the windows in row-major order
        offset = sum(i * r for i, r in zip(j, grow))
        loads += [Load(0, strides(window), offset), Load(1, strides(window), offset)]
        g = b.cast(b.load(len(loads) - 2, dtype, 0), acc)
        index = b.load(len(loads) - 1, D.int64, 0)
        for r in range(stride[-1]):
            here = b.add(at, b.const(r, D.int64)) if r else at
            picked = b.select(b.cmp("eq", index, here), g, zero)
            # windows that cannot overlap: the one gradient or 0, as numpy's plain scatter
            totals[r] = picked if not overlap else b.add(
                zero if totals[r] is None else totals[r], picked)
    stores = [Store(3, b.cast(t, dtype).index, strides(element), r) for r, t in enumerate(totals)]
    buffers = [("in0", dtype, "in"), ("in1", D.int64, "in"), ("in2", D.int64, "in"),
               ("out0", dtype, "out")]
    return Kernel("max_pool_backward", tuple(extent[a] for a in names), (), buffers, b.exprs,
                  loads, [], stores, unroll=True)


def gather_positions(spatial, blocks, stride):
    """max_pool_gather's table: the flat position in the plane of each element with r = 0 in
    the last dim, over the kernel's kept axes (a0, r0, .., a_last)."""
    nd = len(spatial)
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]
    grid = []
    for i in range(nd - 1):
        grid += [np.arange(blocks[i]) * stride[i] * row[i], np.arange(stride[i]) * row[i]]
    grid.append(np.arange(blocks[-1]) * stride[-1])
    total = np.zeros([len(v) for v in grid], np.int64)
    for k, v in enumerate(grid):
        total += v.reshape([-1 if m == k else 1 for m in range(len(grid))])
    return total


# ---------------------------------------------------------------- the direct rules
# ``max_pool{2,3}d_with_indices`` of float32/float64 whose windows lie inside the input (no
# padding, no ceil-mode overhang), any stride and dilation, and ``max_pool_backward`` of such
# a pool (its window attributes given) where each dim's windows end within whole strides of
# the input; other cases return None and run the op's impl.

# node -> {input layout: (compiled plan or None, what running it needs)}
_PLANS = weakref.WeakKeyDictionary()


@launch.rule
def run_max_pool(node, args, attrs, out, compile_kernel, bound):
    """``max_pool*_with_indices(x, **attrs)`` -> [values, indices], or None when not covered."""
    planned = _max_pool_plans(args, attrs, compile_kernel, node)
    if planned is None:
        return None
    plan, sizes, starts, layout, last = planned
    (x,) = args
    nd = len(attrs["kernel_size"])
    shape = x.shape[:-nd] + sizes
    values = out if out is not None and out.shape == shape else np.empty(shape, x.dtype)
    # the indices of the last call once nothing else holds them (a compiled step's backward
    # has used them): fresh pages would fault on every call.  References: the list, the
    # name and getrefcount's argument.  A bound launch has indices of its own.
    indices = None if bound else last[0]
    if indices is None or sys.getrefcount(indices) != 3:
        indices = np.empty(shape, np.int64)
        if not bound:
            last[0] = indices
    return launch.Launch(plan, [(x, layout), (starts, None)], [values, indices],
                         [values, indices], owned=(1,) if bound else ())


def _max_pool_plans(args, attrs, compile_kernel, node=None):
    """(plan, output sizes, window starts, x's Padding, [the last indices]) of max pooling of
    ``args``, kept per layout for ``node`` (None: kept nowhere); None when the case is not
    covered."""
    (x,) = args
    nd = len(attrs["kernel_size"])
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float32, np.float64) or \
            x.ndim not in (nd + 1, nd + 2) or 0 in x.shape:
        return None
    key = (x.shape, x.strides)
    plans = {} if node is None else _PLANS.setdefault(node, {})
    if key not in plans:
        plans[key] = _plan(x, attrs, nd, compile_kernel)
    return None if plans[key][0] is None else plans[key]


def _plan(x, attrs, nd, compile_kernel):
    none = None, None, None, None, None
    if not usable(x):
        return none
    recipe = pooling_kernel(x.shape, attrs, nd, D.from_numpy_dtype(x.dtype))
    if recipe is None:
        return none
    kernel, sizes, starts = recipe
    return compile_kernel(kernel), sizes, starts, \
        padding_of(x, (0,) * nd, (0,) * nd, 0, compile_kernel), [None]


def pooling_kernel(shape, attrs, nd, dtype):
    """(Kernel, output sizes, window starts) of max pooling over a contiguous input of
    ``shape``, or None where the direct kernel does not cover it (padding, a ceil-mode window
    hanging over the end); buffers: the input, the starts (int64), values, indices."""
    from ..ops.pooling import axis_index, overhang, pool_output_size   # the op set imports this module
    ksize, stride = tuple(attrs["kernel_size"]), tuple(attrs["stride"])
    dilation, padding = tuple(attrs["dilation"]), tuple(attrs["padding"])
    spatial = shape[-nd:]
    if any(padding) or any(s <= 0 for s in stride):
        return None
    sizes = tuple(pool_output_size(n, k, 0, s, d, attrs["ceil_mode"])
                  for n, k, s, d in zip(spatial, ksize, stride, dilation))
    # every window inside the input (ceil mode may add one that hangs over the end)
    if min(sizes) < 1 or any(overhang(spatial, sizes, ksize, stride, padding, dilation)):
        return None
    try:
        kernel = max_pool_windows(math.prod(shape[:-nd]), spatial, sizes, ksize, stride,
                                  dilation, dtype)
    except Unsupported:
        return None
    row = [math.prod(spatial[i + 1:]) for i in range(nd)]
    starts = sum(axis_index(i, nd, sizes[i]) * stride[i] * row[i] for i in range(nd))
    return kernel, sizes, np.ascontiguousarray(starts, np.int64)


@launch.rule
def run_max_pool_backward(node, args, attrs, out, compile_kernel, bound):
    """``max_pool_backward(g, indices, **attrs)`` -> the input gradient, or None when not
    covered (no window attributes: adaptive and fractional pools)."""
    planned = _backward_plans(args, attrs, compile_kernel, node)
    if planned is None:
        return None
    plan, positions, tail, g_layout, i_layout = planned
    g, indices = args
    shape = tuple(attrs["input_shape"])
    if out is None or out.shape != shape:
        out = np.empty(shape, g.dtype)
    # positions past the last whole stride are in no window: zeroed after the kernel
    return launch.Launch(plan, [(g, g_layout), (indices, i_layout), (positions, None)], [out],
                         out, zeroed=[out[part] for part in tail])


def _backward_plans(args, attrs, compile_kernel, node=None):
    """(plan, positions, tail slices, g's Padding, the indices' Padding) of max pooling's
    backward of ``args``, kept per layout for ``node`` (None: kept nowhere); None when the case
    is not covered."""
    g, indices = args
    shape = tuple(attrs["input_shape"])
    if attrs.get("stride") is None or not all(isinstance(a, np.ndarray) for a in (g, indices)) \
            or g.dtype not in (np.float32, np.float64) or indices.dtype != np.int64 or \
            g.shape != indices.shape or g.ndim != len(shape) or 0 in shape:
        return None
    key = (g.shape, g.strides, indices.strides, shape)
    plans = {} if node is None else _PLANS.setdefault(node, {})
    if key not in plans:
        plans[key] = _backward_plan(g, indices, shape, attrs, compile_kernel)
    return None if plans[key][0] is None else plans[key]


# a direct rule's ``plans(args, attrs, compile_kernel)``: its plans for ``args``, kept nowhere
# (lowering/ahead.py describes the kernels a program will need before its first run)
run_max_pool.plans = _max_pool_plans
run_max_pool_backward.plans = _backward_plans


def _backward_plan(g, indices, shape, attrs, compile_kernel):
    none = None, None, None, None, None
    if any(s % g.itemsize for s in g.strides) or any(s % 8 for s in indices.strides):
        return none
    recipe = pooling_backward_kernel(g.shape, shape, attrs, D.from_numpy_dtype(g.dtype))
    if recipe is None:
        return none
    kernel, positions, tail, lo, hi = recipe
    return compile_kernel(kernel), positions, tail, \
        padding_of(g, lo, hi, 0, compile_kernel), padding_of(indices, lo, hi, -1, compile_kernel)


def pooling_backward_kernel(g_shape, shape, attrs, dtype):
    """(Kernel, positions table, tail slices, lo, hi) of max pooling's backward for an output
    gradient of ``g_shape`` and an input of ``shape``, or None where it does not cover it:
    the gradient and indices are read padded by lo/hi (0 and -1 in the border), and the input
    gradient's ``tail`` (positions past the last whole stride) is zeroed after the kernel."""
    from ..ops.pooling import pool_output_size   # the op set imports this module
    nd = attrs["nd"]
    ksize, stride = tuple(attrs["kernel_size"]), tuple(attrs["stride"])
    dilation, padding = tuple(attrs["dilation"]), tuple(attrs["padding"])
    spatial, out = shape[-nd:], g_shape[-nd:]
    if g_shape[:-nd] != shape[:-nd] or any(padding) or min(stride) <= 0 or out != tuple(
            pool_output_size(n, k, 0, s, d, attrs.get("ceil_mode", False))
            for n, k, s, d in zip(spatial, ksize, stride, dilation)):
        return None
    blocks = tuple(n // s for n, s in zip(spatial, stride))
    # every window ends inside the whole strides the kernel writes
    if any((o - 1) * s + (k - 1) * d >= a * s
           for o, s, k, d, a in zip(out, stride, ksize, dilation, blocks)):
        return None
    reach = [(k - 1) * d // s + 1 for k, s, d in zip(ksize, stride, dilation)]
    try:
        kernel = max_pool_gather(math.prod(shape[:-nd]), spatial, blocks, out, ksize, stride,
                                 dilation, dtype)
    except Unsupported:
        return None
    lo = tuple(j - 1 for j in reach)
    hi = tuple(max(0, a - o) for a, o in zip(blocks, out))
    positions = gather_positions(spatial, blocks, stride)
    tail = []
    for i, (n, a, s) in enumerate(zip(spatial, blocks, stride)):
        if a * s < n:
            tail.append((Ellipsis,) + (slice(None),) * i + (slice(a * s, None),) +
                        (slice(None),) * (nd - 1 - i))
    return kernel, positions, tail, lo, hi


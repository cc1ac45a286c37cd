"""Pooling primitives: max pooling with indices, average pooling, adaptive average and max
pooling, max unpooling, and the backward primitives their derivative rules use.

Conventions of this file:

* every primitive works on ``nd`` spatial dims (2 or 3) preceded by one or two leading dims
  ((C, *spatial) unbatched or (N, C, *spatial)); the 1-d forms are the 2-d primitives on an
  unsqueezed input (as in PyTorch, whose 1-d pools report ``SqueezeBackward1``);
* window attributes (``kernel_size``, ``stride``, ``padding``, ``dilation``) are tuples of
  ``nd`` ints; the public layer (dynograph/nn/_functional/pooling.py) normalizes them;
* indices are PyTorch's: the flat position of the chosen element within its input plane;
* impls reduce over windows one kernel tap at a time: each tap is one strided view of the
  (padded) input covering every window, so a pool is a few whole-array numpy operations
  (measured several times faster than copying windows out and reducing their last axis);
  backward impls scatter with ``np.bincount`` or add one strided slice per kernel tap; there
  is never a Python loop over pixels or batch items.
"""
import itertools

import numpy as np

from dynograph.runtime import dtypes as D
from ..lowering.pool import run_max_pool, run_max_pool_backward
from .core import TensorSpec, define
from .eager import call as _call
from .movement import prod


_DIM_NAMES = {2: ("H", "W"), 3: ("T", "H", "W")}


# ---------------------------------------------------------------- shapes and checks

def pool_output_size(size, k, p, s, d, ceil_mode):
    """PyTorch's pooling_output_shape for one dim."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1                        # the last window must start inside the input or left pad
    return out


def _fmt(shape):
    return "x".join(str(n) for n in shape)


def _check_input(x, nd, batch_msg=None):
    """(nd+1)-d or (nd+2)-d input whose non-batch dims are non-empty."""
    shape = tuple(x.shape)
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for input")
    if any(n == 0 for n in shape[len(shape) - nd - 1:]):
        raise RuntimeError(f"Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got:{list(shape)}")


def _check_window(nd, kernel_size, stride, padding, dilation):
    names = _DIM_NAMES[nd]
    if any(s == 0 for s in stride):
        raise RuntimeError("stride should not be zero")
    if any(k <= 0 for k in kernel_size):
        raise RuntimeError("kernel size should be greater than zero, but got "
                           + " ".join(f"k{n}: {k}" for n, k in zip(names, kernel_size)))
    if any(s < 0 for s in stride):
        raise RuntimeError("stride should be greater than zero, but got "
                           + " ".join(f"d{n}: {s}" for n, s in zip(names, stride)))
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero, but got "
                           + " ".join(f"dilation{n}: {d}" for n, d in zip(names, dilation)))
    for p in padding:
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    for k, p, d in zip(kernel_size, padding, dilation):
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError("pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")


def window_ok(x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    """Whether an impl may run; when not, it raises ValueError and the dispatcher asks the meta
    rule for PyTorch's error text."""
    if x.ndim not in (nd + 1, nd + 2) or 0 in x.shape[-nd - 1:]:
        return False
    for n, k, s, p, d in zip(x.shape[-nd:], kernel_size, stride, padding, dilation):
        if k <= 0 or s <= 0 or d <= 0 or p < 0 or p > ((k - 1) * d + 1) // 2:
            return False
        if pool_output_size(n, k, p, s, d, ceil_mode) < 1:
            return False
    return True


def _pool_out_shape(x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    """The output shape of a pool, with PyTorch's 'Output size is too small' error."""
    shape = tuple(x.shape)
    spatial = shape[-nd:]
    out = tuple(pool_output_size(n, k, p, s, d, ceil_mode)
                for n, k, p, s, d in zip(spatial, kernel_size, padding, stride, dilation))
    if any(o < 1 for o in out):
        c = shape[-nd - 1]
        raise RuntimeError(f"Given input size: ({_fmt((c,) + spatial)}). Calculated output size: "
                           f"({_fmt((c,) + out)}). Output size is too small")
    return shape[:-nd] + out


# ---------------------------------------------------------------- windows

def pad_spatial(x, nd, lo, hi, fill):
    """x with ``lo``/``hi`` extra elements on each spatial side, filled with ``fill``."""
    if not any(lo) and not any(hi):
        return x
    spatial = x.shape[-nd:]
    out = np.full(x.shape[:-nd] + tuple(n + a + b for n, a, b in zip(spatial, lo, hi)), fill, x.dtype)
    out[(Ellipsis,) + tuple(slice(a, a + n) for a, n in zip(lo, spatial))] = x
    return out


def overhang(spatial, out, kernel_size, stride, padding, dilation):
    """Right padding so that every window of the output grid lies inside the array."""
    return tuple(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + p)) if o > 0 else 0
                 for n, o, k, s, p, d in zip(spatial, out, kernel_size, stride, padding, dilation))


def axis_index(i, nd, n):
    """arange(n) shaped to broadcast along output axis i of nd."""
    shape = [1] * nd
    shape[i] = n
    return np.arange(n).reshape(shape)


_EXTENT = {2: "plane", 3: "volume"}


def _define_nd(name, kind, impl, meta_for, vjp, grad_name, doc, kernel=None):
    """The 2-d and 3-d primitives of one family: ``{nd}`` in ``name``, ``grad_name`` and ``doc``
    becomes the number of spatial dims, ``{extent}`` in ``doc`` "plane" or "volume"."""
    return tuple(define(name.format(nd=nd), kind, impl, meta=meta_for(nd), vjp=vjp,
                        grad_name=grad_name.format(nd=nd), doc=doc.format(nd=nd, extent=_EXTENT[nd]),
                        kernel=kernel)
                 for nd in (2, 3))


# ---------------------------------------------------------------- max pooling

def _is_int(dtype):
    """Integer or bool (bfloat16 from ml_dtypes has numpy kind 'V', so test for ints)."""
    return dtype.kind in "biu"


def _lowest(dtype):
    return np.iinfo(dtype).min if _is_int(dtype) else -np.inf


def _tap(xp, nd, offset, out, stride, dilation):
    """The strided view of ``xp`` holding tap ``offset`` of every window."""
    key = tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                for o, d, s, n in zip(offset, dilation, stride, out))
    return xp[(Ellipsis,) + key]


def _max_over_taps(views):
    """The max over same-shaped arrays (one per window tap) and the position of the first max.

    One elementwise pass per tap over all windows at once: on small windows (2x2) this is
    several times faster than copying the windows out and reducing their last axis."""
    best = views[0].copy() if len(views) == 1 else np.maximum(views[0], views[1])
    for v in views[2:]:
        np.maximum(best, v, out=best)                      # propagates nan, as PyTorch does
    # the first tap holding the max wins: arg counts the taps before the first match
    # (branch-free arithmetic; a masked copy per tap is several times slower on random data)
    arg = np.zeros(best.shape, np.int8 if len(views) < 128 else np.int64)
    missing = views[0] != best
    for v in views[1:]:
        np.add(arg, missing, out=arg, casting="unsafe")
        missing &= v != best
    if not _is_int(best.dtype):
        nan = np.isnan(best)
        if nan.any():                                       # PyTorch keeps the last nan
            for k, v in enumerate(views):
                np.copyto(arg, k, where=nan & np.isnan(v))
    return best, arg


def _max_pool_impl(x, kernel_size, stride, padding, dilation, ceil_mode):
    nd = len(kernel_size)
    if not window_ok(x, nd, kernel_size, stride, padding, dilation, ceil_mode):
        raise ValueError("invalid pooling window")
    spatial = x.shape[-nd:]
    out = tuple(pool_output_size(n, k, p, s, d, ceil_mode)
                for n, k, p, s, d in zip(spatial, kernel_size, padding, stride, dilation))
    hi = tuple(p + e for p, e in zip(padding, overhang(spatial, out, kernel_size, stride, padding,
                                                        dilation)))
    low = _lowest(x.dtype)
    xp = pad_spatial(x, nd, padding, hi, low)
    taps = list(itertools.product(*(range(k) for k in kernel_size)))
    best, arg = _max_over_taps([_tap(xp, nd, t, out, stride, dilation) for t in taps])
    # flat plane index = window start + the tap's offset
    plane = [prod(spatial[i + 1:]) for i in range(nd)]
    offsets = np.array([sum(t[i] * dilation[i] * plane[i] for i in range(nd)) for t in taps], np.int64)
    base = 0
    for i in range(nd):
        base = base + (axis_index(i, nd, out[i]) * stride[i] - padding[i]) * plane[i]
    index = offsets[arg] + base
    if (any(padding) or any(hi)) and (best == low).any():
        index = _fix_padding_picks(index, arg, taps, spatial, out, stride, padding, dilation)
    return best, index


def _fix_padding_picks(index, arg, taps, spatial, out, stride, padding, dilation):
    """A window whose elements are all the lowest value may have picked a padding cell:
    PyTorch reports the window's first element inside the input instead."""
    nd = len(spatial)
    tap = np.array(taps, np.int64)
    valid = True
    first = np.zeros(index.shape[-nd:], np.int64)
    for i in range(nd):
        start = axis_index(i, nd, out[i]) * stride[i] - padding[i]
        p = start + tap[arg, i] * dilation[i]
        valid = valid & (p >= 0) & (p < spatial[i])
        k = np.maximum(0, -(start // dilation[i]))          # first tap at or after position 0
        first = first * spatial[i] + start + k * dilation[i]
    return np.where(valid, index, first)


def _max_pool_meta_for(nd):
    def meta(x, kernel_size, stride, padding, dilation, ceil_mode):
        _check_input(x, nd)
        _check_window(nd, kernel_size, stride, padding, dilation)
        shape = _pool_out_shape(x, nd, kernel_size, stride, padding, dilation, ceil_mode)
        return TensorSpec(shape, x.dtype), TensorSpec(shape, D.int64)
    return meta


def _max_indices_vjp(ctx, g, _gi=None):
    """Every max pool (plain, adaptive, fractional) sends each output's gradient to the input
    element its index names; other inputs (fractional pooling's samples) get none."""
    x = ctx.inputs[0]
    a = ctx.attrs
    nd = len(a["kernel_size" if "kernel_size" in a else "output_size"])
    # windows that cannot overlap (stride >= the window's extent) pick distinct elements
    disjoint = "stride" in a and "dilation" in a and all(
        s >= (k - 1) * d + 1 for k, s, d in zip(a["kernel_size"], a["stride"], a["dilation"]))
    # a max pool's window lets the backward run as a gather kernel (lowering/pool.py)
    window = {k: a[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
              if "stride" in a}
    grad = _call(max_pool_backward, g, ctx.output[1], input_shape=tuple(x.shape), nd=nd,
                 disjoint=disjoint, **window)
    return (grad,) + (None,) * (len(ctx.inputs) - 1)


max_pool2d_with_indices, max_pool3d_with_indices = _define_nd(
    "max_pool{nd}d_with_indices", "pooling", _max_pool_impl, _max_pool_meta_for, _max_indices_vjp,
    "MaxPool{nd}DWithIndicesBackward0",
    "{nd}-d max pooling: the largest value of each window and its flat index in the {extent}.",
    kernel=run_max_pool)


def _plane_rows(indices, input_shape, nd):
    """Flat indices into the whole input: each plane's indices offset by its start."""
    planes = prod(input_shape[:-nd])
    size = prod(input_shape[-nd:])
    rows = indices.reshape(planes, -1)
    return (rows + (np.arange(planes, dtype=np.int64) * size)[:, None]).ravel(), planes * size


def _max_pool_backward_impl(g, indices, input_shape, nd, disjoint=False, **window):
    flat, total = _plane_rows(indices, input_shape, nd)
    if disjoint:                    # every element chosen at most once: a plain scatter
        out = np.zeros(total, g.dtype)
        out[flat] = g.ravel()
        return out.reshape(input_shape)
    # bincount sums the gradients of windows that chose the same element (overlapping windows)
    out = np.bincount(flat, weights=g.ravel(), minlength=total)
    return out.astype(g.dtype, copy=False).reshape(input_shape)


def _max_pool_backward_meta(g, indices, input_shape, nd, disjoint=False, **window):
    return TensorSpec(tuple(input_shape), g.dtype)


def gather_planes(t, indices, nd):
    """t's values at ``indices`` (flat positions in t's planes); shape of ``indices``."""
    lead = tuple(indices.shape[:-nd]) if nd else ()
    planes = t.reshape(prod(lead), -1)
    return planes.gather(1, indices.reshape(prod(lead), -1)).reshape(tuple(indices.shape))


def _max_pool_backward_vjp(ctx, gg):
    indices = ctx.inputs[1]
    return gather_planes(gg, indices, ctx.attrs["nd"]), None


max_pool_backward = define(
    "max_pool_backward", "index", _max_pool_backward_impl, meta=_max_pool_backward_meta,
    vjp=_max_pool_backward_vjp, grad_name="MaxPool2DWithIndicesBackwardBackward0",
    kernel=run_max_pool_backward,
    doc="The input gradient of a max pool: each output gradient added at its index; a max "
        "pool's window attributes (kernel_size, stride, padding, dilation, ceil_mode), where "
        "given, let it run as a gather kernel.")


# ---------------------------------------------------------------- average pooling

def avg_divisor(spatial, out, kernel_size, stride, padding, count_include_pad, divisor_override):
    """The divisor of every output position (broadcastable to the output's spatial shape)."""
    if divisor_override:
        return divisor_override
    nd = len(spatial)
    div = 1
    for i, (n, o, k, s, p) in enumerate(zip(spatial, out, kernel_size, stride, padding)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if count_include_pad:
            count = end - start
        else:
            count = np.minimum(end, n) - np.maximum(start, 0)
        div = div * count.reshape([-1 if j == i else 1 for j in range(nd)])
    return div


def _divide(total, div, dtype):
    if not _is_int(dtype):
        return (total / div).astype(dtype, copy=False)
    q = np.abs(total) // div                            # C++ integer division truncates
    return (np.sign(total) * q).astype(dtype)


def _avg_pool_impl(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    nd = len(kernel_size)
    if divisor_override == 0 or not window_ok(x, nd, kernel_size, stride, padding, (1,) * nd,
                                               ceil_mode):
        raise ValueError("invalid pooling window")
    spatial = x.shape[-nd:]
    ones = (1,) * nd
    out = tuple(pool_output_size(n, k, p, s, 1, ceil_mode)
                for n, k, p, s in zip(spatial, kernel_size, padding, stride))
    hi = tuple(p + e for p, e in zip(padding, overhang(spatial, out, kernel_size, stride, padding,
                                                        ones)))
    acc = np.int64 if x.dtype.kind in "biu" else x.dtype
    xp = pad_spatial(x.astype(acc, copy=False), nd, padding, hi, 0)
    # one add per kernel tap over all windows (numpy's sum over small strided window axes is
    # several times slower)
    taps = itertools.product(*(range(k) for k in kernel_size))
    total = None
    for t in taps:
        v = _tap(xp, nd, t, out, stride, ones)
        if total is None:
            total = v.copy()
        else:
            total += v
    div = avg_divisor(spatial, out, kernel_size, stride, padding, count_include_pad,
                       divisor_override)
    return _divide(total, div, x.dtype)


def _avg_pool_meta_for(nd):
    def meta(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        _check_input(x, nd)
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        spatial = tuple(x.shape)[-nd:]
        if nd == 3 and any(n < k for n, k in zip(spatial, kernel_size)) and not any(padding):
            raise RuntimeError(
                f"input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) smaller than kernel "
                f"size (kT: {kernel_size[0]} kH: {kernel_size[1]} kW: {kernel_size[2]})")
        _check_window(nd, kernel_size, stride, padding, (1,) * nd)
        shape = _pool_out_shape(x, nd, kernel_size, stride, padding, (1,) * nd, ceil_mode)
        return TensorSpec(shape, x.dtype)
    return meta


def _avg_pool_vjp(ctx, g):
    return (_call(avg_pool_backward, g, input_shape=tuple(ctx.inputs[0].shape), **ctx.attrs),)


avg_pool2d, avg_pool3d = _define_nd(
    "avg_pool{nd}d", "pooling", _avg_pool_impl, _avg_pool_meta_for, _avg_pool_vjp,
    "AvgPool{nd}DBackward0", "{nd}-d average pooling.")


def _avg_pool_backward_impl(g, input_shape, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override):
    nd = len(kernel_size)
    spatial = tuple(input_shape[-nd:])
    out = g.shape[-nd:]
    div = avg_divisor(spatial, out, kernel_size, stride, padding, count_include_pad,
                       divisor_override)
    share = (g / div).astype(g.dtype, copy=False)
    hi = tuple(p + e for p, e in zip(padding, overhang(spatial, out, kernel_size, stride, padding,
                                                        (1,) * nd)))
    gp = np.zeros(tuple(input_shape[:-nd]) + tuple(n + a + b for n, a, b in zip(spatial, padding, hi)),
                  g.dtype)
    # one strided add per kernel offset: every window sends its share to that tap
    for offset in itertools.product(*(range(k) for k in kernel_size)):
        key = tuple(slice(o, o + s * (n - 1) + 1, s) for o, s, n in zip(offset, stride, out))
        gp[(Ellipsis,) + key] += share
    crop = tuple(slice(p, p + n) for p, n in zip(padding, spatial))
    return np.ascontiguousarray(gp[(Ellipsis,) + crop])


def _avg_pool_backward_meta(g, input_shape, **attrs):
    return TensorSpec(tuple(input_shape), g.dtype)


def _avg_pool_backward_vjp(ctx, gg):
    attrs = dict(ctx.attrs)
    del attrs["input_shape"]
    op = avg_pool2d if len(attrs["kernel_size"]) == 2 else avg_pool3d
    return (_call(op, gg, **attrs),)


avg_pool_backward = define(
    "avg_pool_backward", "pooling", _avg_pool_backward_impl, meta=_avg_pool_backward_meta,
    vjp=_avg_pool_backward_vjp, grad_name="AvgPool2DBackwardBackward0",
    doc="The input gradient of an average pool: each window's share spread over its taps.")


# ---------------------------------------------------------------- adaptive pooling

def adaptive_bounds(size, out):
    """PyTorch's adaptive windows of one dim: start = floor(i*size/out), end = ceil(...)."""
    i = np.arange(out)
    return (i * size) // out, ((i + 1) * size + out - 1) // out


def adaptive_matrix(size, out, dtype):
    """The (out, size) averaging matrix of one dim."""
    start, end = adaptive_bounds(size, out)
    j = np.arange(size)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / np.maximum(end - start, 1)[:, None]).astype(dtype)


def _check_adaptive(x, nd, output_size, name, got_sep="", empty_channels=False):
    shape = tuple(x.shape)
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got{got_sep} "
                           f"{list(shape)}")
    for i, n in enumerate(shape[1:], 1):
        if n == 0 and not (empty_channels and i < len(shape) - nd):
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(shape)} with dimension {i} "
                               "being empty")
    out = shape[:-nd] + tuple(output_size)
    if any(o < 0 for o in output_size):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(output_size)}: {list(out)}")
    return out


def _adaptive_avg_impl(x, output_size):
    nd = len(output_size)
    if x.size == 0:         # numpy would average an empty plane quietly
        _check_adaptive(x, nd, output_size, f"adaptive_avg_pool{nd}d", empty_channels=nd < 3)
    # integers average in double, half precision in float (as PyTorch's opmath type)
    acc = np.float64 if _is_int(x.dtype) else (np.float32 if x.dtype.itemsize < 4 else x.dtype)
    y = x.astype(acc, copy=False)
    # separable: average each dim in turn, one gathered tap at a time (a matmul with the
    # averaging matrix would spread a nan or inf of one window over the whole plane)
    for i in range(nd):
        ax = x.ndim - nd + i
        n, o = x.shape[ax], output_size[i]
        shape = [1] * x.ndim
        shape[ax] = o
        start, end = adaptive_bounds(n, o)
        if o == 0:
            y = np.take(y, np.zeros(0, np.int64), axis=ax)
            continue
        kmax = int((end - start).max())
        total = None
        for k in range(kmax):
            pos = start + k
            inside = pos < end
            v = np.take(y, np.minimum(pos, n - 1), axis=ax)
            if not inside.all():
                v = np.where(inside.reshape(shape), v, 0)
            total = v if total is None else total + v
        y = total / (end - start).astype(acc).reshape(shape)
    return np.ascontiguousarray(y.astype(x.dtype, copy=False))


def _adaptive_avg_meta_for(nd):
    def meta(x, output_size):
        # PyTorch's 1-d and 2-d average kernels check only the spatial sizes
        return TensorSpec(_check_adaptive(x, nd, output_size, f"adaptive_avg_pool{nd}d",
                                          empty_channels=nd < 3), x.dtype)
    return meta


def _adaptive_avg_vjp(ctx, g):
    """Adaptive averaging is one matrix per dim: its adjoint multiplies by the transposes."""
    x = ctx.inputs[0]
    nd = len(ctx.attrs["output_size"])
    for i in range(nd):
        ax = x.ndim - nd + i
        m = g.new_tensor(adaptive_matrix(x.shape[ax], g.shape[ax], np.float64), dtype=g.dtype)
        g = (g.movedim(ax, -1) @ m).movedim(-1, ax)
    return (g.contiguous(),)


adaptive_avg_pool2d, adaptive_avg_pool3d = _define_nd(
    "adaptive_avg_pool{nd}d", "pooling", _adaptive_avg_impl, _adaptive_avg_meta_for,
    _adaptive_avg_vjp, "AdaptiveAvgPool{nd}DBackward0",
    "{nd}-d adaptive average pooling to a given output size.")


def _adaptive_max_impl(x, output_size):
    nd = len(output_size)
    spatial = x.shape[-nd:]
    if all(o > 0 and n % o == 0 for n, o in zip(spatial, output_size)) and x.ndim in (nd + 1, nd + 2):
        # even windows: exactly a max pool with kernel = stride = size / output (the fast path)
        k = tuple(n // o for n, o in zip(spatial, output_size))
        return _max_pool_impl(x, k, k, (0,) * nd, (1,) * nd, False)
    if min(output_size) == 0:
        shape = x.shape[:-nd] + tuple(output_size)
        return np.empty(shape, x.dtype), np.empty(shape, np.int64)
    taps = []                                       # per dim: (out, kmax) input positions
    for n, o in zip(spatial, output_size):
        start, end = adaptive_bounds(n, o)
        kmax = int((end - start).max())
        # short windows repeat their last element: harmless for a max, and never chosen over
        # the first occurrence on a tie
        taps.append(np.minimum(start[:, None] + np.arange(kmax), (end - 1)[:, None]))
    lead = x.ndim - nd
    kshape = tuple(t.shape[1] for t in taps)
    views = []
    for combo in itertools.product(*(range(k) for k in kshape)):
        v = x
        for i, c in enumerate(combo):
            v = np.take(v, taps[i][:, c], axis=lead + i)
        views.append(v)
    val, arg = _max_over_taps(views)
    pos = np.unravel_index(arg, kshape)
    index = np.zeros(arg.shape, np.int64)
    for i, t in enumerate(taps):
        o = axis_index(i, nd, output_size[i])
        index = index * spatial[i] + t[o, pos[i]]
    return val, index


def _adaptive_max_meta_for(nd):
    def meta(x, output_size):
        shape = _check_adaptive(x, nd, output_size, f"adaptive_max_pool{nd}d", ":")
        return TensorSpec(shape, x.dtype), TensorSpec(shape, D.int64)
    return meta


adaptive_max_pool2d, adaptive_max_pool3d = _define_nd(
    "adaptive_max_pool{nd}d", "pooling", _adaptive_max_impl, _adaptive_max_meta_for,
    _max_indices_vjp, "AdaptiveMaxPool{nd}DBackward0",
    "{nd}-d adaptive max pooling: values and flat indices in the {extent}.")


# ---------------------------------------------------------------- max unpooling

def _max_unpool_impl(x, indices, output_size):
    nd = len(output_size)
    lead = x.shape[:-nd]
    size = prod(output_size)
    planes = prod(lead)
    rows = indices.reshape(planes, -1)
    out = np.zeros((planes, size), x.dtype)
    if rows.size:
        bad = (rows < 0) | (rows >= size)
        if bad.any():
            raise RuntimeError(f"Found an invalid max index: {int(rows[bad][0])} (output volumes are "
                               f"of size {_fmt(output_size)})")
        out[np.arange(planes)[:, None], rows] = x.reshape(planes, -1)
    return out.reshape(lead + tuple(output_size))


def _max_unpool_meta_for(nd):
    def meta(x, indices, output_size):
        shape = tuple(x.shape)
        if len(shape) not in (nd + 1, nd + 2):
            raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d "
                               f"Tensor, but got a tensor with {len(shape)} dimensions.")
        if indices.dtype is not D.int64:
            raise RuntimeError("elements in indices should be type int64 but got: "
                               f"{indices.dtype.scalar_type_name}")
        if tuple(indices.shape) != shape:
            raise RuntimeError("Expected shape of indices to be same as that of the input tensor "
                               f"({list(shape)}) but got indices tensor with shape: "
                               f"{list(indices.shape)}")
        return TensorSpec(shape[:-nd] + tuple(output_size), x.dtype)
    return meta


def _max_unpool_vjp(ctx, g):
    indices = ctx.inputs[1]
    return gather_planes(g, indices, len(ctx.attrs["output_size"])), None


max_unpool2d, max_unpool3d = _define_nd(
    "max_unpool{nd}d", "index", _max_unpool_impl, _max_unpool_meta_for, _max_unpool_vjp,
    "MaxUnpool{nd}DBackward0",
    "The inverse of a {nd}-d max pool: values written at their indices, zeros elsewhere.")


# ---------------------------------------------------------------- fractional max pooling

def fractional_starts(samples, size, out, k):
    """PyTorch's generate_intervals for many planes at once: window starts (..., out) from
    one uniform sample per plane, computed in the samples' precision."""
    dt = samples.dtype.type
    starts = np.empty(samples.shape + (out,), np.int64)
    if out > 1:
        alpha = dt(size - k) / dt(out - 1)
        i = np.arange(out - 1, dtype=samples.dtype)
        u = samples[..., None]
        starts[..., :-1] = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    if out > 0:
        starts[..., -1] = size - k
    return starts


# which sample of a plane drives which spatial dim (PyTorch: 2-d uses (W, H), 3-d (T, H, W))
_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}


def _fractional_ok(x, samples, kernel_size, output_size):
    """Whether the impl may run (else the meta rule raises PyTorch's error)."""
    nd = len(kernel_size)
    if x.ndim not in (nd + 1, nd + 2) or 0 in x.shape[-nd - 1:] or samples.dtype != x.dtype:
        return False
    b = 1 if x.ndim == nd + 1 else x.shape[0]
    if samples.ndim != 3 or samples.shape[0] < b or samples.shape[1:] != (x.shape[-nd - 1], nd):
        return False
    return all(o + k - 1 < n or (nd == 2 and o + k - 1 == n)
               for n, o, k in zip(x.shape[-nd:], output_size, kernel_size))


def _fractional_impl(x, samples, kernel_size, output_size):
    nd = len(kernel_size)
    if not _fractional_ok(x, samples, kernel_size, output_size):
        raise ValueError("invalid fractional pooling arguments")
    spatial = x.shape[-nd:]
    c = x.shape[-nd - 1]
    b = 1 if x.ndim == nd + 1 else x.shape[0]
    xb = x.reshape((b, c) + spatial)
    if 0 in output_size or b == 0:
        shape = x.shape[:-nd] + tuple(output_size)
        return np.empty(shape, x.dtype), np.empty(shape, np.int64)
    keys = [np.arange(b).reshape((b,) + (1,) * (2 * nd + 1)),
            np.arange(c).reshape((1, c) + (1,) * (2 * nd))]
    starts = []
    for i in range(nd):
        s = fractional_starts(samples[:b, :, _SAMPLE_OF_DIM[nd][i]], spatial[i], output_size[i],
                              kernel_size[i])
        starts.append(s)
        taps = s[..., None] + np.arange(kernel_size[i])               # (b, c, out_i, k_i)
        shape = [b, c] + [1] * (2 * nd)
        shape[2 + 2 * i], shape[3 + 2 * i] = output_size[i], kernel_size[i]
        keys.append(taps.reshape(shape))
    win = xb[tuple(keys)]                                               # (b, c, o1, k1, o2, k2...)
    order = (0, 1) + tuple(2 + 2 * i for i in range(nd)) + tuple(3 + 2 * i for i in range(nd))
    flat = win.transpose(order).reshape((b, c) + tuple(output_size) + (-1,))
    arg = flat.argmax(-1)
    if not _is_int(flat.dtype):
        nan = np.isnan(flat)
        if nan.any():
            last = flat.shape[-1] - 1 - nan[..., ::-1].argmax(-1)     # PyTorch keeps the last nan
            arg = np.where(nan.any(-1), last, arg)
    val = np.take_along_axis(flat, arg[..., None], -1)[..., 0]
    pos = np.unravel_index(arg, kernel_size)
    index = np.zeros(arg.shape, np.int64)
    for i in range(nd):
        shape = [b, c] + [1] * nd
        shape[2 + i] = output_size[i]
        index = index * spatial[i] + starts[i].reshape(shape) + pos[i]
    out_shape = x.shape[:-nd] + tuple(output_size)
    return val.reshape(out_shape), index.reshape(out_shape)


_TIME_HEIGHT_WIDTH = {"T": "time", "H": "height", "W": "width"}


def _fractional_meta_for(nd):
    def meta(x, samples, kernel_size, output_size):
        shape = tuple(x.shape)
        name = f"fractional_max_pool{nd}d" + ("" if nd == 2 else "_out")
        if len(shape) not in (nd + 1, nd + 2) or 0 in shape[len(shape) - nd - 1:]:
            raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(shape)}")
        b = 1 if len(shape) == nd + 1 else shape[0]
        ss = tuple(samples.shape)
        if samples.dtype is not x.dtype:
            raise RuntimeError("Expect _random_samples to have the same dtype as input")
        if len(ss) != 3:
            raise RuntimeError(f"Expect _random samples to have 3 dimensions, got {len(ss)}")
        if ss[0] < b:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        if ss[1] != shape[-nd - 1]:
            raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
        if ss[2] != nd:
            raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {ss[2]}.")
        for n, o, k, d in zip(shape[-nd:], output_size, kernel_size, _DIM_NAMES[nd]):
            # PyTorch's 3-d check is strict (the last window may not end at the border)
            if o + k - 1 > n or (nd == 3 and o + k - 1 == n):
                what = _TIME_HEIGHT_WIDTH[d]
                raise RuntimeError(f"{name}(): pool {what} {k} too large relative to input {what} {n}")
        out = shape[:-nd] + tuple(output_size)
        return TensorSpec(out, x.dtype), TensorSpec(out, D.int64)
    return meta


fractional_max_pool2d, fractional_max_pool3d = _define_nd(
    "fractional_max_pool{nd}d", "pooling", _fractional_impl, _fractional_meta_for,
    _max_indices_vjp, "FractionalMaxPool{nd}DBackward0",
    "{nd}-d fractional max pooling: pseudo-random window starts from one sample per plane.")


# ---------------------------------------------------------------- separable resampling

def _resample_impl(x, index, weight, dim):
    """out[..., j, ...] = sum_k x[..., index[k, j], ...] * weight[k, j] along ``dim``."""
    shape = [1] * x.ndim
    shape[dim] = index.shape[1]
    out = None
    for i, w in zip(index, weight):
        term = np.take(x, i, axis=dim) * w.reshape(shape)
        if out is None:
            out = term
        else:
            out += term
    return out.astype(x.dtype, copy=False)


def _resample_meta(x, index, weight, dim):
    shape = list(x.shape)
    shape[dim] = index.shape[1]
    return TensorSpec(tuple(shape), x.dtype)


def _resample_vjp(ctx, g):
    x, index, weight = ctx.inputs
    dim = ctx.attrs["dim"]
    return _call(resample_backward, g, index, weight, dim=dim, size=x.shape[dim]), None, None


resample = define("resample", "index", _resample_impl, meta=_resample_meta, vjp=_resample_vjp,
                  grad_name="UpsampleBackward0",
                  doc="Resampling along one dim: a weighted sum of a few gathered taps per output.")


def _resample_backward_impl(g, index, weight, dim, size):
    if size <= 64:
        # small dims: one BLAS matmul with the dense (out, in) matrix of the taps
        m = np.zeros((index.shape[1], size), g.dtype)
        rows = np.arange(index.shape[1])
        for i, w in zip(index, weight):
            np.add.at(m, (rows, i), w)
        out = np.moveaxis(np.moveaxis(g, dim, -1) @ m, -1, dim)
        return np.ascontiguousarray(out)
    gm = np.moveaxis(g, dim, -1)
    lead = gm.shape[:-1]
    rows = prod(lead)
    base = (np.arange(rows, dtype=np.int64) * size)[:, None]
    flat = gm.reshape(rows, -1)
    # every tap's contributions in one bincount (the taps of neighbouring outputs overlap)
    pos = np.concatenate([(base + i[None, :]).ravel() for i in index])
    val = np.concatenate([(flat * w[None, :]).ravel() for w in weight])
    out = np.bincount(pos, weights=val, minlength=rows * size).astype(g.dtype, copy=False)
    return np.ascontiguousarray(np.moveaxis(out.reshape(lead + (size,)), -1, dim))


def _resample_backward_meta(g, index, weight, dim, size):
    shape = list(g.shape)
    shape[dim] = size
    return TensorSpec(tuple(shape), g.dtype)


def _resample_backward_vjp(ctx, gg):
    _, index, weight = ctx.inputs
    return _call(resample, gg, index, weight, dim=ctx.attrs["dim"]), None, None


resample_backward = define(
    "resample_backward", "index", _resample_backward_impl, meta=_resample_backward_meta,
    vjp=_resample_backward_vjp, grad_name="UpsampleBackwardBackward0",
    doc="The input gradient of resample: each output's gradient spread back over its taps.")

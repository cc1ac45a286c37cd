"""Interpolation, grid sampling, affine grids and pixel/channel shuffling.

Everything here is a composition of dynograph ops, so autograd (and later the tracer) sees
through it.  Resizing is separable: each spatial dim is resampled in turn by gathering a few
taps along it (``index_select``) and summing them with weights.  Tap positions and weights
depend only on sizes and scales, never on data, so they are computed here (with PyTorch's
formulas, in the precision PyTorch's CPU kernels use) and enter the graph as constants.
"""
import math
import warnings

import numpy as np

import dynograph as _d
from dynograph._dispatch import call as _call
from dynograph.compiler.ops import pooling as _P
from dynograph.compiler.ops.core import type_name as _type_name
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

__all__ = [
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample",
    "affine_grid", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
]

_CUBIC_A = -0.75
_INTERP_MODES = ("linear", "bilinear", "bicubic", "trilinear")


# ----------------------------------------------------------------------------- tap tables

def _compute_dtype(dtype):
    """PyTorch's CPU kernels compute positions in float for float32/half, double for double."""
    return np.float64 if dtype == _d.float64 else np.float32


def _src_scale(in_size, out_size, scale, align_corners, ct):
    """area_pixel_compute_scale: the step in input coordinates per output pixel."""
    if align_corners:
        return ct((in_size - 1) / (out_size - 1)) if out_size > 1 else ct(0)
    if scale is not None and scale > 0:
        return ct(1.0 / scale)
    return ct(in_size / out_size)


def _nearest_taps(in_size, out_size, scale, exact, shortcut):
    """Source index of each output position (upsample_nearest / _upsample_nearest_exact).

    PyTorch's nearest_idx maps equal and doubled sizes without the scale (``shortcut``), so a
    scale_factor of 1.1 that keeps the size copies there but moves the taps elsewhere."""
    if shortcut and not exact and out_size in (in_size, 2 * in_size):
        return np.arange(out_size) // (out_size // in_size)
    dst = np.arange(out_size, dtype=np.float32)
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size / out_size)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_taps(in_size, out_size, scale, align_corners, ct):
    """Two source indices and weights per output position (upsample_linear kernels)."""
    s = _src_scale(in_size, out_size, scale, align_corners, ct)
    dst = np.arange(out_size, dtype=ct)
    src = s * dst if align_corners else np.maximum(s * (dst + ct(0.5)) - ct(0.5), ct(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0, 0, 1).astype(ct)
    i1 = np.where(i0 < in_size - 1, i0 + 1, i0)
    return [i0, i1], [ct(1) - lam, lam]


def _cubic_taps(in_size, out_size, scale, align_corners, ct):
    """Four source indices (clamped to the border) and cubic-convolution weights (A = -0.75)."""
    s = _src_scale(in_size, out_size, scale, align_corners, ct)
    dst = np.arange(out_size, dtype=ct)
    src = s * dst if align_corners else s * (dst + ct(0.5)) - ct(0.5)
    i = np.floor(src)
    t = (src - i).astype(ct)
    a = ct(_CUBIC_A)

    def near(x):                     # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):                      # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    idx = [np.clip(i.astype(np.int64) - 1 + k, 0, in_size - 1) for k in range(4)]
    return idx, weights


def _resample_dim(x, dim, idx, weights):
    """sum_k x.index_select(dim, idx[k]) * weights[k], as one primitive (a gather per tap
    forward, one bincount backward)."""
    index = _d.tensor(np.stack(idx), dtype=_d.int64, device=x.device)
    weight = _d.tensor(np.stack(weights), dtype=x.dtype, device=x.device)
    return _call(_P.resample, x, index, weight, dim=dim)


# ----------------------------------------------------------------------------- interpolate

def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _sizes_and_scales(input, size, scale_factor, mode, recompute_scale_factor):
    """PyTorch's argument handling of interpolate: (output sizes, scales or None)."""
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size of "
                    f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format.")
            if not all(_is_int(v) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                "Tuple[int, int, int], but got size with types "
                                f"{[type(v) for v in size]}")
            out = [int(v) for v in size]
        else:
            out = [int(size)] * dim
    elif scale_factor is not None:
        out = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        out = [int(input.shape[i + 2] * scales[i]) for i in range(dim)]
        scales = None
    if out is None:
        out = [int(math.floor(input.shape[i + 2] * scales[i])) for i in range(dim)]
    return out, scales


def _check_sizes(input, out, name):
    spatial = list(input.shape[2:])
    if input.shape[1] == 0 and all(spatial):
        raise RuntimeError(f"Non-empty {input.dim()}D data tensor expected but got a tensor with "
                           f"sizes {list(input.shape)}")
    if any(n <= 0 for n in out):
        def sizes(ns):
            return ", ".join(f"{k}: {n}" for k, n in zip("DHW"[-len(ns):], ns))
        joint = " and" if len(out) == 1 else ""     # only PyTorch's 1-d kernels say "and"
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({sizes(spatial)}){joint} output ({sizes(out)})")


def _with_grad_of(value, grad_source):
    """``value`` forward with ``grad_source``'s gradient: some of PyTorch's forward kernels skip
    work for unchanged sizes (a copy) that the matching backward kernels still do, or the reverse."""
    if not grad_source.requires_grad:
        return value
    return value.detach() + (grad_source - grad_source.detach())


_MODE_DIMS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, *spatial) input (torch.nn.functional.interpolate).

    Modes: nearest, nearest-exact, linear (3-D), bilinear / bicubic (4-D), trilinear (5-D), area.
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    out, scales = _sizes_and_scales(input, size, scale_factor, mode, recompute_scale_factor)
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes "
                         "and requires a 4-D tensor as input")
    nd = input.dim()
    _check_interpolate_dtype(input, mode)
    if mode in ("nearest", "nearest-exact", "area") and nd in (3, 4, 5):
        if mode == "area":
            return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 3](input, out)
        return _nearest(input, out, scales, mode == "nearest-exact")
    if _MODE_DIMS.get(mode) == nd:
        if antialias:
            return _antialias(input, out, scales, align_corners, mode)
        return _interp(input, out, scales, align_corners, mode)
    if mode == "lanczos" and nd == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if mode in _MODE_DIMS and mode != "bicubic" and nd in (3, 4, 5):
        raise NotImplementedError(f"Got {nd}D input, but {mode} mode needs {_MODE_DIMS[mode]}D input")
    raise NotImplementedError(
        "Input Error: Only 3D, 4D and 5D input Tensors supported"
        f" (got {nd}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos "
        f"| area | nearest-exact (got {mode})")


# the kernel PyTorch names when it refuses an input dtype, by mode and input rank
_INTERP_KERNELS = {("nearest", 3): "compute_indices_weights_nearest",
                   ("nearest", 4): "upsample_nearest2d_channels_last",
                   ("nearest", 5): "upsample_nearest3d_channels_last",
                   ("linear", 3): "compute_indices_weights_linear",
                   ("bilinear", 4): "upsample_bilinear2d_channels_last",
                   ("bicubic", 4): "compute_indices_weights_cubic",
                   ("trilinear", 5): "compute_indices_weights_linear"}


def _check_interpolate_dtype(input, mode):
    """Interpolation takes floating inputs, and uint8 except in the 1-d/3-d linear modes."""
    dt = input.dtype
    if dt.is_floating_point or mode == "area":        # area is adaptive pooling: its own check
        return
    key = ("nearest" if mode == "nearest-exact" else mode, input.dim())
    if key not in _INTERP_KERNELS or (dt is _d.uint8 and mode not in ("linear", "trilinear")):
        return
    raise NotImplementedError(f"\"{_INTERP_KERNELS[key]}\" not implemented for "
                              f"'{_type_name(dt)}'")


def _scale(scales, i):
    return None if scales is None else scales[i]


def _nearest(input, out, scales, exact):
    _check_sizes(input, out, "nearest")
    # PyTorch's 2-d forward kernel and every backward kernel take nearest_idx's shortcut
    taps = [_nearest_taps(input.shape[2 + i], n, _scale(scales, i), exact, shortcut=input.dim() == 4)
            for i, n in enumerate(out)]
    x = _nearest_gather(input, taps)
    if input.requires_grad:
        grad_taps = [_nearest_taps(input.shape[2 + i], n, _scale(scales, i), exact, shortcut=True)
                     for i, n in enumerate(out)]
        if any(not np.array_equal(a, b) for a, b in zip(taps, grad_taps)):
            x = _with_grad_of(x, _nearest_gather(input, grad_taps))
    return x


def _nearest_gather(input, taps):
    x = input
    for i, idx in enumerate(taps):
        dim = 2 + i
        size, n = input.shape[dim], len(idx)
        if dim < input.dim() - 1 and n % size == 0 and np.array_equal(idx, np.arange(n) // (n // size)):
            x = _repeat_each(x, dim, n // size)     # a broadcast: its backward is a fast sum
        else:
            x = _resample_dim(x, dim, [idx], [np.ones(n)])
    return x


def _repeat_each(x, dim, k):
    """Every entry along ``dim`` repeated k times (a broadcast: its backward is a sum)."""
    if k == 1:
        return x
    shape = list(x.shape)
    expanded = shape[:dim + 1] + [k] + shape[dim + 1:]
    shape[dim] *= k
    return x.unsqueeze(dim + 1).expand(expanded).reshape(shape)


def _cubic_filter(a):
    def f(x):
        x = abs(x)
        if x < 1.0:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2.0 else 0.0
    return f


def _linear_filter(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _uint8_float_taps(in_size, out_size, scale, align_corners, mode, antialias):
    """(first index, tap count, float weights, largest weight) per output of PyTorch's uint8
    kernels, in double: PIL's filter windows with antialias, else the 2 or 4 interpolation
    taps, those past the border folded onto the first or last pixel (the largest weight is
    then the largest partial sum, as PyTorch tracks it)."""
    interp = 2 if mode == "bilinear" else 4
    filt = _linear_filter if interp == 2 else _cubic_filter(-0.5 if antialias else -0.75)
    s = float(_src_scale(in_size, out_size, scale, align_corners, np.float64))
    taps = []
    if antialias:
        support = interp * 0.5 * (s if s >= 1.0 else 1.0)
        width = math.ceil(support) * 2 + 1
        inv = 1.0 / s if s >= 1.0 else 1.0
        for i in range(out_size):
            center = s * (i + 0.5)
            lo = max(int(center - support + 0.5), 0)            # C casts truncate toward 0
            n = min(max(min(int(center + support + 0.5), in_size) - lo, 0), width)
            w = [filt((j + lo - center + 0.5) * inv) for j in range(n)]
            total = sum(w)
            w = [v / total for v in w] if total != 0.0 else w
            taps.append((lo, n, w, max([0.0] + w) if total != 0.0 else 0.0))
        return taps, width
    support = interp // 2
    for i in range(out_size):
        real = s * i if align_corners else s * (i + 0.5) - 0.5
        if interp == 2 and not align_corners and real < 0:
            real = 0.0
        # guard_index_and_lambda floors the source position in float32
        index = min(math.floor(np.float32(real)), in_size - 1)
        lam = min(max(real - index, 0.0), 1.0)
        first = index - support + 1
        lo = max(first, 0)
        n = min(max(min(index + support + 1, in_size) - lo, 0), interp)
        w, k, top = [0.0] * interp, 0, 0.0
        for j in range(interp):
            if first + j <= 0:
                k = 0
            elif first + j >= in_size - 1:
                k = n - 1
            w[k] += filt(j + 1 - support - lam)
            top = max(top, w[k])
            k += 1
        taps.append((lo, n, w, top))
    return taps, interp


def _uint8_taps(in_size, out_size, scale, align_corners, mode, antialias):
    """Index and int16 weight tables (taps, outputs) and the weights' fixed-point precision:
    each float weight times 2**precision rounded half away from zero, the precision the
    largest (below 22) at which twice the largest weight stays below 2**15."""
    taps, width = _uint8_float_taps(in_size, out_size, scale, align_corners, mode, antialias)
    w_max = max([top for *_, top in taps], default=0.0)
    precision = 0
    while precision < 22 and int(0.5 + w_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    index = np.zeros((width, out_size), np.int64)
    weight = np.zeros((width, out_size), np.int32)
    for i, (lo, n, w, _) in enumerate(taps):
        for j in range(n):
            v = w[j] * (1 << precision)
            index[j, i] = lo + j
            weight[j, i] = int(v - 0.5) if v < 0 else int(v + 0.5)
        index[n:, i] = lo                   # unused taps: any valid index, weight 0
    return index, weight, precision


def _uint8_resize(input, out, scales, align_corners, mode, antialias):
    """Bilinear/bicubic resizing of a uint8 image as PyTorch's uint8 kernels compute it: one
    dimension at a time (the last first, a dimension of unchanged size skipped), each pass in
    integers with fixed-point weights: (sum of pixel * weight + 2**(p-1)) >> p, saturated to
    uint8 before the next pass.

    A 3-channel image resized to 1x1 is resized here too, although PyTorch 2.13's CPU kernel
    fails an internal assert there ("num_channels == unpacked_output.size(0) INTERNAL ASSERT
    FAILED ... please report a bug to PyTorch"): a bug, not a documented limit; its other
    paths (each channel alone, or four channels) give these values."""
    x = input
    for i in reversed(range(len(out))):
        dim = 2 + i
        if out[i] == x.shape[dim]:
            continue
        index, weight, p = _uint8_taps(x.shape[dim], out[i], _scale(scales, i), align_corners,
                                       mode, antialias)
        acc = _call(_P.resample, x.to(_d.int32), _d.tensor(index, device=x.device),
                    _d.tensor(weight, device=x.device), dim=dim)
        x = ((acc + (1 << (p - 1))) >> p).clamp(0, 255).to(_d.uint8)
    return x.clone() if x is input else x


def _interp(input, out, scales, align_corners, mode):
    _check_sizes(input, out, mode)
    if input.dtype is _d.uint8:
        return _uint8_resize(input, out, scales, align_corners, mode, antialias=False)
    ct = _compute_dtype(input.dtype)
    cubic = mode == "bicubic"
    taps = _cubic_taps if cubic else _linear_taps
    x = input
    for i, n in enumerate(out):
        dim = 2 + i
        if n == input.shape[dim] and not cubic:
            continue                # PyTorch's linear kernels copy such a dim, whatever its scale
        idx, weights = taps(input.shape[dim], n, _scale(scales, i), align_corners, ct)
        x = _resample_dim(x, dim, idx, weights)
    if x is input:
        return input.clone()
    if cubic and list(out) == list(input.shape[2:]):
        return _with_grad_of(x, input)    # bicubic's backward kernel copies the gradient then
    return x


def _aa_matrix(in_size, out_size, scale, align_corners, mode, ct):
    """The (out, in) resampling matrix of PyTorch's anti-aliased kernels (_upsample_*_aa):
    a triangle or cubic filter stretched by the downscaling factor, normalized per row."""
    s = float(_src_scale(in_size, out_size, scale, align_corners, np.float64))
    support = (1.0 if mode == "bilinear" else 2.0) * (s if s >= 1.0 else 1.0)
    inv = 1.0 / s if s >= 1.0 else 1.0
    center = s * (np.arange(out_size) + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)
    xmax = np.minimum((center + support + 0.5).astype(np.int64), in_size)
    j = np.arange(in_size)
    x = (j[None, :] - center[:, None] + 0.5) * inv
    if mode == "bilinear":
        w = np.maximum(0.0, 1.0 - np.abs(x))
    else:
        a, ax = -0.5, np.abs(x)
        w = np.where(ax < 1, ((a + 2) * ax - (a + 3)) * ax * ax + 1,
                     np.where(ax < 2, ((a * ax - 5 * a) * ax + 8 * a) * ax - 4 * a, 0.0))
    w = np.where((j[None, :] >= xmin[:, None]) & (j[None, :] < xmax[:, None]), w, 0.0)
    total = w.sum(1, keepdims=True)
    return (w / np.where(total == 0, 1.0, total)).astype(ct)


def _antialias(input, out, scales, align_corners, mode):
    _check_sizes(input, out, mode)
    if input.dtype is _d.uint8:
        return _uint8_resize(input, out, scales, align_corners, mode, antialias=True)
    ct = _compute_dtype(input.dtype)
    x = input
    for i, n in enumerate(out):
        dim = 2 + i
        m = _d.tensor(_aa_matrix(input.shape[dim], n, _scale(scales, i), align_corners, mode, ct),
                      dtype=input.dtype, device=input.device)
        resampled = (x.movedim(dim, -1) @ m.mT).movedim(-1, dim)
        # PyTorch skips a dim of unchanged size forward, yet its backward kernel resamples it
        x = _with_grad_of(x, resampled) if n == input.shape[dim] else resampled
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='nearest')."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='bilinear', align_corners=True)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ----------------------------------------------------------------------------- grid sampling

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False "
                  "since 1.3.0. Please specify align_corners=True if the old behavior is desired. "
                  "See the documentation of grid_sample for details.")


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, twice_low, twice_high):
    """Reflect coordinates into [twice_low/2, twice_high/2] (grid_sampler's reflect_coordinates)."""
    if twice_low == twice_high:
        return coord * 0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    t = (coord - low).abs()
    flips = (t / span).floor()
    extra = t - flips * span
    return _d.where(flips.remainder(2) == 0, extra + low, span - extra + low)


def _source_coord(coord, size, padding_mode, align_corners):
    """grid_sampler_compute_source_index: unnormalize, then apply the padding mode."""
    c = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        c = c.clamp(0, size - 1)
    elif padding_mode == "reflection":
        if align_corners:
            c = _reflect(c, 0, 2 * (size - 1))
        else:
            c = _reflect(c, -1, 2 * size - 1)
        c = c.clamp(0, size - 1)
    return c


def _gather_points(flat, index, n, c):
    """flat (N, C, P) at index (N, L) -> (N, C, L)."""
    return flat.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))


def _grid_check(input, grid, mode, padding_mode):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
                         f"'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', "
                         f"or 'reflection', but got: '{padding_mode}'")
    nd = input.dim()
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if grid.shape[-1] != nd - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd - 2} in last dimension, "
                           f"but got grid with sizes {list(grid.shape)}")
    for d in range(2, nd):
        if input.shape[d] == 0:
            raise RuntimeError("grid_sampler(): expected input to have non-empty spatial dimensions, "
                               f"but input has sizes {list(input.shape)} with dimension {d} being "
                               "empty")
    if nd not in (4, 5) or grid.dim() != nd:
        raise RuntimeError("grid_sampler(): expected 4D or 5D input and grid with same number of "
                           f"dimensions, but got input with sizes {list(input.shape)} and grid with "
                           f"sizes {list(grid.shape)}")
    if mode == "bicubic" and nd != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample (N, C, H, W) input (or (N, C, D, H, W)) at the normalized grid locations in [-1, 1].

    grid is (N, H_out, W_out, 2) with (x, y) per point (or (N, D_out, H_out, W_out, 3))."""
    _grid_check(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    n, c = input.shape[:2]
    spatial = tuple(input.shape[2:])
    nd = len(spatial)
    out_spatial = tuple(grid.shape[1:-1])
    pts = grid.reshape(n, math.prod(out_spatial), nd)      # explicit sizes: n may be 0
    flat = input.reshape(n, c, math.prod(spatial))
    # grid's last axis lists x (W) first: coordinate i addresses spatial dim nd - 1 - i
    sizes = spatial[::-1]
    if mode == "bicubic":
        coords = [_unnormalize(pts[..., i], sizes[i], align_corners) for i in range(nd)]
        out = _bicubic_sample(flat, coords, sizes, n, c, padding_mode, align_corners)
    else:
        coords = [_source_coord(pts[..., i], sizes[i], padding_mode, align_corners)
                  for i in range(nd)]
        if mode == "nearest":
            out = _corner(flat, [cd.round() for cd in coords], sizes, n, c)
        else:
            out = _linear_sample(flat, coords, sizes, n, c)
    return out.reshape((n, c) + out_spatial)


def _corner(flat, corner, sizes, n, c, weight=None):
    """The input values at integer coordinates ``corner`` (zero outside), times ``weight``."""
    inside = None
    index = None
    stride = 1
    for i, (ci, size) in enumerate(zip(corner, sizes)):
        ok = (ci >= 0) & (ci <= size - 1)
        inside = ok if inside is None else inside & ok
        term = ci.clamp(0, size - 1).to(_d.int64) * stride
        index = term if index is None else index + term
        stride *= size
    # a corner outside the input contributes nothing (where, not a zero weight: the clamped
    # position it read may hold an inf or nan)
    values = _d.where(inside.unsqueeze(1), _gather_points(flat, index, n, c), 0.0)
    return values if weight is None else values * (weight * inside.to(flat.dtype)).unsqueeze(1)


def _linear_sample(flat, coords, sizes, n, c):
    """Bi/trilinear: the 2**nd corners around each point, weighted by the opposite volumes."""
    lows = [cd.floor() for cd in coords]
    out = None
    for corner in np.ndindex(*(2,) * len(coords)):
        pos = []
        weight = None
        for cd, lo, up in zip(coords, lows, corner):
            pos.append(lo + up)
            w = (cd - lo) if up else (lo + 1 - cd)
            weight = w if weight is None else weight * w
        term = _corner(flat, pos, sizes, n, c, weight)
        out = term if out is None else out + term
    return out


def _bicubic_sample(flat, coords, sizes, n, c, padding_mode, align_corners):
    """Bicubic grid sampling: 4x4 taps, each tap's coordinate passed through the padding mode."""
    (x, y), (w_size, h_size) = coords, sizes
    x0, y0 = x.floor(), y.floor()
    tx, ty = x - x0, y - y0
    a = _CUBIC_A

    def coeffs(t):
        near = lambda v: ((a + 2) * v - (a + 3)) * v * v + 1           # noqa: E731
        far = lambda v: ((a * v - 5 * a) * v + 8 * a) * v - 4 * a      # noqa: E731
        return [far(t + 1), near(t), near(1 - t), far(2 - t)]

    cx, cy = coeffs(tx), coeffs(ty)
    out = None
    for j in range(4):
        for i in range(4):
            xi = _bounded(x0 - 1 + i, w_size, padding_mode, align_corners)
            yj = _bounded(y0 - 1 + j, h_size, padding_mode, align_corners)
            term = _corner(flat, [xi, yj], sizes, n, c, cx[i] * cy[j])
            out = term if out is None else out + term
    return out


def _bounded(coord, size, padding_mode, align_corners):
    """compute_coordinates of PyTorch's bicubic sampler (padding applied per tap)."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def _base_coords(steps, align_corners, dtype):
    """linspace(-1, 1, steps), shrunk by (steps - 1) / steps without align_corners."""
    if steps <= 1:
        return _d.zeros(max(steps, 1), dtype=dtype) if steps else _d.zeros(0, dtype=dtype)
    r = _d.linspace(-1, 1, steps, dtype=dtype)
    return r if align_corners else r * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) for a batch of affine matrices theta."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got "
                         f"{str(theta.dtype).replace('dynograph', 'torch')}")
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}."
                             f" Got {_shape_text(theta.shape)}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}."
                             f" Got {_shape_text(theta.shape)}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine "
                                  f"transforms, respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids "
                      "when align_corners=True. This is not an intended use case of affine_grid. "
                      "See the documentation of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    nd = len(spatial)
    axes = [_base_coords(s, align_corners, theta.dtype) for s in spatial[::-1]]   # x, y(, z)
    mesh = _d.meshgrid(*axes[::-1], indexing="ij")          # spatial order (D,) H, W
    cols = [m.reshape(-1) for m in mesh[::-1]] + [_d.ones(mesh[0].numel(), dtype=theta.dtype)]
    base = _d.stack(cols, 1).to(theta.device)                # (points, nd + 1)
    grid = base.unsqueeze(0) @ theta.transpose(1, 2)         # (N, points, nd)
    return grid.reshape([size[0]] + list(spatial) + [nd])


def _shape_text(shape):
    return "torch.Size([" + ", ".join(str(n) for n in shape) + "])"


# ----------------------------------------------------------------------------- shuffles

def _shuffle_factor(input, factor, fn, name):
    """The shuffle factor as an int, after PyTorch's checks of the input's rank and its sign."""
    r = int(factor)
    if input.dim() < 3:
        raise RuntimeError(f"{fn} expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{fn} expects a positive {name}, but got {r}")
    return r


def _regroup(input, split, order, merged):
    """The last 3 dims viewed as ``split``, permuted by ``order`` and viewed as ``merged``."""
    lead = list(input.shape[:-3])
    k = len(lead)
    x = input.reshape(lead + split).permute(list(range(k)) + [k + i for i in order])
    return x.reshape(lead + merged)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r)."""
    r = _shuffle_factor(input, upscale_factor, "pixel_shuffle", "upscale_factor")
    c, h, w = input.shape[-3:]
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by "
                           f"the square of upscale_factor, but input.size(-3)={c} is not divisible "
                           f"by {r * r}")
    return _regroup(input, [c // (r * r), r, r, h, w], [0, 3, 1, 4, 2], [c // (r * r), h * r, w * r])


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W)."""
    r = _shuffle_factor(input, downscale_factor, "pixel_unshuffle", "downscale_factor")
    c, h, w = input.shape[-3:]
    if h % r:
        raise RuntimeError("pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError("pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    return _regroup(input, [c, h // r, r, w // r, r], [0, 2, 4, 1, 3], [c * r * r, h // r, w // r])


def channel_shuffle(input, groups):
    """Split the channels (dim 1) into ``groups`` and interleave them."""
    g = int(groups)
    if input.dim() < 3:
        raise RuntimeError("channel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.dim()} dimension(s)")
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{g}")
    n, c = input.shape[:2]
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and "
                           f"{g} groups.")
    rest = list(input.shape[2:])
    x = input.reshape([n, g, c // g] + rest).transpose(1, 2)
    return x.reshape([n, c] + rest)


native_channel_shuffle = channel_shuffle

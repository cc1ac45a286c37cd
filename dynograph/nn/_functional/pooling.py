"""Max, average, adaptive, power-average and unpooling (torch.nn.functional's pooling forms).

The 2-d and 3-d pools are primitives (compiler/ops/pooling.py) so that they run as one strided
numpy reduction and report PyTorch's grad_fn names; the 1-d pools are the 2-d primitives on an
unsqueezed input, as in PyTorch (whose 1-d pools report ``SqueezeBackward1``).
"""
import dynograph as _d
from dynograph._dispatch import call as _call
from dynograph.compiler.ops import pooling as _P
from dynograph.compiler.ops.core import type_name as _type_name

__all__ = [
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "fractional_max_pool2d", "fractional_max_pool3d",
    "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
]

_WORDS = {1: "a single int", 2: "two ints", 3: "three ints"}


def _tuple(value, n, fn, name, forms="be a single int"):
    """An int or a sequence of 1 or n ints as an n-tuple (PyTorch's error otherwise)."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"{fn}: {name} must either {forms}, or a tuple of {_WORDS[n]}")
    return value


def _stride(stride, kernel, n, fn):
    """The stride as an n-tuple; omitted (None or empty), the kernel size."""
    if stride is None or (not isinstance(stride, int) and len(stride) == 0):
        return kernel
    return _tuple(stride, n, fn, "stride", "be omitted, a single int")


def _window(fn, n, kernel_size, stride, padding, dilation=1):
    k = _tuple(kernel_size, n, fn, "kernel_size")
    return (k, _stride(stride, k, n, fn), _tuple(padding, n, fn, "padding"),
            _tuple(dilation, n, fn, "dilation"))


def _refuse(input, kernel, dtypes=None):
    """PyTorch's error for a pooling kernel without an instantiation for input's dtype
    (``dtypes``: the refused ones; default every non-floating dtype)."""
    dt = input.dtype
    if (dt in dtypes) if dtypes is not None else not dt.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(dt)}'")


_NARROW_INTEGRAL = (_d.bool, _d.uint8, _d.int8, _d.int16, _d.int32)    # avg pooling's refusals


def _check_dim(input, low, high, fn):
    if input.dim() not in (low, high):
        raise RuntimeError(f"Expected {low} to {high} dimensions, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for {fn})")


# ----------------------------------------------------------------------------- max pooling

def _max_pool(input, n, kernel_size, stride, padding, dilation, ceil_mode):
    """The n-d (2 or 3) max pool primitive on normalized window arguments: (values, indices)."""
    _refuse(input, f"max_pool{n}d", (_d.bool,))
    k, s, p, d = _window(f"max_pool{n}d", n, kernel_size, stride, padding, dilation)
    op = _P.max_pool2d_with_indices if n == 2 else _P.max_pool3d_with_indices
    return _call(op, input, kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=bool(ceil_mode))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """2-d max pooling; returns (values, indices), indices flat within each input plane."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling over (N, C, H, W) or (C, H, W) input."""
    out, idx = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """3-d max pooling; returns (values, indices), indices flat within each input volume."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pooling over (N, C, D, H, W) or (C, D, H, W) input."""
    out, idx = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """1-d max pooling; returns (values, indices)."""
    if input.dim() not in (2, 3) or any(n == 0 for n in input.shape[-2:]):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                           f"batch size for input, but got:{list(input.shape)}")
    _refuse(input, "max_pool2d", (_d.bool,))
    k, s, p, d = _window("max_pool1d", 1, kernel_size, stride, padding, dilation)
    _check_pool1d(input, k[0], s[0], p[0], d[0], ceil_mode)
    out, idx = _call(_P.max_pool2d_with_indices, input.unsqueeze(-2), kernel_size=(1,) + k,
                     stride=(1,) + s, padding=(0,) + p, dilation=(1,) + d, ceil_mode=bool(ceil_mode))
    return out.squeeze(-2), idx.squeeze(-2)


def _check_pool1d(input, k, s, p, d, ceil_mode):
    """PyTorch's own checks of max_pool1d (worded apart from the 2-d ones)."""
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got "
                           f"padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = _P.pool_output_size(input.shape[-1], k, p, s, d, ceil_mode)
    if out <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over (N, C, L) or (C, L) input."""
    # PyTorch's kernel without indices takes floating inputs only; the one with them, any but bool
    _refuse(input, "max_pool2d" if return_indices else "max_pool1d_impl",
            (_d.bool,) if return_indices else None)
    out, idx = max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


# ----------------------------------------------------------------------------- average pooling

def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-d average pooling over (N, C, L) or (C, L) input."""
    _check_dim(input, 2, 3, "avg_pool1d")
    _refuse(input, "avg_pool2d", _NARROW_INTEGRAL)
    k, s, p, _ = _window("avg_pool1d", 1, kernel_size, stride, padding)
    out = _call(_P.avg_pool2d, input.unsqueeze(-2), kernel_size=(1,) + k, stride=(1,) + s,
                padding=(0,) + p, ceil_mode=bool(ceil_mode),
                count_include_pad=bool(count_include_pad), divisor_override=None)
    return out.squeeze(-2)


def _avg_pool(input, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """The n-d (2 or 3) average pool primitive on normalized window arguments."""
    _refuse(input, "avg_pool2d" if n == 2 else "avg_pool3d_out_frame", _NARROW_INTEGRAL)
    k, s, p, _ = _window(f"avg_pool{n}d", n, kernel_size, stride, padding)
    op = _P.avg_pool2d if n == 2 else _P.avg_pool3d
    return _call(op, input, kernel_size=k, stride=s, padding=p, ceil_mode=bool(ceil_mode),
                 count_include_pad=bool(count_include_pad), divisor_override=divisor_override)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-d average pooling; ``divisor_override`` replaces the window size as divisor."""
    if input.dim() < 3:
        input.size(-3)              # PyTorch's IndexError for too few dims
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-d average pooling; ``divisor_override`` replaces the window size as divisor."""
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ----------------------------------------------------------------------------- adaptive pooling

def _output_size(input, output_size, n, fn):
    """An int, or n ints/None (None keeps the input's size), as an n-tuple."""
    if isinstance(output_size, int):
        return (output_size,) * n
    size = tuple(output_size)
    if len(size) != n:
        raise RuntimeError(f"{fn}: output_size must be {n}")
    spatial = input.shape[-n:]
    return tuple(spatial[i] if v is None else int(v) for i, v in enumerate(size))


def _adaptive_avg(input, output_size, n):
    fn = f"adaptive_avg_pool{n}d"
    size = _output_size(input, output_size, n, fn)
    if n == 2:
        _refuse(input, "adaptive_avg_pool2d")
    if input.dim() in (n + 1, n + 2) and all(o == 1 for o in size) and all(input.shape[1:]):
        # PyTorch takes the mean for a global pool (grad_fn MeanBackward1)
        return input.mean(tuple(range(-n, 0)), keepdim=True)
    _refuse(input, "adaptive_avg_pool3d_cpu")
    op = _P.adaptive_avg_pool2d if n == 2 else _P.adaptive_avg_pool3d
    return _call(op, input, output_size=size)


def adaptive_avg_pool1d(input, output_size):
    """1-d adaptive average pooling to ``output_size`` positions."""
    _check_dim(input, 2, 3, "adaptive_avg_pool1d")
    size = _tuple(output_size, 1, "adaptive_avg_pool1d", "output_size")
    return _adaptive_avg(input.unsqueeze(-2), (1,) + size, 2).squeeze(-2)


def adaptive_avg_pool2d(input, output_size):
    """2-d adaptive average pooling; ``output_size`` an int or (H, W), None keeping a size."""
    return _adaptive_avg(input, output_size, 2)


def adaptive_avg_pool3d(input, output_size):
    """3-d adaptive average pooling; ``output_size`` an int or (D, H, W)."""
    return _adaptive_avg(input, output_size, 3)


def _adaptive_max(input, output_size, n):
    size = _output_size(input, output_size, n, f"adaptive_max_pool{n}d")
    _refuse(input, "adaptive_max_pool2d" if n == 2 else "adaptive_max_pool3d_cpu")
    op = _P.adaptive_max_pool2d if n == 2 else _P.adaptive_max_pool3d
    return _call(op, input, output_size=size)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """2-d adaptive max pooling; returns (values, indices)."""
    return _adaptive_max(input, output_size, 2)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """2-d adaptive max pooling."""
    out, idx = adaptive_max_pool2d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """3-d adaptive max pooling; returns (values, indices)."""
    return _adaptive_max(input, output_size, 3)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """3-d adaptive max pooling."""
    out, idx = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """1-d adaptive max pooling; returns (values, indices)."""
    _check_dim(input, 2, 3, "adaptive_max_pool1d")
    size = _tuple(output_size, 1, "adaptive_max_pool1d", "output_size")
    _refuse(input, "adaptive_max_pool2d")
    out, idx = _call(_P.adaptive_max_pool2d, input.unsqueeze(-2), output_size=(1,) + size)
    return out.squeeze(-2), idx.squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """1-d adaptive max pooling."""
    out, idx = adaptive_max_pool1d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


# ----------------------------------------------------------------------------- unpooling

def _unpool_output_size(input, n, kernel_size, stride, padding, output_size):
    """PyTorch's _unpool_output_size: the default size, or ``output_size`` checked against it."""
    kernel_size, stride, padding, _ = _window(f"max_unpool{n}d", n, kernel_size, stride, padding)
    default = [(input.shape[-n + i] - 1) * stride[i] + kernel_size[i] - 2 * padding[i]
               for i in range(n)]
    if output_size is None:
        return tuple(default)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    size = [int(v) for v in output_size]
    if len(size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but "
                         f"it has a length of '{len(size)}'")
    for d in range(n):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} '
                             f'and {hi})')
    return tuple(size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: values placed at their indices, zeros elsewhere."""
    size = _unpool_output_size(input, 1, kernel_size, stride, padding, output_size)
    out = _call(_P.max_unpool2d, input.unsqueeze(-1), indices.unsqueeze(-1),
                output_size=size + (1,))
    return out.squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: values placed at their indices, zeros elsewhere."""
    size = _unpool_output_size(input, 2, kernel_size, stride, padding, output_size)
    return _call(_P.max_unpool2d, input, indices, output_size=size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: values placed at their indices, zeros elsewhere."""
    size = _unpool_output_size(input, 3, kernel_size, stride, padding, output_size)
    return _call(_P.max_unpool3d, input, indices, output_size=size)


# ----------------------------------------------------------------------------- power-average

def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, n):
    avg = (avg_pool1d, avg_pool2d, avg_pool3d)[n - 1]
    k = _tuple(kernel_size, n, f"lp_pool{n}d", "kernel_size")
    window = 1
    for v in k:
        window *= v
    if stride is not None:
        out = avg(input.pow(norm_type), k, stride, 0, ceil_mode)
    else:
        out = avg(input.pow(norm_type), k, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * _d.relu(out.abs())).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """1-d power-average pooling: (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-d power-average pooling: (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-d power-average pooling: (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


# ----------------------------------------------------------------------------- fractional

def _fractional(input, kernel_size, output_size, output_ratio, samples, n):
    fn = f"fractional_max_pool{n}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = (output_ratio,) * n if not isinstance(output_ratio, (list, tuple)) else tuple(output_ratio)
        if len(ratio) > n:
            raise ValueError(f"{fn} requires output_ratio to either be a single Int or tuple of Ints.")
        if len(ratio) == 1:
            ratio = ratio * n
        output_size = [int(input.size(-n + i) * ratio[i]) for i in range(n)]
    size = _tuple(output_size, n, fn, "output_size")
    k = _tuple(kernel_size, n, fn, "kernel_size")
    if samples is None:
        batch = 1 if input.dim() == n + 1 else input.size(0)
        samples = _d.rand(batch, input.size(-n - 1), n, dtype=input.dtype)
    op = _P.fractional_max_pool2d if n == 2 else _P.fractional_max_pool3d
    return _call(op, input, samples, kernel_size=k, output_size=size)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """2-d fractional max pooling; returns (values, indices)."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """2-d fractional max pooling (Graham, 2014): windows at pseudo-random, increasing starts."""
    out, idx = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return (out, idx) if return_indices else out


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """3-d fractional max pooling; returns (values, indices)."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """3-d fractional max pooling: windows at pseudo-random, increasing starts."""
    out, idx = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return (out, idx) if return_indices else out

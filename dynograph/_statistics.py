"""Differences, integration, distances, covariance and histograms: ``diff``, ``gradient``,
``trapezoid``, ``trapz``, ``cumulative_trapezoid``, ``cdist``, ``dist``, ``renorm``, ``cov``, ``corrcoef``,
``histogram``, ``histogramdd``.

All of them are composites of the op set's primitives, written the way PyTorch composes
them, so their gradients come from the primitives' rules."""
import builtins
import math
import warnings

from dynograph.compiler.ops.core import type_name, wrap_dim
from dynograph.runtime import dtypes as D
from . import _creation
from ._reduce import structseq, vector_norm
from ._tensor import Tensor, exporters, tensor_method

__all__ = []
_public, _function = exporters(__all__)


def _need_tensor(x, fn, arg="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


# ---------------------------------------------------------------- differences

def _diff_once(x, dim):
    n = x.shape[dim]
    if n == 0:
        return x
    hi, lo = x.narrow(dim, 1, max(n - 1, 0)), x.narrow(dim, 0, max(n - 1, 0))
    return hi.logical_xor(lo) if x.dtype is D.bool else hi - lo


@_public
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along ``dim``, after prepending/appending values."""
    _need_tensor(input, "diff")
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input.dim())
    if n == 0:      # no differences taken: prepend and append are not used (PyTorch)
        return input
    parts = []
    for label, t in (("prepend", prepend), ("append", append)):
        if t is None:
            continue
        _need_tensor(t, "diff", label, 4 if label == "prepend" else 5)
        if t.dim() != input.dim():
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        parts.append((label, t))
    x = input
    if parts:
        from ._shape import cat
        seq = [t for label, t in parts if label == "prepend"] + [input] + \
              [t for label, t in parts if label == "append"]
        x = cat(seq, d)
    for _ in range(n):
        x = _diff_once(x, d)
    return x


# ---------------------------------------------------------------- integration

def _spacing(y, x, dx, d, fn):
    """The widths between consecutive samples along d, shaped to broadcast against y's."""
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise TypeError(f"{fn}() received an invalid combination of arguments: x and dx")
    if not isinstance(x, Tensor):       # a number: the spacing itself (torch.trapz(y, 0.5))
        return x
    if x.dim() == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(
                f"{fn}: There must be one `x` value for each sample point (found {x.shape[0]} "
                f"x values and {y.shape[d]} sample points)")
        w = diff(x)
        return w.reshape((-1,) + (1,) * (y.dim() - d - 1)) if y.dim() - d - 1 else w
    return diff(x, dim=d)


def _need_float_or_int(y, fn):
    if y.dtype is D.bool:
        raise RuntimeError(f"{fn}: received a bool input for `y`, but bool is not supported")


@_function
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``, with sample points ``x`` or a constant spacing."""
    _need_tensor(y, "trapezoid", "y")
    _need_float_or_int(y, "trapezoid")
    d = wrap_dim(dim, y.dim())
    n = y.shape[d]
    if n == 0:      # no intervals: the integral is 0 (over the other dims)
        out = y.sum(d)
        return out if out.dtype.is_floating_point else out.to(D.get_default_dtype())
    w = _spacing(y, x, dx, d, "trapezoid")
    if isinstance(w, Tensor):
        pairs = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
        return (w * pairs).sum(d) / 2
    # a constant spacing: (sum - (first + last) / 2) * dx, as PyTorch computes it
    ends = (y.select(d, 0) + y.select(d, -1)) * 0.5
    return (y.sum(d) - ends) * w


@_function
def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of :func:`trapezoid` (``torch.trapz(y, x, dim=-1)`` or ``trapz(y, dx=1, dim=-1)``)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@_function
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoidal integrals along ``dim`` (one fewer than the samples)."""
    _need_tensor(y, "cumulative_trapezoid", "y")
    _need_float_or_int(y, "cumulative_trapezoid")
    d = wrap_dim(dim, y.dim())
    n = y.shape[d]
    if n == 0:
        return y if y.dtype.is_floating_point else y.to(D.get_default_dtype())
    w = _spacing(y, x, dx, d, "cumulative_trapezoid")
    pairs = y.narrow(d, 1, max(n - 1, 0)) + y.narrow(d, 0, max(n - 1, 0))
    return (w * pairs / 2).cumsum(d)


@_function
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Numerical derivatives along each dimension (central differences inside, one-sided
    differences of order ``edge_order`` at the ends), with uniform ``spacing`` or sample
    coordinates, as numpy.gradient and torch.gradient."""
    _need_tensor(input, "gradient")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.dim())) if dim is None else \
        [dim] if isinstance(dim, int) else list(dim)
    dims = [wrap_dim(d, input.dim()) for d in dims]
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (int, float, Tensor)) and not (isinstance(spacing, Tensor) and spacing.dim()):
        spacing = [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) == 1 and len(dims) > 1:
        spacing = spacing * len(dims)
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's "
                           f"spacing and dim arguments to have the same length, but got a spacing "
                           f"argument of length {len(spacing)} and a dim argument of length "
                           f"{len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    f = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    return tuple(_gradient_along(f, d, h, edge_order) for d, h in zip(dims, spacing))


def _gradient_along(f, d, h, edge_order):
    n = f.shape[d]

    def at(start, length):
        return f.narrow(d, start, length)

    def shaped(w):          # coordinate weights along d, broadcast over the other dims
        return w.reshape((-1,) + (1,) * (f.dim() - d - 1))
    from ._shape import cat
    if isinstance(h, Tensor) and h.dim():                     # sample coordinates
        x = h.to(f.dtype)
        dx = diff(x)
        a1, a2 = dx[:-1], dx[1:]
        inner = (shaped(-a2 / (a1 * (a1 + a2))) * at(0, n - 2) + shaped((a2 - a1) / (a1 * a2)) *
                 at(1, n - 2) + shaped(a1 / (a2 * (a1 + a2))) * at(2, n - 2))
        if edge_order == 1:
            first = (at(1, 1) - at(0, 1)) / dx[0]
            last = (at(n - 1, 1) - at(n - 2, 1)) / dx[-1]
        else:
            p, q = dx[0], dx[1]
            first = (-(2 * p + q) / (p * (p + q)) * at(0, 1) + (p + q) / (p * q) * at(1, 1)
                     - p / (q * (p + q)) * at(2, 1))
            p, q = dx[-2], dx[-1]
            last = (q / (p * (p + q)) * at(n - 3, 1) - (q + p) / (p * q) * at(n - 2, 1)
                    + (2 * q + p) / (q * (p + q)) * at(n - 1, 1))
    else:                                                     # a uniform step
        h = h.item() if isinstance(h, Tensor) else h
        inner = (at(2, n - 2) - at(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (at(1, 1) - at(0, 1)) / h
            last = (at(n - 1, 1) - at(n - 2, 1)) / h
        else:
            first = (at(0, 1) * -1.5 + at(1, 1) * 2 - at(2, 1) * 0.5) / h
            last = (at(n - 3, 1) * 0.5 - at(n - 2, 1) * 2 + at(n - 1, 1) * 1.5) / h
    return cat([first, inner, last], d)


# ---------------------------------------------------------------- distances

@_function
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each pair of rows of x1 (..., P, M) and x2 (..., R, M)."""
    _need_tensor(x1, "cdist", "x1")
    _need_tensor(x2, "cdist", "x2", 2)
    for label, t in (("X1", x1), ("X2", x2)):
        if t.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {label} got: {t.dim()}D")
    for label, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {label} got: "
                               f"{type_name(t.dtype)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                           f"X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    many = x1.shape[-2] > 25 or x2.shape[-2] > 25
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                   (compute_mode == "use_mm_for_euclid_dist_if_necessary" and many)):
        return _euclidean_dist(x1, x2)
    diffs = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == math.inf:
        # every coordinate at the maximum gets the whole gradient (PyTorch's cdist rule; the
        # norm's own rule would share it among ties)
        m = diffs.abs()
        top = m.amax(-1, keepdim=True).detach() if m.shape[-1] else m.sum(-1, keepdim=True)
        tied = (m == top).to(m.dtype)
        return top.squeeze(-1) + ((m - m.detach()) * tied).sum(-1)
    return vector_norm(diffs, p, -1)


def _euclidean_dist(x1, x2):
    """|a - b| from |a|^2 - 2 a.b + |b|^2 with one matrix product, as PyTorch computes cdist
    for many rows."""
    from ._linalg import matmul
    from ._shape import cat
    n1 = x1.pow(2).sum(-1, keepdim=True)
    n2 = x2.pow(2).sum(-1, keepdim=True)
    a = cat([x1 * -2, n1, n1.new_ones(n1.shape)], -1)
    b = cat([x2, x2.new_ones(n2.shape), n2], -1)
    return matmul(a, b.mT).clamp_min(0).sqrt()


@_public
def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast)."""
    _need_tensor(input, "dist")
    _need_tensor(other, "dist", "other", 2)
    return vector_norm(input - other, p)


@_public
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` rescaled to norm ``maxnorm``."""
    _need_tensor(input, "renorm")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"renorm: expected a floating point or complex tensor as input. Got "
                           f"{type_name(input.dtype)}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    d = wrap_dim(dim, input.dim())
    others = tuple(i for i in range(input.dim()) if i != d)
    norms = vector_norm(input, p, others, keepdim=True)
    factor = (maxnorm / (norms + 1e-7)).where(norms > maxnorm, 1.0)
    return input * factor


@tensor_method
def renorm_(self, p, dim, maxnorm):
    """In-place :func:`renorm`."""
    from ._inplace import assign
    return assign(self, renorm(self, p, dim, maxnorm))


# ---------------------------------------------------------------- covariance

@_public
def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the variables (rows) of ``input`` over its observations (columns)."""
    _need_tensor(input, "cov")
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dim() > 1:
            raise RuntimeError(f"cov(): expected fweights to have one or fewer dimensions but got "
                               f"fweights with {fweights.dim()} dimensions")
        if fweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights "
                               f"with {type_name(fweights.dtype)} dtype")
        if fweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are "
                               f"observations in the input but got {fweights.numel()} != {n_obs}")
        if n_obs and bool((fweights < 0).any()):
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        if aweights.dim() > 1:
            raise RuntimeError(f"cov(): expected aweights to have one or fewer dimensions but got "
                               f"aweights with {aweights.dim()} dimensions")
        if not aweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got "
                               f"aweights with {type_name(aweights.dtype)} dtype")
        if aweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are "
                               f"observations in the input but got {aweights.numel()} != {n_obs}")
        if n_obs and bool((aweights < 0).any()):
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1) if x.dtype.is_floating_point else x.to(D.get_default_dtype()).mean(1)
        w_sum = n_obs
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    if w is not None and aweights is not None and correction != 0:
        norm_factor = w_sum - correction * (w * aweights).sum() / w_sum
    else:
        norm_factor = w_sum - correction
    if (bool(norm_factor <= 0) if isinstance(norm_factor, Tensor) else norm_factor <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than "
                      "the number of observations.", stacklevel=2)
        norm_factor = norm_factor * 0 if isinstance(norm_factor, Tensor) else 0
    xc = x - avg.unsqueeze(1)
    from ._linalg import mm
    c = mm(xc, (xc if w is None else xc * w).t())
    return (c / norm_factor).squeeze()


@_public
def corrcoef(input):
    """Pearson correlation coefficients of the variables (rows) of ``input``."""
    _need_tensor(input, "corrcoef")
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got "
                           f"an input with {input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clamp(-1, 1) if c.dtype.is_floating_point else c


# ---------------------------------------------------------------- histograms

_histogram_t = structseq("histogram", ("hist", "bin_edges"))
_histogramdd_t = structseq("histogramdd", ("hist", "bin_edges"))


def _edges_of(x, bins, rng, fn, name="bins"):
    """The bin edges of one dimension (a count and an optional range, or the edges)."""
    if isinstance(bins, Tensor):
        if bins.dim() != 1:
            raise RuntimeError(f"{fn}(): {name} tensor should have one dimension, but got "
                               f"{bins.dim()} dimensions")
        if bins.dtype is not x.dtype:
            raise RuntimeError(f"{fn}: input tensor and bins tensors should have the same dtype, "
                               f"but got input {x.dtype} and bins {bins.dtype}")
        return bins
    if bins <= 0:
        raise RuntimeError(f"{fn}(): bins must be > 0, but got {bins} for dimension 0")
    if rng is not None:
        lo, hi = builtins.float(rng[0]), builtins.float(rng[1])
    elif x.numel():
        lo, hi = x.min().item(), x.max().item()
    else:
        lo, hi = 0.0, 1.0
    if lo > hi:
        raise RuntimeError(f"{fn}(): min should not exceed max, but got min {lo} max {hi}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{fn}(): range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return _creation.linspace(lo, hi, bins + 1, dtype=x.dtype)


def _bin_index(v, edges):
    """The bin of each value (-1 outside): edges[i] <= v < edges[i + 1], the last bin closed."""
    from ._indexing import searchsorted
    nb = edges.shape[0] - 1
    idx = searchsorted(edges.contiguous(), v.contiguous(), right=True) - 1
    idx = idx.where(v != edges[-1], nb - 1)                   # the rightmost edge: last bin
    inside = (v >= edges[0]) & (v <= edges[-1])
    return idx.where(inside, -1), inside


def _check_hist_input(x):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{type_name(x.dtype)}'")


@_public
def histogram(input, bins, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """Counts (or summed weights) of ``input``'s values in ``bins`` and the bin edges."""
    _need_tensor(input, "histogram")
    _check_hist_input(input)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogram: if weight tensor is provided, it should have the same "
                           "shape as the input tensor")
    hist, edges = histogramdd(input.reshape(-1, 1), [bins] if not isinstance(bins, Tensor) else [bins],
                              range=range, weight=None if weight is None else weight.reshape(-1),
                              density=density)
    return _histogram_t((hist, edges[0]))


@_function
def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """A D-dimensional histogram of the points in ``input`` (..., D)."""
    _need_tensor(input, "histogramdd")
    _check_hist_input(input)
    if input.dim() < 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 1 dimension, but "
                           "got 0")
    ndim = input.shape[-1]
    pts = input.reshape(-1, ndim)
    if isinstance(bins, int):
        bins = [bins] * ndim
    bins = list(bins)
    if len(bins) != ndim:
        raise RuntimeError(f"torch.histogramdd: expected {ndim} sequences of bin edges for each "
                           f"of the {ndim} input dimensions, but got {len(bins)} bin edges")
    if range is not None and len(range) != 2 * ndim:
        raise RuntimeError(f"torch.histogramdd: for a {ndim}-dimensional histogram range should "
                           f"have {2 * ndim} elements, but got {len(range)}")
    edges = [_edges_of(pts[:, i], b, None if range is None else range[2 * i:2 * i + 2],
                       "torch.histogramdd") for i, b in enumerate(bins)]
    nbins = [e.shape[0] - 1 for e in edges]
    flat = _creation.zeros(pts.shape[0], dtype=D.int64)
    keep = _creation.ones(pts.shape[0], dtype=D.bool)
    for i, e in enumerate(edges):
        idx, inside = _bin_index(pts[:, i], e)
        flat = flat * nbins[i] + idx.clamp(min=0)
        keep = keep & inside
    w = _creation.ones(pts.shape[0], dtype=input.dtype) if weight is None else weight.reshape(-1)
    w = w.where(keep, 0)
    hist = _creation.zeros(math.prod(nbins), dtype=input.dtype).index_add(0, flat, w)
    hist = hist.reshape(nbins)
    if density:
        hist = hist / hist.sum()
        for i, e in enumerate(edges):
            shape = [1] * ndim
            shape[i] = nbins[i]
            hist = hist / diff(e).reshape(shape)
    return _histogramdd_t((hist, tuple(edges)))

"""Reductions, scans and sorting: sum, mean, prod, max/min, std/var, norms, cumsum, sort ...

Conventions shared by every op here:

* ``dim`` attributes reach the op already normalized by the API layer: ``None`` (all
  dims) or a tuple of non-negative ints (single-dim ops get one int).  Meta rules
  re-validate them, so a traced graph gets the same errors.
* ``impl`` is one numpy reduction call; float16/bfloat16 accumulate in float32 like
  PyTorch's CPU kernels and are cast back at the end.
* Derivative rules rebuild the reduced dims with ``reshape`` + ``expand`` (``_unreduce``)
  and are written only with tensor methods.
"""

import builtins
import math

import numpy as np

from dynograph.runtime import dtypes as D
from .core import REGISTRY, TensorSpec, define, type_name, wrap_dim, wrap_dims
from .creation import as_contiguous, as_preserved
from .indexing import DATA_DEPENDENT
from ..lowering.scalar import Composite, Reduction, highest, lowest

_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)


def _acc(out):
    """The numpy type a reduction to numpy type ``out`` accumulates in (float32 for halves)."""
    return _F32 if D.is_half(out) else out


# ---------------------------------------------------------------- shared helpers

def _axis(x, dim):
    """The numpy ``axis`` for a normalized ``dim`` (0-d tensors reduce over nothing)."""
    if dim is None or x.ndim == 0:
        return None
    return dim


def _arr(r, dt=None):
    """numpy reductions return scalars for full reductions: make them 0-d arrays."""
    if dt is None:
        return r if type(r) is np.ndarray else np.asarray(r)
    if type(r) is np.ndarray and r.dtype == dt:
        return r
    return np.asarray(r).astype(dt)


def reduced_shape(shape, dim, keepdim):
    """The shape left after reducing ``dim`` (None: all) of ``shape``."""
    dims = wrap_dims(dim, len(shape))
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def numel_reduced(shape, dim):
    n = 1
    for i in (range(len(shape)) if dim is None else dim):
        if i < len(shape):
            n *= shape[i]
    return n


def _unreduce(g, shape, dim, keepdim):
    """Expand a reduction's output gradient ``g`` back to the input ``shape``."""
    if not keepdim and dim is not None and len(shape):
        g = g.reshape(tuple(1 if i in dim else n for i, n in enumerate(shape)))
    return g.expand(shape)


def _unreduce_out(t, ctx):
    """A saved reduction output (or its gradient) brought back to the input's shape."""
    return _unreduce(t, tuple(ctx.inputs[0].shape), ctx.attrs.get("dim"),
                     ctx.attrs.get("keepdim", False))


def _spec_reduce(x, dim, keepdim, dtype):
    return TensorSpec(reduced_shape(tuple(x.shape), dim, keepdim), dtype)


# ---------------------------------------------------------------- lowering rules
# How the code generators reduce (compiler/lowering/scalar.py): the combine, its identity, the
# accumulation dtype (half types accumulate in float32), per-element and final steps.


def _acc_dtype(in_dt, out_dt):
    return D.float32 if out_dt in (D.float16, D.bfloat16) else out_dt


def _same_dtype(in_dt, out_dt):
    return in_dt


def _mean_finalize(b, acc, count, **_):
    return b.div(acc, b.const(count, acc.dtype))         # the mean of nothing is 0/0 = nan


def _skip_nan(b, x, **_):
    return b.select(b.cmp("ne", x, x), b.const(0, x.dtype), x)


def _variance(b, x, count, reduce, correction=1):
    """Two passes, as ``_moments``: the mean, then the sum of squared deviations."""
    acc = _acc_dtype(x.dtype, x.dtype)
    x = b.cast(x, acc)
    mean = b.div(reduce("add", 0, x), b.const(count, acc))
    d = b.sub(x, mean)
    return b.div(reduce("add", 0, b.mul(d, d)), b.const(builtins.max(count - correction, 0), acc))


VAR_LOWERING = Composite(_variance)
STD_LOWERING = Composite(lambda b, x, count, reduce, correction=1:
                         b.sqrt(_variance(b, x, count, reduce, correction)))
SUM_LOWERING = Reduction("add", lambda dt: 0, _acc_dtype)
MEAN_LOWERING = Reduction("add", lambda dt: 0, _acc_dtype, finalize=_mean_finalize)
NANSUM_LOWERING = Reduction("add", lambda dt: 0, _acc_dtype, prepare=_skip_nan)
PROD_LOWERING = Reduction("mul", lambda dt: 1, _acc_dtype)
MAX_LOWERING = Reduction("max", lowest, _same_dtype)
MIN_LOWERING = Reduction("min", highest, _same_dtype)
ARGMAX_LOWERING = Reduction("argmax", lowest, _same_dtype)
ARGMIN_LOWERING = Reduction("argmin", highest, _same_dtype)
ALL_LOWERING = Reduction("and_", lambda dt: True, lambda i, o: D.bool)
ANY_LOWERING = Reduction("or_", lambda dt: False, lambda i, o: D.bool)


# ---------------------------------------------------------------- sum

def sum_dtype(in_dt, dtype=None):
    """sum/prod/cumsum result dtype: ``dtype`` if given, int64 for bool/integers."""
    if dtype is not None:
        return dtype
    return in_dt if in_dt.is_floating_point or in_dt.is_complex else D.int64


def _sum_types(x_dtype):
    """(accumulation, result) numpy types of sum/prod/cumsum of ``x_dtype`` without ``dtype=``."""
    if x_dtype.kind in "fc" or D.is_bfloat16(x_dtype):
        return _acc(x_dtype), x_dtype
    return _I64, _I64


def _sum_impl(x, dim=None, keepdim=False, dtype=None):
    if dtype is None:
        acc, out = _sum_types(x.dtype)
    else:
        out = dtype.np
        acc = _acc(out)
        if x.dtype != acc:
            x = x.astype(acc)
    r = np.add.reduce(x, axis=None if dim is None or x.ndim == 0 else dim, dtype=acc,
                      keepdims=keepdim)
    if type(r) is np.ndarray and r.dtype == out:
        return r
    return np.asarray(r).astype(out)


def _sum_meta(x, dim=None, keepdim=False, dtype=None):
    return _spec_reduce(x, dim, keepdim, sum_dtype(x.dtype, dtype))


def _sum_vjp(ctx, g):
    return (_unreduce_out(g, ctx),)


def _overload_name(name):
    """PyTorch's grad_fn name of a reduction: ``<name>Backward1`` for the overload taking
    ``dim`` (even ``dim=None``), ``Backward0`` for the one without."""
    return lambda is_tensor, attrs: f"{name}Backward{int('dim' in attrs)}"


sum = define("sum", "reduction", _sum_impl, meta=_sum_meta, vjp=_sum_vjp,  # noqa: A001
             grad_name=_overload_name("Sum"), doc="Sum of all elements, or over ``dim``.",
             lowering=SUM_LOWERING)


# ---------------------------------------------------------------- mean

def mean_dtype(in_dt, dtype=None, name="mean"):
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(
                f"{name}(): could not infer output dtype. Optional dtype must be either a floating "
                f"point or complex dtype. Got: {type_name(dtype)}")
        return dtype
    if not (in_dt.is_floating_point or in_dt.is_complex):
        raise RuntimeError(
            f"{name}(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {type_name(in_dt)}")
    return in_dt


def _mean_impl(x, dim=None, keepdim=False, dtype=None):
    if dtype is None and x.dtype.kind in "fc":
        out = x.dtype
    else:
        out = mean_dtype(D.FROM_NUMPY[x.dtype], dtype).np
    acc = _acc(out)
    if x.dtype != acc:
        x = x.astype(acc)
    s = np.add.reduce(x, axis=None if dim is None or x.ndim == 0 else dim, keepdims=keepdim)
    n = numel_reduced(x.shape, dim)
    return _arr(s / n if n else s * np.nan, out)        # the mean of nothing is nan


def _mean_meta(x, dim=None, keepdim=False, dtype=None):
    return _spec_reduce(x, dim, keepdim, mean_dtype(x.dtype, dtype))


def _mean_vjp(ctx, g):
    n = numel_reduced(tuple(ctx.inputs[0].shape), ctx.attrs.get("dim"))
    return (_unreduce_out(g, ctx) / n,)


mean = define("mean", "reduction", _mean_impl, meta=_mean_meta, vjp=_mean_vjp,
              grad_name=_overload_name("Mean"), doc="Mean of all elements, or over ``dim``.",
              lowering=MEAN_LOWERING)


# ---------------------------------------------------------------- nansum


def _nansum_impl(x, dim=None, keepdim=False, dtype=None):
    if D.is_floating(x.dtype):
        x = np.where(np.isnan(x), x.dtype.type(0), x)
    return _sum_impl(x, dim, keepdim, dtype)


def _nansum_vjp(ctx, g):
    # a product, not a fill: an inf or NaN gradient stays NaN at NaN inputs, as in torch
    return (_unreduce_out(g, ctx) * ~ctx.inputs[0].isnan(),)


nansum = define("nansum", "reduction", _nansum_impl, meta=_sum_meta, vjp=_nansum_vjp,
                doc="Sum treating NaN as zero.", lowering=NANSUM_LOWERING)


# ---------------------------------------------------------------- prod


def _prod_impl(x, dim=None, keepdim=False, dtype=None):
    out = sum_dtype(D.FROM_NUMPY[x.dtype], dtype).np
    acc = _acc(out)
    if x.dtype != acc:
        x = x.astype(acc)
    return _arr(np.multiply.reduce(x, axis=_axis(x, _tup(dim)), keepdims=keepdim), out)


def _prod_meta(x, dim=None, keepdim=False, dtype=None):
    return _spec_reduce(x, _tup(dim), keepdim, sum_dtype(x.dtype, dtype))


def _prod_vjp(ctx, g):
    """Exact with zeros: the one zero gets the product of the others; with two, all get 0."""
    x = ctx.inputs[0]
    dim = _tup(ctx.attrs.get("dim"))
    g = _unreduce(g, tuple(x.shape), dim, ctx.attrs.get("keepdim", False))
    zero = x == 0
    if dim is None:
        nz, others = zero.sum(), x.masked_fill(zero, 1).prod()
    else:
        nz = zero.sum(dim, keepdim=True)
        others = x.masked_fill(zero, 1).prod(dim[0], keepdim=True)
    at_zero = others.masked_fill(nz != 1, 0).expand(x.shape).masked_fill(~zero, 0)
    # divide by a safe x: an inf at a zero would turn into NaN in the second derivative
    elsewhere = (others / x.masked_fill(zero, 1)).masked_fill(zero | (nz != 0), 0)
    return (g * (at_zero + elsewhere),)


prod = define("prod", "reduction", _prod_impl, meta=_prod_meta, vjp=_prod_vjp,
              grad_name=_overload_name("Prod"), doc="Product of all elements, or over one ``dim``.",
              lowering=PROD_LOWERING)


def _tup(dim):
    return (dim,) if type(dim) is int else dim


# ---------------------------------------------------------------- max, min, amax, amin


def _empty_full_error(name):
    return RuntimeError(
        f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
        "Specify the reduction dim with the 'dim' argument.")


def _check_nonempty(name, shape, dim, sep="():"):
    """IndexError naming the first reduced dim of size zero (no identity for max/min)."""
    for d in wrap_dims(_tup(dim), len(shape)):
        if len(shape) and shape[d] == 0:
            raise IndexError(f"{name}{sep} Expected reduction dim {d} to have non-zero size.")


def _extreme_full(ufunc, name):
    def impl(x):
        if x.size == 0:
            raise _empty_full_error(name)
        return _arr(ufunc.reduce(x, axis=None))

    def meta(x):
        if 0 in tuple(x.shape):
            raise _empty_full_error(name)
        return TensorSpec((), x.dtype)
    return impl, meta


def _evenly_distribute(g, x, value):
    """torch's gradient of a whole-tensor max/min/median: split evenly among the ties."""
    mask = (x == value) | (x.isnan() & value.isnan())
    return mask * (g / mask.sum())


def _extreme_full_vjp(ctx, g):
    return (_evenly_distribute(g, ctx.inputs[0], ctx.output),)


_impl, _meta = _extreme_full(np.maximum, "max")
max = define("max", "reduction", _impl, meta=_meta, vjp=_extreme_full_vjp,  # noqa: A001
             grad_name="MaxBackward1", doc="Largest element.", lowering=MAX_LOWERING)
_impl, _meta = _extreme_full(np.minimum, "min")
min = define("min", "reduction", _impl, meta=_meta, vjp=_extreme_full_vjp,  # noqa: A001
             grad_name="MinBackward1", doc="Smallest element.", lowering=MIN_LOWERING)


def _select_along(x, idx, dim, keepdim):
    """The values of ``x`` at ``idx`` (computed with keepdims) along ``dim``."""
    vals = np.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return vals, idx


def _arg_dim(argfn, name):
    def impl(x, dim, keepdim=False):
        if x.ndim == 0:
            return x.copy(), np.zeros((), _I64)
        if x.shape[dim] == 0:
            _check_nonempty(name, x.shape, dim)
        idx = argfn(x, axis=dim, keepdims=True)
        return _select_along(x, idx, dim, keepdim)

    def meta(x, dim, keepdim=False):
        _check_nonempty(name, tuple(x.shape), dim)
        shape = reduced_shape(tuple(x.shape), (dim,), keepdim)
        return TensorSpec(shape, x.dtype), TensorSpec(shape, D.int64)
    return impl, meta


def _selected_grad(ctx, g, idx):
    """Gradient of an op that picked ``x[idx]`` along ``dim``: scatter ``g`` back."""
    x = ctx.inputs[0]
    if x.ndim == 0:
        return g
    dim = ctx.attrs["dim"]
    if not ctx.attrs.get("keepdim", True):
        g, idx = g.unsqueeze(dim), idx.unsqueeze(dim)
    return g.new_zeros(tuple(x.shape)).scatter(dim, idx, g)


def _value_index_vjp(ctx, g, _gi=None):
    return (_selected_grad(ctx, g, ctx.output[1]),)


_impl, _meta = _arg_dim(np.argmax, "max")
max_dim = define("max_dim", "reduction", _impl, meta=_meta, vjp=_value_index_vjp,
                 grad_name="MaxBackward0", doc="Largest values along a dim and their indices.")
_impl, _meta = _arg_dim(np.argmin, "min")
min_dim = define("min_dim", "reduction", _impl, meta=_meta, vjp=_value_index_vjp,
                 grad_name="MinBackward0", doc="Smallest values along a dim and their indices.")


def _amax_like(ufunc, name):
    def impl(x, dim=None, keepdim=False):
        if x.size == 0:
            meta(TensorSpec(x.shape, None), dim, keepdim)
        return _arr(ufunc.reduce(x, axis=_axis(x, dim), keepdims=keepdim))

    def meta(x, dim=None, keepdim=False):
        shape = tuple(x.shape)
        if dim is None and 0 in shape:
            raise _empty_full_error(name)
        _check_nonempty(name, shape, dim)
        return _spec_reduce(x, dim, keepdim, x.dtype)
    return impl, meta


def _amax_vjp(ctx, g):
    """Ties share the gradient evenly (torch's scale_grad_by_count)."""
    x = ctx.inputs[0]
    dim = ctx.attrs.get("dim")
    mask = x == _unreduce_out(ctx.output, ctx)
    count = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
    return (mask * (_unreduce_out(g, ctx) / count),)


_impl, _meta = _amax_like(np.maximum, "amax")
amax = define("amax", "reduction", _impl, meta=_meta, vjp=_amax_vjp,
              doc="Largest values over dims.", lowering=MAX_LOWERING)
_impl, _meta = _amax_like(np.minimum, "amin")
amin = define("amin", "reduction", _impl, meta=_meta, vjp=_amax_vjp,
              doc="Smallest values over dims.", lowering=MIN_LOWERING)


def _aminmax_impl(x, dim=None, keepdim=False):
    if x.size == 0:
        _aminmax_meta(TensorSpec(x.shape, None), dim, keepdim)
    ax = _axis(x, _tup(dim))
    return (_arr(np.minimum.reduce(x, axis=ax, keepdims=keepdim)),
            _arr(np.maximum.reduce(x, axis=ax, keepdims=keepdim)))


def _aminmax_meta(x, dim=None, keepdim=False):
    shape = tuple(x.shape)
    if dim is None and 0 in shape:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    _check_nonempty("aminmax", shape, dim, sep=":")
    spec = _spec_reduce(x, _tup(dim), keepdim, x.dtype)
    return spec, spec


def _aminmax_vjp(ctx, gmin, gmax):
    x = ctx.inputs[0]
    dim = _tup(ctx.attrs.get("dim"))
    keepdim = ctx.attrs.get("keepdim", False)
    out = ctx.output
    total = None
    for g, value in ((gmin, out[0]), (gmax, out[1])):
        if g is None:
            continue
        mask = x == _unreduce(value, tuple(x.shape), dim, keepdim)
        count = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
        part = mask * (_unreduce(g, tuple(x.shape), dim, keepdim) / count)
        total = part if total is None else total + part
    return (total,)


aminmax = define("aminmax", "reduction", _aminmax_impl, meta=_aminmax_meta, vjp=_aminmax_vjp,
                 doc="(min, max) in one pass.")


def _argext(argfn, name):
    def impl(x, dim=None, keepdim=False):
        if x.dtype == np.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            if x.size == 0:
                meta(TensorSpec(x.shape, None), dim, keepdim)
            r = np.asarray(argfn(x.reshape(-1)), _I64)
            return r.reshape((1,) * x.ndim) if keepdim else r
        if x.ndim == 0:
            return np.zeros((), _I64)
        if x.shape[dim] == 0:
            _check_nonempty(name, x.shape, dim)
        return _arr(argfn(x, axis=dim, keepdims=keepdim), _I64)

    def meta(x, dim=None, keepdim=False):
        shape = tuple(x.shape)
        if x.dtype is D.bool:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            if 0 in shape:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                                 "input.numel() == 0.")
            return TensorSpec((1,) * len(shape) if keepdim else (), D.int64)
        _check_nonempty(name, shape, dim)
        return TensorSpec(reduced_shape(shape, (dim,), keepdim), D.int64)
    return impl, meta


_impl, _meta = _argext(np.argmax, "argmax")
argmax = define("argmax", "reduction", _impl, meta=_meta, differentiable=False,
                doc="Index of the largest element (flattened when dim is None).",
                lowering=ARGMAX_LOWERING)
_impl, _meta = _argext(np.argmin, "argmin")
argmin = define("argmin", "reduction", _impl, meta=_meta, differentiable=False,
                doc="Index of the smallest element (flattened when dim is None).",
                lowering=ARGMIN_LOWERING)


# ---------------------------------------------------------------- var, std


def _float_only(dt, name="std and var"):
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


def _moments(x, dim, correction, keepdim, name="std and var"):
    """(var, mean) by two passes, in float32 for the half types."""
    out = x.dtype
    _float_only(D.FROM_NUMPY[out], name)
    if D.is_half(out):
        x = x.astype(_F32)
    ax = _axis(x, dim)
    n = numel_reduced(x.shape, dim)
    mean = np.add.reduce(x, axis=ax, keepdims=True)
    mean = mean / n if n else mean * np.nan
    d = x - mean
    ss = np.add.reduce(d * d, axis=ax, keepdims=keepdim)
    var = ss / builtins.max(n - correction, 0)
    if not keepdim:
        mean = mean.reshape(np.shape(var))
    return _arr(var, out), _arr(mean, out)


def _var_impl(x, dim=None, correction=1, keepdim=False):
    return _moments(x, dim, correction, keepdim)[0]


def _std_impl(x, dim=None, correction=1, keepdim=False):
    return _arr(np.sqrt(_moments(x, dim, correction, keepdim)[0]))


def _var_mean_impl(x, dim=None, correction=1, keepdim=False):
    return _moments(x, dim, correction, keepdim, "var_mean")


def _std_mean_impl(x, dim=None, correction=1, keepdim=False):
    var, mean = _moments(x, dim, correction, keepdim, "std_mean")
    return _arr(np.sqrt(var)), mean


def _var_meta(x, dim=None, correction=1, keepdim=False):
    _float_only(x.dtype)
    return _spec_reduce(x, dim, keepdim, x.dtype)


def _pair_meta(name):
    def meta(x, dim=None, correction=1, keepdim=False):
        _float_only(x.dtype, name)
        spec = _spec_reduce(x, dim, keepdim, x.dtype)
        return spec, spec
    return meta


def _centered(ctx):
    """(x - mean(x)) * 2 / (N - correction): the gradient of var per unit output grad."""
    x = ctx.inputs[0]
    dim = ctx.attrs.get("dim")
    n = numel_reduced(tuple(x.shape), dim)
    dof = builtins.max(n - ctx.attrs.get("correction", 1), 0)
    mean = x.mean() if dim is None else x.mean(dim, keepdim=True)
    return (x - mean) * (2.0 / dof if dof else math.inf)


def _var_vjp(ctx, g):
    return (_unreduce_out(g, ctx) * _centered(ctx),)


def _std_scale(g, out):
    """d std / d var, zero where std is 0 (PyTorch's subgradient of a constant input)."""
    return (g / (2 * out)).masked_fill(out == 0, 0)


def _std_vjp(ctx, g):
    return (_unreduce_out(_std_scale(g, ctx.output), ctx) * _centered(ctx),)


def _moment_pair_vjp(first):
    def vjp(ctx, g_first, g_mean):
        total = None
        if g_first is not None:
            out = ctx.output[0]
            scale = _std_scale(g_first, out) if first == "std" else g_first
            total = _unreduce_out(scale, ctx) * _centered(ctx)
        if g_mean is not None:
            n = numel_reduced(tuple(ctx.inputs[0].shape), ctx.attrs.get("dim"))
            part = _unreduce_out(g_mean, ctx) / n
            total = part if total is None else total + part
        return (total,)
    return vjp


var = define("var", "reduction", _var_impl, meta=_var_meta, vjp=_var_vjp,
             doc="Variance with Bessel's correction (``correction``).", lowering=VAR_LOWERING)
std = define("std", "reduction", _std_impl, meta=_var_meta, vjp=_std_vjp,
             doc="Standard deviation with ``correction``.", lowering=STD_LOWERING)
var_mean = define("var_mean", "reduction", _var_mean_impl, meta=_pair_meta("var_mean"),
                  vjp=_moment_pair_vjp("var"), doc="(var, mean) in one pass.")
std_mean = define("std_mean", "reduction", _std_mean_impl, meta=_pair_meta("std_mean"),
                  vjp=_moment_pair_vjp("std"), doc="(std, mean) in one pass.")


# ---------------------------------------------------------------- vector norm


def norm_dtype(in_dt, dtype=None):
    if not in_dt.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {type_name(in_dt)}")
    if dtype is not None and D.promote_types(in_dt, dtype) is not dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({type_name(in_dt)}) should be convertible "
            f"without narrowing to the specified dtype ({type_name(dtype)})")
    return in_dt if dtype is None else dtype


def _vnorm_impl(x, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002
    out = norm_dtype(D.FROM_NUMPY[x.dtype], dtype).np
    acc = _acc(out)
    if x.dtype != acc:
        x = x.astype(acc)
    ax = _axis(x, dim)
    if ord == 2:
        r = np.sqrt(np.add.reduce(x * x, axis=ax, keepdims=keepdim))
    elif ord == 1:
        r = np.add.reduce(np.abs(x), axis=ax, keepdims=keepdim)
    elif ord == 0:
        r = np.add.reduce(x != 0, axis=ax, keepdims=keepdim, dtype=acc)
    elif math.isinf(ord):
        if numel_reduced(x.shape, dim) == 0 and x.ndim:
            _vnorm_meta(TensorSpec(x.shape, D.FROM_NUMPY[out]), ord, dim, keepdim, dtype)
        fn = np.maximum if ord > 0 else np.minimum
        r = fn.reduce(np.abs(x), axis=ax, keepdims=keepdim)
    else:
        r = np.add.reduce(np.abs(x) ** ord, axis=ax, keepdims=keepdim) ** (1.0 / ord)
    return _arr(r, out)


def _vnorm_meta(x, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002
    dt = norm_dtype(x.dtype, dtype)
    shape = tuple(x.shape)
    if math.isinf(ord) and shape and builtins.any(shape[d] == 0 for d in wrap_dims(dim, len(shape))):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {'-' if ord < 0 else ''}inf "
                           "norm on an empty tensor because the operation does not have an identity")
    return _spec_reduce(x, dim, keepdim, dt)


def _vnorm_vjp(ctx, g):
    """torch's norm_backward, case by case on ``ord``."""
    x = ctx.inputs[0]
    p = ctx.attrs.get("ord", 2)
    dim = ctx.attrs.get("dim")
    g = _unreduce_out(g, ctx)
    norm = _unreduce_out(ctx.output, ctx)
    if p == 0:
        return (None,)                     # torch: no gradient at all (x.grad stays None)
    if p == 1:
        return (x.sign() * g,)
    if p == 2:
        return (g * (x / norm).masked_fill(norm == 0, 0),)
    if math.isinf(p):
        ax = x.abs()
        mask = (ax == norm) | ax.isnan()
        count = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
        return (x.sign() * (mask * (g / count)),)
    if p < 1:
        scaled = x.sign() * x.abs().pow(p - 1).masked_fill(x == 0, 0)
        return (scaled * g * norm.pow(1 - p),)
    scaled = x.sign() * x.abs().pow(p - 1) if p < 2 else x * x.abs().pow(p - 2)
    return (scaled * (g / norm.pow(p - 1)).masked_fill(norm == 0, 0),)


linalg_vector_norm = define("linalg_vector_norm", "reduction", _vnorm_impl, meta=_vnorm_meta,
                            vjp=_vnorm_vjp, doc="Vector p-norm over dims.")


# ---------------------------------------------------------------- logsumexp


def _float_of(dt):
    return dt if dt.is_floating_point else D.get_default_dtype()


def _lse_impl(x, dim=None, keepdim=False):
    out = _float_of(D.FROM_NUMPY[x.dtype]).np
    acc = _acc(out)
    if x.dtype != acc:
        x = x.astype(acc)
    ax = _axis(x, dim)
    if numel_reduced(x.shape, dim) == 0:
        return np.full(reduced_shape(x.shape, dim, keepdim), -np.inf, out)
    m = np.maximum.reduce(x, axis=ax, keepdims=True)
    m = np.where(np.isinf(m), acc.type(0), m)             # all -inf (or an inf) rows
    r = np.log(np.add.reduce(np.exp(x - m), axis=ax, keepdims=True)) + m
    return _arr(r if keepdim else r.reshape(reduced_shape(x.shape, dim, False)), out)


def _lse_meta(x, dim=None, keepdim=False):
    return _spec_reduce(x, dim, keepdim, _float_of(x.dtype))


def _lse_vjp(ctx, g):
    x = ctx.inputs[0]
    return (_unreduce_out(g, ctx) * (x - _unreduce_out(ctx.output, ctx)).exp(),)


logsumexp = define("logsumexp", "reduction", _lse_impl, meta=_lse_meta, vjp=_lse_vjp,
                   doc="log(sum(exp(x))) computed without overflow.")


# ---------------------------------------------------------------- scans


def _scan(ufunc, name):
    def impl(x, dim, dtype=None):
        out = sum_dtype(D.FROM_NUMPY[x.dtype], dtype).np
        acc = _acc(out)
        if x.dtype != acc:
            x = x.astype(acc)
        if x.ndim == 0:
            return x.astype(out, copy=True)
        return _arr(ufunc.accumulate(x, axis=dim, dtype=acc), out)

    def meta(x, dim, dtype=None):
        wrap_dim(dim, len(x.shape))
        return TensorSpec(tuple(x.shape), sum_dtype(x.dtype, dtype))
    return impl, meta


def _rev_cumsum(t, dim):
    """Sums from the end: out[i] = t[i] + t[i+1] + ..."""
    return t.flip(dim).cumsum(dim).flip(dim)


def _cumsum_vjp(ctx, g):
    if ctx.inputs[0].ndim == 0:
        return (g,)
    return (_rev_cumsum(g, ctx.attrs["dim"]),)


def _cumprod_vjp(ctx, g):
    """Exact with zeros: before the first zero it is sum_j>=i g_j out_j / x_i; at the first
    zero it is the same sum with that zero replaced by one; after it, zero."""
    x = ctx.inputs[0]
    if x.ndim == 0:
        return (g,)
    dim = ctx.attrs["dim"]
    zero = x == 0
    nzeros = zero.cumsum(dim)
    before = nzeros == 0
    first = zero & (nzeros == 1)
    part_before = _rev_cumsum(g * ctx.output, dim) / x.masked_fill(~before, 1)
    replaced = x.masked_fill(first, 1).cumprod(dim)
    part_first = _rev_cumsum(g * replaced, dim)
    return (part_before.masked_fill(~before, 0) + part_first.masked_fill(~first, 0),)


_impl, _meta = _scan(np.add, "cumsum")
cumsum = define("cumsum", "scan", _impl, meta=_meta, vjp=_cumsum_vjp,
                doc="Running sum along a dim.")
_impl, _meta = _scan(np.multiply, "cumprod")
cumprod = define("cumprod", "scan", _impl, meta=_meta, vjp=_cumprod_vjp,
                 doc="Running product along a dim.")



def _logcumsumexp_impl(x, dim):
    out = _logcumsumexp_meta(TensorSpec(x.shape, D.FROM_NUMPY[x.dtype]), dim).dtype.np
    acc = _acc(out)
    if x.dtype != acc:
        x = x.astype(acc)
    if x.ndim == 0:
        return x.astype(out, copy=True)
    return _arr(np.logaddexp.accumulate(x, axis=dim), out)      # stable pairwise log-add


def _logcumsumexp_meta(x, dim):
    wrap_dim(dim, len(x.shape))
    _not_implemented(x.dtype, "logcumsumexp_out_cpu", floating_only=True)
    return TensorSpec(tuple(x.shape), x.dtype)


def _not_implemented(dt, kernel, floating_only=False):
    """torch's error for a dtype its CPU kernel does not handle."""
    if dt is D.bool or (floating_only and not dt.is_floating_point):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dt)}'")


def _logcumsumexp_vjp(ctx, g):
    """torch's rule: positive and negative parts of g summed in log space (no overflow)."""
    x = ctx.inputs[0]
    if x.ndim == 0:
        return (g,)
    dim = ctx.attrs["dim"]
    out = ctx.output
    lowest = D.finfo(g.dtype).min
    log_abs = g.abs().log()

    def part(mask):
        t = log_abs.masked_fill(~mask, lowest) - out
        return (t.flip(dim).logcumsumexp(dim).flip(dim) + x).exp()
    return (part(g > 0) - part(g < 0),)


logcumsumexp = define("logcumsumexp", "scan", _logcumsumexp_impl, meta=_logcumsumexp_meta,
                      vjp=_logcumsumexp_vjp, doc="log(cumsum(exp(x))) along a dim, stably.")

def _cumext(ufunc):
    """cummax/cummin: values and the index of the last element reaching them (NaN sticks)."""
    def impl(x, dim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), _I64)
        vals = ufunc.accumulate(x, axis=dim)
        if D.is_floating(x.dtype):
            hit = (x == vals) | np.isnan(x)
        else:
            hit = x == vals
        pos = np.arange(x.shape[dim], dtype=_I64).reshape(
            [-1 if i == dim else 1 for i in range(x.ndim)])
        idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=dim)
        return vals, idx

    def meta(x, dim):
        wrap_dim(dim, len(x.shape))
        return TensorSpec(tuple(x.shape), x.dtype), TensorSpec(tuple(x.shape), D.int64)
    return impl, meta


def _cumext_vjp(ctx, g, _gi=None):
    x = ctx.inputs[0]
    if x.ndim == 0:
        return (g,)
    dim = ctx.attrs["dim"]
    return (g.new_zeros(tuple(x.shape)).scatter_add(dim, ctx.output[1], g),)


_impl, _meta = _cumext(np.maximum)
cummax = define("cummax", "scan", _impl, meta=_meta, vjp=_cumext_vjp,
                doc="Running maximum and its index.")
_impl, _meta = _cumext(np.minimum)
cummin = define("cummin", "scan", _impl, meta=_meta, vjp=_cumext_vjp,
                doc="Running minimum and its index.")


# ---------------------------------------------------------------- all, any, count_nonzero


def _logic(ufunc):
    def impl(x, dim=None, keepdim=False):
        r = _arr(ufunc.reduce(x, axis=_axis(x, dim), keepdims=keepdim, dtype=np.bool_))
        return r.astype(np.uint8) if x.dtype == np.uint8 else r

    def meta(x, dim=None, keepdim=False):
        return _spec_reduce(x, dim, keepdim, D.uint8 if x.dtype is D.uint8 else D.bool)
    return impl, meta


_impl, _meta = _logic(np.logical_and)
all = define("all", "reduction", _impl, meta=_meta, differentiable=False,  # noqa: A001
             doc="Whether every element is nonzero.", lowering=ALL_LOWERING)
_impl, _meta = _logic(np.logical_or)
any = define("any", "reduction", _impl, meta=_meta, differentiable=False,  # noqa: A001
             doc="Whether some element is nonzero.", lowering=ANY_LOWERING)


def _count_nonzero_impl(x, dim=None):
    return _arr(np.count_nonzero(x, axis=_axis(x, dim)), _I64)


def _count_nonzero_meta(x, dim=None):
    return _spec_reduce(x, dim, False, D.int64)


count_nonzero = define("count_nonzero", "reduction", _count_nonzero_impl,
                       meta=_count_nonzero_meta, differentiable=False,
                       doc="Number of nonzero elements over dims.")


# ---------------------------------------------------------------- sorting


def _is_float(a):
    return D.is_floating(a.dtype)


_U32 = np.dtype(np.uint32)
_SIGN = np.uint32(0x80000000)


def _sort_keys32(x):
    """uint32 keys whose unsigned order is x's order (NaN largest, -0 == +0)."""
    kind = x.dtype.kind
    if kind in "bu":
        return x.astype(_U32)
    if kind == "i":
        return x.astype(np.int32).view(_U32) ^ _SIGN
    f = x if x.dtype == _F32 else x.astype(_F32)
    f = np.where(np.isnan(f), np.float32(np.nan), f + np.float32(0))    # one NaN; -0 -> +0
    bits = f.view(_U32)
    return np.where(bits >> 31, ~bits, bits | _SIGN)


def _packed_argsort(x, axis, descending):
    """Stable argsort via one SIMD sort of (key << 32 | position): numpy's indirect sorts are
    several times slower than its sort of plain integers."""
    keys = _sort_keys32(x)
    if descending:
        keys = ~keys                       # positions stay ascending: ties keep their order
    pos = np.arange(x.shape[axis], dtype=np.uint64).reshape(
        [-1 if i == axis else 1 for i in range(x.ndim)])
    packed = (keys.astype(np.uint64) << np.uint64(32)) | pos
    packed.sort(axis=axis)
    return (packed & np.uint64(0xFFFFFFFF)).astype(_I64)


def argsort_np(x, axis, descending=False):
    """Stable argsort; NaN sorts as the largest value (last ascending, first descending)."""
    if x.dtype.itemsize <= 4 and x.size >= 256 and x.shape[axis] < 2 ** 32:
        return _packed_argsort(x, axis, descending)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # a stable ascending sort of the reversed array, reversed back, keeps ties in order
    n = x.shape[axis]
    r = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(r, axis)


def _sort_impl(x, dim=-1, descending=False, stable=False):
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    idx = argsort_np(x, dim, descending)
    return np.take_along_axis(x, idx, axis=dim), idx


def _same_shape_pair(x, dim=-1, *_, **__):
    wrap_dim(dim, len(x.shape))
    return TensorSpec(tuple(x.shape), x.dtype), TensorSpec(tuple(x.shape), D.int64)


def _scatter_back_vjp(ctx, g, _gi=None):
    """sort/topk: each output came from one input position; send its gradient there."""
    x = ctx.inputs[0]
    if x.ndim == 0:
        return (g,)
    return (g.new_zeros(tuple(x.shape)).scatter(ctx.attrs.get("dim", -1), ctx.output[1], g),)


sort = define("sort", "sort", _sort_impl, meta=_same_shape_pair, vjp=_scatter_back_vjp,
              doc="Sorted values and their indices (stable).")


def _topk_check(shape, k, dim, dtype):
    if dtype is D.bool:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = shape[dim] if len(shape) else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")


def _topk_impl(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    _topk_check(x.shape, k, dim, D.FROM_NUMPY[x.dtype])
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    n = x.shape[dim]
    lead = (slice(None),) * dim
    if 0 < k <= n // 4 and n >= 64:
        # select the k candidates in linear time, then sort only them (in index order first,
        # so that ties come out by position like the full stable sort)
        cand = np.argpartition(x, n - k if largest else k - 1, axis=dim)
        cand = np.sort(cand[lead + (slice(n - k, n) if largest else slice(0, k),)], axis=dim)
        order = argsort_np(np.take_along_axis(x, cand, axis=dim), dim, largest)
        idx = np.take_along_axis(cand, order, axis=dim)
    else:
        idx = argsort_np(x, dim, largest)[lead + (slice(0, k),)]
    return np.take_along_axis(x, idx, axis=dim), idx


def _topk_meta(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    shape = tuple(x.shape)
    d = wrap_dim(dim, len(shape))
    _topk_check(shape, k, d, x.dtype)
    out = shape[:d] + (k,) + shape[d + 1:] if shape else ()
    return TensorSpec(out, x.dtype), TensorSpec(out, D.int64)


topk = define("topk", "sort", _topk_impl, meta=_topk_meta, vjp=_scatter_back_vjp,
              doc="The k largest (or smallest) values along a dim and their indices.")


def _kth_check(shape, k, dim, dtype):
    _not_implemented(dtype, "kthvalue_cpu")
    n = shape[dim] if len(shape) else 1
    if n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {dim} to have non-zero size.")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")


def _kthvalue_impl(x, k, dim=-1, keepdim=False):
    _kth_check(x.shape, k, dim, D.FROM_NUMPY[x.dtype])
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    idx = np.take(argsort_np(x, dim), [k - 1], axis=dim)
    return _select_along(x, idx, dim, keepdim)


def _kthvalue_meta(x, k, dim=-1, keepdim=False):
    shape = tuple(x.shape)
    d = wrap_dim(dim, len(shape))
    _kth_check(shape, k, d, x.dtype)
    out = reduced_shape(shape, (d,), keepdim)
    return TensorSpec(out, x.dtype), TensorSpec(out, D.int64)


kthvalue = define("kthvalue", "sort", _kthvalue_impl, meta=_kthvalue_meta,
                  vjp=_value_index_vjp, doc="The k-th smallest value along a dim and its index.")


# ---------------------------------------------------------------- median, mode


def _median_full(ignore_nan):
    def impl(x):
        if x.dtype == np.bool_:
            meta(TensorSpec(x.shape, D.bool))
        flat = x.reshape(-1)
        if _is_float(flat):
            nan = np.isnan(flat)
            if nan.any():
                if not ignore_nan:
                    return np.full((), np.nan, x.dtype)
                flat = flat[~nan]
        if flat.size == 0:
            return np.full((), np.nan if _is_float(x) else 0, x.dtype)
        return _arr(np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2])

    def meta(x):
        _not_implemented(x.dtype, "median_cpu")
        return TensorSpec((), x.dtype)
    return impl, meta


def _median_dim(ignore_nan, name):
    def impl(x, dim, keepdim=False):
        if x.dtype == np.bool_:
            meta(TensorSpec(x.shape, D.bool), dim, keepdim)
        if x.ndim == 0:
            return x.copy(), np.zeros((), _I64)
        n = x.shape[dim]
        if n == 0:
            _check_nonempty(name, x.shape, dim)
        if not _is_float(x) or not np.isnan(x).any():
            # the lower median is the ((n-1)//2)-th smallest: a linear-time selection
            k = (n - 1) // 2
            idx = np.take(np.argpartition(x, k, axis=dim), [k], axis=dim)
            return _select_along(x, idx, dim, keepdim)
        order = np.argsort(x, axis=dim, kind="stable")       # NaNs last, in order
        valid = n - np.count_nonzero(np.isnan(x), axis=dim, keepdims=True)
        if ignore_nan:
            k = np.maximum(valid - 1, 0) // 2
        else:
            k = np.where(valid < n, valid, (n - 1) // 2)      # a NaN row gives its first NaN
        idx = np.take_along_axis(order, k, axis=dim)
        return _select_along(x, idx, dim, keepdim)

    def meta(x, dim, keepdim=False):
        shape = tuple(x.shape)
        _not_implemented(x.dtype, "median_out")
        _check_nonempty(name, shape, dim)
        out = reduced_shape(shape, (dim,), keepdim)
        return TensorSpec(out, x.dtype), TensorSpec(out, D.int64)
    return impl, meta


_impl, _meta = _median_full(False)
median = define("median", "sort", _impl, meta=_meta, vjp=_extreme_full_vjp,
                grad_name="MedianBackward0", doc="Lower median of all elements.")
_impl, _meta = _median_dim(False, "median")
median_dim = define("median_dim", "sort", _impl, meta=_meta, vjp=_value_index_vjp,
                    grad_name="MedianBackward1", doc="Lower median along a dim and its index.")
_impl, _meta = _median_full(True)
nanmedian = define("nanmedian", "sort", _impl, meta=_meta, vjp=_extreme_full_vjp,
                   grad_name="NanmedianBackward0", doc="Lower median ignoring NaN.")
_impl, _meta = _median_dim(True, "nanmedian")
nanmedian_dim = define("nanmedian_dim", "sort", _impl, meta=_meta, vjp=_value_index_vjp,
                       grad_name="NanmedianBackward1",
                       doc="Lower median along a dim ignoring NaN, and its index.")


def _mode_impl(x, dim=-1, keepdim=False):
    """Most frequent value (the smallest on a tie) and the index of its last occurrence."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    if x.shape[dim] == 0:
        _check_nonempty("mode", x.shape, dim)
    a = np.moveaxis(x, dim, -1)
    s = np.sort(a, axis=-1)
    n = s.shape[-1]
    pos = np.arange(n)
    new_run = np.ones(s.shape, bool)
    new_run[..., 1:] = s[..., 1:] != s[..., :-1]
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=-1)
    count = pos - start                       # occurrences so far, minus one
    best = np.argmax(count, axis=-1)[..., None]
    value = np.take_along_axis(s, best, axis=-1)
    last = n - 1 - np.argmax(np.flip(a == value, -1), axis=-1)[..., None]
    value, last = np.moveaxis(value, -1, dim), np.moveaxis(last.astype(_I64), -1, dim)
    if not keepdim:
        value, last = value.squeeze(dim), last.squeeze(dim)
    return value, last


def _mode_meta(x, dim=-1, keepdim=False):
    shape = tuple(x.shape)
    d = wrap_dim(dim, len(shape))
    _check_nonempty("mode", shape, d)
    out = reduced_shape(shape, (d,), keepdim)
    return TensorSpec(out, x.dtype), TensorSpec(out, D.int64)


mode = define("mode", "sort", _mode_impl, meta=_mode_meta, vjp=_value_index_vjp,
              doc="Most frequent value along a dim and its index.")


# ---------------------------------------------------------------- unique, bincount, histc
# Their output sizes depend on the data: meta rules report those sizes as DATA_DEPENDENT.


def _unique_impl(x, dim=None):
    if dim is not None:
        _unique_meta(x, dim)
    if dim is None:
        vals, inv, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True,
                                      equal_nan=False)
        return vals, inv.reshape(x.shape).astype(_I64), counts.astype(_I64)
    vals, inv, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim,
                                  equal_nan=False)
    return vals, inv.reshape(-1).astype(_I64), counts.astype(_I64)


def _unique_meta(x, dim=None):
    shape = tuple(x.shape)
    if dim is None:
        return (TensorSpec((DATA_DEPENDENT,), x.dtype), TensorSpec(shape, D.int64),
                TensorSpec((DATA_DEPENDENT,), D.int64))
    d = wrap_dim(dim, len(shape))
    if 0 in shape[:d] + shape[d + 1:]:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    vals = shape[:d] + (DATA_DEPENDENT,) + shape[d + 1:]
    return (TensorSpec(vals, x.dtype), TensorSpec((shape[d],), D.int64),
            TensorSpec((DATA_DEPENDENT,), D.int64))


unique = define("unique", "other", _unique_impl, meta=_unique_meta, differentiable=False,
                doc="Sorted distinct values (or slices along dim), inverse indices and counts.",
                data_dependent=True)


def _unique_consecutive_impl(x, dim=None):
    if dim is not None:
        _unique_meta(x, dim)
    if dim is None:
        a = x.reshape(-1, 1)
    else:
        a = np.moveaxis(x, dim, 0)
        a = a.reshape(x.shape[dim], math.prod(a.shape[1:]))    # explicit: x may be empty
    n = a.shape[0]
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = (a[1:] != a[:-1]).any(axis=1) if a.shape[1] else False
    starts = np.flatnonzero(new)
    inv = np.cumsum(new, dtype=_I64) - 1
    counts = np.diff(np.append(starts, n)).astype(_I64)
    if dim is None:
        return x.reshape(-1)[starts], inv.reshape(x.shape), counts
    return np.take(x, starts, axis=dim), inv, counts


unique_consecutive = define("unique_consecutive", "other", _unique_consecutive_impl,
                            meta=_unique_meta, differentiable=False,
                            doc="Collapse runs of equal values (or slices along dim).", data_dependent=True)


def _bincount_check(x, weights, minlength):
    if x.dtype.is_floating_point or x.dtype is D.bool:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{type_name(x.dtype)}'")
    if len(x.shape) != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and tuple(weights.shape) != tuple(x.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")


def _bincount_dtype(weights):
    if weights is None:
        return D.int64
    return weights.dtype if weights.dtype in (D.float32, D.float16, D.bfloat16) else D.float64


def _bincount_impl(x, weights=None, minlength=0):
    if x.ndim != 1 or x.dtype.kind not in "iu" or (x.size and x.min() < 0):
        spec = TensorSpec(x.shape, D.FROM_NUMPY[x.dtype])
        wspec = None if weights is None else TensorSpec(weights.shape, D.FROM_NUMPY[weights.dtype])
        _bincount_check(spec, wspec, minlength)
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and weights.shape != x.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dt = _bincount_dtype(None if weights is None else TensorSpec(weights.shape,
                                                                 D.FROM_NUMPY[weights.dtype]))
    w = None if weights is None else weights.astype(np.float64)
    return np.bincount(x, w, minlength=minlength).astype(dt.np)


def _bincount_meta(x, weights=None, minlength=0):
    _bincount_check(x, weights, minlength)
    return TensorSpec((DATA_DEPENDENT,), _bincount_dtype(weights))


bincount = define("bincount", "other", _bincount_impl, meta=_bincount_meta,
                  differentiable=False, doc="Occurrences (or summed weights) of each integer.",
                  data_dependent=True)


def _histc_check(x, bins, min, max):  # noqa: A002
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{type_name(x.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")


def _histc_impl(x, bins=100, min=0, max=0):  # noqa: A002
    _histc_check(TensorSpec(x.shape, D.FROM_NUMPY[x.dtype]), bins, min, max)
    lo, hi = min, max
    flat = x.reshape(-1)
    if lo == hi and flat.size:
        lo, hi = flat.min().item(), flat.max().item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    keep = flat[(flat >= lo) & (flat <= hi)]
    # torch's bin formula, in the input's precision: (x - min) * bins / (max - min)
    pos = ((keep - x.dtype.type(lo)) * x.dtype.type(bins) / x.dtype.type(hi - lo)).astype(_I64)
    pos = np.minimum(pos, bins - 1)
    return np.bincount(pos, minlength=bins).astype(x.dtype)


def _histc_meta(x, bins=100, min=0, max=0):  # noqa: A002
    _histc_check(x, bins, min, max)
    return TensorSpec((bins,), x.dtype)


histc = define("histc", "other", _histc_impl, meta=_histc_meta, differentiable=False,
               doc="Histogram with equal-width bins between min and max.")


# ---------------------------------------------------------------- result layouts

# PyTorch allocates the results of reductions, scans and selections (topk, kthvalue, median,
# mode) contiguous, and sort's like its input (empty_like: the input's own strides where
# dense); numpy lays out the first in the input's order (or as a view) and sort's row-major.
def _laid_out(impl, layout):
    def run(x, *args, **attrs):
        r = impl(x, *args, **attrs)
        if type(r) is tuple:
            return tuple(layout(x, o) for o in r)
        return layout(x, r)
    run.__name__, run.__doc__ = impl.__name__, impl.__doc__
    return run


# (shape, byte strides, itemsize) of results already found laid out as PyTorch's contiguous
# ones: most results repeat a few layouts, and a set lookup costs less than checking the
# strides again (~2 us).  Emptied when full.
_CONTIGUOUS = set()


def _contiguous(x, r):
    key = (r.shape, r.strides, r.itemsize)
    if key in _CONTIGUOUS:
        return r
    out = as_contiguous(r)
    if out is r:
        if len(_CONTIGUOUS) >= 1024:
            _CONTIGUOUS.clear()
        _CONTIGUOUS.add(key)
    return out


for _op in [op for op in REGISTRY.values() if op.area == "reduction"]:
    if _op is sort:
        _op.impl = _laid_out(_op.impl, as_preserved)
    elif _op.kind in ("reduction", "scan", "sort"):
        _op.impl = _laid_out(_op.impl, _contiguous)

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

import numpy as np

from dynograph.runtime import dtypes as D
from .core import TensorSpec, define, type_name, wrap_dims

_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_LOW = (np.dtype(np.float16), D.bfloat16.np)        # accumulate these in float32


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


def _numel_reduced(shape, dim):
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


# ---------------------------------------------------------------- sum

def sum_dtype(in_dt, dtype=None):
    """sum/prod/cumsum result dtype: ``dtype`` if given, int64 for bool/integers."""
    if dtype is not None:
        return dtype
    return in_dt if in_dt.is_floating_point else D.int64


def _sum_impl(x, dim=None, keepdim=False, dtype=None):
    out = dtype.np if dtype is not None else (x.dtype if x.dtype.kind == "f" or
                                              x.dtype == D.bfloat16.np else _I64)
    acc = _F32 if out in _LOW else out
    if dtype is not None and x.dtype != acc:
        x = x.astype(acc)
    return _arr(np.add.reduce(x, axis=_axis(x, dim), dtype=acc, keepdims=keepdim), out)


def _sum_meta(x, dim=None, keepdim=False, dtype=None):
    return _spec_reduce(x, dim, keepdim, sum_dtype(x.dtype, dtype))


def _sum_vjp(ctx, g):
    return (_unreduce_out(g, ctx),)


sum = define("sum", "reduction", _sum_impl, meta=_sum_meta, vjp=_sum_vjp,  # noqa: A001
             grad_name="SumBackward0", doc="Sum of all elements.")
sum_dim = define("sum_dim", "reduction", _sum_impl, meta=_sum_meta, vjp=_sum_vjp,
                 grad_name="SumBackward1", doc="Sum over dims.")


# ---------------------------------------------------------------- mean

def mean_dtype(in_dt, dtype=None, name="mean"):
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError(
                f"{name}(): could not infer output dtype. Optional dtype must be either a floating "
                f"point or complex dtype. Got: {type_name(dtype)}")
        return dtype
    if not in_dt.is_floating_point:
        raise RuntimeError(
            f"{name}(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {type_name(in_dt)}")
    return in_dt


def _mean_impl(x, dim=None, keepdim=False, dtype=None):
    out = mean_dtype(D._FROM_NP[x.dtype], dtype).np
    acc = _F32 if out in _LOW else out
    if x.dtype != acc:
        x = x.astype(acc)
    s = np.add.reduce(x, axis=_axis(x, dim), keepdims=keepdim)
    n = _numel_reduced(x.shape, dim)
    return _arr(s / n if n else s * np.nan, out)        # the mean of nothing is nan


def _mean_meta(x, dim=None, keepdim=False, dtype=None):
    return _spec_reduce(x, dim, keepdim, mean_dtype(x.dtype, dtype))


def _mean_vjp(ctx, g):
    n = _numel_reduced(tuple(ctx.inputs[0].shape), ctx.attrs.get("dim"))
    return (_unreduce_out(g, ctx) / n,)


mean = define("mean", "reduction", _mean_impl, meta=_mean_meta, vjp=_mean_vjp,
              grad_name="MeanBackward0", doc="Mean of all elements.")
mean_dim = define("mean_dim", "reduction", _mean_impl, meta=_mean_meta, vjp=_mean_vjp,
                  grad_name="MeanBackward1", doc="Mean over dims.")

"""Public reductions, scans and sorting (``dynograph.sum``, ``Tensor.max``, ``sort`` ...).

Each function parses PyTorch's signature, normalizes ``dim`` (int, tuple, list, None,
negative) once, and calls one primitive of ``compiler/ops/reduction.py``; the rest
(``argsort``, ``quantile``, ``nanmean`` ...) are compositions of those.
"""
import builtins
import functools
import inspect
import operator
import sys
import types
import warnings

from dynograph.compiler.ops import elementwise as E
from dynograph.compiler.ops import reduction as R
from dynograph.compiler.ops.core import wrap_dim
from dynograph.runtime import dtypes as D
from . import _creation
from ._dispatch import call
from ._inplace import assign, write_out
from ._tensor import Tensor, tensor_method

__all__ = []

_int = builtins.int


def _public(fn):
    """Export ``fn`` as dynograph.<name> and Tensor.<name>."""
    if "dim" in inspect.signature(fn).parameters:
        fn = numpy_names(fn)
    __all__.append(fn.__name__)
    tensor_method(fn)
    return fn


def numpy_names(fn):
    """Accept numpy's ``axis=`` and ``keepdims=`` for ``dim=`` and ``keepdim=``, like torch."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            for alias, real in (("axis", "dim"), ("keepdims", "keepdim")):
                if alias in kwargs:
                    if real in kwargs:
                        raise TypeError(f"{name}() got multiple values for argument '{real}'")
                    kwargs[real] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    return wrapper


def _finish(result, out):
    return result if out is None else write_out(out, result)


def _bad_dim(name, dim):
    return TypeError(f"{name}(): argument 'dim' must be tuple of ints, not {type(dim).__name__}")


def _dims(dim, ndim, name):
    """Normalize a ``dim`` argument to None (all dims) or a tuple of ints >= 0, in given order."""
    if dim is None:
        return None
    if type(dim) is _int:
        return (wrap_dim(dim, ndim),)
    if isinstance(dim, (tuple, list)):
        if not dim:
            return None
        out = []
        for d in dim:
            if isinstance(d, builtins.bool) or not isinstance(d, _int):
                try:
                    d = operator.index(d)
                except TypeError:
                    raise _bad_dim(name, dim) from None
            w = wrap_dim(d, ndim)
            if w in out:
                raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
            out.append(w)
        return tuple(out)
    if isinstance(dim, builtins.bool):
        raise _bad_dim(name, dim)
    try:
        return (wrap_dim(operator.index(dim), ndim),)
    except TypeError:
        raise _bad_dim(name, dim) from None


# ---------------------------------------------------------------- sum, mean

class _Omitted:
    """Default of ``dim`` where torch tells ``sum(x)`` (SumBackward0) from ``sum(x, None)``."""

    def __repr__(self):
        return "None"


_OMITTED = _Omitted()


@_public
def sum(input, dim=_OMITTED, keepdim=False, *, dtype=None, out=None):  # noqa: A001
    """Sum of the elements, over ``dim`` (int or tuple) or all of them (torch.sum)."""
    if dim is _OMITTED and not keepdim and out is None:
        if dtype is None:
            return call(R.sum, input)
        return call(R.sum, input, dtype=dtype)
    dims = None if dim is _OMITTED else _dims(dim, input._data.ndim, "sum")
    return _finish(call(R.sum, input, dim=dims, keepdim=keepdim, dtype=dtype), out)


@_public
def mean(input, dim=_OMITTED, keepdim=False, *, dtype=None, out=None):
    """Arithmetic mean (torch.mean); integer inputs need a floating ``dtype``."""
    if dim is _OMITTED and not keepdim and out is None:
        if dtype is None:
            return call(R.mean, input)
        return call(R.mean, input, dtype=dtype)
    dims = None if dim is _OMITTED else _dims(dim, input._data.ndim, "mean")
    return _finish(call(R.mean, input, dim=dims, keepdim=keepdim, dtype=dtype), out)


def _dim1(dim, ndim, name):
    """One dim (int, negative allowed) made non-negative."""
    if type(dim) is _int:
        return wrap_dim(dim, ndim)
    if isinstance(dim, builtins.bool) or dim is None:
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    try:
        return wrap_dim(operator.index(dim), ndim)
    except TypeError:
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}") from None


# ---------------------------------------------------------------- result tuples

return_types = types.ModuleType("dynograph.return_types",
                                "Named result tuples of ops that return several tensors.")
return_types.__all__ = []
sys.modules["dynograph.return_types"] = return_types
__all__.append("return_types")


def structseq(name, fields):
    """A tuple type like torch.return_types.<name>: indexable, unpackable, fields by name."""
    def __new__(cls, seq):
        seq = tuple(seq)
        if len(seq) != len(fields):
            raise TypeError(f"dynograph.return_types.{name} takes a {len(fields)}-sequence "
                            f"({len(seq)}-sequence given)")
        return tuple.__new__(cls, seq)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"dynograph.return_types.{name}(\n{body})"

    def __reduce__(self):
        return (type(self), (tuple(self),))

    ns = {"__new__": __new__, "__repr__": __repr__, "__str__": __repr__, "__reduce__": __reduce__,
          "__slots__": (), "__module__": "dynograph.return_types", "n_fields": len(fields),
          "n_sequence_fields": len(fields), "n_unnamed_fields": 0}
    for i, f in enumerate(fields):
        ns[f] = property(operator.itemgetter(i), doc=f"Alias for field number {i}")
    cls = type(name, (tuple,), ns)
    setattr(return_types, name, cls)
    return_types.__all__.append(name)
    return cls


_VI = ("values", "indices")
_max_t = structseq("max", _VI)
_min_t = structseq("min", _VI)
_median_t = structseq("median", _VI)
_nanmedian_t = structseq("nanmedian", _VI)
_mode_t = structseq("mode", _VI)
_sort_t = structseq("sort", _VI)
_topk_t = structseq("topk", _VI)
_kthvalue_t = structseq("kthvalue", _VI)
_cummax_t = structseq("cummax", _VI)
_cummin_t = structseq("cummin", _VI)
_aminmax_t = structseq("aminmax", ("min", "max"))


def _pair(cls, result, out):
    """Wrap an op's (values, indices) in its named tuple, writing into ``out`` if given."""
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"{cls.__name__}(): argument 'out' must be tuple of Tensors")
        result = (write_out(out[0], result[0]), write_out(out[1], result[1]))
    return cls(result)


# ---------------------------------------------------------------- nansum, nanmean, prod

@_public
def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum treating NaN as zero (torch.nansum)."""
    dims = _dims(dim, input._data.ndim, "nansum")
    return _finish(call(R.nansum, input, dim=dims, keepdim=keepdim, dtype=dtype), out)


@_public
def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean of the non-NaN elements (torch.nanmean)."""
    dt = input.dtype if dtype is None else dtype
    if not dt.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {R.type_name(dt)}")
    count = (~input.isnan()).sum(dim, keepdim)
    return _finish(nansum(input, dim, keepdim, dtype=dtype) / count, out)


@_public
def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Product of the elements, over one ``dim`` or all of them (torch.prod)."""
    if dim is None:
        if keepdim or out is not None:
            raise TypeError("prod(): argument 'dim' must be int, not NoneType")
        return call(R.prod, input, dtype=dtype)
    d = _dim1(dim, input._data.ndim, "prod")
    return _finish(call(R.prod, input, dim=d, keepdim=keepdim, dtype=dtype), out)


# ---------------------------------------------------------------- max, min and friends

def _extreme(full_op, dim_op, binary_op, cls, name):
    def fn(input, dim=None, keepdim=False, *, out=None, other=None):
        if isinstance(dim, Tensor) or other is not None:
            return _finish(call(binary_op, input, dim if other is None else other), out)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): argument 'dim' must be int, not NoneType")
            return _finish(call(full_op, input), out)
        if isinstance(dim, (builtins.float, builtins.bool, str)):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"(Tensor, {type(dim).__name__}), but expected one of:\n"
                            " * (Tensor input, *, Tensor out = None)\n"
                            " * (Tensor input, Tensor other, *, Tensor out = None)\n"
                            " * (Tensor input, int dim, bool keepdim = False, *, "
                            "tuple of Tensors out = None)\n")
        d = _dim1(dim, input._data.ndim, name)
        return _pair(cls, call(dim_op, input, dim=d, keepdim=keepdim), out)
    fn.__name__ = name
    fn.__doc__ = (f"torch.{name}: the whole tensor's {name}imum, or (values, indices) along "
                  f"``dim``, or the elementwise {name}imum with another tensor.")
    return _public(fn)


max = _extreme(R.max, R.max_dim, E.maximum, _max_t, "max")  # noqa: A001
min = _extreme(R.min, R.min_dim, E.minimum, _min_t, "min")  # noqa: A001


@_public
def amax(input, dim=(), keepdim=False, *, out=None):
    """Largest values over ``dim`` (all dims by default); ties share the gradient."""
    dims = _dims(dim, input._data.ndim, "amax")
    return _finish(call(R.amax, input, dim=dims, keepdim=keepdim), out)


@_public
def amin(input, dim=(), keepdim=False, *, out=None):
    """Smallest values over ``dim`` (all dims by default); ties share the gradient."""
    dims = _dims(dim, input._data.ndim, "amin")
    return _finish(call(R.amin, input, dim=dims, keepdim=keepdim), out)


@_public
def aminmax(input, *, dim=None, keepdim=False, out=None):
    """(min, max) over ``dim`` or the whole tensor (torch.aminmax)."""
    d = None if dim is None else _dim1(dim, input._data.ndim, "aminmax")
    return _pair(_aminmax_t, call(R.aminmax, input, dim=d, keepdim=keepdim), out)


def _argext(op, name):
    def fn(input, dim=None, keepdim=False, *, out=None):
        d = None if dim is None else _dim1(dim, input._data.ndim, name)
        return _finish(call(op, input, dim=d, keepdim=keepdim), out)
    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: index of the {name[3:]}imum (of the flattened tensor when dim is None)."
    return _public(fn)


argmax = _argext(R.argmax, "argmax")
argmin = _argext(R.argmin, "argmin")


# ---------------------------------------------------------------- var, std

def _correction(name, dim, unbiased, correction):
    """torch's two spellings: ``unbiased`` (bool, also as 2nd positional) or ``correction``."""
    if isinstance(dim, builtins.bool):
        if unbiased is not None:
            raise TypeError(f"{name}(): argument 'dim' must be tuple of ints, not bool")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}: can't pass both unbiased and correction")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction


def _moment(op, name):
    def fn(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
        dim, corr = _correction(name, dim, unbiased, correction)
        dims = _dims(dim, input._data.ndim, name)
        shape = input._data.shape
        n = R.numel_reduced(shape, dims)
        if n - corr <= 0:
            warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                          "less than the reduction factor (input numel divided by output numel).",
                          UserWarning, stacklevel=3)   # past the axis= wrapper
        r = call(op, input, dim=dims, correction=corr, keepdim=keepdim)
        if out is not None:
            if isinstance(r, tuple):
                return tuple(write_out(o, t) for o, t in zip(out, r))
            return write_out(out, r)
        return r
    fn.__name__ = name
    return fn


var = _public(_moment(R.var, "var"))
var.__doc__ = "Variance over ``dim`` with ``correction`` (1: Bessel's; ``unbiased=False``: 0)."
std = _public(_moment(R.std, "std"))
std.__doc__ = "Standard deviation over ``dim`` with ``correction`` (see ``var``)."
var_mean = numpy_names(_moment(R.var_mean, "var_mean"))
var_mean.__doc__ = "(var, mean) over ``dim`` (torch.var_mean)."
std_mean = numpy_names(_moment(R.std_mean, "std_mean"))
std_mean.__doc__ = "(std, mean) over ``dim`` (torch.std_mean)."
__all__ += ["var_mean", "std_mean"]


# ---------------------------------------------------------------- norms

def _ord_value(p):
    if isinstance(p, Tensor):
        p = p.item()
    return builtins.float(p) if not isinstance(p, _int) or isinstance(p, builtins.bool) else p


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """torch.linalg.vector_norm: the ``ord``-norm of ``x`` over ``dim`` (all dims by default)."""
    dims = _dims(dim, x._data.ndim, "linalg.vector_norm")
    r = call(R.linalg_vector_norm, x, ord=_ord_value(ord), dim=dims, keepdim=keepdim, dtype=dtype)
    return _finish(r, out)


@_public
def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(input))) over ``dim``, computed stably (torch.logsumexp)."""
    dims = _dims(dim, input._data.ndim, "logsumexp")
    return _finish(call(R.logsumexp, input, dim=dims, keepdim=keepdim), out)


# ---------------------------------------------------------------- scans

@_public
def cumsum(input, dim, *, dtype=None, out=None):
    """Running sum along ``dim`` (torch.cumsum); integers accumulate in int64."""
    d = _dim1(dim, input._data.ndim, "cumsum")
    return _finish(call(R.cumsum, input, dim=d, dtype=dtype), out)


@_public
def cumprod(input, dim, *, dtype=None, out=None):
    """Running product along ``dim`` (torch.cumprod)."""
    d = _dim1(dim, input._data.ndim, "cumprod")
    return _finish(call(R.cumprod, input, dim=d, dtype=dtype), out)


@tensor_method
def cumsum_(self, dim, *, dtype=None):
    return assign(self, cumsum(self, dim, dtype=dtype))


@tensor_method
def cumprod_(self, dim, *, dtype=None):
    return assign(self, cumprod(self, dim, dtype=dtype))


@_public
def cummax(input, dim, *, out=None):
    """Running maximum along ``dim`` and the index where it was reached (torch.cummax)."""
    d = _dim1(dim, input._data.ndim, "cummax")
    return _pair(_cummax_t, call(R.cummax, input, dim=d), out)


@_public
def cummin(input, dim, *, out=None):
    """Running minimum along ``dim`` and the index where it was reached (torch.cummin)."""
    d = _dim1(dim, input._data.ndim, "cummin")
    return _pair(_cummin_t, call(R.cummin, input, dim=d), out)


@_public
def logcumsumexp(input, dim, *, out=None):
    """log(cumsum(exp(input))) along ``dim``, computed stably (torch.logcumsumexp)."""
    d = _dim1(dim, input._data.ndim, "logcumsumexp")
    return _finish(call(R.logcumsumexp, input, dim=d), out)


# ---------------------------------------------------------------- logical reductions

def _logic(op, name):
    def fn(input, dim=None, keepdim=False, *, out=None):
        dims = _dims(dim, input._data.ndim, name)
        return _finish(call(op, input, dim=dims, keepdim=keepdim), out)
    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: whether {'every' if name == 'all' else 'some'} element is nonzero."
    return _public(fn)


all = _logic(R.all, "all")  # noqa: A001
any = _logic(R.any, "any")  # noqa: A001


@_public
def count_nonzero(input, dim=None):
    """Number of nonzero elements over ``dim`` (torch.count_nonzero), as int64."""
    return call(R.count_nonzero, input, dim=_dims(dim, input._data.ndim, "count_nonzero"))


# ---------------------------------------------------------------- median, mode

def _median(full_op, dim_op, cls, name):
    def fn(input, dim=None, keepdim=False, *, out=None):
        if dim is None:
            return _finish(call(full_op, input), out)
        d = _dim1(dim, input._data.ndim, name)
        return _pair(cls, call(dim_op, input, dim=d, keepdim=keepdim), out)
    fn.__name__ = name
    fn.__doc__ = (f"torch.{name}: the lower median of all elements, or (values, indices) "
                  "along ``dim``" + (" ignoring NaN." if name == "nanmedian" else "."))
    return _public(fn)


median = _median(R.median, R.median_dim, _median_t, "median")
nanmedian = _median(R.nanmedian, R.nanmedian_dim, _nanmedian_t, "nanmedian")


@_public
def mode(input, dim=-1, keepdim=False, *, out=None):
    """Most frequent value along ``dim`` (the smallest on a tie) and an index of it."""
    d = _dim1(dim, input._data.ndim, "mode")
    return _pair(_mode_t, call(R.mode, input, dim=d, keepdim=keepdim), out)


# ---------------------------------------------------------------- sorting

@_public
def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    """Sorted values and their original indices along ``dim``; ties keep their order."""
    d = _dim1(dim, input._data.ndim, "sort")
    return _pair(_sort_t, call(R.sort, input, dim=d, descending=builtins.bool(descending)), out)


@_public
def argsort(input, dim=-1, descending=False, *, stable=False):
    """Indices that sort ``input`` along ``dim`` (torch.argsort)."""
    return sort(input, dim, descending, stable=stable)[1]


@_public
def msort(input, *, out=None):
    """``input`` sorted along its first dim (torch.msort)."""
    return _finish(sort(input, 0)[0], out)


@_public
def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002
    """The ``k`` largest (``largest=False``: smallest) values along ``dim`` and their indices."""
    d = _dim1(dim, input._data.ndim, "topk")
    k = operator.index(k)
    r = call(R.topk, input, k, dim=d, largest=builtins.bool(largest), sorted=builtins.bool(sorted))
    return _pair(_topk_t, r, out)


@_public
def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The ``k``-th smallest value along ``dim`` and its index (torch.kthvalue)."""
    d = _dim1(dim, input._data.ndim, "kthvalue")
    return _pair(_kthvalue_t, call(R.kthvalue, input, operator.index(k), dim=d, keepdim=keepdim),
                 out)


# ---------------------------------------------------------------- unique, counting

def _uniq_result(r, return_inverse, return_counts):
    vals, inv, counts = r
    if return_inverse and return_counts:
        return vals, inv, counts
    if return_inverse:
        return vals, inv
    if return_counts:
        return vals, counts
    return vals


@_public
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """Distinct values (sorted), with inverse indices and counts on request (torch.unique)."""
    d = None if dim is None else _dim1(dim, input._data.ndim, "unique")
    return _uniq_result(call(R.unique, input, dim=d), return_inverse, return_counts)


@_public
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse each run of equal consecutive values (slices along ``dim``) to one."""
    d = None if dim is None else _dim1(dim, input._data.ndim, "unique_consecutive")
    return _uniq_result(call(R.unique_consecutive, input, dim=d), return_inverse, return_counts)


@_public
def bincount(input, weights=None, minlength=0):
    """Occurrences of each non-negative integer in ``input`` (summed ``weights`` if given)."""
    return call(R.bincount, input, weights, minlength=operator.index(minlength))


@_public
def histc(input, bins=100, min=0, max=0, *, out=None):  # noqa: A002
    """Histogram of ``input`` with ``bins`` equal bins over [min, max] (data range if equal)."""
    r = call(R.histc, input, bins=operator.index(bins), min=builtins.float(min),
             max=builtins.float(max))
    return _finish(r, out)


# ---------------------------------------------------------------- quantiles

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_q(name, input, q):
    """Check ``input`` and ``q``; return (list of q values, whether q was a scalar)."""
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input._data.size == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if isinstance(q, Tensor):
        if q._data.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        values = q._data.reshape(-1).tolist()
        if not builtins.all(0 <= v <= 1 for v in values):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
        return values, q._data.ndim == 0
    if not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    return [builtins.float(q)], True


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    qs, scalar_q = _quantile_q(name, input, q)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    ndim = input._data.ndim
    d = None if dim is None else _dim1(dim, ndim, name)
    x = input.reshape(-1) if d is None or ndim == 0 else input.movedim(d, -1)
    s = x.sort(-1)[0]                                 # NaN sorts last
    n = s.shape[-1]
    nq = len(qs)
    s = s.unsqueeze(0).expand((nq,) + tuple(s.shape))
    # a q tensor takes part in the arithmetic, so its gradient flows as in PyTorch's composite
    qt = q.reshape(-1) if isinstance(q, Tensor) else _creation.tensor(qs, dtype=input.dtype)
    qt = qt.reshape((nq,) + (1,) * (s.ndim - 1))
    if ignore_nan:
        last = (~s.isnan()).sum(-1, keepdim=True).to(input.dtype) - 1
    else:
        last = n - 1
    rank = (qt * last).clamp(min=0).expand(tuple(s.shape[:-1]) + (1,))   # one rank per row
    lo, hi = rank.floor(), rank.ceil()
    if interpolation == "nearest":
        lo = hi = rank.round()
    v_lo = s.gather(-1, lo.to(D.int64))
    if interpolation in ("lower", "nearest"):
        r = v_lo
    else:
        v_hi = s.gather(-1, hi.to(D.int64))
        if interpolation == "higher":
            r = v_hi
        elif interpolation == "midpoint":
            r = v_lo + (v_hi - v_lo) * 0.5
        else:
            r = v_lo + (v_hi - v_lo) * (rank - lo)
    if not ignore_nan:                                # any NaN in a row makes its result NaN
        r = r.masked_fill(s[..., -1:].isnan(), builtins.float("nan"))
    if keepdim and ndim:
        r = r.reshape((nq,) + (1,) * ndim) if d is None else r.movedim(-1, d + 1)
    else:
        r = r.squeeze(-1)
    return r.squeeze(0) if scalar_q else r


@_public
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The ``q``-th quantiles of ``input`` over ``dim`` (flattened if None) (torch.quantile)."""
    return _finish(_quantile("quantile", input, q, dim, keepdim, interpolation, False), out)


@_public
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """``quantile`` ignoring NaN values (torch.nanquantile)."""
    return _finish(_quantile("nanquantile", input, q, dim, keepdim, interpolation, True), out)

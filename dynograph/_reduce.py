"""Public reductions, scans and sorting (``dynograph.sum``, ``Tensor.max``, ``sort`` ...).

Each function parses PyTorch's signature, normalizes ``dim`` (int, tuple, list, None,
negative) once, and calls one primitive of ``compiler/ops/reduction.py``; the rest
(``argsort``, ``quantile``, ``nanmean`` ...) are compositions of those.
"""
import builtins
import operator

from dynograph.compiler.ops import reduction as R
from dynograph.compiler.ops.core import wrap_dim
from ._dispatch import call
from ._inplace import write_out
from ._tensor import tensor_method

__all__ = []

_int = builtins.int


def _public(fn):
    """Export ``fn`` as dynograph.<name> and Tensor.<name>."""
    __all__.append(fn.__name__)
    tensor_method(fn)
    return fn


def _finish(result, out):
    return result if out is None else write_out(out, result)


def _bad_dim(name, dim):
    return TypeError(f"{name}(): argument 'dim' must be tuple of ints, not {type(dim).__name__}")


def _dims(dim, ndim, name):
    """Normalize a ``dim`` argument to None (all dims) or a sorted-free tuple of ints >= 0."""
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

@_public
def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A001
    """Sum of the elements, over ``dim`` (int or tuple) or all of them (torch.sum)."""
    if dim is None and not keepdim and out is None:
        if dtype is None:
            return call(R.sum, input)
        return call(R.sum, input, dtype=dtype)
    dims = _dims(dim, input._data.ndim, "sum")
    return _finish(call(R.sum_dim, input, dim=dims, keepdim=keepdim, dtype=dtype), out)


@_public
def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Arithmetic mean (torch.mean); integer inputs need a floating ``dtype``."""
    if dim is None and not keepdim and out is None:
        if dtype is None:
            return call(R.mean, input)
        return call(R.mean, input, dtype=dtype)
    dims = _dims(dim, input._data.ndim, "mean")
    return _finish(call(R.mean_dim, input, dim=dims, keepdim=keepdim, dtype=dtype), out)

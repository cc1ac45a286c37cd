"""Indexing: ``Tensor.__getitem__``/``__setitem__`` and the index functions (gather, scatter,
index_select, index_add, masked_select, nonzero, take, searchsorted ...).

``x[key]`` follows PyTorch's algorithm (not numpy's): the items of the key are applied left
to right, an int as ``select`` (a view), a slice as ``slice`` (a view), ``None`` as
``unsqueeze``; tensors, lists and masks are collected per dimension and applied last by one
``index`` (a copy).  So ``x[0, :, idx]`` selects first and then indexes, and the placement
of the advanced-index dimensions follows from the dims left after the basic steps.

``x[key] = value`` runs the same basic steps on ``x`` and writes into the resulting view
(``index_put`` when tensors index it).  With autograd the write is recorded like PyTorch's
in-place ops: a view's base gets a ``CopySlices`` node (see ``_inplace.commit``).  Without
autograd the write goes straight into the numpy buffer (the same steps, on arrays).
"""
import numbers
import operator
import warnings

import numpy as np

from dynograph.compiler.ops import indexing as I
from dynograph.compiler.ops import movement as M
from dynograph.compiler.ops.core import TensorSpec, check_broadcast, type_name, wrap_dim
from dynograph.runtime import dtypes as D
from dynograph._trace_hook import TRACE
from ._dispatch import call
from ._inplace import (alias_of, assign, check_inplace_leaf, check_no_internal_overlap, commit,
                       refresh_view, write, write_out, writable)
from ._tensor import Tensor, exporters, tensor_method
from .autograd.grad_mode import STATE

__all__ = []

_pyslice = slice


_public, _function = exporters(__all__)


def _finish(result, out):
    return result if out is None else write_out(out, result)


def _view(op, t, **attrs):
    """Run a view op whose derivative needs only ``t``'s shape: later in-place writes to
    ``t`` (``y[1] = ...`` after ``z = y[0]``) must not invalidate the recorded graph."""
    out = call(op, t, **attrs)
    fn = out.grad_fn
    if fn is not None:
        fn._versions = (None,) + tuple(fn._versions[1:])
    return out


def _checked(op, *args, **attrs):
    """``call`` for ops whose impl can find an index out of range: PyTorch raises IndexError."""
    try:
        return call(op, *args, **attrs)
    except RuntimeError as e:
        cause = e.__context__
        if isinstance(cause, I.IndexOutOfRange):
            raise IndexError(str(cause)) from None
        raise


# ---------------------------------------------------------------- reading a key

_INT, _SLICE, _NONE, _ELLIPSIS, _BOOL, _TENSOR, _MASK = range(7)

_ZERO_DIM = ("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
_SEQ_WARNING = ("Using a non-tuple sequence for multidimensional indexing is deprecated and will "
                "be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 "
                "this will be interpreted as tensor index, x[torch.tensor(seq)], which will "
                "result either in an error or a different result")
_BAD_INDEX_DTYPE = "tensors used as indices must be long, int, byte or bool tensors"


def _items(key):
    """The items of ``key``; a short list holding slices, sequences or tensors counts as a
    tuple (PyTorch's legacy rule, with its deprecation warning)."""
    if type(key) is tuple or isinstance(key, tuple):
        return key
    if type(key) is list and len(key) < 32:
        for it in key:
            if it is None or it is Ellipsis or isinstance(it, (Tensor, list, tuple, _pyslice,
                                                               np.ndarray)):
                warnings.warn(_SEQ_WARNING, UserWarning, stacklevel=3)
                return tuple(key)
    return (key,)


def _index_tensor(seq):
    """A list or numpy array used as an index, as a tensor (empty lists index nothing)."""
    a = np.asarray(seq)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"new(): invalid data type '{type(seq).__name__}'")
    if type(seq) is not np.ndarray and a.dtype.kind in "iu":
        a = a.astype(np.int64)
    elif a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)
    if a.dtype not in D.FROM_NUMPY:
        raise IndexError(_BAD_INDEX_DTYPE)
    return Tensor._wrap(a)


def _value_read(reason):
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break(reason)


def _tensor_item(t):
    dt = t.dtype
    if dt is D.bool or dt is D.uint8:
        if dt is D.uint8:
            warnings.warn("indexing with dtype dynograph.uint8 is now deprecated, please use a "
                          "dtype dynograph.bool instead.", UserWarning, stacklevel=4)
            t = Tensor._wrap(t._data.astype(np.bool_))
        if t._data.ndim == 0:
            _value_read("indexing with a 0-d boolean tensor reads its value into Python")
            return _BOOL, bool(t._data)
        return _MASK, t
    if dt.is_floating_point:
        raise IndexError(_BAD_INDEX_DTYPE)
    if t._data.ndim == 0:
        _value_read("indexing with a 0-d tensor reads its value into Python")
        return _INT, int(t._data)              # a 0-d integer tensor selects, like an int
    if dt is not D.int64 and dt is not D.int32:
        raise IndexError(_BAD_INDEX_DTYPE)
    return _TENSOR, t


def _classify(item):
    """(kind, payload) of one item of a key."""
    t = type(item)
    if t is int:
        return _INT, item
    if t is _pyslice:
        return _SLICE, item
    if item is None:
        return _NONE, None
    if item is Ellipsis:
        return _ELLIPSIS, None
    if t is bool or t is np.bool_:
        return _BOOL, bool(item)
    if isinstance(item, Tensor):
        return _tensor_item(item)
    if isinstance(item, numbers.Integral):
        return _INT, operator.index(item)
    if isinstance(item, (list, tuple, np.ndarray)):
        return _tensor_item(_index_tensor(item))
    if isinstance(item, str):
        raise TypeError("new(): invalid data type 'str'")
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"Variables are valid indices (got {type(item).__name__})")


def _slice_bound(v):
    if v is None:
        return None
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError("slice indices must be integers or None or have an __index__ method") \
            from None


def _plan(shape, items, keep_full_slices=False):
    """PyTorch's applySlicing on shapes only.  Returns (steps, advanced, final shape):
    steps are (op, attrs) of the view ops (select, slice, unsqueeze) to apply in order;
    advanced lists (dim, kind, tensor) for the dims of the stepped result that tensors or
    masks index."""
    entries = []
    specified = 0
    for it in items:
        t = type(it)
        if t is int:
            entries.append((_INT, it))
            specified += 1
        elif t is _pyslice:
            entries.append((_SLICE, it))
            specified += 1
        else:
            e = _classify(it)
            entries.append(e)
            if e[0] == _INT or e[0] == _TENSOR:
                specified += 1
            elif e[0] == _MASK:
                specified += e[1]._data.ndim
    ndim = len(shape)
    if specified > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    cur = list(shape)
    steps = []
    adv = []
    dim = 0
    for real_dim, (kind, p) in enumerate(entries):
        if (kind == _INT or kind == _SLICE) and dim >= len(cur):
            wrap_dim(dim, len(cur))                 # raises PyTorch's IndexError
        if kind == _INT:
            n = cur[dim]
            if not -n <= p < n:
                raise IndexError(f"index {p} is out of bounds for dimension {real_dim} with size {n}")
            steps.append((I.select, {"dim": dim, "index": p + n if p < 0 else p}))
            del cur[dim]
        elif kind == _SLICE:
            n = cur[dim]
            start, stop = _slice_bound(p.start), _slice_bound(p.stop)
            st, e, step = I.normalize_slice(start, stop,
                                            1 if p.step is None else _slice_bound(p.step), n)
            # PyTorch skips a slice that names the whole dim from 0 (an end past it counts)
            whole = not start and (stop is None or stop >= n) and step == 1
            if keep_full_slices or not whole:
                steps.append((M.slice, {"dim": dim, "start": st, "end": e, "step": step}))
                cur[dim] = I.slice_length(st, e, step)
            dim += 1
        elif kind == _ELLIPSIS:
            dim += ndim - specified
        elif kind == _NONE:
            steps.append((M.unsqueeze, {"dim": dim}))
            cur.insert(dim, 1)
            dim += 1
        elif kind == _BOOL:
            steps.append((M.unsqueeze, {"dim": dim}))
            cur.insert(dim, 1)
            adv.append((dim, _TENSOR, Tensor._wrap(np.zeros(1 if p else 0, np.int64))))
            dim += 1
        elif kind == _TENSOR:
            adv.append((dim, _TENSOR, p))
            dim += 1
        else:
            adv.append((dim, _MASK, p))
            dim += p._data.ndim
    return steps, adv, cur


def _check_masks(adv, shape):
    for d, kind, m in adv:
        if kind == _MASK:
            ms = m._data.shape
            for j, n in enumerate(ms):
                if d + j >= len(shape) or shape[d + j] != n:
                    raise IndexError(
                        f"The shape of the mask {list(ms)} at index {j} does not match the shape "
                        f"of the indexed tensor {list(shape)} at index {d + j}")


def _np_step(a, op, attrs):
    """The numpy view a step of a plan takes (for writes without autograd)."""
    d = attrs["dim"]
    if op is I.select:
        return a[(_pyslice(None),) * d + (attrs["index"], Ellipsis)]
    if op is M.slice:
        return a[(_pyslice(None),) * d + (_pyslice(attrs["start"], attrs["end"], attrs["step"]),)]
    return np.expand_dims(a, d)


def _index_list(adv):
    """The per-dimension integer index tensors for ``index``/``index_put`` (masks become
    the columns of their nonzero coordinates)."""
    width = max(d + (m._data.ndim if kind == _MASK else 1) for d, kind, m in adv)
    indices = [None] * width
    for d, kind, m in adv:
        if kind == _MASK:
            nz = call(I.nonzero, m)
            for j in range(m._data.ndim):
                indices[d + j] = call(I.select, nz, dim=1, index=j)
        else:
            indices[d] = m
    return indices


# ---------------------------------------------------------------- __getitem__

def _getitem(self, key):
    """``self[key]`` with PyTorch's result shapes, views and grad_fn names."""
    t = type(key)
    if t is int:
        shape = self._data.shape
        if not shape:
            raise IndexError(_ZERO_DIM)
        n = shape[0]
        if not -n <= key < n:
            raise IndexError(f"index {key} is out of bounds for dimension 0 with size {n}")
        return _view(I.select, self, dim=0, index=key + n if key < 0 else key)
    if key is None:
        return _view(M.unsqueeze, self, dim=0)
    if t is _pyslice:
        shape = self._data.shape
        if not shape:
            raise IndexError("too many indices for tensor of dimension 0")
        s, e, st = I.normalize_slice(_slice_bound(key.start), _slice_bound(key.stop),
                                     1 if key.step is None else _slice_bound(key.step), shape[0])
        return _view(M.slice, self, dim=0, start=s, end=e, step=st)
    steps, adv, shape = _plan(self._data.shape, _items(key))
    result = self
    for op, attrs in steps:
        result = _view(op, result, **attrs)
    if adv:
        _check_masks(adv, shape)
        result = _checked(I.index, result, *_index_list(adv))
        fn = result.grad_fn
        if fn is not None:
            fn._versions = (None,) + tuple(fn._versions[1:])
        return result
    if result is self:
        return _view(I.alias, self)
    return result


Tensor.__getitem__ = _getitem


# ---------------------------------------------------------------- __setitem__

# the dtypes a written Python number is checked to fit (torch's checked conversion)
_OVERFLOW_CHECKED = (D.int8, D.int16, D.int32, D.int64, D.uint8, D.float32)


def scalar_array(value, dtype):
    """A Python number as a 0-d array of ``dtype``, with PyTorch's overflow errors."""
    if isinstance(value, np.generic):
        value = value.item()
    if type(value) is int and not -2 ** 63 <= value < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if dtype in _OVERFLOW_CHECKED and type(value) is not bool:
        if dtype is D.float32:
            bad = type(value) is float and np.isfinite(value) and abs(value) > 3.4028234663852886e38
        else:
            info = np.iinfo(dtype.np)
            if type(value) is float:
                bad = not (info.min <= value <= info.max)      # also NaN and infinities
            elif info.min == 0:                                # unsigned: negatives wrap around
                bad = value > info.max or -value > info.max
            else:
                bad = not info.min <= value <= info.max
        if bad:
            raise RuntimeError(f"value cannot be converted to type {dtype.cpp_type} without "
                               "overflow")
    a = np.asarray(value)
    if a.dtype.kind == "i" and dtype.np.kind == "u":
        return a.astype(np.int64).astype(dtype.np)
    return a.astype(dtype.np)


def _value_of(self, value):
    """The assigned value: a Tensor, or a Python number as a 0-d array of self's dtype."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (int, float, np.integer)):      # not numpy's float32 or bool_
        return scalar_array(value, self.dtype)
    t = type(value)
    name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
    raise TypeError(f"can't assign a {name} to a dynograph.{self.dtype.tensor_type}")


def _strip_shape(shape):
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def _check_copy_shape(vshape, tshape, dtype):
    """copy_to's rule: a value of another shape loses its leading 1s, then expands."""
    if vshape == tshape or not vshape:
        return
    vshape = _strip_shape(vshape)
    if M.expand_shape(vshape, tuple(tshape)) is None:
        raise RuntimeError(
            f"expand(dynograph.{dtype.tensor_type}{{{list(vshape)}}}, size={list(tshape)}): the "
            f"number of sizes provided ({len(tshape)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(vshape)})")


def _only_mask(adv):
    return len(adv) == 1 and adv[0][1] == _MASK


def _check_put_dtype(self, v, adv):
    """index_put needs the value in self's dtype, except a one-element value under a single
    mask (PyTorch then runs masked_fill)."""
    vdt = v.dtype if isinstance(v, Tensor) else D.from_numpy_dtype(v.dtype)
    if vdt is self.dtype or not isinstance(v, Tensor):
        return False
    if _only_mask(adv) and v._data.size == 1:
        return True
    raise RuntimeError(
        "Index put requires the source and destination dtypes match, got "
        f"{type_name(self.dtype)} for the destination and {type_name(vdt)} for the source.")


def _put_shape_error(vshape, shape, adv):
    result = _adv_result_shape(shape, adv)
    raise RuntimeError(f"shape mismatch: value tensor of shape {list(_strip_shape(vshape))} "
                       f"cannot be broadcast to indexing result of shape {list(result)}")


def _adv_empty(shape, adv):
    """Whether the advanced-indexing result has no elements (raises PyTorch's error for a
    non-empty index into a size-0 dimension)."""
    indices = [None] * len(shape)
    for d, kind, m in adv:
        if kind == _MASK:
            return 0 in _adv_result_shape(shape, adv)
        indices[d] = m._data
    return I.empty_result(shape, indices) is not None


def _adv_result_shape(shape, adv):
    """The shape of the advanced-indexing result (masks counted as their nonzero columns)."""
    specs = []
    for d, kind, m in adv:
        if kind == _MASK:
            count = int(np.count_nonzero(m._data))
            specs += [(d + j, TensorSpec((count,), D.int64)) for j in range(m._data.ndim)]
        else:
            specs.append((d, TensorSpec(m._data.shape, D.int64)))
    indices = [None] * (max(d for d, _ in specs) + 1)
    for d, s in specs:
        indices[d] = s
    return I.index_result_shape(shape, indices)


def _numpy_key(adv):
    """The numpy index tuple for the advanced part (masks stay boolean arrays)."""
    key = []
    dim = 0
    for d, kind, m in sorted(adv, key=lambda e: e[0]):
        key += [_pyslice(None)] * (d - dim)
        key.append(m._data)
        dim = d + (m._data.ndim if kind == _MASK else 1)
    return tuple(key)


def _setitem(self, key, value):
    """``self[key] = value``: PyTorch's copy_/index_put_ into the indexed part of self."""
    if key is False:
        _value_of(self, value)
        return
    v = _value_of(self, value)
    steps, adv, shape = _plan(self._data.shape, _items(key))
    if TRACE.tracer is not None or self.is_cuda or (STATE.grad_enabled and (
            self.requires_grad or (isinstance(v, Tensor) and v.requires_grad
                                   and self.is_floating_point()))):
        # the recorded path writes through ops, which the tracer sees
        _setitem_autograd(self, steps, adv, shape, v)
    else:
        _setitem_eager(self, steps, adv, shape, v)


def _setitem_eager(self, steps, adv, shape, v):
    """The write without autograd: numpy assignment into the indexed view of self."""
    a = self._data
    for op, attrs in steps:
        a = _np_step(a, op, attrs)
    a = writable(a)
    varr = v._data if isinstance(v, Tensor) else v
    if adv:
        _check_masks(adv, shape)
        if _check_put_dtype(self, v, adv):
            varr = varr.astype(self._data.dtype)
        try:
            a[_numpy_key(adv)] = varr
        except IndexError:
            if _adv_empty(shape, adv):                  # nothing written: no bounds checked
                self._bump_version()
                return
            k = 0
            for d, kind, m in sorted(adv, key=lambda e: e[0]):
                if kind == _TENSOR:
                    I.check_bounds(m._data, shape[d], k, exc=IndexError)
                k += m._data.ndim if kind == _MASK else 1
            raise
        except ValueError:
            _put_shape_error(varr.shape, shape, adv)
    else:
        if any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape)):
            check_no_internal_overlap(Tensor._wrap(a))      # the written region overlaps itself
        _check_copy_shape(varr.shape, a.shape, self.dtype)
        if varr.shape != a.shape and varr.ndim > a.ndim:
            varr = varr.reshape(_strip_shape(varr.shape))
        write(a, varr)
    self._bump_version()


def _strip_ones(t):
    """``t`` without leading size-1 dims (as differentiable selects)."""
    while t._data.ndim and t._data.shape[0] == 1:
        t = _view(I.select, t, dim=0, index=0)
    return t


def _cast(t, dtype):
    if hasattr(Tensor, "to"):
        return t.to(dtype)
    return Tensor._wrap(t._data.astype(dtype.np))


def _setitem_autograd(self, steps, adv, shape, v):
    """The write recorded for autograd: ``index_put`` into (a view of) self, committed as an
    in-place write (a view's base gets CopySlices)."""
    if not isinstance(v, Tensor):
        v = Tensor._wrap(v)
    target = self
    for op, attrs in steps:
        target = _view(op, target, **attrs)
    check_inplace_leaf(target)
    if adv:
        _check_masks(adv, shape)
        if _check_put_dtype(self, v, adv):
            v = _cast(v, self.dtype)
        v = _strip_ones(v)
        src = _checked(I.index_put, alias_of(target), v, *_index_list(adv))
        commit(target, src)
    else:
        check_no_internal_overlap(target)       # as the write without autograd does
        _check_copy_shape(tuple(v._data.shape), target._data.shape, self.dtype)
        if v._data.shape != target._data.shape and v._data.ndim > target._data.ndim:
            v = _strip_ones(v)
        commit(target, v)
    if target is not self and self._base is not None:
        refresh_view(self, self._base)


Tensor.__setitem__ = _setitem


# ---------------------------------------------------------------- select / scatter of views

def _select_index(input, dim, index):
    shape = input._data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    n = shape[d]
    index = operator.index(index)
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(shape)} "
                         f"at dimension {d}")
    return d, index + n if index < 0 else index


@_public
def select(input, dim, index):
    """The view of ``input`` at position ``index`` of dimension ``dim`` (torch.select)."""
    d, i = _select_index(input, dim, index)
    return _view(I.select, input, dim=d, index=i)


@_public
def select_scatter(input, src, dim, index):
    """A copy of ``input`` whose ``select(dim, index)`` is ``src`` (torch.select_scatter)."""
    d, i = _select_index(input, dim, index)
    return call(I.select_scatter, input, src, dim=d, index=i)


# ---------------------------------------------------------------- gather / scatter

def _dim(dim, input):
    return wrap_dim(dim, input._data.ndim)


def _inplace_of(fn, *, reads_self=False):
    """Tensor.<name>_: compute out of place from an alias of self, then write into self.
    The alias keeps self's autograd identity; ops whose derivative reads self's values get
    self itself (then ``commit`` keeps a copy of the overwritten values for them)."""
    def method(self, *args, **kwargs):
        check_inplace_leaf(self)
        return assign(self, fn(self if reads_self else alias_of(self), *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place {fn.__name__}."
    tensor_method(method)
    return method


@_public
def gather(input, dim, index, *, sparse_grad=False, out=None):
    """Values of ``input`` along ``dim`` at ``index`` (out has index's shape)."""
    return _finish(call(I.gather, input, index, dim=_dim(dim, input)), out)


@_public
def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    """A copy of ``input`` with ``src`` (a tensor) or ``value`` (a number) written at ``index``
    along ``dim``; ``reduce`` ('add'/'multiply') combines instead of overwriting."""
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src
    if src is None and value is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    attrs = {"dim": _dim(dim, input)}
    if reduce is not None:
        attrs["reduce"] = reduce
    if src is not None:
        return _finish(call(I.scatter, input, index, src, **attrs), out)
    return _finish(call(I.scatter_value, input, index, value=value, **attrs), out)


@_public
def scatter_add(input, dim, index, src, *, out=None):
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim``."""
    return _finish(call(I.scatter_add, input, index, src, dim=_dim(dim, input)), out)


@_public
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """``src`` reduced into ``input`` at ``index`` along ``dim`` ('sum', 'prod', 'mean',
    'amax', 'amin'); ``include_self=False`` leaves input's old values out of the reduction."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    return _finish(call(I.scatter_reduce, input, index, src, dim=_dim(dim, input), reduce=reduce,
                        include_self=include_self), out)


_inplace_of(scatter)
_inplace_of(scatter_add)
_inplace_of(scatter_reduce, reads_self=True)


# ---------------------------------------------------------------- index_* along one dim

@_public
def index_select(input, dim, index, *, out=None):
    """The entries ``index`` (a vector) of dimension ``dim`` of ``input``."""
    r = call(I.index_select, input, index, dim=_dim(dim, input))
    fn = r.grad_fn
    if fn is not None:
        fn._versions = (None,) + tuple(fn._versions[1:])
    return _finish(r, out)


@_public
def index_add(input, dim, index, source, *, alpha=1, out=None):
    """A copy of ``input`` with ``alpha * source`` added at the entries ``index`` of ``dim``."""
    attrs = {"dim": _dim(dim, input)}
    if alpha != 1:
        attrs["alpha"] = alpha
    return _finish(call(I.index_add, input, index, source, **attrs), out)


@_public
def index_copy(input, dim, index, source, *, out=None):
    """A copy of ``input`` whose entries ``index`` of ``dim`` are ``source``'s."""
    return _finish(_checked(I.index_copy, input, index, source, dim=_dim(dim, input)), out)


@_public
def index_fill(input, dim, index, value):
    """A copy of ``input`` whose entries ``index`` of ``dim`` are ``value``."""
    d = _dim(dim, input)
    if isinstance(value, Tensor):
        return _checked(I.index_fill_tensor, input, index, value, dim=d)
    return _checked(I.index_fill, input, index, dim=d, value=value)


@_public
def index_put(input, indices, values, accumulate=False):
    """A copy of ``input`` with ``input[indices] = values`` (``+=`` with accumulate)."""
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    adv = []
    dim = 0
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
        if t.dtype is D.bool or t.dtype is D.uint8:
            kind, p = _tensor_item(t) if t._data.ndim else (_MASK, t)
            adv.append((dim, _MASK, p))
            dim += p._data.ndim
        elif t.dtype is D.int64 or t.dtype is D.int32:
            adv.append((dim, _TENSOR, t))
            dim += 1
        else:
            raise IndexError(_BAD_INDEX_DTYPE)
    shape = list(input._data.shape)
    if dim > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)} (got {dim})")
    _check_masks(adv, shape)
    if not accumulate and _check_put_dtype(input, values, adv):
        values = _cast(values, input.dtype)
    attrs = {"accumulate": True} if accumulate else {}
    return _checked(I.index_put, input, values, *(_index_list(adv) if adv else ()), **attrs)


_inplace_of(index_add)
_inplace_of(index_copy)
_inplace_of(index_fill)
index_put_ = _inplace_of(index_put)
__all__.append("index_put_")


# ---------------------------------------------------------------- masks, nonzero, take, put

@_public
def masked_select(input, mask, *, out=None):
    """The elements of ``input`` (broadcast with ``mask``) where ``mask`` is True, as 1-D."""
    return _finish(call(I.masked_select, input, mask), out)


@_public
def masked_scatter(input, mask, source):
    """A copy of ``input`` whose positions where ``mask`` is True take ``source``'s leading
    elements in order."""
    return call(I.masked_scatter, input, mask, source)


@tensor_method
def masked_scatter_(self, mask, source):
    """In-place masked_scatter (the mask must broadcast to self's shape)."""
    check_inplace_leaf(self)
    if mask.shape != self.shape:
        M.expand.meta(TensorSpec(tuple(mask.shape), mask.dtype), tuple(self.shape))
    return assign(self, masked_scatter(alias_of(self), mask, source))


@_public
def nonzero(input, *, out=None, as_tuple=False):
    """The coordinates of the non-zero elements of ``input``: an (n, ndim) int64 tensor, or
    with ``as_tuple`` one 1-D tensor per dimension."""
    if as_tuple:
        if out is not None:
            raise RuntimeError("nonzero(): out= is not supported with as_tuple=True")
        x = input if input._data.ndim else call(M.unsqueeze, input, dim=0)
        nz = call(I.nonzero, x)
        return tuple(call(I.select, nz, dim=1, index=j) for j in range(x._data.ndim))
    r = call(I.nonzero, input)
    if out is not None and out.dtype is not D.int64:
        raise RuntimeError(f"nonzero: Expected out tensor to have scalar type Long but got scalar "
                           f"type{type_name(out.dtype)}")
    return _finish(r, out)


@_public
def argwhere(input):
    """The coordinates of the non-zero elements of ``input`` (same as nonzero)."""
    return call(I.nonzero, input)


@_public
def take(input, index, *, out=None):
    """``input`` viewed as 1-D, read at ``index`` (result has index's shape)."""
    r = _checked(I.take, input, index)
    return _finish(r, out)


@_public
def put(input, index, source, accumulate=False):
    """A copy of ``input`` (viewed as 1-D) with ``input[index] = source`` (``+=`` with
    accumulate)."""
    attrs = {"accumulate": True} if accumulate else {}
    return _checked(I.put, input, index, source, **attrs)


_inplace_of(put)


@_public
def take_along_dim(input, indices, dim=None, *, out=None):
    """``gather`` with broadcasting: values of ``input`` along ``dim`` at ``indices``; with
    ``dim=None`` both are flattened."""
    if dim is None:
        r = gather(input.reshape(-1), 0, indices.reshape(-1))
        return _finish(r, out)
    nd, ni = input._data.ndim, indices._data.ndim
    if nd != ni:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number "
                           f"of dimensions, but got {nd} dimensions for input, and {ni} dimensions "
                           "for indices")
    if indices.dtype is not D.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{type_name(indices.dtype)}")
    d = _dim(dim, input)
    xs, ixs = list(input._data.shape), list(indices._data.shape)
    want_i = check_broadcast(tuple(xs[:d] + [ixs[d]] + xs[d + 1:]), tuple(ixs))
    want_x = check_broadcast(tuple(ixs[:d] + [xs[d]] + ixs[d + 1:]), tuple(xs))
    if tuple(ixs) != want_i:
        indices = indices.broadcast_to(want_i)
    if tuple(xs) != want_x:
        input = input.broadcast_to(want_x)
    if indices._data.size and indices._data.min() < 0:      # along a dim, negatives count from the end
        indices = indices + (indices < 0) * xs[d]
    return _finish(call(I.gather, input, indices, dim=d), out)


# ---------------------------------------------------------------- searchsorted / bucketize

@_function
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, out=None,
                 sorter=None):
    """Where ``input``'s values would be inserted into the sorted last dimension of
    ``sorted_sequence`` (``right``/``side='right'``: after equal values)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got "
                               f"{side}")
        if side == "left" and right:
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    if out is not None and out.dtype is not (D.int32 if out_int32 else D.int64):
        raise RuntimeError(
            "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
            "Long(int64) depending on whether out_int32 flag is True, but we got output tensor's "
            f"dtype {type_name(out.dtype)} and out_int32 flag is {bool(out_int32)}")
    if isinstance(input, np.generic):
        input = input.item()
    r = call(I.searchsorted, sorted_sequence, input, sorter, right=bool(right),
             out_int32=bool(out_int32))
    return _finish(r, out)


@_function
def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The index of the bucket of each value of ``input`` between sorted 1-D ``boundaries``."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right, out=out)


# ---------------------------------------------------------------- index_reduce / nonzero_static

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


@_public
def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """``input`` with the slices ``index[i]`` along ``dim`` reduced (prod, mean, amax, amin)
    with ``source``'s slices i (a scatter_reduce of the index spread over source's shape)."""
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = _dim(dim, input)
    if index._data.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (D.int32, D.int64):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{type_name(index.dtype)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({type_name(input.dtype)}) and source "
                           f"({type_name(source.dtype)}) must have the same scalar type")
    sd = d if source._data.ndim else 0
    if source._data.ndim and source._data.shape[sd] != index.numel():
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal "
                           f"to source.size(dim) ({source._data.shape[sd]})")
    src = source if source._data.ndim == input._data.ndim else source.reshape(input.shape[:0] + (1,))
    shape = [1] * src._data.ndim
    if shape:
        shape[sd] = -1
    spread = index.to(D.int64).reshape(shape).expand(src.shape)
    return _finish(scatter_reduce(input, d, spread, src, reduce, include_self=include_self), out)


@tensor_method
def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """In-place :func:`index_reduce`."""
    return assign(self, index_reduce(self, dim, index, source, reduce, include_self=include_self))


@_function
def nonzero_static(input, *, size, fill_value=-1):
    """The indices of the first ``size`` nonzero elements (``nonzero`` padded with
    ``fill_value`` rows or cut to ``size`` rows)."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got "
                           f"size: {size}")
    found = nonzero(input)
    n = found.shape[0]
    if n >= size:
        return found[:size]
    from ._creation import full
    from ._shape import cat
    pad = full((size - n, input._data.ndim), fill_value, dtype=D.int64)
    return cat([found, pad], 0)


tensor_method(nonzero_static)

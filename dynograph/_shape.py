"""Public shape and movement functions (``dynograph.reshape``, ``Tensor.view``, ``cat`` ...).

Each function parses PyTorch's signature (sizes as varargs or one sequence, negative
dims, ``-1`` inference) and calls a primitive of ``compiler/ops/movement.py``; the rest
(``flatten``, ``movedim``, ``hstack``, ``meshgrid`` ...) are compositions of those, chosen
so that ``grad_fn`` names match PyTorch's.
"""
import builtins
import math
import operator
import warnings

import numpy as np

from dynograph.compiler.ops import movement as M
from dynograph.compiler.ops.core import check_broadcast, type_name, wrap_dim
from dynograph.runtime import dtypes as D
from ._dispatch import call, mark_view
from ._inplace import assign, check_inplace_leaf, write_out
from ._tensor import Tensor, Size, exporters, tensor_method

__all__ = []

_int = builtins.int
_prod = math.prod
_seq_types = (tuple, list, Size)


_public, _function = exporters(__all__)


def _sizes(args, fn, argname="size"):
    """Sizes given as varargs ``(2, 3)`` or one sequence ``((2, 3),)`` as a tuple of ints."""
    if len(args) == 1 and isinstance(args[0], _seq_types):
        args = args[0]
    for s in args:
        if type(s) is not _int:
            return _sizes_slow(args, fn, argname)
    return tuple(args)


def _sizes_slow(args, fn, argname):
    out = []
    for i, s in enumerate(args):
        if isinstance(s, builtins.bool) or not _is_index(s):
            raise TypeError(f"{fn}(): argument '{argname}' failed to unpack the object at pos "
                            f"{i + 1} with error \"type must be tuple of ints,but got "
                            f"{type(s).__name__}\"")
        out.append(operator.index(s))
    return tuple(out)


def _is_index(s):
    if isinstance(s, Tensor):
        return s._data.size == 1 and s._data.dtype.kind in "iu"
    return hasattr(type(s), "__index__")


def _dim(d, ndim):
    if type(d) is not _int:
        d = operator.index(d)
    return wrap_dim(d, ndim)


# ---------------------------------------------------------------- view / reshape

def _bad_view_args(args):
    got = ", ".join(type(a).__name__ for a in args)
    lines = [f"view() received an invalid combination of arguments - got ({got}), "
             "but expected one of:", " * (torch.dtype dtype)"]
    if args:
        bad = ", ".join(f"!{type(a).__name__}!" for a in args)
        lines.append(f"      didn't match because some of the arguments have invalid types: ({bad})")
    lines.append(" * (tuple of ints size)")
    if args:
        lines.append(f"      didn't match because some of the arguments have invalid types: ({bad})")
    return TypeError("\n".join(lines) + "\n")


@tensor_method
def view(self, *shape, size=None, dtype=None):
    """A tensor sharing this one's memory with a new shape (``-1`` inferred), or the same
    bytes reinterpreted as ``dtype`` (Tensor.view)."""
    d = self._data
    if shape and type(shape[0]) is _int and size is None and dtype is None:
        for s in shape:                 # fast path: view(2, -1, 3)
            if type(s) is not _int:
                break
        else:
            if shape != d.shape:
                shape = _infer(shape, d.size)
            return call(M.view, self, shape=shape)
    if size is not None:
        shape = (size,)
    elif dtype is not None:
        shape = (dtype,)
    if len(shape) == 1:
        s = shape[0]
        if isinstance(s, D.dtype):
            return call(M.view_dtype, self, dtype=s)
        if not isinstance(s, _seq_types) and not _is_index(s):
            raise _bad_view_args(shape)
    elif not shape:
        raise _bad_view_args(shape)
    shape = _sizes(shape, "view")
    if shape != d.shape:
        shape = _infer(shape, d.size)
    return call(M.view, self, shape=shape)


def _infer(shape, numel):
    """``shape`` checked against ``numel`` elements, with a ``-1`` resolved."""
    if -1 not in shape and _prod(shape) == numel and min(shape, default=0) >= 0:
        return shape
    return M.infer_size(shape, numel)


@tensor_method
def view_as(self, other):
    """``self.view(other.size())``."""
    return view(self, other._data.shape)


def _reshape(x, shape):
    d = x._data
    if shape != d.shape:
        shape = _infer(shape, d.size)
    if d.flags.c_contiguous or M.compute_stride(d.shape, d.strides, shape, 1) is not None:
        return call(M.view, x, shape=shape)
    return call(M.unsafe_view, x, shape=shape)


@_function
def reshape(input, shape):
    """A tensor with ``shape`` and input's elements: a view when the strides allow one,
    otherwise a copy (torch.reshape)."""
    if not isinstance(shape, _seq_types):
        raise TypeError("reshape(): argument 'shape' (position 2) must be tuple of ints, "
                        f"not {type(shape).__name__}")
    return _reshape(input, _sizes(shape, "reshape", "shape"))


@tensor_method(name="reshape")
def _reshape_method(self, *shape, **kwargs):
    """Tensor.reshape(*shape)."""
    shape = _varargs(shape, kwargs, "reshape", "shape")
    if not shape:
        raise TypeError("reshape() missing 1 required positional arguments: \"shape\"")
    return _reshape(self, _sizes(shape, "reshape", "shape"))


@tensor_method
def reshape_as(self, other):
    """``self.reshape(other.shape)``."""
    return _reshape(self, other._data.shape)


@_public
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dimensions ``start_dim`` .. ``end_dim`` into one (torch.flatten)."""
    d = input._data
    nd = d.ndim
    if start_dim == 0 and end_dim == -1 and nd > 1:      # the common full flatten
        return _reshape(input, (d.size,))
    start, end = _dim(start_dim, nd), _dim(end_dim, nd)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if nd == 0:
        return _reshape(input, (1,))
    if start == end:
        return input
    shape = d.shape
    n = 1
    for s in shape[start:end + 1]:
        n *= s
    return _reshape(input, shape[:start] + (n,) + shape[end + 1:])


@_public
def unflatten(input, dim, sizes):
    """Split dimension ``dim`` into ``sizes`` (one may be -1) (torch.unflatten)."""
    d = input._data
    dim = _dim(dim, d.ndim)
    sizes = _sizes((sizes,), "unflatten", "sizes")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = d.shape[dim] if d.ndim else 1
    try:
        inferred = M.infer_size(sizes, n)
    except RuntimeError as e:
        if "only one dimension" in str(e):
            raise
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({n}) in the input tensor") from None
    return view(input, d.shape[:dim] + inferred + d.shape[dim + 1:])


def _varargs(args, kwargs, fn, name, ignored=()):
    """The sizes a varargs method got: ``x.flip(0, 1)``, ``x.flip((0, 1))`` or, as PyTorch also
    accepts, one keyword (``x.flip(dims=(0, 1))``)."""
    kwargs = {k: v for k, v in kwargs.items() if k not in ignored or v is not False}
    if not kwargs:
        return args
    extra = sorted(set(kwargs) - {name})
    if extra:
        raise TypeError(f"{fn}() got an unexpected keyword argument '{extra[0]}'")
    if args:
        raise TypeError(f"{fn}() got multiple values for argument '{name}'")
    return (kwargs[name],)


# ---------------------------------------------------------------- expand

@tensor_method
def expand(self, *sizes, **kwargs):
    """A stride-0 view repeating size-1 dimensions up to ``sizes`` (-1 keeps a size)."""
    sizes = _varargs(sizes, kwargs, "expand", "size", ("implicit",))
    sizes = _sizes(sizes, "expand")
    d = self._data
    if sizes != d.shape:
        shape = M.expand_shape(d.shape, sizes)
        if shape is None:
            raise RuntimeError(
                f"expand(dynograph.{self.dtype.tensor_type}{{{list(d.shape)}}}, size={list(sizes)}): "
                f"the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                f"number of dimensions in the tensor ({d.ndim})")
        sizes = shape
    return call(M.expand, self, shape=sizes)


@tensor_method
def expand_as(self, other):
    """``self.expand(other.size())``."""
    return expand(self, other._data.shape)


@_public
def broadcast_to(input, size):
    """``input.expand(size)`` (torch.broadcast_to)."""
    return expand(input, size)


# ---------------------------------------------------------------- permute / transpose

@_function
def permute(input, dims):
    """A view with the dimensions in the order ``dims`` (torch.permute)."""
    return _permute(input, _sizes((dims,), "permute", "dims"))


@tensor_method(name="permute")
def _permute_method(self, *dims, **kwargs):
    """Tensor.permute(*dims)."""
    dims = _varargs(dims, kwargs, "permute", "dims")
    if not dims:
        raise TypeError("permute() missing 1 required positional arguments: \"dims\"")
    return _permute(self, _sizes(dims, "permute", "dims"))


def _permute(x, dims):
    nd = x._data.ndim
    if len(dims) != nd:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            "length of the desired ordering of dimensions i.e. input.dim() = "
            f"{nd} is not equal to len(dims) = {len(dims)}")
    wrapped = tuple(d if 0 <= d < nd else wrap_dim(d, nd) for d in dims)
    if len(set(wrapped)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return call(M.permute, x, dims=wrapped)


@_public
def transpose(input, dim0, dim1):
    """A view with dimensions ``dim0`` and ``dim1`` swapped (torch.transpose)."""
    nd = input._data.ndim
    return call(M.transpose, input, dim0=_dim(dim0, nd), dim1=_dim(dim1, nd))


swapdims = transpose
Tensor.swapdims = transpose


@tensor_method
def swapaxes(input, axis0, axis1):
    """``transpose`` under numpy's name and argument names."""
    return transpose(input, axis0, axis1)

__all__ += ["swapaxes", "swapdims"]


@_public
def t(input):
    """Transpose of a tensor with at most 2 dimensions (torch.t)."""
    if input._data.ndim > 2:
        raise RuntimeError(
            f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    return call(M.t, input)


def _T(self):
    nd = self._data.ndim
    if nd != 2:
        if nd == 0:
            warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity "
                          "in these cases.", UserWarning, stacklevel=2)
        else:
            warnings.warn(
                "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
                "deprecated and it will throw an error in a future release. Consider `x.mT` to "
                "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` "
                "to reverse the dimensions of a tensor.", UserWarning, stacklevel=2)
    return call(M.permute, self, dims=tuple(range(nd - 1, -1, -1)))


def _matrix_transpose(name, what):
    def get(self):
        nd = self._data.ndim
        if nd == 0:
            warnings.warn(f"{what} is deprecated on 0-D tensors. " + (
                "This function is the identity in these cases." if name == "mT"
                else "Consider using x.conj()."), UserWarning, stacklevel=2)
            return self
        if nd < 2:
            raise RuntimeError(f"{what} is only supported on matrices or batches of matrices. "
                               f"Got {nd}-D tensor.")
        return call(M.transpose, self, dim0=nd - 2, dim1=nd - 1)
    return get


def _H(self):
    nd = self._data.ndim
    if nd == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return self
    if nd != 2:
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{nd}-D tensor." + (" For batches of matrices, consider using "
                                                "tensor.mH" if nd > 2 else ""))
    return call(M.transpose, self, dim0=0, dim1=1)


def _conjugated(transpose):
    """A transpose that also conjugates complex tensors (mH, H, adjoint)."""
    def fn(self):
        r = transpose(self)
        return r.conj() if r.is_complex() else r
    return fn


Tensor.T = property(_T)
Tensor.mT = property(_matrix_transpose("mT", "tensor.mT"))
Tensor.mH = property(_conjugated(_matrix_transpose("mH", "tensor.mH")))
Tensor.H = property(_conjugated(_H))
_adjoint = _conjugated(_matrix_transpose("adjoint", "tensor.adjoint()"))


@_public
def adjoint(input):
    """Conjugate transpose of the last two dimensions (real tensors: ``mT``)."""
    if input._data.ndim == 0:
        warnings.warn("adjoint() is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return input
    return _adjoint(input)


# ---------------------------------------------------------------- squeeze / unsqueeze

@_public
def squeeze(input, dim=None):
    """Remove size-1 dimensions: all of them, ``dim``, or those in the tuple ``dim``."""
    if dim is None:
        return call(M.squeeze, input)
    nd = input._data.ndim
    if isinstance(dim, _seq_types):
        dims = tuple(_dim(d, nd) for d in dim)
        if len(set(dims)) != len(dims):
            for d in dims:
                if dims.count(d) > 1:
                    raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        return call(M.squeeze_dims, input, dims=dims if nd else ())
    return call(M.squeeze_dim, input, dim=_dim(dim, nd))


@_public
def unsqueeze(input, dim):
    """A view with a size-1 dimension inserted at ``dim`` (torch.unsqueeze)."""
    return call(M.unsqueeze, input, dim=_dim(dim, input._data.ndim + 1))


# ---------------------------------------------------------------- in-place view ops

def _inplace_view(fn, name):
    """Tensor.<name>_: change this tensor's shape/strides in place (same memory)."""
    def method(self, *args, **kwargs):
        check_inplace_leaf(self)
        self._bump_version()            # first: the op's record of its input sees the new version
        alias = Tensor._wrap(self._data)
        alias.__dict__.update(self.__dict__)
        result = fn(alias, *args, **kwargs)
        self._data = result._data
        if result.grad_fn is not None:
            self.grad_fn = result.grad_fn
            self._output_nr = result._output_nr
        return self
    method.__name__ = name
    tensor_method(method)
    return method


for _fn, _name in ((squeeze, "squeeze_"), (unsqueeze, "unsqueeze_"), (t, "t_"),
                   (transpose, "transpose_"), (transpose, "swapaxes_"), (transpose, "swapdims_")):
    _inplace_view(_fn, _name)


# ---------------------------------------------------------------- as_strided / unfold

@_public
def as_strided(input, size, stride, storage_offset=None):
    """A view of input's memory with the given sizes, strides and storage offset."""
    size = _sizes((size,), "as_strided")
    stride = _sizes((stride,), "as_strided", "stride")
    d = input._data
    if storage_offset is None:
        storage_offset = M.storage_offset_of(d)
    return call(M.as_strided, input, size=size, stride=stride, storage_offset=storage_offset)


_inplace_view(as_strided, "as_strided_")


@tensor_method
def unfold(self, dimension, size, step):
    """A view of every window of ``size`` elements along ``dimension``, ``step`` apart."""
    nd = self._data.ndim
    return call(M.unfold, self, dimension=_dim(dimension, nd), size=size, step=step)


# ---------------------------------------------------------------- diagonals, triangles

@_public
def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal with ``offset`` of the ``dim1``/``dim2`` planes (last dim)."""
    nd = input._data.ndim
    d1, d2 = M.check_diagonal_dims(nd, dim1, dim2)
    return call(M.diagonal, input, offset=offset, dim1=d1, dim2=d2)


@_function
def diagonal_copy(input, offset=0, dim1=0, dim2=1, *, out=None):
    """A copy of ``diagonal(input, offset, dim1, dim2)``."""
    nd = input._data.ndim
    d1, d2 = M.check_diagonal_dims(nd, dim1, dim2)
    return _finish(call(M.diagonal_copy, input, offset=offset, dim1=d1, dim2=d2), out)


@_public
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input whose diagonal (as ``diagonal`` selects it) is ``src``."""
    nd = input._data.ndim
    d1, d2 = M.check_diagonal_dims(nd, dim1, dim2)
    return call(M.diagonal_scatter, input, src, offset=offset, dim1=d1, dim2=d2)


@_public
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices in dims ``dim1``/``dim2`` whose ``offset`` diagonal holds input's last dim."""
    nd = input._data.ndim + 1
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return call(M.diag_embed, input, offset=offset, dim1=d1, dim2=d2)


@_public
def diag(input, diagonal=0, *, out=None):
    """1-D input: a matrix with it on the ``diagonal``; 2-D input: that diagonal (a copy)."""
    nd = input._data.ndim
    if nd == 1:
        r = call(M.diag_embed, input, offset=diagonal, dim1=0, dim2=1)
    elif nd == 2:
        r = call(M.diagonal_copy, input, offset=diagonal, dim1=0, dim2=1)
    else:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")
    return _finish(r, out)


@_public
def tril(input, diagonal=0, *, out=None):
    """The lower triangle (at and below ``diagonal``) of the last two dims; zeros elsewhere."""
    return _finish(call(M.tril, input, diagonal=diagonal), out)


@_public
def triu(input, diagonal=0, *, out=None):
    """The upper triangle (at and above ``diagonal``) of the last two dims; zeros elsewhere."""
    return _finish(call(M.triu, input, diagonal=diagonal), out)


@tensor_method
def tril_(self, diagonal=0):
    return assign(self, tril(self, diagonal))


@tensor_method
def triu_(self, diagonal=0):
    return assign(self, triu(self, diagonal))


def _finish(result, out):
    return result if out is None else write_out(out, result)


# ---------------------------------------------------------------- flip / roll / rot90

def _dims_arg(dims, nd, fn):
    if type(dims) is _int and 0 <= dims < nd:
        return (dims,)
    if isinstance(dims, _seq_types):
        out = tuple(_dim(d, nd) for d in dims)
    else:
        out = (_dim(dims, nd),)
    if len(set(out)) != len(out):
        for d in out:
            if out.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


@_function
def flip(input, dims):
    """A copy with the elements reversed along ``dims`` (torch.flip)."""
    return call(M.flip, input, dims=_dims_arg(dims, input._data.ndim, "flip"))


@tensor_method(name="flip")
def _flip_method(self, *dims, **kwargs):
    """Tensor.flip(*dims)."""
    dims = _varargs(dims, kwargs, "flip", "dims")
    if not dims:
        raise TypeError("flip() missing 1 required positional arguments: \"dims\"")
    if len(dims) == 1:
        dims = dims[0]
    return call(M.flip, self, dims=_dims_arg(dims, self._data.ndim, "flip"))


@_public
def fliplr(input):
    """Reverse the columns (dim 1); input must be at least 2-D."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return call(M.flip, input, dims=(1,))


@_public
def flipud(input):
    """Reverse the rows (dim 0); input must be at least 1-D."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return call(M.flip, input, dims=(0,))


@_public
def roll(input, shifts, dims=None):
    """Shift elements cyclically along ``dims`` (or over the flattened tensor)."""
    shifts = tuple(shifts) if isinstance(shifts, _seq_types) else (shifts,)
    shifts = tuple(operator.index(s) for s in shifts)
    nd = input._data.ndim
    if dims is None or (isinstance(dims, _seq_types) and not dims):
        if len(shifts) != 1:
            if not shifts:
                raise RuntimeError("`shifts` required")
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return call(M.roll, input, shifts=shifts, dims=())
    dims = tuple(dims) if isinstance(dims, _seq_types) else (dims,)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    return call(M.roll, input, shifts=shifts, dims=tuple(_dim(d, nd) for d in dims))


@_public
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from dims[0] to dims[1])."""
    dims = tuple(dims)
    nd = input._data.ndim
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = _dim(dims[0], nd), _dim(dims[1], nd)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return call(M.rot90, input, k=k % 4, dims=(d0, d1))


# ---------------------------------------------------------------- repeat / tile

@tensor_method
def repeat(self, *repeats, **kwargs):
    """Tile this tensor ``repeats[i]`` times along each dimension (Tensor.repeat)."""
    repeats = _varargs(repeats, kwargs, "repeat", "repeats")
    if not repeats:
        raise TypeError("repeat() missing 1 required positional arguments: \"repeats\"")
    repeats = _sizes(repeats, "repeat", "repeats")
    if len(repeats) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return call(M.repeat, self, repeats=repeats)


@_public
def tile(input, dims, *more):
    """``input.repeat(dims)`` with ``dims`` padded with leading 1s to input's rank."""
    dims = _sizes((dims,) + more if more else (dims,), "tile", "dims")
    pad = input._data.ndim - len(dims)
    if pad > 0:
        dims = (1,) * pad + dims
    return call(M.repeat, input, repeats=dims)


# ---------------------------------------------------------------- cat / stack

def _tensor_list(tensors, fn):
    if type(tensors) is not list and type(tensors) is not tuple:
        if isinstance(tensors, Tensor) or not isinstance(tensors, (tuple, list)):
            raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                            f"not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if type(t) is not Tensor and not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return tuple(tensors)


def _promoted(tensors):
    dt = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not dt:
            dt = D.promote_types(dt, t.dtype)
    return dt


@_function
def cat(tensors, dim=0, *, out=None):
    """Join tensors along ``dim``; dtypes are promoted; 1-D empty tensors are skipped."""
    tensors = _tensor_list(tensors, "cat")
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    ref = tensors[0]._data
    if ref.shape == (0,):
        ref = next((t._data for t in tensors if t._data.shape != (0,)), ref)
    nd = ref.ndim
    d = dim if type(dim) is _int and 0 <= dim < nd else _dim(dim, nd)
    return _finish(call(M.cat, *tensors, dim=d, dtype=_promoted(tensors)), out)


concat = concatenate = cat
__all__ += ["concat", "concatenate"]


@_function
def stack(tensors, dim=0, *, out=None):
    """Join same-shaped tensors along a new dimension ``dim``."""
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _dim(dim, tensors[0]._data.ndim + 1)
    return _finish(call(M.stack, *tensors, dim=d, dtype=_promoted(tensors)), out)


def _stack_via_cat(name, atleast, dim_of):
    def fn(tensors, *, out=None):
        tensors = _tensor_list(tensors, name)
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        ts = atleast(tensors)
        return cat(ts, dim_of(ts), out=out)
    fn.__name__ = name
    return fn


def _column_parts(tensors):
    return tuple(t.reshape(t._data.size, 1) if t._data.ndim <= 1 else t for t in tensors)


hstack = _stack_via_cat("hstack", lambda ts: atleast_1d(ts),
                        lambda ts: 0 if ts[0]._data.ndim == 1 else 1)
vstack = _stack_via_cat("vstack", lambda ts: atleast_2d(ts), lambda ts: 0)
dstack = _stack_via_cat("dstack", lambda ts: atleast_3d(ts), lambda ts: 2)
column_stack = _stack_via_cat("column_stack", _column_parts, lambda ts: 1)
row_stack = vstack
hstack.__doc__ = "Stack tensors horizontally (along dim 1; dim 0 for 1-D tensors)."
vstack.__doc__ = "Stack tensors vertically (dim 0) after making them at least 2-D."
dstack.__doc__ = "Stack tensors depthwise (dim 2) after making them at least 3-D."
column_stack.__doc__ = "Stack tensors as columns (0-D and 1-D inputs become columns)."
__all__ += ["hstack", "vstack", "dstack", "column_stack", "row_stack"]


# ---------------------------------------------------------------- split / chunk / unbind

def _mark_views(outs, base):
    for o in outs:
        mark_view(o, base)
    return outs


@tensor_method(name="split")
def _split_method(self, split_size, dim=0):
    """Tensor.split(split_size, dim=0)."""
    return split(self, split_size, dim)


@_function
def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along ``dim``: of equal size (the last may be smaller) for
    an int, or of the given sizes for a list."""
    nd = tensor._data.ndim
    if nd == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _dim(dim, nd)
    s = split_size_or_sections
    if isinstance(s, _seq_types):
        sizes = _sizes((s,), "split_with_sizes", "split_sizes")
        return _mark_views(call(M.split_with_sizes, tensor, sizes=sizes, dim=d), tensor)
    s = operator.index(s)
    n = tensor._data.shape[d]
    if s < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
    if s == 0 and n != 0:
        raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {n}")
    return _mark_views(call(M.split, tensor, split_size=s, dim=d), tensor)


@_public
def split_with_sizes(input, split_sizes, dim=0):
    """Views of consecutive pieces of ``split_sizes`` along ``dim``."""
    d = _dim(dim, input._data.ndim)
    sizes = _sizes((split_sizes,), "split_with_sizes", "split_sizes")
    return _mark_views(call(M.split_with_sizes, input, sizes=sizes, dim=d), input)


@_public
def chunk(input, chunks, dim=0):
    """Split into ``chunks`` views of equal size (the last may be smaller, or fewer chunks)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    d = _dim(dim, nd)
    n = input._data.shape[d]
    size = (n + chunks - 1) // chunks
    if size == 0 and n == 0:
        return _mark_views(call(M.split_with_sizes, input, sizes=(0,) * chunks, dim=d), input)
    return _mark_views(call(M.split, input, split_size=size, dim=d), input)


@_public
def unbind(input, dim=0):
    """Views of every slice along ``dim``, without that dimension."""
    nd = input._data.ndim
    if nd == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return _mark_views(call(M.unbind, input, dim=_dim(dim, nd)), input)


# ---------------------------------------------------------------- movedim / atleast

@_public
def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination`` (others keep their order)."""
    nd = input._data.ndim
    if type(source) is _int and type(destination) is _int:          # one dim: a quick order
        s, d = _dim(source, nd), _dim(destination, nd)
        order = [i for i in range(nd) if i != s]
        order.insert(d, s)
        return call(M.permute, input, dims=tuple(order))
    src = tuple(source) if isinstance(source, _seq_types) else (source,)
    dst = tuple(destination) if isinstance(destination, _seq_types) else (destination,)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)")
    src = tuple(_dim(d, nd) for d in src)
    dst = tuple(_dim(d, nd) for d in dst)
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(source)})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(destination)})")
    order = [-1] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    order = tuple(o if o >= 0 else next(rest) for o in order)
    return call(M.permute, input, dims=order)


moveaxis = movedim
Tensor.moveaxis = movedim
__all__.append("moveaxis")


def _atleast(fn, make):
    def atleast(*tensors):
        if len(tensors) == 1:
            t = tensors[0]
            if isinstance(t, Tensor):
                return make(t)
            tensors = tuple(t)
        return tuple(make(t) for t in tensors)
    atleast.__name__ = fn
    return atleast


def _1d(t):
    return _reshape(t, (1,)) if t._data.ndim == 0 else t


def _2d(t):
    nd = t._data.ndim
    if nd == 0:
        return _reshape(t, (1, 1))
    return unsqueeze(t, 0) if nd == 1 else t


def _3d(t):
    nd = t._data.ndim
    if nd == 0:
        return _reshape(t, (1, 1, 1))
    if nd == 1:
        return unsqueeze(unsqueeze(t, 0), -1)
    return unsqueeze(t, -1) if nd == 2 else t


atleast_1d = _atleast("atleast_1d", _1d)
atleast_2d = _atleast("atleast_2d", _2d)
atleast_3d = _atleast("atleast_3d", _3d)
atleast_1d.__doc__ = "The tensor(s) viewed with at least one dimension."
atleast_2d.__doc__ = "The tensor(s) viewed with at least two dimensions."
atleast_3d.__doc__ = "The tensor(s) viewed with at least three dimensions."
__all__ += ["atleast_1d", "atleast_2d", "atleast_3d"]


# ---------------------------------------------------------------- broadcasting, meshgrid

@_function
def broadcast_shapes(*shapes):
    """The shape tensors of ``shapes`` broadcast to (torch.broadcast_shapes)."""
    norm = []
    for s in shapes:
        s = (s,) if isinstance(s, _int) else tuple(s)
        for n in s:
            if n < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
        norm.append(s)
    ndim = max((len(s) for s in norm), default=0)
    out = [1] * ndim
    for s in norm:
        for i in range(-1, -len(s) - 1, -1):
            n = s[i]
            if n == 1 or n == out[i]:
                continue
            if out[i] == 1:
                out[i] = n
                continue
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {n} at {i}! Mismatching argument "
                f"at index {norm.index(s)} had {tuple(s)}; but expected shape should be "
                f"broadcastable to {out}")
    return Size(out)


@_function
def broadcast_tensors(*tensors):
    """Views of ``tensors`` expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if not tensors:
        return ()
    shape = tensors[0]._data.shape
    for t in tensors[1:]:
        shape = check_broadcast(shape, t._data.shape)
    return tuple(t if t._data.shape == shape else call(M.expand, t, shape=shape) for t in tensors)


@_function
def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-D/1-D ``tensors`` (``indexing`` 'ij' or 'xy'); views."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('torch.meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f"{indexing}")
    dt = tensors[0].dtype
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
        if t.dtype is not dt:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    swap = indexing == "xy" and len(tensors) >= 2
    ts = list(tensors)
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t._data.size for t in ts)
    n = len(ts)
    grids = []
    for i, t in enumerate(ts):
        view_shape = (1,) * i + (-1,) + (1,) * (n - i - 1)
        grids.append(expand(view(t, view_shape), shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# ---------------------------------------------------------------- slices: narrow, tensor_split

def clamp_slice(n, start, end):
    """Python-style slice bounds for a dimension of size ``n``, clamped as PyTorch does."""
    if start is None:
        start = 0
    elif start < 0:
        start = max(start + n, 0)
    start = min(start, n)
    if end is None:
        end = n
    elif end < 0:
        end = max(end + n, 0)
    end = min(max(end, start), n)
    return start, end


def _slice(x, dim, start, end, step=1):
    return call(M.slice, x, dim=dim, start=start, end=end, step=step)


@_public
def narrow(input, dim, start, length):
    """A view of ``length`` elements of ``dim`` from ``start`` (negative counts from the end)."""
    d, start = _narrow_args(input, dim, start, length)
    return _slice(input, d, start, start + length)


def _narrow_args(input, dim, start, length):
    """(dim, start) of a narrow, both made non-negative, with PyTorch's errors."""
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = _dim(dim, nd)
    n = input._data.shape[d]
    start = operator.index(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return d, start


@_public
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input whose slice ``[start:end:step]`` along ``dim`` is ``src``."""
    d = _dim(dim, input._data.ndim)
    start, end = clamp_slice(input._data.shape[d], start, end)
    return call(M.slice_scatter, input, src, dim=d, start=start, end=end, step=step)


@_public
def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None,
                 tensor_indices_or_sections=None):
    """Views splitting ``dim`` into n near-equal sections (an int) or at the given indices
    (PyTorch's overloads name them ``sections``, ``indices``, ``tensor_indices_or_sections``)."""
    indices_or_sections = _one_of("tensor_split", indices_or_sections, sections, indices,
                                  tensor_indices_or_sections)
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype is not D.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of "
                               f"long, but got {type_name(ios.dtype)}")
        if ios._data.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor with "
                               f"{ios._data.ndim} dims")
        ios = ios.item() if ios._data.ndim == 0 else ios.tolist()
    d = _dim(dim, nd)
    n = input._data.shape[d]
    if isinstance(ios, _seq_types):
        bounds = [0] + [operator.index(i) for i in ios] + [n]
        return tuple(_slice(input, d, *clamp_slice(n, a, b if b is not None else n))
                     for a, b in zip(bounds[:-1], bounds[1:]))
    sections = operator.index(ios)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    size, extra = divmod(n, sections)
    out = []
    start = 0
    for i in range(sections):
        length = size + (1 if i < extra else 0)
        out.append(_slice(input, d, start, start + length))
        start += length
    return tuple(out)


# ---------------------------------------------------------------- repeat_interleave

def _repeat_index(repeats, alone=False):
    """``repeat_interleave(repeats)`` of a 1-D integer tensor: each i repeated repeats[i] times."""
    r = repeats._data
    if r.ndim > 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat" if alone else
                           "repeats must be 0-dim or 1-dim tensor")
    if repeats.dtype not in (D.int32, D.int64):
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{type_name(repeats.dtype)}'")
    r = r.reshape(-1)
    if r.size and r.min() < 0:
        raise RuntimeError("repeats can not be negative")
    # alone, the result has the repeats' dtype (an index into another tensor: int64)
    return Tensor._wrap(np.repeat(np.arange(r.size, dtype=r.dtype if alone else np.int64), r))


@_public
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (an int, or a tensor of per-element counts) along
    ``dim`` (the flattened input when None).  With only a tensor: the repeated indices."""
    if repeats is None:
        return _repeat_index(input, alone=True)
    x = flatten(input) if dim is None else input
    d = 0 if dim is None else _dim(dim, x._data.ndim)
    if isinstance(repeats, Tensor):
        if x._data.ndim == 0:
            x = _reshape(x, (1,))
        n = x._data.shape[d]
        r = repeats
        if r._data.size == 1 and r._data.ndim <= 1:      # one count for every element
            r = expand(_reshape(r, (1,)), (n,))
        elif r._data.ndim == 1 and r._data.size != n:
            raise RuntimeError("repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {r._data.size} and input.size({d}) = {n}")
        return x.index_select(d, _repeat_index(r))
    repeats = operator.index(repeats)
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    if x._data.ndim == 0:
        x = _reshape(x, (1,))
    shape = x._data.shape
    wide = expand(unsqueeze(x, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
    return flatten(wide.clone(), d, d + 1)


@_public
def narrow_copy(input, dim, start, length):
    """A copy of ``narrow(input, dim, start, length)``."""
    d, start = _narrow_args(input, dim, start, length)
    return call(M.narrow_copy, input, dim=d, start=start, length=length)


@_public
def ravel(input):
    """The elements as a 1-D tensor: a view when contiguous, otherwise a contiguous copy's view."""
    return view(input.contiguous(), -1)


def _one_of(fn, *given):
    """The one split argument given, under whichever of its overloads' names."""
    found = [g for g in given if g is not None]
    if len(found) != 1:
        raise TypeError(f"{fn}() expects exactly one of indices_or_sections, sections, indices")
    return found[0]


def _split_family(name, dim_of, min_dims):
    def fn(input, indices_or_sections=None, *, sections=None, indices=None):
        indices_or_sections = _one_of(name, indices_or_sections, sections, indices)
        nd = input._data.ndim
        if nd < min_dims:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, "
                               f"but got a tensor with {nd} dimensions!")
        d = dim_of(nd)
        ios = indices_or_sections
        if not isinstance(ios, (Tensor,) + _seq_types):
            n = input._data.shape[d]
            ios = operator.index(ios)
            if ios == 0 or n % ios:
                raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                                   f"size of the dimension {n} is not divisible by the split_size "
                                   f"{ios}!")
        return tensor_split(input, ios, d)
    fn.__name__ = name
    return _public(fn)


hsplit = _split_family("hsplit", lambda nd: 0 if nd == 1 else 1, 1)
vsplit = _split_family("vsplit", lambda nd: 0, 2)
dsplit = _split_family("dsplit", lambda nd: 2, 3)
hsplit.__doc__ = "tensor_split along dim 1 (dim 0 for 1-D input); sections must divide evenly."
vsplit.__doc__ = "tensor_split along dim 0 of an at least 2-D tensor."
dsplit.__doc__ = "tensor_split along dim 2 of an at least 3-D tensor."

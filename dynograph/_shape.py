"""Public shape and movement functions (``dynograph.reshape``, ``Tensor.view``, ``cat`` ...).

Each function parses PyTorch's signature (sizes as varargs or one sequence, negative
dims, ``-1`` inference) and calls a primitive of ``compiler/ops/movement.py``; the rest
(``flatten``, ``movedim``, ``hstack``, ``meshgrid`` ...) are compositions of those, chosen
so that ``grad_fn`` names match PyTorch's.
"""
import builtins
import operator
import warnings

from dynograph.compiler.ops import movement as M
from dynograph.compiler.ops.core import wrap_dim
from dynograph.runtime import dtypes as D
from ._dispatch import call
from ._tensor import Tensor, Size, tensor_method

__all__ = []

_int = builtins.int
_seq_types = (tuple, list, Size)


def _public(fn):
    """Export ``fn`` as dynograph.<name> and Tensor.<name>."""
    __all__.append(fn.__name__)
    tensor_method(fn)
    return fn


def _function(fn):
    """Export ``fn`` as dynograph.<name> only."""
    __all__.append(fn.__name__)
    return fn


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
    d = self._data
    if shape != d.shape:
        shape = M.infer_size(shape, d.size)
    return call(M.view, self, shape=shape)


@tensor_method
def view_as(self, other):
    """``self.view(other.size())``."""
    return view(self, other._data.shape)


def _reshape(x, shape):
    d = x._data
    if shape != d.shape:
        shape = M.infer_size(shape, d.size)
    if d.flags.c_contiguous or M.compute_stride(d.shape, M.elem_strides(d), shape) is not None:
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
def _reshape_method(self, *shape):
    """Tensor.reshape(*shape)."""
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


# ---------------------------------------------------------------- expand

@tensor_method
def expand(self, *sizes):
    """A stride-0 view repeating size-1 dimensions up to ``sizes`` (-1 keeps a size)."""
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
def _permute_method(self, *dims):
    """Tensor.permute(*dims)."""
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


swapaxes = swapdims = transpose
Tensor.swapaxes = Tensor.swapdims = transpose
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


Tensor.T = property(_T)
Tensor.mT = property(_matrix_transpose("mT", "tensor.mT"))
Tensor.mH = property(_matrix_transpose("mH", "tensor.mH"))
Tensor.H = property(_H)
_adjoint = _matrix_transpose("adjoint", "tensor.adjoint()")


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

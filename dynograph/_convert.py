"""Dtype, device and layout conversion: ``Tensor.to``, ``.type()``, ``.float()`` ..., ``clone``,
``contiguous``, ``copy_``, ``fill_``, ``zero_``, and the dtype queries (``result_type``,
``promote_types``, ``can_cast``, ``is_tensor``, ...).

Dtype conversion is the ``to_copy`` primitive (``ToCopyBackward0``), copies are ``clone``
(``CloneBackward0``); in-place writes that take part in autograd go through the ``copy``
primitive (``CopyBackwards``), whose rule sends the gradient to the source and zeros to
the overwritten value.
"""
import builtins

import numpy as np

from dynograph.compiler.ops import core
from dynograph.compiler.ops import creation as C
from dynograph._trace_hook import TRACE
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import CPU, as_device, device as _device
from dynograph.runtime.cuda_memory import DeviceArray
from ._device import cuda_index, fill, transfer
from ._dispatch import call
from ._inplace import check_inplace_leaf, check_no_internal_overlap, commit, writable, write
from ._tensor import Tensor, tensor_method
from .autograd.grad_mode import STATE

__all__ = ["layout", "strided", "memory_format", "contiguous_format", "preserve_format", "channels_last",
           "channels_last_3d", "result_type", "promote_types", "can_cast", "is_tensor",
           "is_floating_point", "is_nonzero", "numel", "get_default_dtype", "set_default_dtype"]

_PY_TYPES = {builtins.float: D.float64, builtins.int: D.int64, builtins.bool: D.bool}
_NUMBER = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)


# ---------------------------------------------------------------- layouts and memory formats

class layout:
    """A tensor layout; dynograph has only dense ``dynograph.strided`` tensors (the layout=
    argument of the factories accepts it and ignores it)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"dynograph.{self.name}"

    def __reduce__(self):
        return self.name


strided = layout("strided")


class memory_format:
    """A tensor memory layout (``dynograph.contiguous_format``, ``channels_last`` ...)."""

    __slots__ = ("name", "_key")

    def __init__(self, name, key):
        self.name = name
        self._key = key                 # the memory_format attribute of the op set

    def __repr__(self):
        return f"dynograph.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format", "contiguous")
preserve_format = memory_format("preserve_format", "preserve")
channels_last = memory_format("channels_last", "channels_last")
channels_last_3d = memory_format("channels_last_3d", "channels_last_3d")


def _format_key(fmt):
    if fmt is None:
        return "preserve"
    if isinstance(fmt, memory_format):
        return fmt._key
    raise TypeError(f"memory_format must be a dynograph.memory_format, not {type(fmt).__name__}")


def _in_format(a, key):
    """Whether array ``a`` already has the layout ``key`` asks for."""
    if key == "preserve":
        return True
    if key == "contiguous":
        return a.flags.c_contiguous or a.size <= 1
    rank = 4 if key == "channels_last" else 5
    if a.ndim != rank:
        return False
    return a.transpose((0,) + tuple(range(2, rank)) + (1,)).flags.c_contiguous


def _format_attrs(key):
    return {} if key == "preserve" else {"memory_format": key}


# ---------------------------------------------------------------- to / type

def _as_dtype(x):
    if type(x) is D.dtype:
        return x
    if isinstance(x, type):
        return _PY_TYPES.get(x)
    return None


def _pyname(x):
    """A value's type as PyTorch's argument errors print it: 'int', 'numpy.ndarray'."""
    kind = type(x)
    module = kind.__module__.split(".")[0]
    return kind.__name__ if module == "builtins" else f"{module}.{kind.__name__}"


def _type_label(x):
    if isinstance(x, Tensor):
        return "Tensor"
    if isinstance(x, D.dtype):
        return "dynograph.dtype"
    if isinstance(x, _device):
        return "dynograph.device"
    return _pyname(x)


_TO_SIGNATURES = (
    " * (dynograph.device device = None, dynograph.dtype dtype = None, bool non_blocking = False, "
    "bool copy = False, *, dynograph.memory_format memory_format = None)\n"
    " * (dynograph.dtype dtype, bool non_blocking = False, bool copy = False, *, "
    "dynograph.memory_format memory_format = None)\n"
    " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, "
    "dynograph.memory_format memory_format = None)\n")


def _bad_to(args, kwargs):
    got = [_type_label(a) for a in args] + [f"{k}={_type_label(v)}" for k, v in kwargs.items()]
    return TypeError("to() received an invalid combination of arguments - got "
                     f"({', '.join(got)}), but expected one of:\n" + _TO_SIGNATURES)


def _parse_to(args, kwargs):
    """(device, dtype, copy, memory_format key, non_blocking) from Tensor.to's three overloads."""
    kw = dict(kwargs)
    fmt = kw.pop("memory_format", None)
    first = args[0] if args else None
    if isinstance(first, Tensor) or "tensor" in kw:
        names = ("tensor", "non_blocking", "copy")
    elif _as_dtype(first) is not None:
        names = ("dtype", "non_blocking", "copy")
    else:
        names = ("device", "dtype", "non_blocking", "copy")
    if len(args) > len(names):
        raise _bad_to(args, kwargs)
    vals = dict(zip(names, args))
    for k, v in kw.items():
        if k not in names or k in vals:
            raise _bad_to(args, kwargs)
        vals[k] = v
    other = vals.get("tensor")
    if other is not None:
        if not isinstance(other, Tensor):
            raise _bad_to(args, kwargs)
        device, dtype = other.device, other.dtype
    else:
        device, dtype = vals.get("device"), vals.get("dtype")
        if device is not None and (isinstance(device, builtins.bool)
                                   or not isinstance(device, (str, builtins.int, _device))):
            raise _bad_to(args, kwargs)
        if dtype is not None:
            dtype = _as_dtype(dtype)
            if dtype is None:
                raise _bad_to(args, kwargs)
    for flag in ("non_blocking", "copy"):
        if not isinstance(vals.get(flag, False), builtins.bool):
            raise _bad_to(args, kwargs)
    return device, dtype, vals.get("copy", False), _format_key(fmt), vals.get("non_blocking", False)


@tensor_method
def to(self, *args, **kwargs):
    """Convert to a dtype and/or device: ``to(dtype)``, ``to(device, dtype)``, ``to(other)``.

    Returns ``self`` when nothing changes and ``copy`` is False.
    """
    if len(args) == 1 and not kwargs:
        arg = args[0]
        if type(arg) is D.dtype:                    # the common case
            if arg is FROM_NUMPY[self._data.dtype]:
                return self
            return call(C.to_copy, self, dtype=arg)
        if (arg == "cpu" or arg is CPU) and type(self._data) is not DeviceArray:
            return self
    device, dtype, copy, key, non_blocking = _parse_to(args, kwargs)
    if device is not None:
        device = as_device(device)          # raises the one clear error where CUDA is unavailable
        if device != self.device and not (device.index is None and device.type == self.device.type):
            moved = transfer(self, device, non_blocking)
            if dtype is None or dtype is moved.dtype:
                return moved
            return call(C.to_copy, moved, dtype=dtype, **_format_attrs(key))
    if dtype is None:
        dtype = self.dtype
    if not copy and dtype is self.dtype:         # nothing to convert: no copy, whatever the layout
        return self
    return call(C.to_copy, self, dtype=dtype, **_format_attrs(key))


FROM_NUMPY = D.FROM_NUMPY


def _legacy_dtype(name):
    """The dtype of a legacy type name: 'dynograph.FloatTensor', 'torch.cuda.LongTensor'."""
    parts = name.split(".")
    if len(parts) in (2, 3) and parts[0] in ("dynograph", "torch"):
        if len(parts) == 3:
            if parts[1] != "cuda":
                return None
            as_device("cuda")
        for dt in D.ALL_DTYPES:
            if dt.tensor_type == parts[-1]:
                return dt
    return None


@tensor_method(name="type")
def type_(self, dtype=None, non_blocking=False, **kwargs):
    """Without arguments the type name ('dynograph.FloatTensor'); otherwise convert to it."""
    if dtype is None:
        return f"dynograph.{self.dtype.tensor_type}"
    if isinstance(dtype, str):
        dt = _legacy_dtype(dtype)
        if dt is None:
            raise ValueError(f"invalid type: '{dtype}'")
    elif type(dtype) is D.dtype:
        dt = dtype
    elif isinstance(dtype, type) and type(getattr(dtype, "dtype", None)) is D.dtype:
        dt = dtype.dtype                    # a legacy class such as dynograph.FloatTensor
    else:
        raise TypeError("dtype must be a type, str, or dtype object")
    if dt is self.dtype:
        return self
    return call(C.to_copy, self, dtype=dt)


@tensor_method
def type_as(self, other):
    """This tensor converted to ``other``'s dtype."""
    return to(self, other.dtype)


def _dtype_method(name, dt):
    def method(self, memory_format=preserve_format):
        key = _format_key(memory_format)
        if dt is FROM_NUMPY[self._data.dtype]:
            return self
        return call(C.to_copy, self, dtype=dt, **_format_attrs(key))
    method.__name__ = name
    method.__doc__ = f"``self.to({dt})``"
    tensor_method(method)


for _name, _dt in (("float", D.float32), ("double", D.float64), ("half", D.float16),
                   ("bfloat16", D.bfloat16), ("long", D.int64), ("int", D.int32),
                   ("short", D.int16), ("char", D.int8), ("byte", D.uint8), ("bool", D.bool)):
    _dtype_method(_name, _dt)


@tensor_method
def cpu(self, memory_format=preserve_format):
    """This tensor in host memory: ``self`` when it is there already, else a copy."""
    if type(self._data) is not DeviceArray:
        return self
    return transfer(self, CPU)


@tensor_method
def cuda(self, device=None, non_blocking=False, memory_format=preserve_format):
    """This tensor on CUDA device ``device`` (the current one by default): ``self`` when it is
    there already, else a copy; the one clear error where CUDA is unavailable."""
    index = cuda_index(device)
    if self.is_cuda and self._data.index == index:
        return self
    return transfer(self, as_device(f"cuda:{index}"), non_blocking)


# ---------------------------------------------------------------- copies

@tensor_method
def clone(self, *args, memory_format=preserve_format):
    """A copy with its own memory (strides kept for dense tensors, as in PyTorch)."""
    if args:
        raise TypeError(f"clone() takes 0 positional arguments but {len(args)} was given")
    return call(C.clone, self, **_format_attrs(_format_key(memory_format)))


@tensor_method
def contiguous(self, memory_format=contiguous_format):
    """``self`` if already laid out in ``memory_format``, else a copy that is."""
    key = _format_key(memory_format)
    if _in_format(self._data, "contiguous" if key == "preserve" else key):
        return self
    if key == "preserve":
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return call(C.clone, self, memory_format=key)


def copy_recorded(self, src):
    """``self.copy_(src)`` when autograd records it.  ``commit`` gives ``self`` (or the base
    it is a view of) a history in which src's values replace the old ones."""
    return commit(self, src)


def records_write(self, src):
    """Whether autograd records a write of ``src`` into ``self`` (integer results have no
    gradient, whatever their source)."""
    if not STATE.grad_enabled:
        return False
    if self.requires_grad:
        return True
    return isinstance(src, Tensor) and src.requires_grad and self.is_floating_point()


def _spec(t):
    return core.TensorSpec(t._data.shape, t.dtype)


@tensor_method
def copy_(self, src, non_blocking=False):
    """Write ``src`` (broadcast, converted to this dtype) into this tensor."""
    if not isinstance(src, Tensor):
        if isinstance(src, _NUMBER):
            return fill_(self, src)
        raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {_pyname(src)}")
    if not isinstance(non_blocking, builtins.bool):
        raise TypeError("copy_(): argument 'non_blocking' (position 2) must be bool, "
                        f"not {_pyname(non_blocking)}")
    check_inplace_leaf(self)
    check_no_internal_overlap(self)
    if records_write(self, src):
        return copy_recorded(self, src)
    dst, data = self._data, src._data
    if data.shape != dst.shape:
        C.copy.meta(_spec(self), _spec(src))      # raises PyTorch's broadcast error
    if type(dst) is DeviceArray or type(data) is DeviceArray:     # a cuda tensor
        if TRACE.tracer is not None:
            TRACE.tracer.write(self, src)
        write(dst, data)
        self._bump_version()
        return self
    if data.dtype != dst.dtype:
        data = C.cast(data, dst.dtype)
    if TRACE.tracer is not None:
        TRACE.tracer.write(self, src)
    dst[...] = data
    self._bump_version()
    return self


def _fill_value(value):
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
        return value
    if isinstance(value, (np.number, np.bool_)):
        return value.item()
    if not isinstance(value, _NUMBER):
        name = type(value).__name__
        raise TypeError(
            f"fill_() received an invalid combination of arguments - got ({name}), but expected "
            f"one of:\n * (Tensor value)\n      didn't match because some of the arguments have "
            f"invalid types: (!{name}!)\n * (Number value)\n      didn't match because some of "
            f"the arguments have invalid types: (!{name}!)\n")
    return value


@tensor_method
def fill_(self, value):
    """Fill with one value (a number or a 0-dim tensor)."""
    value = _fill_value(value)
    check_inplace_leaf(self)
    if isinstance(value, Tensor):
        if records_write(self, value):
            return copy_recorded(self, value)
        if TRACE.tracer is not None:    # the value stays a graph value (no .item())
            TRACE.tracer.write(self, value)
            writable(self._data)[...] = value._data
            self._bump_version()
            return self
        value = value.item()
    C.check_scalar(value, self.dtype)
    if records_write(self, None):
        return copy_recorded(self, Tensor._wrap(np.array(value, dtype=self._data.dtype)))
    dst = writable(self._data)                      # fill_ may write an expanded tensor
    if TRACE.tracer is not None:
        TRACE.tracer.write(self, value)
    if type(dst) is DeviceArray:
        fill(dst, value)
        self._bump_version()
        return self
    try:
        dst.fill(value)
    except OverflowError:                           # -1 into uint8 wraps, as in PyTorch
        dst.fill(np.array(value).astype(self._data.dtype))
    self._bump_version()
    return self


@tensor_method
def zero_(self):
    """Fill with zeros."""
    check_inplace_leaf(self)
    if records_write(self, None):
        return fill_(self, 0)
    if TRACE.tracer is not None:
        TRACE.tracer.write(self, 0)
    if type(self._data) is DeviceArray:
        fill(self._data, 0)
    else:
        writable(self._data).fill(0)
    self._bump_version()
    return self


# ---------------------------------------------------------------- dtype queries

def _need_tensor(fn, x, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, "
                        f"not {type(x).__name__}")


def _need_dtype(fn, x, name, pos):
    if type(x) is not D.dtype:
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be dynograph.dtype, "
                        f"not {type(x).__name__}")


def result_type(tensor, other):
    """The dtype an arithmetic op on ``tensor`` and ``other`` produces (torch.result_type)."""
    for x in (tensor, other):
        if not isinstance(x, (Tensor, builtins.int, builtins.float, builtins.bool)):
            raise TypeError(
                "result_type() received an invalid combination of arguments - got "
                f"({_type_label(tensor)}, {_type_label(other)}), but expected one of:\n"
                " * (Tensor tensor, Tensor other)\n * (Number scalar, Tensor tensor)\n"
                " * (Tensor tensor, Number other)\n * (Number scalar1, Number scalar2)\n")
    return core.result_type(tensor, other)


def promote_types(type1, type2):
    """The smallest dtype both dtypes convert to without losing category."""
    _need_dtype("promote_types", type1, "type1", 1)
    _need_dtype("promote_types", type2, "type2", 2)
    return D.promote_types(type1, type2)


def can_cast(from_, to):
    """Whether PyTorch's casting rule allows writing ``from_`` values into ``to``."""
    _need_dtype("can_cast", from_, "from_", 1)
    _need_dtype("can_cast", to, "to", 2)
    return core.can_cast(from_, to)


def is_tensor(obj):
    """True for dynograph tensors (and their subclasses, such as parameters)."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether ``input``'s dtype is a floating type."""
    _need_tensor("is_floating_point", input)
    return input.dtype.is_floating_point


@tensor_method
def is_nonzero(input):
    """The truth value of a one-element tensor."""
    _need_tensor("is_nonzero", input)
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break("Tensor.is_nonzero() lets a tensor's value steer Python control flow")
    n = input._data.size
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous" if n
                           else "Boolean value of Tensor with no values is ambiguous")
    return builtins.bool(input._data.reshape(()) != 0)


def numel(input):
    """The number of elements of ``input``."""
    _need_tensor("numel", input)
    return input._data.size


get_default_dtype = D.get_default_dtype


def set_default_dtype(d):
    """Make ``d`` (a floating dtype) what float data and factories default to."""
    if type(d) is not D.dtype:
        raise TypeError("invalid dtype object: only floating-point types are supported as the "
                        "default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(d)

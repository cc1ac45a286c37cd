"""Creation functions: tensor, as_tensor, from_numpy, zeros, ones, full, empty, the ``*_like``
and ``Tensor.new_*`` forms, arange, linspace, logspace, eye, and the legacy constructors
(``dynograph.FloatTensor(3, 4)``, ``LongTensor([1, 2])``).

(Random creation lives in _random.py.)  Every factory builds its values with one
creation primitive (``full``, ``empty``, ``arange`` ...), so a traced program records it
as a constant node.
"""
import builtins
import math
import warnings

import numpy as np

from dynograph.compiler.ops import creation as C
from dynograph.compiler.ops.core import type_name
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import as_device, device as _device
from ._dispatch import call
from ._inplace import write_out
from ._tensor import Size, Tensor, tensor_method

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "full", "empty",
           "scalar_tensor",
           "empty_strided", "zeros_like", "ones_like", "full_like", "empty_like", "arange", "range",
           "linspace", "logspace", "eye", "FloatTensor", "DoubleTensor", "HalfTensor",
           "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
           "ByteTensor", "BoolTensor"]

_INTS = (builtins.int, np.integer)
_NUMBERS = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)
_PLAIN = frozenset((builtins.float, builtins.int, builtins.bool))


def tname(x):
    """A value's type as PyTorch's argument errors name it."""
    if isinstance(x, Tensor):
        return "Tensor"
    if isinstance(x, (D.dtype, _device)):
        return f"dynograph.{type(x).__name__}"
    return type(x).__name__


def _cuda_of(t):
    """``t``'s device where it is a CUDA one (what new tensors made from ``t`` take), else None."""
    return t.device if t.is_cuda else None


def finish_created(t, requires_grad, out=None, device=None):
    """Apply ``device`` / ``requires_grad`` / ``out=`` to a freshly created (host) tensor."""
    if device is not None:
        device = as_device(device)
        if device.type == "cuda":
            t = t.to(device)
    elif out is not None and out.is_cuda:
        t = t.to(out.device)
    if requires_grad:
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad = True
    if out is not None:
        return write_out(out, t)
    return t


_PY_DTYPES = {builtins.float: D.float64, builtins.int: D.int64, builtins.bool: D.bool}


def dtype_arg(dtype):
    """A ``dtype=`` argument: a dynograph dtype, None, or a Python type (float is float64)."""
    if dtype is None or type(dtype) is D.dtype:
        return dtype
    if dtype in _PY_DTYPES:
        return _PY_DTYPES[dtype]
    raise TypeError(f"argument 'dtype' must be dynograph.dtype, not {tname(dtype)}")


def out_dtype(dtype, out):
    """The result dtype of a factory called with ``out=``: out's own, unless told otherwise."""
    if type(dtype) is not D.dtype:
        dtype = dtype_arg(dtype)
    if out is None:
        return dtype
    if dtype is None:
        return out.dtype
    if dtype is not out.dtype:
        raise RuntimeError(f"dtype {type_name(dtype)} does not match dtype of out parameter "
                           f"({type_name(out.dtype)})")
    return dtype


# ---------------------------------------------------------------- sizes

def as_int(x):
    """``x`` as a Python int if it is an integer (numpy integer, integer 0-dim tensor), else None."""
    if type(x) is builtins.int:
        return x
    if isinstance(x, builtins.bool):
        return None
    if isinstance(x, builtins.int):         # a size traced for the user's code (SizeInt)
        return builtins.int.__int__(x)
    if isinstance(x, np.integer):
        return builtins.int(x)
    if isinstance(x, Tensor) and x._data.ndim == 0 and x._data.dtype.kind in "iu":
        return builtins.int(x._data)
    return None


def _negative(shape, fn):
    for s in shape:
        if s < 0:
            if fn == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {s}: {list(shape)}")


def parse_size(args, size, fn):
    """The shape from ``fn(*args)`` / ``fn(size=...)``: ints as varargs, or one sequence."""
    if size is not None:
        if args:
            raise TypeError(f"{fn}() got multiple values for argument 'size'")
        if not isinstance(size, (tuple, list)):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not {tname(size)}")
        args = (size,)
    if not args:
        raise TypeError(f"{fn}() missing 1 required positional arguments: \"size\"")
    if len(args) == 1:
        seq = args[0]
        if isinstance(seq, (tuple, list)):
            shape = []
            for i, s in enumerate(seq):
                n = as_int(s)
                if n is None:
                    raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, "
                                    f"but found element of type {tname(s)} at pos {i}")
                shape.append(n)
        else:
            n = as_int(seq)
            if n is None:
                raise TypeError(
                    f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {tname(seq)}")
            shape = [n]
    else:
        shape = []
        for i, s in enumerate(args):
            n = as_int(s)
            if n is None:
                if isinstance(args[0], (tuple, list)):
                    raise TypeError(f"{fn}() takes 1 positional argument but {len(args)} were given")
                raise TypeError(f"{fn}(): argument 'size' failed to unpack the object at pos "
                                f"{i + 1} with error \"type must be tuple of ints,but got {tname(s)}\"")
            shape.append(n)
    shape = tuple(shape)
    _negative(shape, fn)
    return shape


def sequence_size(size, fn):
    """A size that must be a sequence (``full``, ``new_full``)."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {tname(size)}")
    return parse_size((size,), None, fn)


# ---------------------------------------------------------------- zeros, ones, full, empty

def _filled(shape, value, dtype, device, requires_grad, out, strides=None):
    if device is not None:
        as_device(device)
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    if strides is None:
        t = call(C.full, shape=shape, fill_value=value, dtype=dtype)
    else:
        t = call(C.full, shape=shape, fill_value=value, dtype=dtype, strides=strides)
    return finish_created(t, requires_grad, out, device)


def zeros(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
          requires_grad=False):
    """A tensor of zeros: ``zeros(2, 3)``, ``zeros((2, 3))``, ``zeros(size=[2, 3])``."""
    return _filled(parse_size(args, size, "zeros"), 0, dtype, device, requires_grad, out)


def ones(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    """A tensor of ones."""
    return _filled(parse_size(args, size, "ones"), 1, dtype, device, requires_grad, out)


def _fill_scalar(value, fn):
    """A fill value as a Python number (0-dim tensors give their item)."""
    if isinstance(value, Tensor) and value._data.ndim == 0:
        return value.item()
    if isinstance(value, (np.number, np.bool_)):
        return value.item()
    if not isinstance(value, _NUMBERS + (builtins.complex,)):
        raise TypeError(f"{fn}(): argument 'fill_value' (position 2) must be Number, not {tname(value)}")
    return value


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    """A tensor filled with ``fill_value``; its dtype follows the value (bool, int64, float)."""
    shape = sequence_size(size, "full")
    value = _fill_scalar(fill_value, "full")
    dtype = out_dtype(dtype, out)
    if dtype is None:
        dtype = D.python_scalar_dtype(value)
    C.check_scalar(value, dtype)
    if isinstance(value, builtins.complex) and not dtype.is_complex:
        value = value.real          # checked above: a real value written as complex
    return _filled(shape, value, dtype, device, requires_grad, out)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    """A 0-dim tensor holding the number ``s`` (in the default dtype unless told otherwise)."""
    if isinstance(s, Tensor) and s._data.ndim == 0:
        s = s.item()
    elif isinstance(s, (np.number, np.bool_)):
        s = s.item()
    elif not isinstance(s, _NUMBERS):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not {tname(s)}")
    dtype = dtype_arg(dtype) or D.get_default_dtype()
    C.check_scalar(s, dtype)
    return _filled((), s, dtype, device, requires_grad, None)


def _memory_strides(memory_format, shape):
    """The element strides of a channels-last memory format (None for contiguous_format)."""
    name = getattr(memory_format, "name", "contiguous_format")
    if name in ("channels_last", "channels_last_3d"):
        rank = 4 if name == "channels_last" else 5
        if len(shape) != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {name} format")
        # channels innermost, then width, height (and depth), batch outermost; unlike
        # contiguous strides, PyTorch's multiply size-0 dimensions in as they are
        strides, step = [0] * rank, 1
        for d in (1,) + tuple(builtins.range(rank - 1, 1, -1)) + (0,):
            strides[d] = step
            step *= shape[d]
        return tuple(strides)
    return None


def _empty(shape, dtype, device, requires_grad, out, strides=None):
    if device is not None:
        as_device(device)
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    if strides is None:
        t = call(C.empty, shape=shape, dtype=dtype)
    else:
        t = call(C.empty, shape=shape, dtype=dtype, strides=strides)
    return finish_created(t, requires_grad, out, device)


def empty(*args, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None):
    """An uninitialized tensor."""
    shape = parse_size(args, size, "empty")
    strides = None if memory_format is None else _memory_strides(memory_format, shape)
    return _empty(shape, dtype, device, requires_grad, out, strides)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialized tensor with the given element strides."""
    shape = sequence_size(size, "empty_strided")
    stride = tuple(builtins.int(s) for s in stride)
    if len(stride) != len(shape):
        raise RuntimeError("mismatch in length of strides and shape")
    storage = 0 if 0 in shape else 1 + builtins.sum((n - 1) * s for n, s in zip(shape, stride))
    buf = _empty((storage,), dtype, device, False, None)._data
    item = buf.itemsize
    t = Tensor._wrap(np.lib.stride_tricks.as_strided(buf, shape, tuple(s * item for s in stride)))
    return finish_created(t, requires_grad, device=device)


# ---------------------------------------------------------------- *_like

def like_strides(input, memory_format):
    """The element strides of a ``*_like`` result (None: contiguous): under preserve_format
    those of a preserve_format copy (PyTorch's empty_like), else the format's own."""
    a = input._data
    name = getattr(memory_format, "name", "preserve_format")
    if name == "preserve_format":
        if a.flags.c_contiguous and a.size and 1 not in a.shape:
            return None
        return C.preserved_strides(a)
    return _memory_strides(memory_format, a.shape)


def check_input(input, fn):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {tname(input)}")


def _like(fn, input, value, dtype, device, requires_grad, memory_format):
    check_input(input, fn)
    # cuda tensors are made contiguous (device arrays have no preserved layouts yet)
    strides = None if input.is_cuda else like_strides(input, memory_format)
    device = device or _cuda_of(input)
    dtype = dtype_arg(dtype) or input.dtype
    if value is None:
        return _empty(tuple(input._data.shape), dtype, device, requires_grad, None, strides)
    return _filled(tuple(input._data.shape), value, dtype, device, requires_grad, None, strides)


def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, pin_memory=False):
    """Zeros with ``input``'s shape, dtype and layout."""
    return _like("zeros_like", input, 0, dtype, device, requires_grad, memory_format)


def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):
    """Ones with ``input``'s shape, dtype and layout."""
    return _like("ones_like", input, 1, dtype, device, requires_grad, memory_format)


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, pin_memory=False):
    """An uninitialized tensor with ``input``'s shape, dtype and layout."""
    return _like("empty_like", input, None, dtype, device, requires_grad, memory_format)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):
    """``fill_value`` everywhere, with ``input``'s shape and dtype."""
    check_input(input, "full_like")
    value = _fill_scalar(fill_value, "full_like")
    C.check_scalar(value, dtype_arg(dtype) or input.dtype)
    return _like("full_like", input, value, dtype, device, requires_grad, memory_format)


# ---------------------------------------------------------------- ranges

def _number(x, fn, name, pos):
    """A range argument as a Python number (0-dim tensors give their item)."""
    if isinstance(x, Tensor):
        if x._data.ndim == 0:
            return x.item()
    elif isinstance(x, (np.number, np.bool_)):
        return x.item()
    elif isinstance(x, _NUMBERS):
        return x
    where = f" (position {pos})" if pos else ""
    raise TypeError(f"{fn}(): argument '{name}'{where} must be Number, not {tname(x)}")


def arange(start=None, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """``arange(end)`` or ``arange(start, end, step=1)``: int64 for integer arguments,
    the default dtype otherwise."""
    if end is None:
        if start is None:
            raise TypeError("arange() received an invalid combination of arguments - got (), but "
                            "expected one of:\n * (Number end, *, Tensor out = None, ...)\n"
                            " * (Number start, Number end, *, ...)\n"
                            " * (Number start, Number end, Number step = 1, *, ...)\n")
        start, end = 0, _number(start, "arange", "end", 1)
    else:
        start = 0 if start is None else _number(start, "arange", "start", 1)
        end = _number(end, "arange", "end", 2)
    step = _number(step, "arange", "step", 3)
    dtype = out_dtype(dtype, out)
    if dtype is None:
        integral = all(isinstance(v, builtins.int) for v in (start, end, step))
        dtype = D.int64 if integral else D.get_default_dtype()
    if device is not None:
        as_device(device)
    if dtype is D.bool:
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    t = call(C.arange, start=start, end=end, step=step, dtype=dtype)
    return finish_created(t, requires_grad, out, device)


_RANGE_DEPRECATED = ("dynograph.range is deprecated and will be removed in a future release because its "
                     "behavior is inconsistent with Python's range builtin. Instead, use dynograph.arange, "
                     "which produces values in [start, end).")


def range(start, end, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False):
    """Deprecated (use ``arange``): ``start, start + step, ...`` up to ``end`` *inclusive*, in the
    default dtype even for integer arguments."""
    warnings.warn(_RANGE_DEPRECATED, UserWarning, stacklevel=2)
    start, end, step = (_number(v, "range", n, i) for i, (n, v) in
                        enumerate((("start", start), ("end", end), ("step", step)), 1))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    count = math.floor((end - start) / step) + 1     # torch's size: a true division, floored
    if device is not None:
        as_device(device)
    # computed in float64 so that start + i * step rounds once, into the target dtype
    t = call(C.arange, start=0, end=count, step=1, dtype=D.float64).mul(step).add(start).to(dtype)
    return finish_created(t, requires_grad, out, device)


_SPACE_SIGNATURES = (
    " * (Tensor start, Tensor end, int steps, *, Tensor out = None, dynograph.dtype dtype = None, "
    "dynograph.layout layout = None, dynograph.device device = None, bool pin_memory = False, "
    "bool requires_grad = False)\n"
    " * (Number start, Tensor end, int steps, *, ...)\n"
    " * (Tensor start, Number end, int steps, *, ...)\n"
    " * (Number start, Number end, int steps, *, ...)\n")


def _space_args(fn, start, end, steps, extra=""):
    n = as_int(steps) if not isinstance(steps, Tensor) else None
    if n is None:
        got = [tname(start), tname(end)] + ([] if steps is None else [tname(steps)])
        raise TypeError(f"{fn}() received an invalid combination of arguments - got "
                        f"({', '.join(got)}), but expected one of:\n"
                        + _SPACE_SIGNATURES.replace("int steps", "int steps" + extra))
    return _number(start, fn, "start", 1), _number(end, fn, "end", 2), n


def linspace(start, end, steps=None, *, out=None, dtype=None, layout=None, device=None,
             pin_memory=False, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` (both included)."""
    start, end, steps = _space_args("linspace", start, end, steps)
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    if device is not None:
        as_device(device)
    t = call(C.linspace, start=start, end=end, steps=steps, dtype=dtype)
    return finish_created(t, requires_grad, out, device)


def logspace(start, end, steps=None, base=10.0, *, out=None, dtype=None, layout=None,
             device=None, pin_memory=False, requires_grad=False):
    """``base ** linspace(start, end, steps)``."""
    start, end, steps = _space_args("logspace", start, end, steps, ", float base = 10.0")
    base = _number(base, "logspace", "base", 4)
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    if device is not None:
        as_device(device)
    t = call(C.logspace, start=start, end=end, steps=steps, base=builtins.float(base), dtype=dtype)
    return finish_created(t, requires_grad, out, device)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
        requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere."""
    for name, v, pos in (("n", n, 1), ("m", m, 2)):
        if v is not None and as_int(v) is None:
            raise TypeError(f"eye(): argument '{name}' (position {pos}) must be int, not {tname(v)}")
    n = as_int(n)
    m = n if m is None else as_int(m)
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    if device is not None:
        as_device(device)
    t = call(C.eye, n=n, m=m, dtype=dtype)
    return finish_created(t, requires_grad, out, device)


# ---------------------------------------------------------------- tensor() from data

def _is_sequence(x):
    if isinstance(x, (list, tuple)):
        return True
    if isinstance(x, (str, bytes, dict, set, frozenset, Tensor, np.ndarray)):
        return False
    return hasattr(x, "__len__") and hasattr(x, "__getitem__")


def _scalar_dtype(x):
    """The dtype one leaf value brings (torch's infer_scalar_type), or an error."""
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, np.ndarray):
        return _np_dtype(x)
    if isinstance(x, np.generic):
        if isinstance(x, (np.str_, np.bytes_)):
            raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
        return _np_dtype(x)
    if isinstance(x, builtins.bool):
        return D.bool
    if isinstance(x, builtins.int):
        return D.int64
    if isinstance(x, builtins.float):
        return D.get_default_dtype()
    if isinstance(x, complex):
        return D.get_default_dtype().to_complex()
    if isinstance(x, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(x).__name__}")


def _infer(data, found):
    """The dtype torch.tensor infers for ``data``; ``found`` collects leaf kinds (tensors)."""
    if not _is_sequence(data):
        if isinstance(data, Tensor):
            found.add("tensor")
        elif isinstance(data, np.ndarray):
            found.add("array")
        return _scalar_dtype(data)
    if len(data) == 0:
        return D.get_default_dtype()
    kinds = set(map(type, data)) if isinstance(data, (list, tuple)) else None
    if kinds is not None and kinds <= _PLAIN:
        # a flat run of Python numbers: its dtype from the types present
        if builtins.float in kinds:
            return D.get_default_dtype()
        return D.int64 if builtins.int in kinds else D.bool
    dt = None
    for x in data:
        d = _infer(x, found)
        dt = d if dt is None else D.promote_types(dt, d)
    return dt


def _sizes(data):
    """The shape torch.tensor reads from ``data``: the lengths along the first elements."""
    shape = []
    x = data
    while True:
        if isinstance(x, np.ndarray):
            shape.extend(x.shape)
            return shape
        if isinstance(x, (str, bytes)) and shape:
            raise ValueError(f"too many dimensions '{type(x).__name__}'")
        if not _is_sequence(x):
            return shape
        shape.append(len(x))
        if len(x) == 0:
            return shape
        x = x[0]


def _validate(data, shape, dim, dtype):
    """Walk ``data`` against ``shape`` and raise torch's error for the first mismatch."""
    if dim == len(shape):
        if _is_sequence(data) or isinstance(data, np.ndarray):
            if dtype.is_floating_point:
                raise TypeError(f"must be real number, not {type(data).__name__}")
            raise TypeError(f"'{type(data).__name__}' object cannot be interpreted as an integer")
        if isinstance(data, Tensor) and data._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return
    if isinstance(data, np.ndarray):
        if tuple(data.shape) != tuple(shape[dim:]):
            raise ValueError(f"expected sequence of length {shape[dim]} at dim {dim} "
                             f"(got {data.shape[0] if data.ndim else 0})")
        return
    if not _is_sequence(data):
        raise TypeError("not a sequence")
    if len(data) != shape[dim]:
        raise ValueError(f"expected sequence of length {shape[dim]} at dim {dim} (got {len(data)})")
    for x in data:
        _validate(x, shape, dim + 1, dtype)


def _unwrap(data):
    """Replace tensors inside nested data by Python numbers."""
    if isinstance(data, Tensor):
        return data.item()
    if _is_sequence(data):
        return [_unwrap(x) for x in data]
    return data


def _check_fits(arr, dtype):
    """torch.tensor's overflow check when Python numbers become integers."""
    if dtype is D.bool or dtype.is_floating_point or dtype.is_complex or arr.size == 0:
        return
    low, high = C.LIMITS[dtype]
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr < low) | (arr > high)
    else:
        if dtype is D.int64:
            return
        bad = (arr < (low if dtype.is_signed else -high)) | (arr > high)
    if bad.any():
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


_warned_arrays = []


def _from_data(data, dtype):
    """A new numpy array from nested Python data, with torch's inference and errors."""
    shape = _sizes(data)
    found = set()
    inferred = _infer(data, found)
    if dtype is None:
        dtype = inferred
    if "array" in found and not _warned_arrays:
        _warned_arrays.append(True)            # PyTorch says it once per process
        warnings.warn(
            "Creating a tensor from a list of numpy.ndarrays is extremely slow. Please consider "
            "converting the list to a single numpy.ndarray with numpy.array() before converting "
            "to a tensor.", UserWarning, stacklevel=3)
    if "tensor" in found:
        _validate(data, shape, 0, dtype)
        data = _unwrap(data)
    if dtype.is_complex or inferred.is_complex:
        build = np.complex128
    elif dtype.is_floating_point or inferred.is_floating_point:
        build = np.float64
    elif inferred is D.bool:
        build = np.bool_
    else:
        build = np.int64
    try:
        arr = np.array(data, dtype=build)
    except OverflowError:
        raise ValueError("Overflow when unpacking long long") from None
    except (ValueError, TypeError):
        _validate(data, shape, 0, dtype)
        raise
    if list(arr.shape) != shape:
        _validate(data, shape, 0, dtype)
    _check_fits(arr, dtype)
    return arr if arr.dtype == dtype.np else C.cast(arr, dtype.np)


def _np_dtype(arr):
    """The dtype of numpy array ``arr``, or PyTorch's error for an unsupported one."""
    try:
        return D.from_numpy_dtype(arr.dtype)
    except TypeError:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. The only "
            "supported types are: float64, float32, float16, bfloat16, complex64, complex128, "
            "int64, int32, int16, int8, uint8, and bool.") from None


def _no_negative_strides(arr):
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative "
            "strides are not currently supported. (You can probably work around this by making a "
            "copy of your array  with array.copy().) ")


def _copy_warning(fn):
    warnings.warn(
        "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
        "or sourceTensor.detach().clone().requires_grad_(True), rather than "
        f"{fn}(sourceTensor).", UserWarning, stacklevel=4)


def _array_of(data, dtype, fn="dynograph.tensor"):
    """A new numpy array (never shared with ``data``) holding ``data`` as ``dtype``."""
    if isinstance(data, Tensor):
        _copy_warning(fn)
        src = data._host_data()
        return C.cast(src, (dtype or data.dtype).np, order="K" if C.is_dense(src) else "C")
    if isinstance(data, np.ndarray):
        _np_dtype(data)
        _no_negative_strides(data)
        dt = dtype.np if dtype is not None else data.dtype
        return C.numpy_strides(C.cast(data, dt, order="K" if C.is_dense(data) else "C"), data)
    if isinstance(data, np.generic):
        return _array_of(np.asarray(data), dtype)
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    return _from_data(data, dtype)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor that owns a copy of ``data`` (nested lists, numbers, numpy arrays, tensors)."""
    if device is None and isinstance(data, Tensor):
        device = _cuda_of(data)
    if type(data) is builtins.float and dtype is None:      # the common scalar case
        t = Tensor._wrap(np.array(data, dtype=D.get_default_dtype().np))
    else:
        t = Tensor._wrap(_array_of(data, dtype_arg(dtype)))
    return finish_created(t, requires_grad, device=device)


def as_tensor(data, *, dtype=None, device=None):
    """Like ``tensor`` but shares memory with a tensor or numpy array of the requested dtype."""
    if device is not None:
        as_device(device)
    dtype = dtype_arg(dtype)
    if isinstance(data, Tensor):
        data = data if device is None else data.to(device)
        return data if dtype is None or data.dtype is dtype else data.to(dtype)
    if device is not None and as_device(device).type == "cuda":
        return tensor(data, dtype=dtype, device=device)
    if isinstance(data, np.ndarray):
        src = _np_dtype(data)
        _no_negative_strides(data)
        if dtype is None or dtype is src:
            return Tensor._wrap(C.numpy_strides(data, data))
        return Tensor._wrap(C.numpy_strides(C.cast(data, dtype.np), data))
    return tensor(data, dtype=dtype)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """Convert ``obj`` to a tensor, sharing memory when possible (never when ``copy=True``)."""
    if copy:
        t = tensor(obj.detach() if isinstance(obj, Tensor) else obj, dtype=dtype, device=device)
    else:
        t = as_tensor(obj, dtype=dtype, device=device)
        if copy is False and isinstance(obj, (Tensor, np.ndarray)):
            src = obj._data if isinstance(obj, Tensor) else obj
            if not np.shares_memory(t._data, src):
                raise ValueError("can't alias tensor from a different dtype without copying")
    if requires_grad:
        t = t.detach() if t is obj else t
        finish_created(t, True)
    return t


def from_numpy(ndarray, /):
    """A tensor that shares memory with ``ndarray``."""
    if not isinstance(ndarray, np.ndarray):
        kind = type(ndarray)
        name = f"numpy.{kind.__name__}" if isinstance(ndarray, np.generic) else kind.__name__
        raise TypeError(f"expected np.ndarray (got {name})")
    _np_dtype(ndarray)
    _no_negative_strides(ndarray)
    return Tensor._wrap(C.numpy_strides(ndarray, ndarray))


# ---------------------------------------------------------------- Tensor.new_*

@tensor_method
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    """A new tensor from ``data`` with this tensor's dtype unless told otherwise."""
    return finish_created(Tensor._wrap(_array_of(data, dtype_arg(dtype) or self.dtype, "tensor.new_tensor")),
                          requires_grad, device=device or _cuda_of(self))


@tensor_method
def new_empty(self, *args, size=None, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    """An uninitialized tensor with this tensor's dtype."""
    return _empty(parse_size(args, size, "new_empty"), dtype_arg(dtype) or self.dtype,
                  device or _cuda_of(self),
                  requires_grad, None)


@tensor_method
def new_zeros(self, *args, size=None, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    """Zeros with this tensor's dtype."""
    return _filled(parse_size(args, size, "new_zeros"), 0, dtype_arg(dtype) or self.dtype,
                   device or _cuda_of(self),
                   requires_grad, None)


@tensor_method
def new_ones(self, *args, size=None, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False):
    """Ones with this tensor's dtype."""
    return _filled(parse_size(args, size, "new_ones"), 1, dtype_arg(dtype) or self.dtype,
                   device or _cuda_of(self),
                   requires_grad, None)


@tensor_method
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    """``fill_value`` everywhere, with this tensor's dtype unless told otherwise."""
    shape = sequence_size(size, "new_full")
    value = _fill_scalar(fill_value, "new_full")
    dtype = dtype_arg(dtype) or self.dtype
    C.check_scalar(value, dtype)
    return _filled(shape, value, dtype, device or _cuda_of(self), requires_grad, None)


@tensor_method
def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                      layout=None, pin_memory=False):
    """An uninitialized tensor with the given strides and this tensor's dtype."""
    return empty_strided(size, stride, dtype=dtype_arg(dtype) or self.dtype,
                         device=device or _cuda_of(self),
                         requires_grad=requires_grad)


@tensor_method
def new(self, *args, **kwargs):
    """Legacy ``x.new(...)``: sizes or data, with this tensor's dtype."""
    return legacy_new(self.dtype, args, kwargs)


# ---------------------------------------------------------------- legacy constructors

@tensor_method(name="__init__")
def _legacy_init(self, *args, **kwargs):
    # torch.Tensor(...) is the legacy constructor: Tensor([1, 2]) or Tensor(2, 3)
    self._data = legacy_new(D.get_default_dtype(), args, kwargs)._data


def legacy_new(dtype, args, kwargs, strict=False):
    """``dynograph.Tensor(...)``, ``FloatTensor(...)``: no argument, sizes, a Size, data, or
    a tensor to alias (of any dtype for ``Tensor``, of its own for the ``strict`` types)."""
    kwargs = dict(kwargs)
    device = kwargs.pop("device", None)
    if kwargs:
        got = ", ".join([tname(a) for a in args] + [f"{k}={tname(v)}" for k, v in kwargs.items()])
        raise TypeError(f"new() received an invalid combination of arguments - got ({got}), but "
                        "expected one of:\n * (*, dynograph.device device = None)\n"
                        " * (Tensor other)\n * (tuple of ints size, *, dynograph.device device = None)\n"
                        " * (object data, *, dynograph.device device = None)\n")
    if device is not None:
        as_device(device)
    if not args:
        return _empty((0,), dtype, None, False, None)
    first = args[0]
    if len(args) == 1:
        if isinstance(first, Tensor):
            if strict and first.dtype is not dtype:
                raise TypeError(f"expected {dtype} (got {first.dtype})")
            return first.detach()
        if isinstance(first, Size):
            return _empty(parse_size((tuple(first),), None, "new"), dtype, None, False, None)
        if as_int(first) is None:
            if isinstance(first, (builtins.float, builtins.bool)) or not (
                    _is_sequence(first) or isinstance(first, np.ndarray)):
                raise TypeError(f"new(): data must be a sequence (got {tname(first)})")
            return Tensor._wrap(_array_of(first, dtype))
    return _empty(parse_size(args, None, "new"), dtype, None, False, None)


class _LegacyTensorType(type):
    """The metaclass of ``FloatTensor`` & co: calling one builds a tensor of its dtype, and
    ``isinstance(x, FloatTensor)`` asks whether ``x`` is a float32 tensor."""

    def __call__(cls, *args, **kwargs):
        return legacy_new(cls.dtype, args, kwargs, strict=True)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype


def _legacy_type(dt):
    return _LegacyTensorType(dt.tensor_type, (), {
        "dtype": dt, "is_cuda": False, "is_sparse": False, "__module__": "dynograph",
        "__doc__": f"Legacy constructor of {dt} tensors: ``{dt.tensor_type}(2, 3)`` or "
                   f"``{dt.tensor_type}([1, 2])``."})


FloatTensor = _legacy_type(D.float32)
DoubleTensor = _legacy_type(D.float64)
HalfTensor = _legacy_type(D.float16)
BFloat16Tensor = _legacy_type(D.bfloat16)
LongTensor = _legacy_type(D.int64)
IntTensor = _legacy_type(D.int32)
ShortTensor = _legacy_type(D.int16)
CharTensor = _legacy_type(D.int8)
ByteTensor = _legacy_type(D.uint8)
BoolTensor = _legacy_type(D.bool)

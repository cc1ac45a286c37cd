"""Creation functions: tensor, as_tensor, from_numpy, zeros, ones, full, arange, ...

(Random creation lives in _random.py.)
"""
import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.device import as_device
from ._tensor import Tensor, tensor_method

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty"]


def _infer_dtype(data):
    """The dtype torch.tensor infers for nested Python data."""
    kinds = set()
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, Tensor):
            kinds.add(x.dtype)
        elif isinstance(x, (bool, np.bool_)):
            kinds.add(D.bool)
        elif isinstance(x, (int, np.integer)):
            kinds.add(D.int64)
        elif isinstance(x, (float, np.floating)):
            kinds.add(D.get_default_dtype())
        else:
            raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
    dt = D.bool if not kinds else None
    for k in kinds:
        dt = k if dt is None else D.promote_types(dt, k)
    if not kinds:
        return D.get_default_dtype()
    return dt


def _to_array(data, dtype):
    if isinstance(data, Tensor):
        arr = data._data
    elif isinstance(data, np.ndarray):
        arr = data
    else:
        if isinstance(data, (list, tuple)):
            _check_ragged(data)
            data = _unwrap_tensors(data)
        arr = np.array(data, dtype=dtype.np if dtype is not None else None)
    return arr


def _unwrap_tensors(data):
    if isinstance(data, (list, tuple)):
        return [_unwrap_tensors(x) for x in data]
    if isinstance(data, Tensor):
        if data._data.size != 1 and data._data.ndim:
            return data._data
        return data.item()
    return data


def _check_ragged(data, depth=0):
    if not data or not isinstance(data[0], (list, tuple)):
        for x in data:
            if isinstance(x, (list, tuple)):
                raise ValueError(f"expected sequence of length {len(data)} at dim {depth} (got list)")
        return
    n = len(data[0])
    for x in data:
        if not isinstance(x, (list, tuple)):
            raise TypeError(f"not a sequence")
        if len(x) != n:
            raise ValueError(f"expected sequence of length {n} at dim {depth + 1} (got {len(x)})")
        _check_ragged(x, depth + 1)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Construct a tensor that owns a copy of ``data`` (nested lists, scalars, arrays, tensors)."""
    as_device(device)
    if dtype is None:
        if isinstance(data, Tensor):
            dtype = data.dtype
        elif isinstance(data, (np.ndarray, np.generic)):
            dtype = D.from_numpy_dtype(data.dtype)
        else:
            dtype = _infer_dtype(data)
    arr = np.array(_to_array(data, dtype), dtype=dtype.np, copy=True)
    t = Tensor._wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """Share memory with ``data`` when it already is a tensor/array of the requested dtype."""
    as_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype is dtype else data.to(dtype)
    if isinstance(data, np.ndarray):
        src = D.from_numpy_dtype(data.dtype)
        if dtype is None or dtype is src:
            return Tensor._wrap(data)
        return Tensor._wrap(data.astype(dtype.np))
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A tensor that shares memory with ``ndarray``."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    D.from_numpy_dtype(ndarray.dtype)
    if any(s < 0 for s in ndarray.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative "
            "strides are not currently supported. (You can probably work around this by making a "
            "copy of your array  with array.copy().) ")
    return Tensor._wrap(ndarray)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = s.__index__()
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(
                f"empty(): argument 'size' must be tuple of ints, but found element of type "
                f"{type(s).__name__} at pos {len(out)}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _filled(size, value, dtype, requires_grad):
    dtype = dtype or D.get_default_dtype()
    t = Tensor._wrap(np.full(_size(size), value, dtype=dtype.np))
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    as_device(device)
    return _filled(size, 0, dtype, requires_grad)


def ones(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    as_device(device)
    return _filled(size, 1, dtype, requires_grad)


def empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          memory_format=None, pin_memory=False):
    as_device(device)
    return _filled(size, 0, dtype, requires_grad)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    as_device(device)
    if dtype is None:
        dtype = D.python_scalar_dtype(fill_value)
    return _filled(tuple(size), fill_value, dtype, requires_grad)


@tensor_method
def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return ones(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


@tensor_method
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


@tensor_method
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _filled(tuple(size), fill_value, dtype or self.dtype, requires_grad)


def legacy_new(dtype, args, kwargs):
    """dynograph.Tensor(...), FloatTensor(...): sizes, or data to copy."""
    device = kwargs.pop("device", None)
    as_device(device)
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)) and not isinstance(args[0], Tensor) \
            and not (isinstance(args[0], tuple) and all(isinstance(s, int) for s in args[0]) and False):
        if isinstance(args[0], (list, tuple, np.ndarray, float, bool)):
            return tensor(args[0], dtype=dtype)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].to(dtype)
    return zeros(*args, dtype=dtype)

"""Eager ops on CUDA tensors: a cuda tensor's ``_data`` is a ``DeviceArray`` (runtime/cuda_memory.py),
as a cpu tensor's is a numpy array, and the dispatcher hands every op with a cuda operand here.

* View ops (``view``, ``transpose``, slicing...) compute the view's geometry with the op's own
  implementation run on a *shadow*: a numpy array of the same shape, strides and offset over no
  real memory, whose result's strides and offset become a view of the same device block.
* Ops with a lowering (elementwise, reductions) and direct kernels (matrix products) run as
  single-op kernels lent by the CUDA code generator through runtime/device_kernels.py, rendered
  from the op set's lowering and cached like compiled programs' kernels.
* Every other op runs on the host: its operands are copied to host memory, the op's numpy
  implementation runs, and the results are copied back, with one warning per op naming it.

Operands must share one device, as in torch: a cpu tensor may join cuda ones only as a 0-d
tensor (a number).
"""
import os
import sys
import warnings

import numpy as np

from dynograph import runtime
from dynograph.compiler import ops
from dynograph.runtime import device_kernels
from dynograph.runtime.cuda_memory import DeviceArray
from dynograph.runtime.device import CPU, as_device
from ._tensor import Tensor

_ndarray = np.ndarray
_warned = set()
# ops that return a view of a contiguous operand (reshape's copy of a strided one)
VIEW_WHEN_POSSIBLE = ("unsafe_view",)
# the package's folders (compiler/ and runtime/ are folders of their own in a source tree)
_PACKAGE = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (sys.modules[__package__], runtime)) + \
    (os.path.dirname(os.path.dirname(os.path.abspath(ops.__file__))) + os.sep,)


def on_device(args):
    """Whether a tensor among ``args`` (or inside a list/tuple argument) lives on a device."""
    for a in args:
        if isinstance(a, Tensor):
            if type(a._data) is DeviceArray:
                return True
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Tensor) and type(b._data) is DeviceArray:
                    return True
    return False


def device_of(t):
    d = t._data
    return d.device if type(d) is DeviceArray else CPU


def _tensors(args):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif type(a) in (list, tuple):
            yield from (b for b in a if isinstance(b, Tensor))


def common_device(op_name, args):
    """The one CUDA device of the operands; torch's error where they are on two devices."""
    found = None
    for t in _tensors(args):
        d = device_of(t)
        if d.type == "cpu" and t._data.ndim == 0:
            continue                    # a 0-d cpu tensor joins as a number, as in torch
        if found is None:
            found = d
        elif d != found:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                               f"two devices, {found} and {d}!")
    return found


def _each_tensor(args, fn):
    """``args`` with every tensor ``t`` among them (or in a list/tuple argument) replaced by
    ``fn(t)``."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(fn(a))
        elif type(a) in (list, tuple) and any(isinstance(b, Tensor) for b in a):
            out.append(type(a)(fn(b) if isinstance(b, Tensor) else b for b in a))
        else:
            out.append(a)
    return out


def _moved(args, index):
    """``args`` with the arrays of their tensors: device arrays, 0-d cpu ones copied over."""
    def array(t):
        d = t._data
        return d if type(d) is DeviceArray else to_device_array(d, index)
    return _each_tensor(args, array)


def run(op, args, attrs, compute):
    """``op`` on operands among which a tensor lives on a CUDA device; its result arrays (device
    arrays).  ``compute(op, args, attrs)`` is the eager core's host computation (the fallback)."""
    dev = common_device(op.name, args)
    index = dev.index or 0
    arrays = _moved(args, index)
    if op.view:
        return _view(op, arrays, attrs)
    if op.name in VIEW_WHEN_POSSIBLE and arrays[0].is_contiguous():
        try:
            return arrays[0].view_by(lambda *args: op.impl(*args, **attrs), arrays)
        except ValueError:
            pass                        # not a view after all: a kernel or the host below
    kernels = device_kernels.executor()
    result = kernels.run(op, arrays, attrs, index) if kernels is not None else None
    if result is not None:
        return result
    return _on_host(op, args, attrs, index, compute)


def _on_host(op, args, attrs, index, compute):
    if op.name not in _warned:
        _warned.add(op.name)
        warnings.warn(f"dynograph: '{op.name}' has no CUDA kernel; it runs on the host (its operands "
                      "are copied to host memory and its results back)", stacklevel=_user_level())

    def host(t):
        d = t._data
        return Tensor._wrap(d.to_host()) if type(d) is DeviceArray else t
    result = compute(op, _each_tensor(args, host), attrs)
    if type(result) is tuple:
        return tuple(_back(r, index) for r in result)
    return _back(result, index)


def _user_level():
    """The stacklevel of ``warnings.warn`` (called from here) that names the user's line: the
    first frame outside the dynograph package."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _back(r, index):
    return to_device_array(r, index) if isinstance(r, (_ndarray, np.generic)) else r


# -- views: the op's own implementation on a shadow of the operand ------------------------------
def _view(op, arrays, attrs):
    source = next(a for a in arrays if hasattr(a, "block"))
    try:
        return source.view_by(lambda *args: op.impl(*args, **attrs), arrays)
    except (IndexError, TypeError, ValueError) as e:
        from dynograph.compiler.ops.core import TensorSpec
        from dynograph.runtime import dtypes as D
        if op.meta is not None:         # the op's own error for bad input
            op.meta(*[TensorSpec(a.shape, D.from_numpy_dtype(a.dtype)) if hasattr(a, "block") else a
                      for a in arrays], **attrs)
        raise RuntimeError(f"{op.name}: {e}") from None


# -- transfers ------------------------------------------------------------------------------------
def to_device_array(a, index, non_blocking=False):
    """A device copy of host array ``a`` on CUDA device ``index`` (queued without waiting where
    ``non_blocking`` and ``a`` is in pinned memory)."""
    return DeviceArray.from_host(a if type(a) is _ndarray else np.asarray(a), index, non_blocking)


def transfer(t, device, non_blocking=False):
    """``t`` copied to ``device`` (a runtime device): a new tensor, recorded for autograd so that
    the gradient travels back (``ToCopyBackward0``)."""
    from .autograd.graph import record_function
    device = as_device(device)
    d = t._data
    if device.type == "cpu":
        array = d.to_host()
    else:
        index = device.index or 0
        if type(d) is not DeviceArray:
            array = to_device_array(d, index, non_blocking)
        else:                           # device to device: through the host
            array = to_device_array(d.to_host(), index)
    out = Tensor._wrap(array)
    source = device_of(t)
    return record_function(t, out, "ToCopyBackward0", lambda g: transfer(g, source))


def cuda_index(device):
    """The index of the CUDA device ``device`` names (None: the current one)."""
    from dynograph.runtime import cuda_driver
    d = as_device("cuda" if device is None else device)
    if d.type != "cuda":
        raise RuntimeError(f"Invalid device, must be cuda device, got {d}")
    return cuda_driver.current_device() if d.index is None else d.index


# -- writes into device arrays --------------------------------------------------------------------
def write(dst, src):
    """``dst[...] = src`` where either is a device array (``src`` may be a host array or a number):
    broadcast to ``dst``'s shape and cast to its dtype, as numpy's assignment."""
    if type(dst) is not DeviceArray:
        dst[...] = src.to_host()
        return
    if type(src) is not DeviceArray:
        dst.copy_from_host(np.asarray(src))
        return
    if src.index != dst.index:
        src = to_device_array(src.to_host(), dst.index)
    same = src.shape == dst.shape and src.dtype == dst.dtype
    if same and src.is_contiguous() and dst.is_contiguous() and src.block is not dst.block:
        dst.copy_from_device(src)
    else:                               # broadcast, cast, strided: a copy kernel
        device_kernels.executor().copy(dst, src)


def fill(dst, value):
    """Every element of device array ``dst`` set to the number ``value`` (wrapping as numpy's
    conversion of an integer array does)."""
    dst.copy_from_host(np.array(value).astype(dst.dtype))


# -- random numbers ---------------------------------------------------------------------------------
def random(kind, shape, dtype, params, device):
    """A tensor of ``shape`` and ``dtype`` on CUDA ``device`` drawn by the device's Philox
    kernel ``kind`` ('uniform' with params (low, high), 'normal' with (mean, std)) from the
    device's generator (dynograph.cuda: seeded by manual_seed, advanced by each draw)."""
    from . import cuda
    index = cuda_index(device)
    array = device_kernels.executor().random(kind, tuple(shape), dtype, tuple(params), index,
                                             lambda counters: cuda.philox_state(index, counters))
    return Tensor._wrap(array)

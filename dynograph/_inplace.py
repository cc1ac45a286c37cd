"""Writing a result into an existing tensor: in-place methods (``add_``) and ``out=``."""
import numpy as np

from dynograph.compiler.ops.core import can_cast, type_name
from .autograd.grad_mode import STATE


def check_inplace_leaf(self):
    if self.requires_grad and self.grad_fn is None and STATE.grad_enabled:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation.")


def assign(self, result):
    """Make ``self`` hold ``result`` (same shape after broadcasting), keeping its storage."""
    check_inplace_leaf(self)
    if not can_cast(result.dtype, self.dtype):
        raise RuntimeError(
            f"result type {type_name(result.dtype)} can't be cast to the desired output type "
            f"{type_name(self.dtype)}")
    if result._data.shape != self._data.shape:
        if np.broadcast_shapes(result._data.shape, self._data.shape) != self._data.shape:
            raise RuntimeError(
                f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(result._data.shape, self._data.shape))}")
    self._data[...] = result._data
    self._bump_version()
    if result.requires_grad:
        _rebase_history(self, result)
    return self


def _rebase_history(self, result):
    """After ``self`` was overwritten by ``result``, gradients flow through result's node."""
    self.requires_grad = True
    self.grad_fn = result.grad_fn
    self._output_nr = result._output_nr


def write_out(out, result):
    """Implements ``out=``: resize ``out`` if needed and copy ``result`` into it."""
    if out.dtype is not result.dtype and not can_cast(result.dtype, out.dtype):
        raise RuntimeError(
            f"result type {type_name(result.dtype)} can't be cast to the desired output type "
            f"{type_name(out.dtype)}")
    if out._data.shape != result._data.shape:
        out._data = np.empty(result._data.shape, out._data.dtype)
    out._data[...] = result._data
    out._bump_version()
    return out

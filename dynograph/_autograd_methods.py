"""Tensor methods of autograd: backward, grad, detach, requires_grad_, hooks."""
import warnings

from . import autograd
from ._tensor import Tensor, tensor_method


@tensor_method
def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    autograd.backward(self, gradient, retain_graph, create_graph, inputs)


def _get_grad(self):
    if self.grad_fn is not None and not self._retains_grad:
        warnings.warn(
            "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
            ".grad attribute won't be populated during autograd.backward(). If you indeed want "
            "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
            "non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
            "the leaf Tensor instead.", UserWarning, stacklevel=2)
    return self._grad


def _set_grad(self, value):
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
        if value.shape != self.shape:
            raise RuntimeError(
                f"assigned grad has data of a different size")
    self._grad = value


Tensor.grad = property(_get_grad, _set_grad)


@tensor_method
def requires_grad_(self, requires_grad=True):
    self.requires_grad = requires_grad         # the property checks dtype and leafness
    return self


@tensor_method
def detach(self):
    t = Tensor._wrap(self._data)
    t._base = self._base if self._base is not None else self
    t._vc = self._version_box()
    return t


@tensor_method
def detach_(self):
    self.grad_fn = None
    self.requires_grad = False
    return self


def _get_data(self):
    return self.detach()


def _set_data(self, value):
    self._data = value._data


Tensor.data = property(_get_data, _set_data)

"""Tensor methods of autograd: backward, grad, detach, requires_grad_, hooks."""
import warnings

from dynograph._trace_hook import TRACE
from . import autograd
from ._tensor import Tensor, tensor_method
from .autograd.graph import retain_at_grad_fn


@tensor_method
def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    autograd.backward(self, gradient, retain_graph, create_graph, inputs)


def _get_grad(self):
    if TRACE.tracer is not None:
        TRACE.tracer.grad_read(self)
    if self.grad_fn is not None and not self._retains_grad and self._grad is None:
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
            raise TypeError("assigned grad expected to be a Tensor or None but got grad of type "
                            f"{type(value).__name__}")
        if value.shape != self.shape:
            raise RuntimeError(
                "assigned grad has data of a different size")
    if TRACE.tracer is not None:
        TRACE.tracer.grad_replaced(self)
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
    if TRACE.tracer is not None:        # the tensor's memory changes under the graph's feet
        TRACE.tracer.graph_break("assigning .data inside the compiled function")
    self._data = value._data


Tensor.data = property(_get_data, _set_data)


class RemovableHandle:
    """Returned by register_hook; ``remove()`` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


@tensor_method
def register_hook(self, hook):
    """Call ``hook(grad)`` whenever a gradient for this tensor is computed; a returned tensor
    replaces the gradient."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is None:
        if self._hooks is None:
            self._hooks = []
        hooks = self._hooks
    else:
        table = self.grad_fn.__dict__.setdefault("_tensor_hooks", {})
        hooks = table.setdefault(self._output_nr, [])
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


Tensor._post_accumulate_grad_hooks = None


@tensor_method
def register_post_accumulate_grad_hook(self, hook):
    """Call ``hook(tensor)`` after a gradient has been accumulated into this leaf's ``.grad``
    (torch's hook for optimizers and gradient all-reduce that read the finished ``.grad``)."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if self._post_accumulate_grad_hooks is None:
        self._post_accumulate_grad_hooks = []
    self._post_accumulate_grad_hooks.append(hook)
    return RemovableHandle(self._post_accumulate_grad_hooks, hook)


@tensor_method
def retain_grad(self):
    """Keep ``.grad`` for a non-leaf tensor after backward (a no-op on leaves)."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or self._retains_grad:
        return
    retain_at_grad_fn(self)
    self._retains_grad = True


Tensor.retains_grad = property(lambda self: bool(self._retains_grad))


def zero_grads(tensors, set_to_none=True):
    """Reset the ``.grad`` of each tensor: to None, or to zeros in place (detached first), as
    Module.zero_grad and Optimizer.zero_grad both do."""
    tracer = TRACE.tracer
    for p in tensors:
        if set_to_none and tracer is not None:
            tracer.grad_replaced(p)     # (what it held does not matter: it ends None)
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        g.zero_()

"""Stochastic gradient descent (optionally with momentum), as torch.optim.SGD."""
import numpy as np

from dynograph._trace_hook import TRACE
from ..autograd.grad_mode import no_grad
from . import _fused
from .optimizer import Optimizer, check_range, run_closure, traced_lr

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        check_range(lr, lr >= 0.0, "Invalid learning rate: {}")
        check_range(momentum, momentum >= 0.0, "Invalid momentum value: {}")
        check_range(weight_decay, weight_decay >= 0.0, "Invalid weight_decay value: {}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _step(self, closure):
        loss = run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _state_ahead(self, p, group):
        """The first step sets the momentum buffer to the gradient; later steps compute
        ``buf * momentum + grad * (1 - dampening)``.  From a buffer of -0.0 and without
        dampening that is the gradient bit for bit (-0.0 * m is -0.0, and -0.0 + g is g for
        every g, -0.0 and NaN included), so the later steps' update can run from the first.
        Not for complex numbers (the imaginary part's zero would be +0.0)."""
        g, momentum = p._grad, group["momentum"]
        if not 0 < momentum < float("inf") or group["dampening"] != 0 or g.is_complex() or \
                not g.is_floating_point() or not g.is_contiguous():
            return False
        self.state[p]["momentum_buffer"] = g.detach().clone().fill_(-0.0)
        return True

    def _update_group(self, group):
        lr, momentum = traced_lr(self, group), group["momentum"]
        dampening, weight_decay = group["dampening"], group["weight_decay"]
        nesterov, maximize = group["nesterov"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if momentum != 0:
                buf = self.state[p].get("momentum_buffer")
                # the whole update in one compiled loop, where it pays
                if buf is not None and _fused.sgd_momentum(p, p.grad, buf, momentum, dampening,
                                                           lr, weight_decay, nesterov, maximize):
                    continue
            grad = p.grad if not maximize else -p.grad
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            if momentum != 0:
                if buf is None:
                    buf = grad.detach().clone()
                    self.state[p]["momentum_buffer"] = buf
                elif not nesterov and _momentum_in_place(p, grad, buf, momentum, dampening, lr):
                    continue
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                grad = grad.add(buf, alpha=momentum) if nesterov else buf
            p.add_(grad, alpha=-lr)


_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))


def _momentum_in_place(p, grad, buf, momentum, dampening, lr):
    """The momentum update ``buf = momentum * buf + (1 - dampening) * grad; p -= lr * buf``
    in three numpy calls over the tensors' own memory, where it computes exactly what the
    in-place tensor methods would (float32/float64 tensors of one shape, not being traced);
    False where it does not apply."""
    pa, ga, ba = p._data, grad._data, buf._data
    if TRACE.tracer is not None or type(lr) is not float or pa.dtype not in _FLOAT \
            or not (pa.dtype == ga.dtype == ba.dtype) or not (pa.shape == ga.shape == ba.shape) \
            or not (pa.flags.writeable and ba.flags.writeable) or type(pa) is not np.ndarray:
        return False
    np.multiply(ba, momentum, out=ba)
    np.add(ba, ga if dampening == 0 else ga * (1 - dampening), out=ba)
    np.add(pa, ba * -lr, out=pa)
    buf._bump_version()
    p._bump_version()
    return True

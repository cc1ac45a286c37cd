"""Stochastic gradient descent (optionally with momentum), as torch.optim.SGD."""
from ..autograd.grad_mode import no_grad
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

    def _update_group(self, group):
        lr, momentum = traced_lr(self, group), group["momentum"]
        dampening, weight_decay = group["dampening"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad if not group["maximize"] else -p.grad
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = grad.detach().clone()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
            p.add_(grad, alpha=-lr)

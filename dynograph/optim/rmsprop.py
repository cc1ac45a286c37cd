"""RMSprop, as torch.optim.RMSprop."""
from .. import zeros_like
from ._single import PerParameterOptimizer
from .optimizer import check_range, step_tensor, traced_lr

__all__ = ["RMSprop"]


class RMSprop(PerParameterOptimizer):
    """RMSprop (Hinton), optionally centered and with momentum."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_range(lr, lr >= 0.0, "Invalid learning rate: {}")
        check_range(eps, eps >= 0.0, "Invalid epsilon value: {}")
        check_range(momentum, momentum >= 0.0, "Invalid momentum value: {}")
        check_range(weight_decay, weight_decay >= 0.0, "Invalid weight_decay value: {}")
        check_range(alpha, alpha >= 0.0, "Invalid alpha value: {}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["square_avg"] = zeros_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)

    def _update(self, p, grad, state, group):
        lr, alpha, eps, momentum = traced_lr(self, group), group["alpha"], group["eps"], group["momentum"]
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)

"""Adadelta, as torch.optim.Adadelta."""
from .. import zeros_like
from ._single import PerParameterOptimizer
from .optimizer import check_range, step_tensor, traced_lr

__all__ = ["Adadelta"]


class Adadelta(PerParameterOptimizer):
    """Adadelta (Zeiler, 2012)."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_range(lr, lr >= 0.0, "Invalid learning rate: {}")
        check_range(rho, 0.0 <= rho <= 1.0, "Invalid rho value: {}")
        check_range(eps, eps >= 0.0, "Invalid epsilon value: {}")
        check_range(weight_decay, weight_decay >= 0.0, "Invalid weight_decay value: {}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["square_avg"] = zeros_like(p)
        state["acc_delta"] = zeros_like(p)

    def _update(self, p, grad, state, group):
        rho, eps = group["rho"], group["eps"]
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_()
        delta.div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-traced_lr(self, group))

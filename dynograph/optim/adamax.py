"""Adamax, as torch.optim.Adamax."""
from .. import zeros_like
from ._single import PerParameterOptimizer
from .adam import check_adam_args
from .optimizer import step_tensor, traced_lr, scalar_state

__all__ = ["Adamax"]


class Adamax(PerParameterOptimizer):
    """Adamax: Adam with the infinity norm (Kingma & Ba, 2014)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["exp_avg"] = zeros_like(p)
        state["exp_inf"] = zeros_like(p)

    def _update(self, p, grad, state, group):
        (beta1, beta2), eps = group["betas"], group["eps"]
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(eps)))
        clr = traced_lr(self, group) / (1 - beta1 ** scalar_state(state["step"]))
        p.addcdiv_(exp_avg, exp_inf, value=-clr)

"""RAdam, as torch.optim.RAdam."""
from .. import Tensor, where, zeros_like
from ._single import PerParameterOptimizer
from .adam import check_adam_args
from .optimizer import step_tensor, scalar_state, traced_lr

__all__ = ["RAdam"]


class RAdam(PerParameterOptimizer):
    """Rectified Adam (Liu et al., 2019)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps = traced_lr(self, group), group["betas"], group["eps"]
        weight_decay = group["weight_decay"]
        state["step"].add_(1)
        step = scalar_state(state["step"])
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        traced = isinstance(rho_t, Tensor)
        if traced or rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
            update = corrected * lr * adaptive_lr * rect
            if traced:
                # compiling: the step is a graph value, so the rectification is chosen in the
                # graph (where rho_t <= 5 the unused branch holds nan)
                update = where(rho_t > 5.0, update, corrected * lr)
            p.add_(update, alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)

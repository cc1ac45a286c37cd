"""NAdam, as torch.optim.NAdam."""
from .. import zeros_like
from ._single import PerParameterOptimizer
from .adam import check_adam_args
from .optimizer import check_range, step_tensor, scalar_state, traced_lr

__all__ = ["NAdam"]


class NAdam(PerParameterOptimizer):
    """Adam with Nesterov momentum (Dozat, 2016)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_adam_args(lr, betas, eps, weight_decay)
        check_range(momentum_decay, momentum_decay >= 0.0, "Invalid momentum_decay value: {}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["mu_product"] = step_tensor(1.0)
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)

    def _update(self, p, grad, state, group):
        lr, (beta1, beta2), eps = traced_lr(self, group), group["betas"], group["eps"]
        weight_decay, momentum_decay = group["weight_decay"], group["momentum_decay"]
        state["step"].add_(1)
        step = scalar_state(state["step"])
        bias_correction2 = 1 - beta2 ** step
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        # the running product is a float32 tensor, as in torch (its rounding shows in the result)
        state["mu_product"].mul_(mu)
        mu_product = scalar_state(state["mu_product"])
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
        mu_product_next = mu_product * mu_next
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product_next))

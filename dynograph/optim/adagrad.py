"""Adagrad, as torch.optim.Adagrad."""
from .. import full_like
from ._single import PerParameterOptimizer
from .optimizer import check_range, step_tensor, traced_lr, scalar_state

__all__ = ["Adagrad"]


class Adagrad(PerParameterOptimizer):
    """Adagrad (Duchi et al., 2011) with optional learning-rate decay."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_range(lr, lr >= 0.0, "Invalid learning rate: {}")
        check_range(lr_decay, lr_decay >= 0.0, "Invalid lr_decay value: {}")
        check_range(weight_decay, weight_decay >= 0.0, "Invalid weight_decay value: {}")
        check_range(initial_accumulator_value, initial_accumulator_value >= 0.0,
                     "Invalid initial_accumulator_value value: {}")
        check_range(eps, eps >= 0.0, "Invalid epsilon value: {}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # torch creates the state eagerly, so state_dict() lists it before the first step
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    def _init_state(self, p, state, group):
        state["step"] = step_tensor()
        state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, p, grad, state, group):
        state["step"].add_(1)
        step = scalar_state(state["step"])
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        clr = traced_lr(self, group) / (1 + (step - 1) * group["lr_decay"])
        state["sum"].addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt().add_(group["eps"])
        p.addcdiv_(grad, std, value=-clr)

"""Adam, as torch.optim.Adam (with optional AMSGrad and decoupled weight decay)."""
from dynograph._trace_hook import TRACE
from dynograph.compiler.ops import updates
from .. import zeros_like
from .._dispatch import call
from .._inplace import assign
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import _fused
from .optimizer import Optimizer, check_range, run_closure, step_tensor, scalar_state, traced_lr

__all__ = ["Adam"]


def check_adam_args(lr, betas, eps, weight_decay):
    check_range(lr, lr >= 0.0, "Invalid learning rate: {}")
    check_range(eps, eps >= 0.0, "Invalid epsilon value: {}")
    check_range(betas[0], 0.0 <= betas[0] < 1.0, "Invalid beta parameter at index 0: {}")
    check_range(betas[1], 0.0 <= betas[1] < 1.0, "Invalid beta parameter at index 1: {}")
    check_range(weight_decay, weight_decay >= 0.0, "Invalid weight_decay value: {}")


class Adam(Optimizer):
    """Adam: adaptive moment estimation (Kingma & Ba, 2014)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _step(self, closure):
        loss = run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, group)
        return loss

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = step_tensor()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _state_ahead(self, p, group):
        self._init_state(p, group["amsgrad"])
        return True

    def _update(self, p, group):
        lr, (beta1, beta2), eps = traced_lr(self, group), group["betas"], group["eps"]
        weight_decay = group["weight_decay"]
        state = self._init_state(p, group["amsgrad"])
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        state["step"].add_(1)
        if not group["amsgrad"] and TRACE.tracer is None and type(lr) is float:
            # the update on the arrays: one compiled loop where it pays, else numpy without
            # the tensor methods' dispatch
            step = state["step"].item()
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            if _fused.adam(p, p.grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
                           group["decoupled_weight_decay"], group["maximize"],
                           bias_correction2_sqrt, lr / (1 - beta1 ** step)):
                return
        grad = p.grad if not group["maximize"] else -p.grad
        decoupled = group["decoupled_weight_decay"]
        one_node = TRACE.tracer is not None and _one_node(p, lr)
        if weight_decay != 0:
            if not decoupled:
                grad = grad.add(p, alpha=weight_decay)
            elif not one_node:
                p.mul_(1 - lr * weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom_source = exp_avg_sq
        if group["amsgrad"]:
            denom_source = state["max_exp_avg_sq"]
            denom_source.copy_(denom_source.maximum(exp_avg_sq))
        if one_node:
            # the decay, the bias corrections and the step: one node of the compiled graph
            # (compiler/ops/updates.py), which computes what the methods below compute
            decay = weight_decay if decoupled else 0
            assign(p, call(updates.adam_param, p, exp_avg, denom_source, state["step"], lr,
                           beta1=beta1, beta2=beta2, eps=eps, weight_decay=decay))
            if decay != 0:
                p._bump_version()       # as the methods' separate p.mul_ did
            return
        step = scalar_state(state["step"])
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        step_size = lr / bias_correction1
        denom = (denom_source.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)


def _one_node(p, lr):
    """Whether a traced update of ``p`` records its step as one node: a floating parameter with
    dims, and the learning rate a 0-dim tensor (the graph input of a float lr)."""
    return isinstance(lr, Tensor) and lr.dim() == 0 and p.dim() > 0 and p.is_floating_point()

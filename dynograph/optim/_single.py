"""Shared driver for optimizers that update each parameter independently."""
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, run_closure


class PerParameterOptimizer(Optimizer):
    """Runs ``_update(p, grad, state, group)`` for every parameter that has a gradient."""

    def _step(self, closure):
        loss = run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                maximize = group.get("maximize", False)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if maximize else p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        self._init_state(p, state, group)
                    self._update(p, grad, state, group)
        return loss

    def _state_ahead(self, p, group):
        # each of these starts its state from constants and runs _update from the first step
        self._init_state(p, self.state[p], group)
        return True

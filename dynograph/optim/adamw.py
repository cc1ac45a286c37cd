"""AdamW: Adam with decoupled weight decay, as torch.optim.AdamW."""
from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2017)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused, decoupled_weight_decay=True)

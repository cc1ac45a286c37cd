"""PReLU (a learnable negative slope) and Softmax2d (softmax over the channels of images)."""
import dynograph as _d
from .. import functional as F
from .. import init as _init
from ..parameter import Parameter
from .module import Module

__all__ = ["PReLU", "Softmax2d"]


class PReLU(Module):
    """max(0, x) + weight * min(0, x) with ``num_parameters`` slopes (one, or one per channel)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(_d.empty(num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        """Every slope to ``init``."""
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmax2d(Module):
    """Softmax over the channel dim of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)

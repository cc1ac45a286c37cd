"""Mathematical constants torch exposes at its top level (``torch.pi`` ...), the top-level forms
of a few Tensor methods (``torch.detach``, ``torch.gcd_``) and ``newaxis``."""
import math

from ._tensor import Tensor

__all__ = ["e", "pi", "inf", "nan", "newaxis", "detach", "detach_", "gcd_", "lcm_"]

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None          # x[:, newaxis] adds a dimension, as numpy's


def detach(input):
    """``input.detach()``."""
    return input.detach()


def detach_(input):
    """``input.detach_()``."""
    return input.detach_()


def gcd_(input, other):
    """``input.gcd_(other)``."""
    return Tensor.gcd_(input, other)


def lcm_(input, other):
    """``input.lcm_(other)``."""
    return Tensor.lcm_(input, other)

"""Padding modules: zero, constant, reflection, replication and circular padding (nn.functional.pad)."""
from .. import functional as F
from .module import Module
from ._utils import ntuple

__all__ = [
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
]


# padding holds two amounts (before, after) per padded dim
_TUPLES = {1: ntuple(2), 2: ntuple(4), 3: ntuple(6)}


class _PadNd(Module):
    _dims = 0
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _TUPLES[self._dims](padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(Module):
    _dims = 0

    def __init__(self, padding, value):
        super().__init__()
        self.value = value
        self.padding = _TUPLES[self._dims](padding)

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``; padding = (left, right)."""
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value``; padding = (left, right, top, bottom)."""
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value``; padding = (left, right, top, bottom, front, back)."""
    _dims = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros."""
    _dims = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last two dims with zeros."""
    _dims = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last three dims with zeros."""
    _dims = 3


class ReflectionPad1d(_PadNd):
    """Pad the last dim with its reflection (edge not repeated)."""
    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dims with their reflection."""
    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last three dims with their reflection."""
    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating its edge value."""
    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dims by repeating their edge values."""
    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last three dims by repeating their edge values."""
    _dims, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        low, high = self._dims + 1, self._dims + 2
        if input.dim() not in (low, high):
            raise ValueError(f"expected {low}D or {high}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim by wrapping around (the other end's values)."""
    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims by wrapping around."""
    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims by wrapping around."""
    _dims = 3

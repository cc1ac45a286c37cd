"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d, Unfold and Fold."""
import math

import dynograph as _d
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from ._utils import ntuple

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "Unfold", "Fold"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _reverse_repeat_tuple(t, n):
    """(a, b) -> (b, b, a, a) for n=2: F.pad's order, last dim first."""
    return tuple(x for x in reversed(t) for _ in range(n))


class _ConvNd(Module):
    """What every convolution layer shares: hyper-parameters, weight, bias, init and repr."""

    _n = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        n = self._n
        kernel_size, stride, dilation = map(ntuple(n), (kernel_size, stride, dilation))
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = ntuple(n)(padding)
        if padding_mode not in _PADDING_MODES:
            raise ValueError("padding_mode must be one of {'zeros', 'reflect', 'replicate', "
                             f"'circular'}}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._padding_for_pad()
        if transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = Parameter(_d.empty(shape, dtype=dtype))
        if bias:
            self.bias = Parameter(_d.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _padding_for_pad(self):
        """The amounts F.pad needs for a non-zeros padding_mode (last dim first)."""
        if isinstance(self.padding, str):
            out = [0, 0] * len(self.kernel_size)
            if self.padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size,
                                   range(len(self.kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    out[2 * i] = left
                    out[2 * i + 1] = total - left
            return out
        return _reverse_repeat_tuple(self.padding, 2)

    def reset_parameters(self):
        """kaiming_uniform_(a=sqrt(5)) on weight; bias uniform in +-1/sqrt(fan_in)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}"
             f", stride={self.stride}")
        n = len(self.kernel_size)
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, (0,) * self._n, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(input, weight, bias, self.stride, (0,) * self._n, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L) input."""
    _n = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) input."""
    _n = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W) input."""
    _n = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        n = self._n
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, ntuple(n)(output_padding), groups, bias, padding_mode, device,
                         dtype)

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims,
                        dilation=None):
        """The output_padding that makes the output ``output_size`` (torch's rule and errors)."""
        if output_size is None:
            return ntuple(num_spatial_dims)(self.output_padding)
        has_batch_dim = input.dim() == num_spatial_dims + 2
        non_spatial = 2 if has_batch_dim else 1
        if len(output_size) == non_spatial + num_spatial_dims:
            output_size = output_size[non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(
                f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must "
                f"have {num_spatial_dims} or {non_spatial + num_spatial_dims} elements (got "
                f"{len(output_size)})")
        min_sizes, max_sizes = [], []
        for d in range(num_spatial_dims):
            size = ((input.size(d + non_spatial) - 1) * stride[d] - 2 * padding[d]
                    + (dilation[d] if dilation is not None else 1) * (kernel_size[d] - 1) + 1)
            min_sizes.append(size)
            max_sizes.append(size + stride[d] - 1)
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from "
                    f"{min_sizes} to {max_sizes} (for an input of {input.size()[2:]})")
        return [size - lo for size, lo in zip(output_size, min_sizes)]

    def forward(self, input, output_size=None):
        if isinstance(self.padding, str):
            raise ValueError(f"Only the tuple padding mode is supported for {type(self).__name__}")
        n = self._n
        output_padding = self._output_padding(input, output_size, self.stride, self.padding,
                                              self.kernel_size, n, self.dilation)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding,
                              output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution ("deconvolution") over (N, C_in, L) or (C_in, L) input."""
    _n = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W) or (C_in, H, W) input."""
    _n = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C_in, D, H, W) or (C_in, D, H, W) input."""
    _n = 3
    _fn = staticmethod(F.conv_transpose3d)


class Unfold(Module):
    """Extracts sliding local blocks as columns (F.unfold)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Combines sliding local blocks back into a tensor, summing overlaps (F.fold)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")

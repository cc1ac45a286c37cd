"""Convolutions and their transposes, unfold and fold."""
import operator

import dynograph as _d
from dynograph._dispatch import call as _call
from dynograph.compiler.ops import conv as _ops

from ..modules._utils import ntuple as _parser

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"]


def ntuple(v, n):
    """The shared parser's n-tuple as plain ints (a sequence's length is checked later)."""
    return tuple(int(x) for x in _parser(n)(v))


def _ints(fn, name, v, n, k):
    """An int-or-sequence argument of ``fn`` as a tuple of ints, as PyTorch reads it: a single
    int stands for the ``n`` dims the function is named for, a list of one for the ``k`` the
    weight has; another length is left to the op to report."""
    seq = v if isinstance(v, (tuple, list)) else (v,)
    if any(isinstance(x, bool) or not hasattr(type(x), "__index__") for x in seq):
        raise TypeError(f"{fn}(): argument '{name}' must be tuple of ints, not {type(v).__name__}")
    seq = tuple(operator.index(x) for x in seq)
    if not isinstance(v, (tuple, list)):
        seq *= n
    return seq * k if len(seq) == 1 else seq


def _spatial(weight, n):
    """The number of spatial dims PyTorch goes by: the weight's (``n`` for a weight too small,
    which the op reports)."""
    return weight.dim() - 2 if weight.dim() >= 3 else n


def _batched(input, n, name):
    """``input`` with a batch dim (added for unbatched input) and whether it was added."""
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, "
                           f"but got input of size: {list(input.shape)}")
    if input.dim() == n + 1:
        return input.unsqueeze(0), True
    return input, False


def _same_padding(input, weight, stride, dilation, groups):
    """padding='same' (PyTorch's checks first): symmetric padding, the odd extra element padded
    on the high side."""
    k = weight.dim()
    if k < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if input.dim() != k:
        raise RuntimeError(f"Expected {k}-dimensional input for {k}-dimensional weight"
                           f"{list(weight.shape)}, but got {input.dim()}-dimensional input of size "
                           f"{list(input.shape)} instead")
    for name, v in (("stride", stride), ("dilation", dilation)):
        if len(v) != k - 2:
            raise RuntimeError(f"{name} cannot broadcast to {k - 2} dimensions")
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    padding, extra = [], []
    for size, d in zip(weight.shape[2:], dilation):
        total = d * (size - 1)
        padding.append(total // 2)
        extra.append(total % 2)
    if any(extra):
        pads = []
        for e in reversed(extra):
            pads += [0, e]
        input = _d.nn.functional.pad(input, pads)
    return input, tuple(padding)


def _convnd(input, weight, bias, stride, padding, dilation, groups, n):
    name = f"conv{n}d"
    k = _spatial(weight, n)
    stride, dilation = _ints(name, "stride", stride, n, k), _ints(name, "dilation", dilation, n, k)
    if not isinstance(padding, str):
        padding = _ints(name, "padding", padding, n, k)
    input, unbatched = _batched(input, n, name)
    if padding == "valid":
        padding = (0,) * n
    elif padding == "same":
        input, padding = _same_padding(input, weight, stride, dilation, groups)
    elif isinstance(padding, str):
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    out = _call(_ops.convolution, input, weight, bias, stride=stride, padding=padding,
                dilation=dilation, transposed=False, output_padding=(0,) * k, groups=int(groups))
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of (N, C, L) or unbatched (C, L) input with weight (O, C/groups, K).

    ``padding`` is an int, a 1-tuple, 'valid' or 'same'."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of (N, C, H, W) or unbatched (C, H, W) input with weight
    (O, C/groups, kH, kW).  ``padding`` is an int, a pair, 'valid' or 'same'."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of (N, C, D, H, W) or unbatched (C, D, H, W) input with weight
    (O, C/groups, kD, kH, kW).  ``padding`` is an int, a triple, 'valid' or 'same'."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3)


def _check_output_padding(output_padding, stride, dilation):
    if len(output_padding) != len(stride) or len(stride) != len(dilation):
        return                                  # the primitive reports the length
    if all(op < s or op < d for op, s, d in zip(output_padding, stride, dilation)):
        return
    if len(stride) == 1:            # torch runs 1-d transposed convolutions as 2-d ones
        output_padding, stride, dilation = (0,) + output_padding, (1,) + stride, (1,) + dilation
    names = ("depth", "height", "width")[-len(stride):]
    parts = ([f"output_padding_{a}: {v}" for a, v in zip(names, output_padding)]
             + [f"stride_{a}: {v}" for a, v in zip(names, stride)]
             + [f"dilation_{a}: {v}" for a, v in zip(names, dilation)])
    raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                       + " ".join(parts))


def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation, n):
    name = f"conv_transpose{n}d"
    k = _spatial(weight, n)
    stride, padding = _ints(name, "stride", stride, n, k), _ints(name, "padding", padding, n, k)
    output_padding = _ints(name, "output_padding", output_padding, n, k)
    dilation = _ints(name, "dilation", dilation, n, k)
    input, unbatched = _batched(input, n, name)
    _check_output_padding(output_padding, stride, dilation)
    out = _call(_ops.convolution, input, weight, bias, stride=stride, padding=padding,
                dilation=dilation, transposed=True, output_padding=output_padding,
                groups=int(groups))
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution ("deconvolution"): weight is (C_in, C_out/groups, K)."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution: weight is (C_in, C_out/groups, kH, kW)."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution: weight is (C_in, C_out/groups, kD, kH, kW)."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3)


def _pair(name, v):
    """unfold/fold's 2-element arguments, with torch's error for another length."""
    v = ntuple(v, 2)
    if len(v) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(v)}")
    return v


def _block_args(kernel_size, dilation, padding, stride):
    return dict(kernel_size=_pair("kernel_size", kernel_size), dilation=_pair("dilation", dilation),
                padding=_pair("padding", padding), stride=_pair("stride", stride))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of (N, C, H, W) or (C, H, W) input as columns
    (N, C * kH * kW, L) (im2col)."""
    dim = input.dim()
    if dim < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-dim}, {dim - 1}], "
                         f"but got {dim})")
    if dim > 4 or 0 in input.shape[dim - 3:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and "
                           f"other non-zero dimensions for input, but got: {list(input.shape)}")
    args = _block_args(kernel_size, dilation, padding, stride)
    x = input if dim == 4 else input.unsqueeze(0)
    out = _call(_ops.im2col, x, **args)
    return out if dim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sums columns (N, C * kH * kW, L) or (C * kH * kW, L) back into (N, C, *output_size)
    (col2im, the adjoint of unfold)."""
    dim = input.dim()
    if dim not in (2, 3) or 0 in input.shape[dim - 2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch "
                           f"size and non-zero dimensions for input, but got: {list(input.shape)}")
    output_size = _pair("output_size", output_size)
    args = _block_args(kernel_size, dilation, padding, stride)
    x = input if dim == 3 else input.unsqueeze(0)
    out = _call(_ops.col2im, x, output_size=output_size, **args)
    return out if dim == 3 else out.squeeze(0)

"""dynograph.nn.functional: PyTorch's functional forms, written as compositions of dynograph ops.

Every function here is built from dynograph functions and Tensor methods only (no numpy on the
data), so autograd and, later, the tracer see through them.
"""
import math
import warnings

import dynograph as _d
from dynograph.compiler.ops.core import type_name
from dynograph._trace_hook import is_tracing as _tracing
from dynograph.autograd.graph import shown_as
from ._functional.reduction import (reduce_loss as _reduce, reduction_from_flags as _reduction,
                                    stable_softplus as _softplus)

__all__ = [
    "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu",
    "celu_", "gelu", "silu", "mish", "softplus", "softsign", "hardswish", "hardsigmoid", "hardtanh",
    "hardtanh_", "sigmoid", "tanh", "logsigmoid", "tanhshrink", "hardshrink", "softshrink",
    "threshold", "threshold_", "glu",
    "softmax", "log_softmax", "softmin", "linear", "bilinear", "dropout", "dropout1d", "dropout2d",
    "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu", "rrelu_", "gumbel_softmax", "pdist",
    "one_hot", "normalize", "cosine_similarity", "pairwise_distance",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace_result(input, result, inplace):
    """Copy `result` into `input` when an in-place form was asked for."""
    if inplace:
        return input.copy_(result)
    return result


# ----------------------------------------------------------------------------- activations

def relu(input, inplace=False):
    """max(input, 0) elementwise."""
    return input.relu_() if inplace else _d.relu(input)


def relu_(input):
    """In-place relu."""
    return input.relu_()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """input clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype is _d.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if input.dtype is _d.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return _inplace_result(input, _clip(input, min_val, max_val, input), inplace)


def _check_float(input, kernel):
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(input.dtype)}'")


def _clip(input, low, high, inside):
    """``inside`` where low < input < high, else input clamped to [low, high] without a
    gradient: PyTorch's hard activations have a zero gradient at the edges (clamp has one)."""
    clipped = input.clamp(low, high).detach().to(input.dtype)      # integers stay integers
    return _d.where((input > low) & (input < high), inside, clipped)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place hardtanh."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(input, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """input where positive, negative_slope * input elsewhere."""
    _check_float(input, "leaky_relu_cpu")
    return _inplace_result(input, _d.where(input > 0, input, input * negative_slope), inplace)


def leaky_relu_(input, negative_slope=0.01):
    """In-place leaky_relu."""
    return leaky_relu(input, negative_slope, inplace=True)


def _expm1_neg(input, scale=1.0):
    # expm1 of the non-positive part only: the discarded branch never overflows, so its zero
    # gradient never meets an infinity (0 * inf would be nan)
    x = input.masked_fill(input > 0, 0)      # (keeps -0: elu(-0) is -0)
    return (x / scale).expm1() if scale != 1.0 else x.expm1()


def _in_float(input, compute):
    """``compute(input)``, for a float16/bfloat16 input computed in float32 and rounded once
    to its type, as PyTorch's activation kernels do (each step of the formula rounding to
    the half type would differ in a third of the elements)."""
    if input.dtype is _d.float16 or input.dtype is _d.bfloat16:
        return compute(input.float()).to(input.dtype)
    return compute(input)


def elu(input, alpha=1.0, inplace=False):
    """input where positive, alpha * (exp(input) - 1) elsewhere."""
    _check_float(input, "elu_cpu")
    out = _in_float(input, lambda x: _d.where(x > 0, x, _expm1_neg(x) * alpha))
    return _inplace_result(input, out, inplace)


def elu_(input, alpha=1.0):
    """In-place elu."""
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """scale * elu(input, alpha) with the self-normalizing constants."""
    _check_float(input, "elu_cpu")
    out = _in_float(input, lambda x: _d.where(x > 0, x, _expm1_neg(x) * _SELU_ALPHA) * _SELU_SCALE)
    return _inplace_result(input, out, inplace)


def selu_(input):
    """In-place selu."""
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """input where positive, alpha * (exp(input / alpha) - 1) elsewhere."""
    _check_float(input, "elu_cpu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    out = _in_float(input, lambda x: _d.where(x > 0, x, _expm1_neg(x, alpha) * alpha))
    return _inplace_result(input, out, inplace)


def celu_(input, alpha=1.0):
    """In-place celu."""
    return celu(input, alpha, inplace=True)


def gelu(input, approximate="none"):
    """Gaussian error linear unit; approximate='tanh' uses the tanh formula."""
    _check_float(input, "GeluKernelImpl")
    if approximate == "none":
        return _in_float(input, lambda x: x * 0.5 * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf()))
    if approximate == "tanh":
        def tanh_gelu(x):
            inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
            return x * 0.5 * (1.0 + inner.tanh())
        return _in_float(input, tanh_gelu)
    raise RuntimeError("approximate argument must be either none or tanh.")


def silu(input, inplace=False):
    """input * sigmoid(input)."""
    _check_float(input, "silu_cpu")
    return _inplace_result(input, _in_float(input, lambda x: x * x.sigmoid()), inplace)


def mish(input, inplace=False):
    """input * tanh(softplus(input))."""
    _check_float(input, "mish_cpu")
    return _inplace_result(input, _in_float(input, lambda x: x * softplus(x).tanh()), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * input)) / beta, linear where beta * input > threshold."""
    _check_float(input, "softplus_cpu")

    def compute(x):
        scaled = x * beta
        # exp of the clamped value: the linear branch never overflows the discarded one
        soft = scaled.clamp(max=threshold).exp().log1p()
        if beta != 1.0:
            soft = soft / beta
        return _d.where(scaled > threshold, x, soft)
    return _in_float(input, compute)


def softsign(input):
    """input / (1 + |input|)."""
    return input / (input.abs() + 1)


def hardsigmoid(input, inplace=False):
    """relu6(input + 3) / 6."""
    _check_float(input, "hardsigmoid_cpu")
    out = _in_float(input, lambda x: _d.where((x > -3.0) & (x < 3.0), x / 6 + 0.5,
                                              (x / 6 + 0.5).clamp(0.0, 1.0).detach()))
    return _inplace_result(input, out, inplace)


def hardswish(input, inplace=False):
    """input * relu6(input + 3) / 6."""
    _check_float(input, "hardswish_cpu")
    # gradient 0 up to -3 (inclusive), x/3 + 1/2 inside, 1 from 3 on, as PyTorch's kernel
    out = _in_float(input, lambda x: _d.where(x <= -3.0, x * 0.0, _d.where(x < 3.0, x * (x + 3) / 6, x)))
    return _inplace_result(input, out, inplace)


def sigmoid(input):
    """1 / (1 + exp(-input))."""
    return _d.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent."""
    return _d.tanh(input)


def logsigmoid(input):
    """log(sigmoid(input)) = -softplus(-input), stable for large |input|."""
    _check_float(input, "log_sigmoid_cpu")
    # 0.0 - (not neg): log(sigmoid(1000)) is +0.0 as in torch
    return _in_float(input, lambda x: 0.0 - _softplus(-x))


def tanhshrink(input):
    """input - tanh(input)."""
    return input - input.tanh()


def _check_shrink(input, kernel):
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{type_name(input.dtype)}'")


def hardshrink(input, lambd=0.5):
    """input where |input| > lambd, 0 elsewhere (NaN stays NaN)."""
    _check_shrink(input, "hardshrink_cpu")
    if math.isfinite(lambd) and abs(lambd) > _d.finfo(input.dtype).max:     # lambd takes its type
        raise RuntimeError(f"value cannot be converted to type {input.dtype.cpp_type} without "
                           "overflow")
    inside = (input >= -lambd) & (input <= lambd)
    return _d.where(inside, _d.zeros((), dtype=input.dtype), input)


def softshrink(input, lambd=0.5):
    """input moved towards 0 by lambd, 0 within [-lambd, lambd]: input - clamp(input, ±lambd)."""
    _check_shrink(input, "softshrink_check")
    top = _d.finfo(input.dtype).max
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype "
                           f"{type_name(input.dtype)}, but found {lambd:g}")
    return input - input.clamp(-lambd, lambd)


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, value elsewhere."""
    if input.dtype is _d.bool:
        raise NotImplementedError("\"threshold_cpu\" not implemented for 'Bool'")
    out = _d.where(input > threshold, input, _d.full_like(input, value))
    return _inplace_result(input, out, inplace)


def threshold_(input, threshold, value):
    """In-place threshold."""
    return globals()["threshold"](input, threshold, value, inplace=True)


def glu(input, dim=-1):
    """Gated linear unit: first half * sigmoid(second half) along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension "
                           f"{dim % input.dim()} is size {size}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


# ----------------------------------------------------------------------------- softmax family

def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _shifted(x, dim):
    """x minus its (constant, detached) max along dim, so exp cannot overflow; an empty dim
    has no max and nothing to shift."""
    if x.dim() and x.shape[dim] == 0:
        return x
    return x - x.amax(dim, keepdim=True).detach()


def _softmax_input(name, input, dim, dtype):
    """input cast to dtype and contiguous (PyTorch's kernels work on a contiguous copy, so
    their results are contiguous); they refuse integer and bool inputs."""
    x = input if dtype is None else input.to(dtype)
    if not x.dtype.is_floating_point:
        last = "lastdim_" if dim % max(x.dim(), 1) == max(x.dim(), 1) - 1 else ""
        raise NotImplementedError(
            f"\"{name}_{last}kernel_impl\" not implemented for '{type_name(x.dtype)}'")
    return x.contiguous()


def _log_softmax(x, dim):
    shifted = _shifted(x, dim)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    x = _softmax_input("softmax", input, dim, dtype)

    def compute(x):
        e = _shifted(x, dim).exp()
        return e / e.sum(dim, keepdim=True)
    return _in_float(x, compute)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along dim, computed stably."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    x = _softmax_input("log_softmax", input, dim, dtype)
    return _in_float(x, lambda x: _log_softmax(x, dim))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along dim."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return softmax(-input, dim, dtype=dtype)     # negated first: a bool input fails, as in PyTorch


# ----------------------------------------------------------------------------- linear layers

def linear(input, weight, bias=None):
    """input @ weight.T + bias (one addmm for a batch of vectors, so grad_fn is AddmmBackward0)."""
    if bias is not None and input.dim() == 2 and weight.dim() == 2 and bias.dim() == 1:
        return _d.addmm(bias, input, weight.t())
    out = _d.matmul(input, weight.t())
    return out if bias is None else out + bias


def bilinear(input1, input2, weight, bias=None):
    """out[..., k] = input1 @ weight[k] @ input2 + bias[k]."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and "
                           f"{input2.dim()}")
    out = _d.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out if bias is None else out + bias


# ----------------------------------------------------------------------------- dropout

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input, shape, p):
    return input.new_empty(shape).bernoulli_(1.0 - p)


def _apply_mask(input, mask, p, inplace):
    scale = mask / (1.0 - p) if p < 1.0 else mask
    return input.mul_(scale) if inplace else input * scale


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training only)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _apply_mask(input, _keep_mask(input, input.shape, p), p, inplace)


def _feature_dropout(input, p, training, inplace, batched_dim):
    _check_p(p)
    if not training or p == 0.0:
        return input
    nd = input.dim()
    # one draw per channel: the feature dims are broadcast
    lead = 2 if nd == batched_dim else 1
    shape = tuple(input.shape[:lead]) + (1,) * (nd - lead)
    return _apply_mask(input, _keep_mask(input, shape, p), p, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input."""
    return _feature_dropout(input, p, training, inplace, 4)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input."""
    return _feature_dropout(input, p, training, inplace, 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps the self-normalizing mean and variance (for selu networks)."""
    return _alpha_dropout(input, p, training, inplace, input.shape)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels: one draw per (N, C) of (N, C, *) input."""
    _check_p(p)
    if training and p != 0.0 and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return _alpha_dropout(input, p, training, inplace, shape)


def _alpha_dropout(input, p, training, inplace, mask_shape):
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace else input * 0
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    keep = _keep_mask(input, mask_shape, p)
    b = (keep - 1) * (alpha * a) + alpha * a * p
    out = input * (keep * a) + b
    return _inplace_result(input, out, inplace)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, *, generator=None):
    """leaky_relu with a slope drawn from U(lower, upper) per element while training, and the
    mean slope (lower + upper) / 2 otherwise."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    if not input.is_floating_point():
        raise NotImplementedError(
            f'"rrelu_with_noise_out_cpu" not implemented for \'{type_name(input.dtype)}\'')
    slope = _d.empty_like(input).uniform_(lower, upper, generator=generator)
    return _inplace_result(input, _d.where(input > 0, input, input * slope), inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, *, generator=None):
    """In-place rrelu."""
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); with hard=True the one-hot of its argmax forward
    and the soft sample's gradient backward (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -_d.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _d.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def pdist(input, p=2):
    """The p-norm distance between each pair of rows i < j of (N, M) input, in row-major order."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    # the pairs depend on the size only: constants, not a data-dependent mask
    i = _d.tensor([i for i in range(n) for _ in range(i + 1, n)], dtype=_d.int64, device=input.device)
    j = _d.tensor([j for i in range(n) for j in range(i + 1, n)], dtype=_d.int64, device=input.device)
    return (input.index_select(0, i) - input.index_select(0, j)).norm(p, -1)


# ----------------------------------------------------------------------------- misc

def one_hot(tensor, num_classes=-1):
    """(..., num_classes) int64 tensor with a 1 at each index."""
    if tensor.dtype != _d.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    elif tensor.numel() and int(tensor.max().item()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    if tensor.numel() and int(tensor.min().item()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    return (tensor.unsqueeze(-1) == _d.arange(num_classes, device=tensor.device)).long()


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p, eps) along dim."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is not None:
        return _d.div(input, denom, out=out)
    return input / denom


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between x1 and x2 along dim (norms clamped below by eps)."""
    if x1.shape != x2.shape:        # the norms are taken along dim of the broadcast operands
        x1, x2 = _d.broadcast_tensors(x1, x2)
    n1 = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim."""
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


# ----------------------------------------------------------------------------- losses

def _warn_size(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input size "
                      f"({input.size()}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=stacklevel)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error."""
    _check_float(input if input.is_floating_point() else target, "mse_cpu")   # the promoted dtype
    _warn_size(input, target)
    red = _reduction(size_average, reduce, reduction)
    loss = (input - target).square()
    if weight is not None:
        loss = loss * weight
    return shown_as(_reduce(loss, red), "MseLossBackward0")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error."""
    _warn_size(input, target)
    red = _reduction(size_average, reduce, reduction)
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Squared error below beta (scaled by 1/beta), absolute error above."""
    _check_float(input if input.is_floating_point() else target, "smooth_l1_cpu")
    _warn_size(input, target)
    red = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    diff = (input - target).abs()
    if beta == 0.0:
        return shown_as(_reduce(diff, red), "SmoothL1LossBackward0")
    loss = _d.where(diff < beta, diff.square() * (0.5 / beta), diff - 0.5 * beta)
    return shown_as(_reduce(loss, red), "SmoothL1LossBackward0")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Squared error below delta, delta-scaled absolute error above."""
    _check_float(input if input.is_floating_point() else target, "huber_cpu")
    _warn_size(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    diff = (input - target).abs()
    loss = _d.where(diff < delta, diff.square() * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return shown_as(_reduce(loss, reduction), "HuberLossBackward0")


def _check_nll_shapes(input, target):
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if input.dim() > 1 and target.dim() >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0]}).")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of the target class; input holds log-probabilities on dim 1."""
    red = _reduction(size_average, reduce, reduction)
    if target.dtype not in (_d.int64, _d.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{type_name(target.dtype)}")
    _check_nll_shapes(input, target)
    _check_float(input, "nll_loss_out_frame" if input.dim() <= 2 else "nll_loss2d_forward_out_frame")
    if red not in ("none", "mean", "sum"):
        raise ValueError(f"{red} is not a valid value for reduction")
    if target.dtype is _d.uint8:
        target = target.long()      # gather's index; PyTorch compares its values as int64 too
    unbatched = input.dim() == 1  # (C,) with a 0-dim target
    if unbatched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    n_classes = input.shape[1]
    ignored = _host_targets(target, ignore_index, n_classes)
    if ignored is False:
        return shown_as(_nll_all_valid(input, target, weight, red, unbatched), "NllLossBackward0")
    valid = target != ignore_index
    safe = _d.where(valid, target, _d.zeros_like(target))
    # eager checks the targets here; compiled code relies on gather's own bounds check
    if ignored is None and not _tracing() and \
            bool(((safe < 0) | (safe >= n_classes)).any().item()):
        bad = int(safe[(safe < 0) | (safe >= n_classes)][0].item())
        raise IndexError(f"Target {bad} is out of bounds.")
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * weight[safe]
    loss = -picked * w
    if red == "none":
        loss = loss.squeeze(0) if unbatched else loss
    elif red == "sum":
        loss = loss.sum()
    else:
        loss = _weighted_mean(loss.sum(), w.sum())
    return shown_as(loss, "NllLossBackward0")


_INT64_RANGE = range(-2 ** 63, 2 ** 63)


def _host_targets(target, ignore_index, n_classes):
    """Eager int64 targets in host memory, read directly (the ops that check them cost more
    than the loss): raise PyTorch's IndexError for a class outside [0, n_classes), ignored
    entries aside, and say whether any entry is ignored.  None where the ops decide: while
    tracing (the graph must not depend on the values), for device targets and an
    ``ignore_index`` that is not an int64."""
    if _tracing() or not target.is_cpu \
            or type(ignore_index) is not int or ignore_index not in _INT64_RANGE:
        return None
    t = target.numpy()
    if not t.size:
        return False
    low, high = int(t.min()), int(t.max())
    if 0 <= low and high < n_classes and not low <= ignore_index <= high:
        return False            # the usual case: two reductions tell
    ignored = t == ignore_index
    some = bool(ignored.any())
    bad = (t < 0) | (t >= n_classes)
    if some:
        bad &= ~ignored
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    return some


def _nll_all_valid(input, target, weight, red, unbatched):
    """nll_loss where no target is ignored (checked in range): each entry's weight is 1 or its
    class's weight, so the general formula's masks drop out (multiplying by 1.0 and summing
    ones are exact: the same values and gradients)."""
    picked = input.gather(1, target.unsqueeze(1)).squeeze(1)
    if weight is None:
        loss = -picked
        n = loss.numel()
        if red == "mean" and 0 < n <= 2 ** 24 and input.dtype in (_d.float32, _d.float64):
            # the weights' sum is n, exactly (a Python number divides in the tensor's dtype)
            return loss.sum() / float(n)
        w = None
    else:
        w = weight[target]
        wdt = _d.promote_types(input.dtype, weight.dtype)
        if w.dtype is not wdt:
            w = w.to(wdt)
        loss = -picked * w
    if red == "none":
        return loss.squeeze(0) if unbatched else loss
    if red == "sum":
        return loss.sum()
    if w is None:
        w = _d.ones_like(loss)
    return _weighted_mean(loss.sum(), w.sum())


def _weighted_mean(total, wsum):
    if not _tracing() and wsum.is_cpu and wsum.item() != 0:
        return total / wsum     # eager, weights that do not sum to zero: no mask needed
    # all targets ignored: nan as in PyTorch, but zero (not nan) gradients
    empty = wsum == 0
    # masked_fill keeps the loss's dtype (a float16 loss stays float16)
    return (total / _d.where(empty, _d.ones_like(wsum), wsum)).masked_fill(empty, math.nan)


def _class_weight_view(weight, input):
    # weight (C,) broadcast against input (N, C, d1, ...)
    return weight.reshape((1, -1) + (1,) * (input.dim() - 2))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 followed by nll_loss (class indices) or a dot with probabilities."""
    red = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    _check_nll_shapes(input, target)
    class_dim = 0 if input.dim() == 1 else 1
    logp = log_softmax(input, class_dim)
    n_classes = input.shape[class_dim]
    if target.is_floating_point():
        return _cross_entropy_probs(logp, target, weight, red, label_smoothing, n_classes)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, red)
    if label_smoothing == 0.0:
        return nll
    unbatched = logp.dim() == 1
    if unbatched:
        logp, target = logp.unsqueeze(0), target.unsqueeze(0)
    valid = target != ignore_index
    wlogp = logp if weight is None else logp * _class_weight_view(weight, logp)
    smooth = -wlogp.sum(1) * valid.to(logp.dtype)
    if red == "mean":
        if weight is None:
            smooth = _weighted_mean(smooth.sum(), valid.sum().to(smooth.dtype))
        else:
            safe = _d.where(valid, target, _d.zeros_like(target))
            smooth = _weighted_mean(smooth.sum(), (weight[safe] * valid.to(weight.dtype)).sum())
    elif red == "sum":
        smooth = smooth.sum()
    elif unbatched:
        smooth = smooth.squeeze(0)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _cross_entropy_probs(logp, target, weight, red, label_smoothing, n_classes):
    if tuple(logp.shape) != tuple(target.shape):
        raise RuntimeError(f"Expected input and target of the same shape, got {list(logp.shape)} "
                           f"and {list(target.shape)}")
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    prod = logp * target
    if weight is not None:
        prod = prod * (weight if logp.dim() == 1 else _class_weight_view(weight, logp))
    class_dim = 0 if logp.dim() == 1 else 1
    loss = -prod.sum(class_dim)
    if red == "mean":
        return loss.sum() / (logp.numel() // n_classes) if logp.numel() else loss.sum() / 0.0
    return _reduce(loss, red)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), with each log clamped below at -100 as in PyTorch."""
    red = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input "
                         f"size ({input.size()}) is deprecated. Please ensure they have the same "
                         "size.")
    loss = -(target * input.log().clamp_min(-100) + (1 - target) * (1 - input).log().clamp_min(-100))
    if weight is not None:
        loss = loss * weight
    return shown_as(_reduce(loss, red), "BinaryCrossEntropyBackward0")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross entropy in one stable formula (finite for logits of +-1000)."""
    red = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size "
                         f"({input.size()})")
    log1p_exp_neg = _softplus(-input)      # log(1 + exp(-x)) without overflow
    if pos_weight is None:
        loss = (1 - target) * input + log1p_exp_neg
    else:
        loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * log1p_exp_neg
    if weight is not None:
        loss = loss * weight
    return shown_as(_reduce(loss, red), "BinaryCrossEntropyWithLogitsBackward0")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence target * (log target - input); input holds log-probabilities."""
    red = _reduction(size_average, reduce, reduction)
    if red == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _d.xlogy(target, target) - target * input
    if red == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    return _reduce(loss, red)


# The larger areas live in dynograph/nn/_functional/; they are part of this module's namespace.
from ._functional import attention, conv, losses, normalization, padding, pooling, sampling  # noqa: E402

for _area in (conv, pooling, sampling, normalization, losses, attention, padding):
    globals().update({_name: getattr(_area, _name) for _name in _area.__all__})
    __all__ += _area.__all__
del _area

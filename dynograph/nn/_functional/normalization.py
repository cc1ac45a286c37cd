"""Batch, layer, group and instance normalization, and embeddings."""
import math

import dynograph as _d
from dynograph._dispatch import call as _call
from dynograph.compiler.ops import indexing as _indexing_ops
from dynograph.compiler.ops import normalization as _ops
from dynograph.compiler.ops.core import type_name as _type_name

__all__ = ["layer_norm", "rms_norm", "batch_norm", "instance_norm", "group_norm", "local_response_norm",
           "prelu", "embedding", "embedding_bag"]


def size_text(shape):
    """A shape the way torch prints it in these errors: [2, 3]."""
    return "[" + ", ".join(str(int(n)) for n in shape) + "]"


def _normalized_shape(name, normalized_shape):
    if isinstance(normalized_shape, int) or not hasattr(normalized_shape, "__iter__"):
        raise TypeError(f"{name}(): argument 'normalized_shape' (position 2) must be tuple of ints, "
                        f"not {type(normalized_shape).__name__}")
    return tuple(int(n) for n in normalized_shape)


def _check_normalized(input, shape, weight, bias, sep=", "):
    """torch's checks of normalized_shape against the input, weight and bias."""
    if not shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing "
                           "at least one element, but got normalized_shape = []")
    for label, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {label} to be of same shape as normalized_shape, but got "
                               f"{label} of shape {size_text(t.shape)} and normalized_shape = "
                               f"{size_text(shape)}")
    n = len(shape)
    if input.dim() < n or tuple(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={size_text(shape)}, expected input with shape "
                           f"[*{sep}{', '.join(str(s) for s in shape)}], but got input of size"
                           f"{size_text(input.shape)}")
    return tuple(range(-n, 0))


def _opmath(input):
    """float16 and bfloat16 input is normalized in float32 (as torch computes), then cast back."""
    return input.float() if input.dtype in (_d.float16, _d.bfloat16) else input


def _cast_back(out, input):
    return out.to(input.dtype) if input.dtype in (_d.float16, _d.bfloat16) else out


def _check_dtypes(kernel, input, *params):
    """torch's dtype errors: a floating input, and parameters of its dtype (float32 ones may go
    with float16 or bfloat16 input)."""
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(input.dtype)}'")
    low = input.dtype in (_d.float16, _d.bfloat16)
    for p in params:
        if p is not None and p.dtype != input.dtype and not (low and p.dtype == _d.float32):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _moments(x, dims):
    """The mean and biased variance over ``dims``, kept as size-1 dims."""
    return x.mean(dims, keepdim=True), x.var(dims, correction=0, keepdim=True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` dims (biased variance), then scale and shift."""
    shape = _normalized_shape("layer_norm", normalized_shape)
    dims = _check_normalized(input, shape, weight, bias)
    _check_dtypes("LayerNormKernelImpl", input, weight, bias)
    x = _opmath(input)
    mean, var = _moments(x, dims)
    return _cast_back(_normalize(x, mean, var, weight, bias, eps, "layer"), input)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, times weight.

    eps=None uses the machine epsilon of the input's dtype, as torch does.
    """
    shape = _normalized_shape("rms_norm", normalized_shape)
    dims = _check_normalized(input, shape, weight, None, sep="")  # torch prints [*3] here
    if not input.is_floating_point():
        _check_dtypes("rms_norm", input)
    if eps is None:
        eps = _d.finfo(input.dtype).eps
    x = _opmath(input)
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    return _cast_back(out if weight is None else out * weight, input)


# ----------------------------------------------------------------------------- batch norm

def _verify_batch_size(size):
    n = size[0]
    for s in size[2:]:
        n *= s
    if n == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def _channel_view(input):
    """The shape (1, C, 1, ...) that broadcasts a per-channel vector against ``input``."""
    return (1, input.shape[1]) + (1,) * (input.dim() - 2)


def _check_numel(label, t, expected, repeat=1):
    if t is not None and t.numel() * repeat != expected:
        raise RuntimeError(f"{label} should contain {expected} elements not {t.numel() * repeat}")


def _update_running(running, batch_value, momentum):
    """running = (1 - momentum) * running + momentum * batch_value, in place and untracked."""
    with _d.no_grad():
        running.mul_(1 - momentum).add_(batch_value.detach().to(running.dtype) * momentum)


def _normalize(x, mean, var, weight, bias, eps, kind):
    """(x - mean) / sqrt(var + eps) * weight + bias as one op (its grad_fn has torch's name)."""
    return _call(_ops.affine_normalize, x, mean, var, 1 if weight is None else weight,
                0 if bias is None else bias, eps=float(eps), kind=kind)


def _per_channel(t, view):
    return None if t is None else t.reshape(view)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """Per-channel normalization over the batch and spatial dims (dim 1 holds the channels).

    In training the batch statistics normalize and, when given, ``running_mean`` and
    ``running_var`` are updated in place (the variance unbiased), as torch does; otherwise the
    running statistics normalize.
    """
    if training:
        _verify_batch_size(input.size())
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if momentum is None or isinstance(momentum, bool):
        raise TypeError("batch_norm(): argument 'momentum' (position 7) must be float, not "
                        f"{type(momentum).__name__}")
    if input.numel() == 0 and input.dim() < 2:
        return input.clone()        # no channels to normalize (PyTorch returns the empty input)
    channels = input.size(1)
    for label, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                     ("bias", bias)):
        _check_numel(label, t, channels)
    _check_dtypes("batch_norm", input, weight, bias, running_mean, running_var)
    if input.numel() == 0:
        return input.clone()        # no statistics to take: PyTorch leaves the running ones alone
    view = _channel_view(input)
    x = _opmath(input)
    if training:
        dims = (0,) + tuple(range(2, input.dim()))
        mean, var = _moments(x, dims)
        n = input.numel() // channels
        if running_mean is not None:
            _update_running(running_mean, mean.reshape(channels), momentum)
        if running_var is not None:
            _update_running(running_var, var.reshape(channels) * (n / max(n - 1, 1)), momentum)
    else:
        for label, t in (("running_mean", running_mean), ("running_var", running_var)):
            if t is None:
                raise RuntimeError(f"{label} must be defined in evaluation mode")
        mean, var = running_mean.reshape(view), running_var.reshape(view)
    out = _normalize(x, mean, var, _per_channel(weight, view), _per_channel(bias, view), eps, "batch")
    return _cast_back(out, input)


def _verify_spatial_size(size):
    n = 1
    for s in size[2:]:
        n *= s
    if n == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {size}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Per-sample, per-channel normalization over the spatial dims.

    With ``use_input_stats`` the running statistics (when given) move towards the average over
    the batch of the per-instance statistics; otherwise they normalize.
    """
    if use_input_stats:
        _verify_spatial_size(input.size())
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats "
                           "is false")
    batch, channels = input.shape[0], input.size(1)
    for label, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                     ("bias", bias)):
        _check_numel(label, t, batch * channels, repeat=batch)   # torch repeats them per sample
    _check_dtypes("batch_norm", input, weight, bias, running_mean, running_var)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.numel() == 0:
        return input.clone()        # no statistics to take (nor running ones to update)
    dims = tuple(range(2, input.dim()))
    x = _opmath(input)
    mean, var = _moments(x, dims)
    n = input.numel() // (batch * channels)
    if running_mean is not None:
        _update_running(running_mean, mean.reshape(batch, channels).mean(0), momentum)
    if running_var is not None:
        unbiased = var.reshape(batch, channels) * (n / max(n - 1, 1))
        _update_running(running_var, unbiased.mean(0), momentum)
    view = _channel_view(input)
    out = _normalize(x, mean, var, _per_channel(weight, view), _per_channel(bias, view), eps, "batch")
    return _cast_back(out, input)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalization over groups of channels (and the spatial dims) of each sample."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    shape = tuple(input.shape)
    batch, channels = shape[0], shape[1]
    _verify_batch_size([batch * channels // num_groups, num_groups] + list(shape[2:]))
    if channels % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but "
                           f"got input of shape {size_text(shape)} and num_groups={num_groups}")
    for label, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.numel() != channels):
            raise RuntimeError(f"Expected {label} to be a vector of size equal to the number of "
                               f"channels in input, but got {label} of shape {size_text(t.shape)} "
                               f"and input of shape {size_text(shape)}")
    _check_dtypes("GroupNormKernelImpl", input, weight, bias)
    if input.numel() == 0:
        return input.clone()        # empty groups have no statistics (and need none)
    x = _opmath(input)
    grouped = x.reshape(batch, num_groups, (channels // num_groups) * math.prod(shape[2:]))
    mean, var = _moments(grouped, -1)
    # the group statistics repeated for each channel of the group, shaped (N, C, 1, ...)
    view = _channel_view(input)
    per_channel = (batch, channels) + view[2:]
    mean = mean.repeat_interleave(channels // num_groups, 1).reshape(per_channel)
    var = var.repeat_interleave(channels // num_groups, 1).reshape(per_channel)
    out = _normalize(x, mean, var, _per_channel(weight, view), _per_channel(bias, view), eps, "group")
    return _cast_back(out, input)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of input^2 over a window of ``size`` channels) ** beta."""
    dim = input.dim()
    if dim < 3:
        raise ValueError("Expected 3D or higher dimensionality                          "
                         f"input (got {dim} dimensions)")
    if size <= 0:
        kernel = f"kH: {size} kW: 1" if dim == 3 else f"kT: {size} kH: 1 kW: 1"
        raise RuntimeError(f"kernel size should be greater than zero, but got {kernel}")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    square = input * input
    # zero channels before and after, as torch's padded average pool over channels
    lo, hi = size // 2, (size - 1) // 2
    parts = [square]
    if lo:
        parts.insert(0, square.new_zeros((input.shape[0], lo) + tuple(input.shape[2:])))
    if hi:
        parts.append(square.new_zeros((input.shape[0], hi) + tuple(input.shape[2:])))
    padded = _d.cat(parts, 1) if len(parts) > 1 else square
    window = padded.narrow(1, 0, channels)
    for i in range(1, size):
        window = window + padded.narrow(1, i, channels)
    div = (window / size * alpha + k).pow(beta)
    return input / div


# ----------------------------------------------------------------------------- prelu

def prelu(input, weight):
    """max(0, x) + weight * min(0, x), with one weight per channel (dim 1) or one for all."""
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = "
                           f"{weight.dim()}")
    if not input.is_floating_point():
        _check_dtypes("prelu_cpu", input)
    count = weight.numel()
    channels = input.shape[1] if input.dim() >= 2 else 1
    if count != 1 and count != channels:
        raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter "
                           f"numbers = {count} and channel size = {channels}.")
    if count != 1 and input.dim() > 2:
        weight = weight.reshape((channels,) + (1,) * (input.dim() - 2))
    elif count == 1:
        weight = weight.reshape(())
    return _call(_ops.prelu, input, weight)


# ----------------------------------------------------------------------------- embeddings

def padding_index(padding_idx, num_embeddings, what="Padding_idx", none=-1):
    """padding_idx made non-negative (``none`` for None), with torch's AssertionError (naming it
    ``what``) when out of range. The Embedding and EmbeddingBag modules share it."""
    if padding_idx is None:
        return none
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError(f"{what} must be within num_embeddings")
    return padding_idx % num_embeddings


def _lookup(weight, indices, padding_idx=-1, scale_grad_by_freq=False):
    """The embedding primitive; an index out of range is torch's IndexError."""
    try:
        return _call(_ops.embedding, weight, indices, num_weights=weight.shape[0] if weight.dim() else 0,
                     padding_idx=padding_idx, scale_grad_by_freq=bool(scale_grad_by_freq))
    except RuntimeError as e:
        if isinstance(e.__context__, _indexing_ops.IndexOutOfRange):
            raise IndexError(str(e.__context__)) from None
        raise


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescale, in place and untracked, the rows of ``weight`` that ``input`` references and
    whose ``norm_type`` norm exceeds ``max_norm`` (torch.embedding_renorm_)."""
    with _d.no_grad():
        w = weight.detach()
        rows = input.reshape(-1).unique()
        selected = w.index_select(0, rows)
        norms = _d.linalg.vector_norm(selected, norm_type, dim=1, keepdim=True)
        scale = _d.where(norms > max_norm, max_norm / (norms + 1e-7), _d.ones_like(norms))
        w.index_copy_(0, rows, selected * scale)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer ``input``: out[..., :] = weight[input[...], :].

    The ``padding_idx`` row gets no gradient; ``max_norm`` first rescales the referenced rows of
    ``weight`` in place.  dynograph has no sparse tensors: ``sparse=True`` yields a dense gradient.
    """
    padding_idx = padding_index(padding_idx, weight.size(0))
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    return _lookup(weight, input, padding_idx, scale_grad_by_freq)


def _bag_inputs(input, offsets, per_sample_weights, include_last_offset):
    """input and per_sample_weights as 1-D, offsets and include_last_offset as torch sets them."""
    if input.dim() == 2:
        if offsets is not None:
            kind = "<class 'dynograph.Tensor'>" if isinstance(offsets, _d.Tensor) else str(type(offsets))
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a "
                             "mini-batch of fixed length sequences. However, found offsets of type "
                             f"{kind}")
        offsets = _d.arange(0, input.numel(), input.size(1), dtype=input.dtype, device=input.device)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        return input.reshape(-1), offsets, per_sample_weights, False
    if input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        return input, offsets, per_sample_weights, include_last_offset
    raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")


def _bag_padding(padding_idx, num_embeddings):
    if padding_idx is None:
        return -1
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise RuntimeError(f"padding_idx must be within the number of embeddings, {-num_embeddings} "
                           f"through {num_embeddings - 1}, but got {padding_idx}")
    return padding_idx % num_embeddings


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embeddings, without building the per-index embeddings' batch.

    A bag is one row of a 2-D ``input``, or the run of a 1-D ``input`` from one ``offsets``
    entry to the next.  Entries equal to ``padding_idx`` are left out (an empty bag is zeros).
    """
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not "
                         f"None, then it must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    input, offsets, per_sample_weights, include_last_offset = _bag_inputs(
        input, offsets, per_sample_weights, include_last_offset)
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights "
                                  f"is only supported for mode='sum' (got mode='{mode}'). Please open "
                                  "a feature request on GitHub.")
    padding_idx = _bag_padding(padding_idx, weight.size(0))
    _check_offsets(input, offsets)
    return _bag_reduce(input, weight, offsets, mode, per_sample_weights, include_last_offset,
                       padding_idx, scale_grad_by_freq)


def _tensor_type(input, offsets):
    """'LongTensor' or 'IntTensor': the indices' common type as torch's C++ printer names it."""
    return f"{_type_name(_d.promote_types(input.dtype, offsets.dtype))}Tensor"


def _check_offsets(input, offsets):
    """torch's checks of the offsets' values (they are data: reading them costs a sync)."""
    if offsets.numel() == 0:
        return
    first, last = int(offsets[0]), int(offsets[-1])
    if first != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                           f"start from position 0. However, got {first}\n"
                           f"[ dynograph.{_tensor_type(input, offsets)}{{}} ]")   # torch prints the value
    if last > input.numel():
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.numel()} but got "
                           f"offsets[-1] of {last}")


def _bag_lookup(weight, input, scale_grad_by_freq):
    """The rows of every index; an index out of range is named with its position, as torch does."""
    try:
        return _lookup(weight, input, -1, scale_grad_by_freq)
    except IndexError:
        n = weight.shape[0]
        pos = int(((input < 0) | (input >= n)).nonzero()[0, 0])
        raise RuntimeError(f"Index {pos} of input takes value {int(input[pos])} which is not in the "
                           f"valid range [0, {n})") from None


def _bag_reduce(input, weight, offsets, mode, per_sample_weights, include_last_offset, padding_idx,
                scale_grad_by_freq):
    """Scatter each looked-up row into its bag; left-out rows go to one extra bag, dropped after."""
    bags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    starts = offsets[:bags].to(_d.int64)
    positions = _d.arange(input.numel(), device=input.device)
    bag = _d.searchsorted(starts, positions, right=True) - 1
    keep = (input != padding_idx) & (bag >= 0)
    if include_last_offset:
        keep = keep & (positions < offsets[bags])
    bag = _d.where(keep, bag, _d.full_like(bag, bags))
    rows = _bag_lookup(weight, input, scale_grad_by_freq)
    dim = weight.shape[1]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    zeros = rows.new_zeros((bags + 1, dim))
    if mode == "max":
        target = bag.unsqueeze(1).expand(bag.shape[0], dim)
        out = zeros.scatter_reduce(0, target, rows, "amax", include_self=False)
        return out[:bags]
    out = zeros.index_add(0, bag, rows)[:bags]
    if mode == "mean":
        counts = rows.new_zeros(bags + 1).index_add(0, bag, keep.to(rows.dtype))[:bags]
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out

"""Batch, layer, group and instance normalization, and embeddings."""
import dynograph as _d

__all__ = ["layer_norm", "rms_norm"]


def _size_text(shape):
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
                               f"{label} of shape {_size_text(t.shape)} and normalized_shape = "
                               f"{_size_text(shape)}")
    n = len(shape)
    if input.dim() < n or tuple(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={_size_text(shape)}, expected input with shape "
                           f"[*{sep}{', '.join(str(s) for s in shape)}], but got input of size"
                           f"{_size_text(input.shape)}")
    return tuple(range(-n, 0))


def _affine(out, weight, bias):
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` dims (biased variance), then scale and shift."""
    shape = _normalized_shape("layer_norm", normalized_shape)
    dims = _check_normalized(input, shape, weight, bias)
    mean = input.mean(dims, keepdim=True)
    var = input.var(dims, correction=0, keepdim=True)
    return _affine((input - mean) * (var + eps).rsqrt(), weight, bias)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, times weight.

    eps=None uses the machine epsilon of the input's dtype, as torch does.
    """
    shape = _normalized_shape("rms_norm", normalized_shape)
    dims = _check_normalized(input, shape, weight, None, sep="")  # torch prints [*3] here
    if eps is None:
        eps = _d.finfo(input.dtype).eps
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return _affine(out, weight, None)

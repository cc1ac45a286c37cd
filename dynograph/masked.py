"""dynograph.masked: PyTorch's masked reductions and normalizations (``torch.masked.sum`` ...).

Each takes ``mask`` (broadcast to the input's shape): elements where it is False take no part.
They are composites: masked-out elements are replaced by the operation's identity (0 for a sum,
1 for a product, -inf for a maximum ...) before the ordinary operation runs, so a fully masked
slice gives what PyTorch gives (0, 1, -inf, nan for a mean or a softmax).  The MaskedTensor
class is not provided."""
import math

from dynograph.compiler.ops.core import wrap_dims
from dynograph.runtime import dtypes as D
from . import _creation
from ._tensor import Tensor

__all__ = ["sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm", "var",
           "std", "logsumexp", "logaddexp", "softmax", "log_softmax", "softmin", "normalize",
           "cumsum", "cumprod"]


def _mask(input, mask):
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        mask = _creation.tensor(mask)
    if mask.dtype is not D.bool:
        raise ValueError(f"mask must have dtype bool, got {mask.dtype}")
    return mask.broadcast_to(input.shape)


def _filled(input, mask, value):
    return input if mask is None else input.masked_fill(~mask, value)


def _extreme(dtype, largest):
    if dtype.is_floating_point:
        return math.inf if largest else -math.inf
    if dtype is D.bool:
        return largest
    info = D.iinfo(dtype)
    return info.max if largest else info.min


def _dims(input, dim):
    if dim is None or dim == () or dim == []:
        return tuple(range(input.dim()))
    return wrap_dims(dim, input.dim())


def _cast(input, dtype):
    return input if dtype is None else input.to(dtype)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    """Sum of the unmasked elements (0 where none is)."""
    x = _filled(_cast(input, dtype), _mask(input, mask), 0)
    return x.sum(_dims(x, dim), keepdim=keepdim)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the unmasked elements (1 where none is)."""
    x = _filled(_cast(input, dtype), _mask(input, mask), 1)
    dims = _dims(x, dim)
    for d in sorted(dims, reverse=True):
        x = x.prod(d, keepdim=keepdim) if x.dim() else x
    return x


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest unmasked element (the dtype's lowest value, -inf for floats, where none is)."""
    x = _cast(input, dtype)
    x = _filled(x, _mask(input, mask), _extreme(x.dtype, False))
    return x.amax(_dims(x, dim), keepdim=keepdim)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest unmasked element (the dtype's highest value, inf for floats, where none is)."""
    x = _cast(input, dtype)
    x = _filled(x, _mask(input, mask), _extreme(x.dtype, True))
    return x.amin(_dims(x, dim), keepdim=keepdim)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest unmasked element, in the input's dtype (as PyTorch's prototype)."""
    x = _filled(input, _mask(input, mask), _extreme(input.dtype, False))
    return x.argmax(dim, keepdim=keepdim).to(dtype or input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest unmasked element, in the input's dtype (as PyTorch's prototype)."""
    x = _filled(input, _mask(input, mask), _extreme(input.dtype, True))
    return x.argmin(dim, keepdim=keepdim).to(dtype or input.dtype)


def _count(input, mask, dims, keepdim):
    if mask is None:
        return math.prod(input.shape[d] for d in dims)
    return mask.sum(dims, keepdim=keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the unmasked elements (nan where none is)."""
    m = _mask(input, mask)
    x = _cast(input, dtype)
    dims = _dims(x, dim)
    total = _filled(x, m, 0).sum(dims, keepdim=keepdim)
    return total / _count(x, m, dims, keepdim)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of the unmasked elements along ``dim`` (nan where none is)."""
    x = _cast(input, dtype)
    if not x.dtype.is_floating_point:
        raise ValueError("masked median expects a floating point input")
    x = _filled(x, _mask(input, mask), math.nan)
    return x.nanmedian(dim, keepdim=keepdim)[0]


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A002
    """Vector ``ord``-norm of the unmasked elements (0 where none is)."""
    x = _filled(_cast(input, dtype), _mask(input, mask), 0)
    from ._reduce import vector_norm
    return vector_norm(x, ord, _dims(x, dim), keepdim)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Variance of the unmasked elements (nan where there are too few)."""
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    m = _mask(input, mask)
    x = _cast(input, dtype)
    dims = _dims(x, dim)
    n = _count(x, m, dims, True)
    centered = _filled(x - _filled(x, m, 0).sum(dims, keepdim=True) / n, m, 0)
    dof = _count(x, m, dims, keepdim) - correction
    out = (centered * centered).sum(dims, keepdim=keepdim) / dof
    # no degrees of freedom left: nan, as PyTorch (not the -0 of 0 / -1)
    return out.masked_fill(dof <= 0, math.nan) if isinstance(dof, Tensor) else \
        (out if dof > 0 else out * math.nan)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Standard deviation of the unmasked elements."""
    return var(input, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype,
               mask=mask).sqrt()


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp)) of the unmasked elements (-inf where none is)."""
    x = _filled(_cast(input, dtype), _mask(input, mask), -math.inf)
    return x.logsumexp(_dims(x, dim), keepdim=keepdim)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """logaddexp of the two inputs, a masked-out element counting as -inf."""
    a = _filled(_cast(input, dtype), _mask(input, input_mask), -math.inf)
    b = _filled(_cast(other, dtype), _mask(other, other_mask), -math.inf)
    return a.logaddexp(b)


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax over the unmasked elements (0 at masked ones, nan where none is unmasked)."""
    from .nn.functional import softmax as _softmax
    return _softmax(_filled(_cast(input, dtype), _mask(input, mask), -math.inf), dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log of :func:`softmax` (-inf at masked elements)."""
    from .nn.functional import log_softmax as _log_softmax
    return _log_softmax(_filled(_cast(input, dtype), _mask(input, mask), -math.inf), dim)


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmax of the negated unmasked elements."""
    from .nn.functional import softmax as _softmax
    return _softmax(_filled(-_cast(input, dtype), _mask(input, mask), -math.inf), dim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):  # noqa: A002
    """The unmasked elements divided by their ``ord``-norm along ``dim`` (masked ones 0)."""
    x = _filled(_cast(input, dtype), _mask(input, mask), 0)
    from ._reduce import vector_norm
    return x / vector_norm(x, ord, dim, True).clamp_min(eps)


def cumsum(input, dim, *, dtype=None, mask=None):
    """Running sum along ``dim`` over the unmasked elements."""
    return _filled(_cast(input, dtype), _mask(input, mask), 0).cumsum(dim)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Running product along ``dim`` over the unmasked elements."""
    return _filled(_cast(input, dtype), _mask(input, mask), 1).cumprod(dim)

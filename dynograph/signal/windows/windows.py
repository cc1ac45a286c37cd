"""The window functions of ``torch.signal.windows``, written as PyTorch writes them: a
``linspace`` of sample positions through elementwise functions, so the results (and,
with ``requires_grad=True``, their history) are what PyTorch gives.

``sym=True`` gives the symmetric window (filter design); ``sym=False`` the periodic one
(spectral analysis), which is the symmetric window of length ``M + 1`` without its last
sample.
"""
import math
from collections.abc import Iterable

import dynograph as _dg

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not _dg.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (_dg.float32, _dg.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _empty(dtype, device, requires_grad):
    return _dg.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)


def _ones(dtype, device, requires_grad):
    return _dg.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)


def _positions(start, end, M, dtype, device, requires_grad):
    return _dg.linspace(start, end, M, dtype=dtype, device=device, requires_grad=requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=_dg.strided,
                device=None, requires_grad=False):
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / tau
    k = _positions(-center * c, (-center + (M - 1)) * c, M, dtype, device, requires_grad)
    return _dg.exp(-_dg.abs(k))


def cosine(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)``, as SciPy defines it."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _positions(0.5 * c, (0.5 + (M - 1)) * c, M, dtype, device, requires_grad)
    return _dg.sin(k)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=_dg.strided, device=None,
             requires_grad=False):
    """The Gaussian window of standard deviation ``std`` (in samples)."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / (std * math.sqrt(2))
    k = _positions(start * c, (start + (M - 1)) * c, M, dtype, device, requires_grad)
    return _dg.exp(-(k ** 2))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=_dg.strided, device=None,
           requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - ((n - N/2) / (N/2))^2)) / I0(beta)``."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    beta = _dg.tensor(beta, dtype=dtype, device=device)
    start = -beta
    c = 2.0 * beta / (M if not sym else M - 1)
    end = _dg.minimum(beta, start + (M - 1) * c)
    k = _positions(start.item(), end.item(), M, dtype, device, requires_grad)
    return _dg.i0(_dg.sqrt(beta * beta - _dg.pow(k, 2))) / _dg.i0(beta)


def general_cosine(M, *, a, sym=True, dtype=None, layout=_dg.strided, device=None,
                   requires_grad=False):
    """The sum of cosines ``sum_i (-1)^i a_i cos(2 pi i n / N)``."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("general_cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    c = 2 * math.pi / (M if not sym else M - 1)
    k = _positions(0, (M - 1) * c, M, dtype, device, requires_grad)
    a_i = _dg.tensor([(-1) ** i * w for i, w in enumerate(a)], device=device, dtype=dtype,
                     requires_grad=requires_grad)
    i = _dg.arange(a_i.shape[0], dtype=a_i.dtype, device=a_i.device, requires_grad=a_i.requires_grad)
    return (a_i.unsqueeze(-1) * _dg.cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=_dg.strided, device=None,
                    requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / N)``: Hamming for 0.54, Hann for 0.5."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The Hamming window."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The Hann window."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The Blackman window."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The Bartlett (triangular) window."""
    dtype = dtype or _dg.get_default_dtype()
    _checks("bartlett", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    c = 2 / (M if not sym else M - 1)
    k = _positions(-1, -1 + (M - 1) * c, M, dtype, device, requires_grad)
    return 1 - _dg.abs(k)


def nuttall(M, *, sym=True, dtype=None, layout=_dg.strided, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)

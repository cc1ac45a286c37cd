"""The window factories of the top-level namespace (``hann_window``, ``kaiser_window`` ...),
computed as PyTorch's native kernels compute them: ``arange`` scaled in the requested dtype
(float16 rounds after each step as in PyTorch).  A periodic window of length L is the
symmetric window of length L + 1 without its last sample.  The result is a leaf tensor.
(``dynograph.signal.windows`` holds the newer, keyword-only family.)
"""
import math

import numpy as np

from dynograph.compiler.ops.linalg import cpp_name
from . import _creation as C
from ._math import cos, sqrt
from .autograd.grad_mode import no_grad
from .runtime import dtypes as D
from .special import i0

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window"]


def _checks(name, length, dtype, requires_grad):
    dtype = dtype or D.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(
            f"{name} expects floating point dtypes, got: TensorOptions(dtype={cpp_name(dtype)}, "
            "device=cpu, layout=Strided (default), requires_grad=false (default), "
            "pinned_memory=false, memory_format=(nullopt))")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    return dtype


def _scalar(value, dtype):
    """A Python number as PyTorch's kernels use it here: rounded to the tensor's dtype first
    (float16/bfloat16 windows differ in their last bits otherwise)."""
    return float(np.asarray(value, dtype=dtype.np))


def _window(name, length, periodic, dtype, device, requires_grad, body):
    """Shared framing: the checks, lengths 0 and 1, the periodic extension, a leaf result."""
    dtype = _checks(name, length, dtype, requires_grad)
    if length <= 1:
        return C.ones(length, dtype=dtype, device=device, requires_grad=requires_grad)
    n = length + 1 if periodic else length
    with no_grad():
        w = body(C.arange(n, dtype=dtype, device=device), n)
        if periodic:
            w = w[:n - 1].contiguous()
    return w.requires_grad_(requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """``alpha - beta cos(2 pi n / (N - 1))``."""
    def body(k, n):
        dt = k.dtype
        return cos(k * _scalar(math.pi * 2.0 / (n - 1), dt)) * _scalar(-beta, dt) + _scalar(alpha, dt)
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad, body)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """The Hann window, ``0.5 - 0.5 cos(2 pi n / (N - 1))``."""
    _checks("hann_window", window_length, dtype, requires_grad)
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    def body(k, n):
        dt = k.dtype
        w = k * _scalar(math.pi / (n - 1), dt)
        return cos(w * 4) * _scalar(0.08, dt) - cos(w * 2) * 0.5 + _scalar(0.42, dt)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, body)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The triangular window, rising from 0 to 1 and back."""
    def body(k, n):
        w = k * _scalar(2.0 / (n - 1), k.dtype)
        half = ((n - 1) >> 1) + 1
        w[half:] = 2 - w[half:]
        return w
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, body)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)`` with ``a = (N - 1) / 2``."""
    def body(k, n):
        alpha = (n - 1) / 2.0
        wide = k.to(D.float32) if k.dtype in (D.float16, D.bfloat16) else k   # opmath
        r = i0(sqrt((1 - ((wide - alpha) / alpha) ** 2).abs()) * beta) / i0(wide.new_tensor(beta))
        return r.to(k.dtype)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, body)

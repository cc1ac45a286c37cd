"""The fused multiply-add ``a * b + c`` rounded once, as PyTorch's CPU kernels compute it
(lerp's and addcmul's vectorized loops call fmadd, and their scalar loops are contracted
to it).  numpy has no fma: float32 operands multiply exactly in float64 and the sum is
rounded to odd there where it matters, so that the rounding to float32 is the correct one; float64
operands use the error-free product (Veltkamp-Dekker) and sum."""
import numpy as np

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_SPLIT = 134217729.0        # 2**27 + 1


def fma(a, b, c):
    """``a * b + c`` with one rounding, for float32 and float64 arrays (and numbers, which
    take the arrays' dtype); other dtypes round twice."""
    dt = c.dtype if type(c) is np.ndarray else np.result_type(a, b, c)
    if dt == _F32:
        return _fma32(a, b, c)
    if dt == _F64:
        return _fma64(np.asarray(a, _F64), np.asarray(b, _F64), np.asarray(c, _F64))
    return a * b + c


def _two_sum(p, c):
    s = p + c
    z = s - p
    return s, (p - (s - z)) + (c - z)


_LOW = (1 << 29) - 1        # the float64 mantissa bits below float32's
_TIE = 1 << 28              # ... as they are at a float32 rounding tie
_TINY = 2.0 ** -125         # below: float32's ties lie elsewhere (subnormals)


def _fma32(a, b, c):
    p = np.multiply(a, b, dtype=_F64)                                 # exact
    s = np.add(p, c, dtype=_F64)
    # the double rounding (to float64, then float32) goes wrong only where s lands on a
    # float32 tie: there, round to odd (step one ulp toward the sum's error if inexact)
    suspect = np.bitwise_and(s.view(np.int64), _LOW) == _TIE
    suspect |= np.abs(s) < _TINY
    if suspect.any():
        i = np.nonzero(suspect)
        p = np.broadcast_to(p, s.shape)[i]
        c = np.broadcast_to(np.asarray(c, _F64), s.shape)[i]
        t, err = _two_sum(p, c)
        odd = np.where((err != 0) & ((t.view(np.int64) & 1) == 0),
                       np.nextafter(t, np.where(err > 0, np.inf, -np.inf)), t)
        s = s.copy() if s.base is not None else s
        s[i] = odd
    return s.astype(_F32)


def _split(x):
    t = x * _SPLIT
    hi = t - (t - x)
    return hi, x - hi


def _fma64(a, b, c):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    low = ((ah * bh - p) + ah * bl + al * bh) + al * bl            # p + low == a * b
    s, err = _two_sum(p, c)
    low = err + low
    r = s + low
    # inf and nan as the plain formula gives them; an exact sum keeps its signed zero
    return np.where(np.isfinite(r) & (low != 0), r, s)

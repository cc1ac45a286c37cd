"""Special-function primitives (``torch.special``): normal distribution functions, Bessel
functions, the Hurwitz zeta, incomplete gammas and the classical orthogonal polynomials.

Each is elementwise, computed by scipy.special (or by the recurrence PyTorch's kernel uses,
for the polynomials, so that results agree where the recurrence and a closed form differ).
PyTorch gives only some of them a derivative: the Bessel functions, Airy's function and the
polynomials produce results that do not require grad (``differentiable=False``), ``zeta``
and the incomplete gammas differentiate in their second argument only.  Kernels PyTorch has
no float16/bfloat16 instantiation for raise its "not implemented for 'Half'" error.
"""
import math

import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.lazy import LazyModule
from .eager import call
from .elementwise import (INTEGRAL, define_elementwise, not_implemented, promote,
                          promote_float, rejecting)

_sp = LazyModule("scipy.special")
_LOW = frozenset({D.float16, D.bfloat16})
SQRT_2PI = math.sqrt(2 * math.pi)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _full_float(kernel):
    """Float results, float32/float64 kernels only (PyTorch's "..._cpu" has no Half)."""
    def rule(*xs, **_):
        ct, odt = promote_float(*xs)
        if odt in _LOW:
            raise not_implemented(kernel, odt)
        return ct, odt
    return rule


def _unary(name, fn, rule, vjp=None, **kw):
    return define_elementwise(name, fn, rule, vjp, differentiable=vjp is not None, **kw)


# ---------------------------------------------------------------- normal distribution

def _log_ndtr_vjp(ctx, g):
    x = ctx.inputs[0]
    return (g / SQRT_2PI * (-(ctx.output + x * x / 2)).exp(),)


special_ndtri = _unary("special_ndtri", _sp.later("ndtri"), _full_float("ndtri_cpu"),
                       lambda ctx, g: (g * SQRT_2PI * (ctx.output * ctx.output / 2).exp(),))
special_log_ndtr = _unary("special_log_ndtr", _sp.later("log_ndtr"), _full_float("log_ndtr_cpu"),
                          _log_ndtr_vjp)
special_erfcx = _unary(
    "special_erfcx", _sp.later("erfcx"), _full_float("erfcx_cpu"),
    lambda ctx, g: ((2.0 * ctx.inputs[0] * ctx.output - TWO_OVER_SQRT_PI) * g,))


# ---------------------------------------------------------------- modified Bessel I0, I1

def _i1_vjp(ctx, g):
    # at 0 the quotient below is 0/0: the derivative there is 1/2 (as in PyTorch)
    x = ctx.inputs[0]
    eps = D.finfo(x.dtype).eps
    big = x.abs() > eps
    safe = x.masked_fill(~big, eps)
    d = call(i0, safe) - ctx.output / safe
    return (g * d.masked_fill(~big, 0.5),)


def _i1e_vjp(ctx, g):
    x = ctx.inputs[0]
    eps = D.finfo(x.dtype).eps
    big = x.abs() > eps
    safe = x.masked_fill(~big, eps)
    d = call(special_i0e, safe) - ctx.output * (safe.sgn() + 1 / safe)
    return (g * d.masked_fill(~big, 0.5),)


i0 = _unary("i0", _sp.later("i0"), promote_float,
            lambda ctx, g: (g * call(special_i1, ctx.inputs[0]),))
special_i0e = _unary(
    "special_i0e", _sp.later("i0e"), promote_float,
    lambda ctx, g: (g * (call(special_i1e, ctx.inputs[0]) - ctx.inputs[0].sgn() * ctx.output),),
    grad_name="SpecialI0EBackward0")
special_i1 = _unary("special_i1", _sp.later("i1"), promote_float, _i1_vjp)
special_i1e = _unary("special_i1e", _sp.later("i1e"), promote_float, _i1e_vjp,
                     grad_name="SpecialI1EBackward0")


# ---------------------------------------------------------------- entropy, xlog1py

def _entr(x):
    with np.errstate(all="ignore"):
        r = -x * np.log(x)
    r = np.where(x == 0, 0, r)
    return np.where(x < 0, -np.inf, r)


special_entr = _unary("special_entr", _entr, promote_float,
                      lambda ctx, g: (g * -(1 + ctx.inputs[0].log()),))


def _xlog1py(x, y):
    r = x * np.log1p(y)
    return np.where((np.asarray(x) == 0) & ~np.isnan(y), 0, r)


def _xlog1py_vjp(ctx, g):
    x, y = ctx.inputs
    tx, ty = hasattr(x, "dtype"), hasattr(y, "dtype")
    gx = ctx.needs(0) and tx and g * call(special_xlog1py, x != 0, y)
    gy = ctx.needs(1) and ty and g * x / (y + 1)
    return gx, gy


special_xlog1py = define_elementwise("special_xlog1py", _xlog1py, promote_float, _xlog1py_vjp,
                               grad_name="SpecialXlog1PyBackward0")


# ---------------------------------------------------------------- zeta, incomplete gammas

def _zeta_vjp(ctx, g):
    x, q = ctx.inputs
    if ctx.needs(0):
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    return False, g * -x * call(special_zeta, x + 1.0, q)


special_zeta = define_elementwise("special_zeta", _sp.later("zeta"), _full_float("zeta_cpu"), _zeta_vjp)


def _igamma_vjp(sign, name):
    def vjp(ctx, g):
        a, x = ctx.inputs
        if ctx.needs(0):
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        d = ((a - 1) * x.log() - x - a.lgamma()).exp()
        return False, g * d if sign > 0 else -g * d
    return vjp


igamma = define_elementwise("igamma", _sp.later("gammainc"), rejecting(promote, "igamma_cpu", INTEGRAL),
                      _igamma_vjp(1, "igamma"))
igammac = define_elementwise("igammac", _sp.later("gammaincc"), rejecting(promote, "igammac_cpu", INTEGRAL),
                       _igamma_vjp(-1, "igammac"))


# ---------------------------------------------------------------- Bessel, Airy (no derivative)

def _spherical_j0(x):
    with np.errstate(all="ignore"):
        r = np.sin(x) / x
    r = np.where(np.isinf(x), 0, r)
    return np.where(np.abs(x) < 0.5, _sp.spherical_jn(0, x), r)


_NO_DERIVATIVE = {
    "bessel_j0": _sp.later("j0"), "bessel_j1": _sp.later("j1"),
    "bessel_y0": _sp.later("y0"), "bessel_y1": _sp.later("y1"),
    "modified_bessel_i0": _sp.later("i0"), "modified_bessel_i1": _sp.later("i1"),
    "modified_bessel_k0": _sp.later("k0"), "modified_bessel_k1": _sp.later("k1"),
    "scaled_modified_bessel_k0": _sp.later("k0e"), "scaled_modified_bessel_k1": _sp.later("k1e"),
    "spherical_bessel_j0": _spherical_j0, "airy_ai": lambda x: _sp.airy(x)[0],
}
BESSEL = {name: _unary("special_" + name, fn, _full_float(name + "_cpu"))
          for name, fn in _NO_DERIVATIVE.items()}


# ---------------------------------------------------------------- orthogonal polynomials
# PyTorch truncates the degree n to an integer and evaluates by the three-term recurrence,
# switching to a trigonometric closed form for large n inside (-1, 1) (Chebyshev kinds).
# The recurrences here run once per degree up to the largest n and keep each element's
# value at its own degree.


def _recurrence(x, n, p0, p1, step):
    """P_n(x) with P_0 = p0, P_1 = p1 and P_{k+1} = step(k, P_k, P_{k-1}), per element."""
    out = np.where(n == 0, p0, p1)
    top = int(n.max()) if n.size else 0
    p, q = p0, p1
    for k in range(1, top):
        p, q = q, step(k, q, p)
        out = np.where(n == k + 1, q, out)
    return out


def _polynomial(evaluate):
    def impl(x, n):
        x, n = np.broadcast_arrays(np.asarray(x), np.asarray(n))
        dt = x.dtype if x.dtype.kind == "f" else np.result_type(x, n)
        x = x.astype(dt)
        with np.errstate(all="ignore"):
            ni = np.where(np.isfinite(n), n, -1).astype(np.int64)
        r = evaluate(x, ni)
        return np.where(ni < 0, 0, r).astype(dt)
    return impl


def _chebyshev(kind):
    """T, U, V, W following PyTorch's kernels (aten/src/ATen/native/Math.h)."""
    def evaluate(x, n):
        one = np.ones_like(x)
        p1 = {"t": x, "u": x + x, "v": x + x - 1, "w": x + x + 1}[kind]
        r = _recurrence(x, n, one, p1, lambda k, q, p: (x + x) * q - p)
        even = n % 2 == 0
        with np.errstate(all="ignore"):
            t = np.arccos(x)
            if kind == "t":
                closed, limit = np.cos(n * t), 6
                at_one = np.where((x > 0) | even, 1, -1)
            elif kind == "u":
                s = np.sin(t)
                closed = np.where(s != 0, np.sin((n + 1) * t) / s, (n + 1) * np.cos((n + 1) * t) / x)
                limit = 8
                at_one = np.where((x > 0) | even, n + 1, -(n + 1))
            elif kind == "v":
                closed = np.where(np.sin(t / 2) != 1, np.cos((n + 0.5) * t) / np.cos(t / 2),
                                  np.where(even, n + n + 1, -(n + n + 1)))
                limit = 8
                at_one = np.where(x > 0, 1, np.where(even, n + n + 1, -(n + n + 1)))
            else:
                closed = np.where(np.cos(t / 2) != 1, np.sin((n + 0.5) * t) / np.sin(t / 2),
                                  np.where(x > 0, n + n + 1, np.where(even, 1, -1)))
                limit = 8
                at_one = np.where(x > 0, n + n + 1, np.where(even, 1, -1))
        r = np.where((n > limit) & (np.abs(x) < 1), closed, r)
        return np.where(np.abs(x) == 1, at_one, r)
    return evaluate


def _shifted(evaluate):
    return lambda x, n: evaluate(x + x - 1, n)


def _hermite_h(x, n):
    return _recurrence(x, n, np.ones_like(x), x + x, lambda k, q, p: (x + x) * q - (2 * k) * p)


def _hermite_he(x, n):
    return _recurrence(x, n, np.ones_like(x), x, lambda k, q, p: x * q - k * p)


def _laguerre_l(x, n):
    r = _recurrence(x, n, np.ones_like(x), 1 - x,
                    lambda k, q, p: ((k + k + (1 - x)) * q - k * p) / (k + 1))
    return np.where(x == 0, 1, r)


def _legendre_p(x, n):
    r = _recurrence(x, n, np.ones_like(x), x,
                    lambda k, q, p: ((k + k + 1) * x * q - k * p) / (k + 1))
    at_one = np.where((x > 0) | (n % 2 == 0), 1, -1)
    return np.where(np.abs(x) == 1, at_one, r)


_POLYNOMIALS = {
    "chebyshev_polynomial_t": _chebyshev("t"), "chebyshev_polynomial_u": _chebyshev("u"),
    "chebyshev_polynomial_v": _chebyshev("v"), "chebyshev_polynomial_w": _chebyshev("w"),
    "shifted_chebyshev_polynomial_t": _shifted(_chebyshev("t")),
    "shifted_chebyshev_polynomial_u": _shifted(_chebyshev("u")),
    "shifted_chebyshev_polynomial_v": _shifted(_chebyshev("v")),
    "shifted_chebyshev_polynomial_w": _shifted(_chebyshev("w")),
    "hermite_polynomial_h": _hermite_h, "hermite_polynomial_he": _hermite_he,
    "laguerre_polynomial_l": _laguerre_l, "legendre_polynomial_p": _legendre_p,
}
POLYNOMIALS = {name: define_elementwise("special_" + name, _polynomial(fn), _full_float(name + "_cpu"),
                                  None, differentiable=False)
               for name, fn in _POLYNOMIALS.items()}

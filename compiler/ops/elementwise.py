"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, where, clamp.

Each op's ``impl`` receives numpy arrays already converted to the compute dtype that its
``dtype_rule`` chose (Python scalars stay Python scalars, which numpy treats as weak),
so the implementations here are one numpy call each.  Like PyTorch's CPU kernels,
float16 and bfloat16 compute in float32 ("opmath") and round once at the end; the
dispatcher casts the result to the output dtype.  Where PyTorch first converts a number
operand (or another dtype's tensor) to the half type, or rounds between steps (add/sub,
remainder, fmod, atan2, pow, rounded division of two half tensors), the rule keeps the half
type as the compute type and the impl converts its operands itself.  A dtype rule also raises PyTorch's
error for dtypes the op does not support, naming the kernel as PyTorch does
(``"bitwise_and_cpu" not implemented for 'Float'``).

Derivative rules receive the backward context ``ctx`` (``ctx.inputs``, ``ctx.output``,
``ctx.attrs``) and the output gradient ``g`` and return one gradient per input;
broadcasting and dtype changes are undone by the engine.  ``grad_name`` is a string, or
a function of (which inputs are tensors, attrs) for ops whose PyTorch overloads have
different ``grad_fn`` names (``x ** 2`` is PowBackward0, ``x ** y`` PowBackward1).
"""
import builtins
import math
from fractions import Fraction

import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.lazy import LazyModule
from .core import define, result_type, to_float, type_name, TensorSpec, broadcast_shapes
from .fused import fma
from ..lowering.scalar import Unsupported

_special = LazyModule("scipy.special")

# ---------------------------------------------------------------- dtype sets

BOOL = frozenset({D.bool})
INTS = frozenset({D.uint8, D.int8, D.int16, D.int32, D.int64})
INTEGRAL = BOOL | INTS
FLOATS = frozenset({D.float16, D.bfloat16, D.float32, D.float64})

# the dtype a kernel computes in: float16/bfloat16 widen to float32
_OPMATH = {D.float16: D.float32, D.bfloat16: D.float32}


def not_implemented(kernel, dt):
    """PyTorch's error for a kernel without a ``dt`` instantiation."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dt)}'")


# ---------------------------------------------------------------- dtype rules
# Each returns (compute dtype, output dtype).


def promote(*xs, **_):
    dt = result_type(*xs)
    return _OPMATH.get(dt, dt), dt


def promote_float(*xs, **_):
    dt = to_float(result_type(*xs))
    return _OPMATH.get(dt, dt), dt


def compare(*xs, **_):
    return result_type(*xs), D.bool


def logical(*xs, **_):
    return D.bool, D.bool


def exact(*xs, **_):
    """Ops that never round (max, min, sign, shifts...): compute in the result dtype."""
    dt = result_type(*xs)
    return dt, dt


def rejecting(rule, kernel, bad):
    """``rule``, raising PyTorch's "not implemented" error when the result dtype is in ``bad``."""
    def checked(*xs, **attrs):
        ct, odt = rule(*xs, **attrs)
        if odt in bad:
            raise not_implemented(kernel, odt)
        return ct, odt
    return checked


def integral(kernel):
    """Bitwise ops: bool and integer dtypes only."""
    return rejecting(exact, kernel, FLOATS)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "dtype") else ()


def _is_tensor(x):
    return hasattr(x, "dtype") and hasattr(x, "shape")


def elementwise_meta(op):
    """Meta rule shared by elementwise ops: broadcast the shapes, apply the dtype rule."""
    def meta(*xs, **attrs):
        shape = broadcast_shapes(*[_shape(x) for x in xs if x is not None])
        return TensorSpec(shape, op.dtype_rule(*xs, **attrs)[1])
    return meta


def define_elementwise(name, impl, dtype_rule, vjp=None, **kw):
    op = define(name, "elementwise", impl, meta=None, dtype_rule=dtype_rule, vjp=vjp, **kw)
    op.meta = elementwise_meta(op)
    return op


def by_operands(names):
    """A grad_name chosen by which inputs are tensors: {(True, False): "PowBackward0", ...}."""
    def grad_name(is_tensor, attrs):
        return names[is_tensor]
    return grad_name


NOT_IMPLEMENTED = "torch::autograd::NotImplemented"


def _no_derivative(name):
    """The rule of an op PyTorch records but cannot differentiate (heaviside, floor_divide)."""
    def vjp(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return vjp


LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
DEG_TO_RAD = math.pi / 180.0
RAD_TO_DEG = 180.0 / math.pi

# ---------------------------------------------------------------- lowering rules
# Scalar formulas for the code generators (compiler/lowering/scalar.py describes the builder
# ``b``).  Arguments arrive in the compute dtype; the result is converted to the output dtype.


def _math(name):
    return lambda b, *xs, **_: b.call_math(name, *xs)


def _one(b, x):
    return b.const(1, x.dtype)


def _zero(b, x):
    return b.const(0, x.dtype)


def _lower_sign(b, x, **_):
    if x.dtype is D.bool:
        return x
    pos = b.cast(b.cmp("gt", x, _zero(b, x)), x.dtype)
    neg = b.cast(b.cmp("lt", x, _zero(b, x)), x.dtype)
    return b.sub(pos, neg)              # NaN compares false both ways: sign(nan) is 0


def _lower_rsqrt(b, x, **_):
    return b.div(_one(b, x), b.sqrt(x))


def _lower_sigmoid(b, x, **_):
    return b.div(_one(b, x), b.add(_one(b, x), b.exp(b.neg(x))))


def _scale(factor):
    return lambda b, x, **_: b.mul(x, b.const(factor, x.dtype))


def _lower_sinc(b, x, **_):
    px = b.mul(x, b.const(math.pi, x.dtype))
    return b.select(b.cmp("eq", x, _zero(b, x)), _one(b, x), b.div(b.call_math("sin", px), px))


def _lower_relu(b, x, **_):
    return b.max(x, _zero(b, x))


def _lower_reciprocal(b, x, **_):
    return b.div(_one(b, x), x)


def _rounding(name):
    """floor/ceil/trunc/rint leave integers as they are."""
    def rule(b, x, **_):
        return x if not x.dtype.is_floating_point else b.call_math(name, x)
    return rule


def _lower_frac(b, x, **_):
    return b.sub(x, b.call_math("trunc", x))


def _lower_round(b, x, decimals=0):
    if not x.dtype.is_floating_point:
        return x
    if decimals == 0:
        return b.call_math("rint", x)
    if decimals > 0:
        scale = b.const(10.0 ** decimals, x.dtype)
        return b.div(b.call_math("rint", b.mul(x, scale)), scale)
    scale = b.const(10.0 ** -decimals, x.dtype)
    return b.mul(b.call_math("rint", b.div(x, scale)), scale)


def _lower_logit(b, x, eps=None):
    if eps is not None:
        x = b.min(b.max(x, b.const(eps, x.dtype)), b.const(1 - eps, x.dtype))
    return b.log(b.div(x, b.sub(_one(b, x), x)))


def _lower_nan_to_num(b, x, nan=0.0, posinf=None, neginf=None):
    if not x.dtype.is_floating_point:
        return x
    info = D.finfo(x.dtype)
    hi = b.const(info.max if posinf is None else posinf, x.dtype)
    lo = b.const(info.min if neginf is None else neginf, x.dtype)
    inf = b.const(math.inf, x.dtype)
    out = b.select(b.cmp("eq", x, inf), hi, b.select(b.cmp("eq", x, b.neg(inf)), lo, x))
    return b.select(b.cmp("ne", x, x), b.const(nan, x.dtype), out)


def _lower_isinf(b, x, **_):
    if not x.dtype.is_floating_point:
        return b.const(False, D.bool)
    return b.cmp("eq", b.abs(x), b.const(math.inf, x.dtype))


def _lower_isfinite(b, x, **_):
    if not x.dtype.is_floating_point:
        return b.const(True, D.bool)
    return b.cmp("lt", b.abs(x), b.const(math.inf, x.dtype))    # false for NaN


def _lower_signbit(b, x, **_):
    if not x.dtype.is_floating_point:
        return b.cmp("lt", x, _zero(b, x))
    return b.cmp("lt", b.call_math("copysign", _one(b, x), x), _zero(b, x))


def _lower_add(b, x, y, alpha=1):
    if x.dtype is D.bool:
        return b.or_(x, y)
    return b.add(x, y if alpha == 1 else b.mul(y, b.const(alpha, y.dtype)))


def _lower_sub(b, x, y, alpha=1):
    return b.sub(x, y if alpha == 1 else b.mul(y, b.const(alpha, y.dtype)))


def _lower_mul(b, x, y):
    return b.and_(x, y) if x.dtype is D.bool else b.mul(x, y)


def _wrong_sign(b, r, y):
    """r != 0 and its sign differs from y's: floor division and remainder must adjust."""
    zero = _zero(b, r)
    return b.and_(b.cmp("ne", r, zero), b.xor(b.cmp("lt", r, zero), b.cmp("lt", y, zero)))


def _lower_div(b, x, y, rounding_mode=None):
    if rounding_mode is None or not x.dtype.is_floating_point:
        q = b.div(x, y)                 # integer division truncates
        if rounding_mode == "floor" and not x.dtype.is_floating_point:
            q = b.sub(q, b.cast(_wrong_sign(b, b.rem(x, y), y), q.dtype))
        return q
    if x.dtype.itemsize == 2:           # half tensors by a tensor: every step rounds (_div_half)
        return _lower_div_half(b, x, y, rounding_mode)
    q = b.div(x, y)
    return b.call_math("trunc" if rounding_mode == "trunc" else "floor", q)


def _lower_div_half(b, x, y, rounding_mode):
    dt = x.dtype

    def r(h):
        return b.round_to(h, dt)
    q = r(b.div(x, y))
    if rounding_mode == "trunc":
        return b.call_math("trunc", q)
    zero, one = _zero(b, x), _one(b, x)
    mod = r(b.rem(x, y))
    div = r(b.div(r(b.sub(x, mod)), y))
    div = b.select(_wrong_sign(b, mod, y), r(b.sub(div, one)), div)
    floordiv = b.call_math("floor", div)
    floordiv = b.select(b.cmp("gt", r(b.sub(div, floordiv)), b.const(0.5, dt)),
                        r(b.add(floordiv, one)), floordiv)
    floordiv = b.select(b.cmp("eq", div, zero), b.call_math("copysign", zero, q), floordiv)
    return b.select(b.cmp("eq", y, zero), q, floordiv)


def _lower_remainder(b, x, y):
    r = b.rem(x, y)
    return b.select(_wrong_sign(b, r, y), b.add(r, y), r)


def _lower_fmod(b, x, y):
    return b.rem(x, y)


def _lower_pow(b, x, y):
    e = b.literal(y)
    if e is not None and e in (0, 1, 2, 3):
        if e == 0:
            return _one(b, x)
        r = x
        for _ in range(int(e) - 1):
            r = b.mul(r, x)
        return r
    if not x.dtype.is_floating_point:
        raise Unsupported("integer pow with a tensor or negative exponent")
    if e == 0.5:
        return b.sqrt(x)
    if e == -0.5:
        return b.div(_one(b, x), b.sqrt(x))
    if e == -1:
        return b.div(_one(b, x), x)
    if e == -2:
        return b.div(_one(b, x), b.mul(x, x))
    return b.call_math("pow", x, y)


def _lower_maximum(b, x, y):
    return b.max(x, y)


def _lower_minimum(b, x, y):
    return b.min(x, y)


def _lower_fmax(b, x, y):
    return b.call_math("fmax", x, y) if x.dtype.is_floating_point else b.max(x, y)


def _lower_fmin(b, x, y):
    return b.call_math("fmin", x, y) if x.dtype.is_floating_point else b.min(x, y)


def _lower_logaddexp(exp, tie, scale=1.0):
    """numpy's formula: ties (both infinite) give x + ``tie``, NaN stays NaN; ``scale``
    turns the natural log1p into the base's (1 / ln 2 for logaddexp2)."""
    def rule(b, x, y):
        d = b.sub(x, y)
        zero = _zero(b, d)

        def log1p_exp(v):
            r = b.call_math("log1p", b.call_math(exp, v))
            return r if scale == 1.0 else b.mul(r, b.const(scale, r.dtype))
        pos = b.add(x, log1p_exp(b.neg(d)))
        neg = b.add(y, log1p_exp(d))
        out = b.select(b.cmp("gt", d, zero), pos, b.select(b.cmp("le", d, zero), neg, b.add(x, y)))
        return b.select(b.cmp("eq", x, y), b.add(x, b.const(tie, x.dtype)), out)
    return rule


def _lower_xlogy(b, x, y):
    zero = _zero(b, x)
    out = b.mul(x, b.log(y))
    return b.select(b.and_(b.cmp("eq", x, zero), b.cmp("eq", y, y)), zero, out)


def _lower_heaviside(b, x, y):
    if x.dtype is D.bool:
        return b.or_(x, y)
    zero = _zero(b, x)
    step = b.select(b.cmp("gt", x, zero), _one(b, x), b.select(b.cmp("lt", x, zero), zero, x))
    return b.select(b.cmp("eq", x, zero), y, step)


def _comparison(op):
    return lambda b, x, y: b.cmp(op, x, y)


def _logic(method):
    return lambda b, *xs: getattr(b, method)(*[b.cast(x, D.bool) for x in xs])


def _lower_bitwise_not(b, x):
    return b.not_(x)


def _lower_shift(left):
    """Out-of-range shift amounts give 0 (or -1 shifting a negative number right)."""
    def rule(b, x, s):
        bits = x.dtype.itemsize * 8
        ok = b.and_(b.cmp("ge", s, _zero(b, s)), b.cmp("lt", s, b.const(bits, s.dtype)))
        safe = b.select(ok, s, _zero(b, s))
        if left:
            return b.select(ok, b.shl(x, safe), _zero(b, x))
        fill = b.select(b.cmp("lt", x, _zero(b, x)), b.const(-1, x.dtype), _zero(b, x))
        return b.select(ok, b.shr(x, safe), fill)
    return rule


def _lower_where(b, cond, x, y):
    return b.select(b.cast(cond, D.bool), x, y)


def _lower_clamp(b, x, lo=None, hi=None, fn="clamp"):
    if lo is not None:
        x = b.max(x, lo)
    if hi is not None:
        x = b.min(x, hi)
    return x


def _lower_masked_fill(b, x, mask, value):
    return b.select(b.cast(mask, D.bool), b.cast(value, x.dtype), x)


def _lower_lerp(b, x, y, w):
    # as the impl: one fused multiply-add on either side
    diff = b.sub(y, x)
    small = b.cmp("lt", b.abs(w), b.const(0.5, w.dtype))
    return b.select(small, b.call_math("fma", w, diff, x),
                    b.call_math("fma", b.sub(w, _one(b, w)), diff, y))


def _lower_addcmul(b, x, t1, t2, value=1):
    scaled = t1 if value == 1 else b.mul(b.const(value, x.dtype), t1)
    if not x.dtype.is_floating_point:
        return b.add(x, b.mul(scaled, t2))
    return b.call_math("fma", scaled, t2, x)       # as the impl


def _lower_addcdiv(b, x, t1, t2, value=1):
    scaled = t1 if value == 1 else b.mul(b.const(value, x.dtype), t1)     # as the impl
    return b.add(x, b.div(scaled, t2))


def _lower_angle(b, x):
    zero = _zero(b, x)
    return b.select(b.cmp("lt", x, zero), b.const(math.pi, x.dtype),
                    b.select(b.cmp("ne", x, x), x, zero))


def _horner(b, t, coefficients):
    """coefficients[0] * t**k + ... + coefficients[k], in t's dtype."""
    r = b.const(coefficients[0], t.dtype)
    for c in coefficients[1:]:
        r = b.add(b.mul(r, t), b.const(c, t.dtype))
    return r


def _ipow(b, x, n):
    """x ** n for a Python int n >= 1, by squaring."""
    result, square = None, x
    while n:
        if n & 1:
            result = square if result is None else b.mul(result, square)
        n >>= 1
        if n:
            square = b.mul(square, square)
    return result


# erfinv: Giles' single-precision polynomials in w = -log(1 - a^2) ("Approximating the erfinv
# function", GPU Computing Gems, 2011), within 3e-7 relative for float32.  float64 refines them
# with one Halley step on erf(y) = a.  For 1 - a < 1e-7 (w >= 16, float64 only) Giles' tail no
# longer holds: a rational function of sqrt(-log((1 - a) / 2)), within 1e-4, then one step of
# y = sqrt(-log((1 - a) y sqrt(pi) / S(y))), erfc's asymptotic series S, bring it to 1e-6.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
_ERFINV_FAR = ((1.641345311, 3.429567803, -1.624906493, -1.970840454),
               (1.637067800, 3.543889200, 1.0))
_ERFC_ASYMPTOTIC = (6.5625, -1.875, 0.75, -0.5, 1.0)     # sum (-1)^k (2k-1)!! / (2y^2)^k


def _erfinv_guess(b, a):
    """erfinv(a) for 0 <= a < 1 to float32 accuracy (for float64 also with a near 1)."""
    one = _one(b, a)

    def c(v):
        return b.const(v, a.dtype)
    w = b.neg(b.log(b.mul(b.sub(one, a), b.add(one, a))))
    central = _horner(b, b.sub(w, c(2.5)), _ERFINV_CENTRAL)
    tail = _horner(b, b.sub(b.sqrt(w), c(3.0)), _ERFINV_TAIL)
    y = b.mul(b.select(b.cmp("lt", w, c(5.0)), central, tail), a)
    if a.dtype is not D.float64:
        return y
    # there -log(1 - a) = w + log(1 + a) is w + log 2 to within 1e-7: no further log of 1 - a
    log_q = b.neg(b.add(w, c(LN2)))
    z = b.sqrt(b.sub(c(LN2), log_q))
    far = b.div(_horner(b, z, _ERFINV_FAR[0]), _horner(b, z, _ERFINV_FAR[1]))
    series = _horner(b, b.div(one, b.mul(far, far)), _ERFC_ASYMPTOTIC)
    far = b.sqrt(b.neg(b.add(log_q, b.log(b.div(b.mul(far, c(math.sqrt(math.pi))), series)))))
    return b.select(b.cmp("lt", w, c(16.0)), y, far)


def _erfinv_halley(b, a, y):
    """One Halley step on erf(y) - a = 0 (a >= 0).  Above a = 0.5 the residual is taken as
    (1 - a) - erfc(y), exact where erf(y) - a would cancel."""
    one = _one(b, a)
    near_one = b.sub(b.sub(one, a), b.call_math("erfc", y))
    f = b.select(b.cmp("le", a, b.const(0.5, a.dtype)), b.sub(b.call_math("erf", y), a), near_one)
    slope = b.mul(b.const(TWO_OVER_SQRT_PI, a.dtype), b.exp(b.neg(b.mul(y, y))))
    u = b.div(f, slope)
    return b.sub(y, b.div(u, b.add(one, b.mul(y, u))))      # erf'' / erf' = -2y


def _lower_erfinv(b, x):
    a = b.abs(x)
    y = _erfinv_guess(b, a)
    if a.dtype is D.float64:
        y = _erfinv_halley(b, a, y)
    y = b.select(b.cmp("eq", a, _one(b, a)), b.const(math.inf, a.dtype), y)
    return b.call_math("copysign", y, x)        # |x| > 1 and NaN are NaN already; erfinv(-0) = -0


# digamma and polygamma: psi^(n)(x) = psi^(n)(x + N) + (-1)^(n+1) n! sum_{k<N} (x + k)^-(n+1),
# then the asymptotic series at x + N >= N; reflection for x < 0.  Both compute in float64
# (float32 inputs included, as the reference does): the shift's sum and the reflection's
# polynomial would lose float32 digits.
_BERNOULLI = tuple(Fraction(p, q) for p, q in (
    (1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6), (-3617, 510),
    (43867, 798), (-174611, 330), (854513, 138)))          # B2, B4, ..., B22


def _psi_series(n):
    """Coefficients c_j (j = 1, 2, ...) of the asymptotic series: psi^(n)(z) is about
    log z (n = 0) or (-1)^(n+1) (n-1)!/z^n, plus (-1)^(n+1) (n!/(2z^(n+1)) + sum_j c_j / z^(n+2j)),
    c_j = B_2j (n+2j-1)! / (2j)!.  The last Bernoulli number only bounds the error."""
    return [float(bj * math.factorial(n + 2 * j - 1) / math.factorial(2 * j))
            for j, bj in enumerate(_BERNOULLI, 1)]


def _psi_shift(n):
    """The smallest N >= 10 at which the series' first omitted term is below 1e-17 of the
    leading one."""
    omitted = builtins.abs(_psi_series(n)[-1]) / math.factorial(max(n - 1, 0))
    shift = 10
    while omitted / shift ** (2 * len(_BERNOULLI)) > 1e-17:
        shift += 1
    return shift


def _cot_derivative(n):
    """Coefficients (lowest first) of P_n with d^n/du^n cot(u) = P_n(cot u):
    P_0(c) = c, P_(k+1)(c) = -(1 + c^2) P_k'(c)."""
    p = [0, 1]
    for _ in range(n):
        dp = [i * p[i] for i in range(1, len(p))] or [0]
        p = [0] * (len(dp) + 2)
        for i, v in enumerate(dp):
            p[i] -= v
            p[i + 2] -= v
    return p


def _polygamma_positive(b, x, n):
    """psi^(n)(x) for x >= 0 (the shift, then the series); x = 0 is a pole."""
    shift = _psi_shift(n)
    sign = -1.0 if n % 2 == 0 else 1.0                        # (-1)^(n+1)
    poles = b.const(0.0, x.dtype)
    for k in range(shift):
        xk = b.add(x, b.const(k, x.dtype)) if k else x        # -0.0 + 0 would lose 1/x's sign
        poles = b.add(poles, _ipow(b, b.div(_one(b, x), xk), n + 1))
    z = b.add(x, b.const(shift, x.dtype))
    t = b.div(_one(b, z), z)
    t2 = b.mul(t, t)
    tail = b.mul(_horner(b, t2, _psi_series(n)[-2::-1]), t2)      # the last only bounds
    inner = b.add(b.mul(b.const(math.factorial(n) / 2, x.dtype), t), tail)
    if n == 0:
        series = b.sub(b.log(z), inner)
    else:
        lead = b.add(b.const(math.factorial(n - 1), x.dtype), inner)
        series = b.mul(b.const(sign, x.dtype), b.mul(_ipow(b, t, n), lead))
    return b.add(series, b.mul(b.const(sign * math.factorial(n), x.dtype), poles))


def _cot_pi(b, x):
    """cot(pi x), from r = x - rint(x) in [-1/2, 1/2] (exact, even for tiny x): 1 / tan(pi r)
    for |r| <= 1/4, else tan(pi (1/2 - |r|)) with r's sign, exact zeros at half-integers."""
    one, quarter, half = _one(b, x), b.const(0.25, x.dtype), b.const(0.5, x.dtype)
    r = b.sub(x, b.call_math("rint", x))
    near_pole = b.cmp("le", b.abs(r), quarter)
    t = b.call_math("tan", b.mul(b.const(math.pi, x.dtype),
                                 b.select(near_pole, r, b.sub(half, b.abs(r)))))
    return b.select(near_pole, b.div(one, t), b.call_math("copysign", t, r))


def _polygamma_value(b, x, n):
    """psi^(n)(x) in x's dtype.  Reflection for x < 0:
    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x))."""
    zero, one = _zero(b, x), _one(b, x)
    negative = b.cmp("lt", x, zero)
    right = _polygamma_positive(b, b.select(negative, b.sub(one, x), x), n)
    p = _horner(b, _cot_pi(b, x), _cot_derivative(n)[::-1])
    left = b.sub(right if n % 2 == 0 else b.neg(right),
                 b.mul(b.const(math.pi ** (n + 1), x.dtype), p))
    out = b.select(negative, left, right)
    # poles at x = 0, -1, -2, ... and -inf: digamma is NaN there (its +-0 follow the shift's
    # 1/x), polygamma (-1)^(n+1) inf as the reference's Hurwitz zeta gives
    pole = b.and_(b.cmp("eq", x, b.call_math("floor", x)), b.cmp("le", x, zero))
    if n == 0:
        return b.select(b.and_(pole, negative), b.const(math.nan, x.dtype), out)
    out = b.select(pole, b.const((-1.0) ** (n + 1) * math.inf, x.dtype), out)
    return b.select(b.cmp("eq", x, b.const(math.inf, x.dtype)), b.const(math.nan, x.dtype), out)


def _lower_polygamma(b, x, n):
    if n == 1:
        return _lower_trigamma(b, x)
    if x.dtype is D.float64:
        return _polygamma_value(b, x, n)
    return b.cast(_polygamma_value(b, b.cast(x, D.float64), n), x.dtype)


def _lower_digamma(b, x):
    return _lower_polygamma(b, x, 0)


# trigamma (polygamma(1, x), digamma's derivative) follows torch's own algorithm, in the
# input's float type: reflection through sin(pi x) below 1/2, six recurrence steps, then the
# asymptotic series.  At the poles (0, -1, -2, ...) sin(pi x) is not exactly zero in floating
# point, so torch's value there is large and finite (about 1.3e15 in float32, 6.6e32 in
# float64 at x = -1), and at 0 and -0 it is inf; dynograph gives the same numbers.

def _trigamma(x):
    ft = x.dtype.type
    pi = ft(math.pi)
    reflect = x < 0.5
    sin_pi_x = np.sin(pi * x)
    result = np.where(reflect, -(pi * pi) / (sin_pi_x * sin_pi_x), ft(0))
    x = np.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (ft(1 / 6) - ixx * (ft(1 / 30) - ixx * ft(1 / 42)))) / x
    return np.where(reflect, -result, result)


def _lower_trigamma(b, x):
    dt = x.dtype
    one = _one(b, x)
    pi = b.const(math.pi, dt)
    reflect = b.cmp("lt", x, b.const(0.5, dt))
    sin_pi_x = b.call_math("sin", b.mul(pi, x))
    result = b.select(reflect, b.neg(b.div(b.mul(pi, pi), b.mul(sin_pi_x, sin_pi_x))), _zero(b, x))
    x = b.select(reflect, b.sub(one, x), x)
    for _ in range(6):
        result = b.add(result, b.div(one, b.mul(x, x)))
        x = b.add(x, one)
    ixx = b.div(one, b.mul(x, x))
    c = [b.const(np.asarray(1 / k, dt.np).item(), dt) for k in (6, 30, 42)]
    poly = b.mul(ixx, b.sub(c[0], b.mul(ixx, b.sub(c[1], b.mul(ixx, c[2])))))
    tail = b.div(b.add(b.add(one, b.div(one, b.mul(b.const(2, dt), x))), poly), x)
    result = b.add(result, tail)
    return b.select(reflect, b.neg(result), result)


# ---------------------------------------------------------------- unary


def _is_float_array(x):
    return D.is_floating(x.dtype)


def _kept(rule):
    """``rule`` with a half result type as the compute type too: the impl then sees the half
    type and converts the operands itself (``_half_operands``), and compiled kernels convert
    a number operand to the half type."""
    def kept(*xs, **attrs):
        ct, dt = rule(*xs, **attrs)
        return (dt, dt) if dt in _OPMATH else (ct, dt)
    return kept


def _unary(name, fn, rule, vjp, **kw):
    return define_elementwise(name, fn, rule, vjp, **kw)


def _zero_grad(ctx, g):
    return (g.new_zeros(g.shape),)


def _int_identity(fn):
    """Rounding ops leave integers as they are (a copy, like torch)."""
    def impl(x):
        return x.copy() if x.dtype.kind in "iub" else fn(x)
    return impl


def _neg_rule(x, **_):
    dt = result_type(x)
    if dt is D.bool:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return dt, dt


def _relu_rule(x, **_):
    dt = result_type(x)
    if dt is D.bool:
        raise RuntimeError("Boolean inputs not supported for relu")
    return dt, dt


def _sign(x):
    if x.dtype == np.bool_:
        return x.copy()
    if _is_float_array(x):
        return np.where(np.isnan(x), 0, np.sign(x))   # torch: sign(nan) is 0
    return np.sign(x)


def _lgamma(x):
    # log|gamma(-inf)| is +inf in torch, -inf in scipy
    return np.where(x == -np.inf, np.inf, _special.gammaln(x))


neg = _unary("neg", np.negative, _neg_rule, lambda ctx, g: (-g,), lowering=lambda b, x: b.neg(x))
abs = _unary("abs", np.abs, rejecting(exact, "abs_cpu", BOOL),  # noqa: A001
             lambda ctx, g: (g * ctx.inputs[0].sgn(),), lowering=lambda b, x: b.abs(x))
sign = _unary("sign", _sign, exact, _zero_grad, lowering=_lower_sign)
sgn = _unary("sgn", _sign, exact, _zero_grad, lowering=_lower_sign)
exp = _unary("exp", np.exp, promote_float, lambda ctx, g: (g * ctx.output,), lowering=lambda b, x: b.exp(x))
exp2 = _unary("exp2", np.exp2, promote_float, lambda ctx, g: (g * ctx.output * LN2,), lowering=_math("exp2"))
expm1 = _unary("expm1", np.expm1, promote_float, lambda ctx, g: (g * (ctx.output + 1),),
               lowering=_math("expm1"))
log = _unary("log", np.log, promote_float, lambda ctx, g: (g / ctx.inputs[0],),
             lowering=lambda b, x: b.log(x))
log2 = _unary("log2", np.log2, promote_float, lambda ctx, g: (g / (ctx.inputs[0] * LN2),),
              lowering=_math("log2"))
log10 = _unary("log10", np.log10, promote_float, lambda ctx, g: (g / (ctx.inputs[0] * LN10),),
               lowering=_math("log10"))
log1p = _unary("log1p", np.log1p, promote_float, lambda ctx, g: (g / (ctx.inputs[0] + 1),),
               grad_name="Log1PBackward0", lowering=_math("log1p"))
sqrt = _unary("sqrt", np.sqrt, promote_float, lambda ctx, g: (g / (2 * ctx.output),),
              lowering=lambda b, x: b.sqrt(x))
rsqrt = _unary("rsqrt", lambda x: 1 / np.sqrt(x), promote_float,
               lambda ctx, g: (g * ctx.output.pow(3) * -0.5,), lowering=_lower_rsqrt)
sin = _unary("sin", np.sin, promote_float, lambda ctx, g: (g * ctx.inputs[0].cos(),), lowering=_math("sin"))
cos = _unary("cos", np.cos, promote_float, lambda ctx, g: (g * -ctx.inputs[0].sin(),), lowering=_math("cos"))
tan = _unary("tan", np.tan, promote_float, lambda ctx, g: (g * (1 + ctx.output * ctx.output),),
             lowering=_math("tan"))
asin = _unary("asin", np.arcsin, promote_float,
              lambda ctx, g: (g * (1 - ctx.inputs[0] * ctx.inputs[0]).rsqrt(),), lowering=_math("asin"))
acos = _unary("acos", np.arccos, promote_float,
              lambda ctx, g: (g * -(1 - ctx.inputs[0] * ctx.inputs[0]).rsqrt(),), lowering=_math("acos"))
atan = _unary("atan", np.arctan, promote_float,
              lambda ctx, g: (g / (ctx.inputs[0] * ctx.inputs[0] + 1),), lowering=_math("atan"))
sinh = _unary("sinh", np.sinh, promote_float, lambda ctx, g: (g * ctx.inputs[0].cosh(),),
              lowering=_math("sinh"))
cosh = _unary("cosh", np.cosh, promote_float, lambda ctx, g: (g * ctx.inputs[0].sinh(),),
              lowering=_math("cosh"))
tanh = _unary("tanh", np.tanh, promote_float,
              lambda ctx, g: (g * (1 - ctx.output * ctx.output),), lowering=_math("tanh"))
asinh = _unary("asinh", np.arcsinh, promote_float,
               lambda ctx, g: (g * (ctx.inputs[0] * ctx.inputs[0] + 1).rsqrt(),), lowering=_math("asinh"))
acosh = _unary("acosh", np.arccosh, promote_float,
               lambda ctx, g: (g * (ctx.inputs[0] * ctx.inputs[0] - 1).rsqrt(),), lowering=_math("acosh"))
atanh = _unary("atanh", np.arctanh, promote_float,
               lambda ctx, g: (g / (1 - ctx.inputs[0] * ctx.inputs[0]),), lowering=_math("atanh"))
_expit = _special.later("expit")


def _sigmoid(x):
    """1 / (1 + exp(-x)) with numpy's vectorized exp for float32/float64 arrays (scipy's
    expit, which the other dtypes use, runs a scalar loop: 15 against 5.5 us on 4096 floats);
    exp(-x) overflows to inf for x below about -88 (float32), where the result is 0."""
    if type(x) is not np.ndarray or x.dtype not in _SIGMOID_FAST or x.ndim == 0:
        return _expit(x)
    e = np.negative(x)
    np.exp(e, out=e)        # (impls run with numpy's overflow warnings off: evaluate.py)
    e += 1
    return np.reciprocal(e, out=e)


_SIGMOID_FAST = (np.dtype(np.float32), np.dtype(np.float64))
sigmoid = _unary("sigmoid", _sigmoid, promote_float,
                 lambda ctx, g: (g * (1 - ctx.output) * ctx.output,), lowering=_lower_sigmoid)
erf = _unary("erf", _special.later("erf"), promote_float,
             lambda ctx, g: (g * TWO_OVER_SQRT_PI * (-ctx.inputs[0] * ctx.inputs[0]).exp(),),
             lowering=_math("erf"))
erfc = _unary("erfc", _special.later("erfc"), promote_float,
              lambda ctx, g: (g * -TWO_OVER_SQRT_PI * (-ctx.inputs[0] * ctx.inputs[0]).exp(),),
              lowering=_math("erfc"))
erfinv = _unary("erfinv", _special.later("erfinv"), promote_float,
                lambda ctx, g: (g * SQRT_PI_OVER_TWO * (ctx.output * ctx.output).exp(),),
                lowering=_lower_erfinv)
lgamma = _unary("lgamma", _lgamma, promote_float,
                lambda ctx, g: (g * ctx.inputs[0].digamma(),), lowering=_math("lgamma"))
digamma = _unary("digamma", _special.later("psi"), promote_float,
                 lambda ctx, g: (g * ctx.inputs[0].polygamma(1),), lowering=_lower_digamma)
deg2rad = _unary("deg2rad", lambda x: x * DEG_TO_RAD, promote_float,
                 lambda ctx, g: (g * DEG_TO_RAD,), grad_name="Deg2RadBackward0", lowering=_scale(DEG_TO_RAD))
rad2deg = _unary("rad2deg", lambda x: x * RAD_TO_DEG, promote_float,
                 lambda ctx, g: (g * RAD_TO_DEG,), grad_name="Rad2DegBackward0", lowering=_scale(RAD_TO_DEG))


def _sinc_vjp(ctx, g):
    x = ctx.inputs[0]
    px = x * math.pi
    d = (px * px.cos() - px.sin()) / (px * x)
    return (g * d.masked_fill(x == 0, 0),)


sinc = _unary("sinc", np.sinc, promote_float, _sinc_vjp, lowering=_lower_sinc)
relu = _unary("relu", lambda x: np.maximum(x, 0), _relu_rule,
              lambda ctx, g: (g.masked_fill(ctx.output <= 0, 0),), lowering=_lower_relu)
reciprocal = _unary("reciprocal", lambda x: 1 / x, promote_float,
                    lambda ctx, g: (-g * (ctx.output * ctx.output),), lowering=_lower_reciprocal)
floor = _unary("floor", _int_identity(np.floor), rejecting(exact, "floor_vml_cpu", BOOL), _zero_grad,
               lowering=_rounding("floor"))
ceil = _unary("ceil", _int_identity(np.ceil), rejecting(exact, "ceil_vml_cpu", BOOL), _zero_grad,
              lowering=_rounding("ceil"))
trunc = _unary("trunc", _int_identity(np.trunc), rejecting(exact, "trunc_vml_cpu", BOOL),
               _zero_grad, lowering=_rounding("trunc"))
frac = _unary("frac", lambda x: x - np.trunc(x), rejecting(promote, "frac_cpu", INTEGRAL),
              lambda ctx, g: (g,), lowering=_lower_frac)


_rint = _int_identity(np.rint)          # half to even, like torch


def _round(x, decimals=0):
    if decimals == 0:
        return _rint(x)
    if decimals > 0:
        scale = 10.0 ** decimals
        return np.rint(x * scale) / scale
    scale = 10.0 ** -decimals
    return np.rint(x / scale) * scale


def _round_rule(x, decimals=0):
    dt = result_type(x)
    if dt is D.bool or (decimals != 0 and dt in INTS):
        raise not_implemented("round_vml_cpu" if decimals == 0 else "round_cpu", dt)
    return _OPMATH.get(dt, dt), dt


round = _unary("round", _round, _round_rule, _zero_grad,  # noqa: A001
               grad_name=lambda is_tensor, attrs: "RoundBackward1" if "decimals" in attrs
               else "RoundBackward0", lowering=_lower_round)


def _logit(x, eps=None):
    if _is_half_array(x):
        # torch's half kernel computes in the half type, rounding every step
        dt = x.dtype
        x = x.astype(np.float32)
        if eps is not None:
            lo = _to_half(eps, dt)
            x = np.clip(x, lo, _to_half(1 - lo, dt))
        return np.log(_to_half(x / _to_half(1 - x, dt), dt))
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def _logit_vjp(ctx, g):
    x, eps = ctx.inputs[0], ctx.attrs.get("eps")
    d = g / (x * (1 - x))
    if eps is None:
        return (d.masked_fill((x < 0) | (x > 1), float("nan")),)
    return (d.masked_fill((x < eps) | (x > 1 - eps), 0),)


logit = _unary("logit", _logit, _kept(promote_float), _logit_vjp, lowering=_lower_logit)


def _polygamma(x, n):
    if n == 0:
        return _special.psi(x)
    if n == 1:
        return _trigamma(x)
    # torch's Hurwitz zeta turns +inf into NaN for n >= 2 (its tail term is 0 * inf)
    return np.where(x == np.inf, np.nan, _special.polygamma(n, x)).astype(x.dtype)


def _polygamma_rule(x, n):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return promote_float(x)


polygamma = _unary("polygamma", _polygamma, _polygamma_rule,
                   lambda ctx, g: (g * ctx.inputs[0].polygamma(ctx.attrs["n"] + 1),),
                   lowering=_lower_polygamma)


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    if not _is_float_array(x):
        return x.copy()
    info = D.finfo(D.from_numpy_dtype(x.dtype))      # the limits of x's own dtype
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    return np.where(np.isnan(x), nan, np.where(x == np.inf, hi, np.where(x == -np.inf, lo, x)))


nan_to_num = _unary("nan_to_num", _nan_to_num, exact,
                    lambda ctx, g: (g.masked_fill(~ctx.inputs[0].isfinite(), 0),), lowering=_lower_nan_to_num)


def _signbit(x):
    if D.is_bfloat16(x.dtype):
        x = x.astype(np.float32)
    if x.dtype.kind == "f":
        return np.signbit(x)
    return x < 0


def _bitwise_not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


logical_not = _unary("logical_not", np.logical_not, logical, None, differentiable=False,
                     lowering=lambda b, x: b.not_(b.cast(x, D.bool)))
bitwise_not = _unary("bitwise_not", _bitwise_not, integral("bitwise_not_cpu"), None,
                     differentiable=False, lowering=_lower_bitwise_not)
isnan = _unary("isnan", np.isnan, compare, None, differentiable=False,
               lowering=lambda b, x: b.cmp("ne", x, x))
isinf = _unary("isinf", np.isinf, compare, None, differentiable=False, lowering=_lower_isinf)
isfinite = _unary("isfinite", np.isfinite, compare, None, differentiable=False, lowering=_lower_isfinite)
signbit = _unary("signbit", _signbit, compare, None, differentiable=False, lowering=_lower_signbit)

# ---------------------------------------------------------------- binary


def _wrap_int(v, np_dtype):
    """A Python int taken modulo the integer dtype's range, as torch converts scalars."""
    info = np.iinfo(np_dtype)
    if info.min <= v <= info.max:
        return v
    span = info.max - info.min + 1
    return (v - info.min) % span + info.min


def _check_alpha(dt, alpha):
    if type(alpha) is bool:
        if dt is not D.bool:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, float) and not dt.is_floating_point:
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number.")


def _scaled(b, alpha):
    """``alpha * b`` with alpha converted to b's dtype first (integers wrap, as in torch)."""
    if type(alpha) is int and type(b) is np.ndarray and b.dtype.kind in "iu":
        alpha = _wrap_int(alpha, b.dtype)
    return b * alpha


def _is_half_array(a):
    return type(a) is np.ndarray and a.itemsize == 2 and a.dtype.kind not in "iu"


def _to_half(x, dt):
    """``x`` (an array or a Python number) converted to the half type ``dt`` as torch converts
    it (a number through float32), as float32 values."""
    return np.asarray(x).astype(np.float32).astype(dt).astype(np.float32)


def _add_half(a, b, alpha):
    """a + alpha * b for float16/bfloat16 as torch's kernel computes it: a Python number and
    alpha are first converted to the tensor's type, then a + alpha * b is one fused
    multiply-add in float32, rounded once (the product of two half values is exact in float32)."""
    dt = a.dtype if _is_half_array(a) else b.dtype
    A, B = _to_half(a, dt), _to_half(b, dt)
    return (A + B if alpha == 1 else A + B * _to_half(alpha, dt)).astype(dt)


def _add(a, b, alpha=1):
    if _is_half_array(a) or _is_half_array(b):     # the rule keeps half types (_add_rule)
        return _add_half(a, b, alpha)
    return np.add(a, b if alpha == 1 else _scaled(b, alpha))


def _sub(a, b, alpha=1):
    if _is_half_array(a) or _is_half_array(b):
        return _add_half(a, b, -alpha)
    return np.subtract(a, b if alpha == 1 else _scaled(b, alpha))


# An impl's ``floats``: the same function for float32/float64/complex operands without
# attributes, which need none of the half-type care (the eager fast path calls it).
_add.floats, _sub.floats = np.add, np.subtract


def _add_rule(a, b, alpha=1):
    dt = result_type(a, b)
    if alpha != 1 or type(alpha) is not int:
        _check_alpha(dt, alpha)
    # half types compute in the half type itself: torch rounds a number operand and alpha to
    # it before the float32 arithmetic (mul and div keep the number in float32 instead)
    return dt, dt


def _is_bool(x):
    return type(x) is bool or getattr(x, "dtype", None) is D.bool


def _sub_rule(a, b, alpha=1):
    if _is_bool(a) or _is_bool(b):
        if _is_bool(a) and _is_bool(b):
            raise RuntimeError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. "
                "Use the `^` or `logical_xor()` operator instead.")
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _add_rule(a, b, alpha)


def _alpha_grad(g, alpha):
    """``g * alpha`` for the second operand of add and sub: ``g`` itself for 1 (a multiply by 1
    would be a pass over the gradient for nothing; the engine copies a gradient that is shared
    before a leaf keeps it), ``-g`` for -1."""
    if type(alpha) is int or type(alpha) is float:
        if alpha == 1:
            return g
        if alpha == -1:
            return -g
    return g * alpha


add = define_elementwise("add", _add, _add_rule,
                   lambda ctx, g: (g, ctx.needs(1) and _alpha_grad(g, ctx.attrs.get("alpha", 1))),
                   lowering=_lower_add, scalar_attrs=("alpha",))
sub = define_elementwise("sub", _sub, _sub_rule,
                   lambda ctx, g: (g, ctx.needs(1) and _alpha_grad(g, -ctx.attrs.get("alpha", 1))),
                   grad_name=lambda is_tensor, attrs: "SubBackward0" if is_tensor[0]
                   else "RsubBackward1", lowering=_lower_sub, scalar_attrs=("alpha",))
mul = define_elementwise("mul", np.multiply, promote,
                   lambda ctx, g: (ctx.needs(0) and g * ctx.inputs[1],
                                   ctx.needs(1) and g * ctx.inputs[0]), lowering=_lower_mul)


def _is_int_array(a):
    return type(a) is np.ndarray and a.dtype.kind in "iub"


def _check_int_divisor(a, b):
    """Integer floor/trunc division and remainder by zero raise, as in torch."""
    if type(b) is np.ndarray:
        if b.dtype.kind in "iub" and not b.all():
            raise RuntimeError("ZeroDivisionError")
    elif b == 0 and _is_int_array(a) or (type(b) is int and b == 0 and type(a) is int):
        raise RuntimeError("ZeroDivisionError")


def _div_half(a, b, rounding_mode):
    """Rounded division of two float16/bfloat16 tensors as torch's CPU kernel computes it:
    its vectorized half arithmetic rounds every step to the dtype (trunc rounds the quotient
    before truncating; floor runs Python's floor-division algorithm step by step)."""
    dt = a.dtype if _is_half_array(a) else b.dtype
    f32 = np.float32

    def r(x):                           # one step's result, rounded to the dtype
        return np.asarray(x, f32).astype(dt).astype(f32)
    A, B = r(a), r(b)
    q = r(A / B)
    if rounding_mode == "trunc":
        return np.trunc(q).astype(dt)
    mod = r(np.fmod(A, B))
    div = r(r(A - mod) / B)
    div = np.where((mod != 0) & ((B < 0) != (mod < 0)), r(div - 1), div)
    floordiv = np.floor(div)
    floordiv = np.where(r(div - floordiv) > 0.5, r(floordiv + 1), floordiv)
    floordiv = np.where(div == 0, np.copysign(f32(0), q), floordiv)
    return np.where(B == 0, q, floordiv).astype(dt)


def _div(a, b, rounding_mode=None):
    if rounding_mode is None:
        return np.true_divide(a, b)
    if _is_half_array(a) or _is_half_array(b):      # the rule keeps half types (_div_rule)
        return _div_half(a, b, rounding_mode)
    integer = _is_int_array(a) or _is_int_array(b) or (type(a) is int and type(b) is int)
    if integer:
        _check_int_divisor(a, b)
    if rounding_mode == "floor":
        return np.floor_divide(a, b)
    if integer:
        q = np.floor_divide(a, b)
        # floor rounds toward -inf; trunc differs when the signs differ and there is a remainder
        fix = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q + fix.astype(q.dtype)
    return np.trunc(np.true_divide(a, b))


def _div_rule(a, b, rounding_mode=None):
    if rounding_mode is None:
        return promote_float(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' "
            f"but found '{rounding_mode}'")
    ct, dt = promote(a, b)
    if dt is D.bool:
        raise not_implemented(f"div_{rounding_mode}_cpu", dt)
    if dt in _OPMATH and _numel(b) != 1:
        # torch computes a half tensor by a one-element divisor (a number) in float32 and
        # rounds once; by a tensor it rounds every step: the impl sees the half type then
        return dt, dt
    return ct, dt


def _numel(x):
    return math.prod(x.shape) if _is_tensor(x) else 1


def _div_vjp(ctx, g):
    if ctx.attrs.get("rounding_mode") is not None:
        return (ctx.needs(0) and g.new_zeros(g.shape), ctx.needs(1) and g.new_zeros(g.shape))
    a, b = ctx.inputs
    return (ctx.needs(0) and g / b, ctx.needs(1) and -g * a / (b * b))


div = define_elementwise("div", _div, _div_rule, _div_vjp,
                   grad_name=lambda is_tensor, attrs: "DivBackward2"
                   if attrs.get("rounding_mode") is not None else "DivBackward0", lowering=_lower_div)


def _half_operands(a, b):
    """Both operands as float32 values of the half type when one is a float16/bfloat16 array
    (torch converts a number or another dtype's tensor to the result type first); else as
    they are.  The ops calling this keep half types in their rule (``_kept``)."""
    if _is_half_array(a) or _is_half_array(b):
        dt = a.dtype if _is_half_array(a) else b.dtype
        return _to_half(a, dt), _to_half(b, dt)
    return a, b


def _remainder(a, b):
    if _is_int_array(a) or _is_int_array(b) or (type(a) is int and type(b) is int):
        _check_int_divisor(a, b)
        return np.remainder(a, b)
    a, b = _half_operands(a, b)
    # torch: fmod, then shift into the divisor's sign (keeps fmod's zero sign: -4 % 2 = -0.)
    m = np.fmod(a, b)
    adjust = (m != 0) & ((np.asarray(b) < 0) != (m < 0))
    return np.where(adjust, m + b, m)


def _fmod(a, b):
    if _is_int_array(a) or _is_int_array(b):
        _check_int_divisor(a, b)
    return np.fmod(*_half_operands(a, b))


def _remainder_vjp(ctx, g):
    a, b = ctx.inputs
    if not _is_tensor(a):
        raise RuntimeError("derivative for aten::remainder is not implemented")
    return (g, ctx.needs(1) and -g * a.div(b, rounding_mode="floor"))


remainder = define_elementwise(
    "remainder", _remainder, _kept(rejecting(promote, "remainder_cpu", BOOL)), _remainder_vjp,
    grad_name=by_operands({(True, True): "RemainderBackward1", (True, False): "RemainderBackward0",
                           (False, True): NOT_IMPLEMENTED}), lowering=_lower_remainder)
fmod = define_elementwise(
    "fmod", _fmod, _kept(rejecting(promote, "fmod_cpu", BOOL)),
    lambda ctx, g: (g, ctx.needs(1) and -g * ctx.inputs[0].div(ctx.inputs[1], rounding_mode="trunc")),
    grad_name=by_operands({(True, True): "FmodBackward1", (True, False): "FmodBackward0"}),
    lowering=_lower_fmod)


def _int_pow(a, b):
    """Integer power: a negative exponent gives 1, -1 or 0 (truncated), as in torch."""
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    neg = b_arr < 0
    if not neg.any():
        return np.power(a, b)
    safe = np.power(a, np.where(neg, 0, b_arr).astype(b_arr.dtype))
    odd = (b_arr & 1).astype(bool)
    at_neg = np.where(a_arr == 1, 1, np.where(a_arr == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, at_neg.astype(safe.dtype), safe)


# torch computes these scalar exponents with cheaper exact formulas (sqrt(-0.) is -0.)
_POW_SHORTCUTS = {
    2: lambda x: x * x, 3: lambda x: x * x * x, 0.5: np.sqrt, -0.5: lambda x: 1 / np.sqrt(x),
    -1: lambda x: 1 / x, -2: lambda x: 1 / (x * x)}


def _opmath(x):
    """float16/bfloat16 arrays widened to float32 (torch's compute type for them)."""
    if type(x) is np.ndarray and x.itemsize == 2 and x.dtype.kind != "i":
        return x.astype(np.float32)
    return x


def _pow(a, b):
    # pow keeps half types in the impl (the rule does not widen them): torch computes
    # float16 with pow in float32, and the other float types with exact shortcuts
    if type(b) is not np.ndarray:                    # tensor ** Python number
        if b == 1 or b == 0:
            return a.copy() if b == 1 else np.ones_like(a)
        if _is_int_array(a):
            if b < 0 and isinstance(b, int):
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            return np.power(a, b)
        if _is_half_array(a):
            return _half_pow(a, b)
        f = _POW_SHORTCUTS.get(b)
        return f(a) if f is not None else np.power(a, b)
    if b.dtype.kind in "iu" and (_is_int_array(a) or isinstance(a, int)):
        r = _int_pow(a, b)
    else:
        r = _power(*_half_operands(a, b))
    # torch's number ** tensor kernel allocates its result contiguous (evaluate.py keeps it)
    if type(a) is not np.ndarray and type(r) is np.ndarray and not r.flags.c_contiguous:
        return r.copy(order="C")
    return r


def _power(base, exp):
    """C's pow: numpy takes sqrt for a one-element exponent 0.5, where pow gives +inf at -inf
    and +0 at -0."""
    r = np.power(base, exp)
    if np.size(exp) == 1 and np.asarray(exp).dtype.kind == "f" and exp == 0.5 and type(base) is np.ndarray:
        r = np.where(np.isneginf(base) | (base == 0), np.abs(base), r)
    return r


def _half_pow(a, b):
    """A half tensor to a number power as torch computes it: bfloat16 takes sqrt, rsqrt or
    reciprocal for the number 0.5, -0.5 or -1, then converts the number to bfloat16 and
    multiplies out 2, 3 and -2 in bfloat16 steps; float16 converts it and calls pow."""
    x = _opmath(a)
    if a.dtype == np.float16:
        return _power(x, _to_half(b, a.dtype))
    if b in (0.5, -0.5, -1):
        return _POW_SHORTCUTS[b](x)
    e = _to_half(b, a.dtype)

    def r(v):
        return v.astype(a.dtype).astype(np.float32)
    if e == 2:
        return x * x
    if e == 3:
        return r(x * x) * x
    if e == -2:
        return 1 / r(x * x)
    return np.power(x, e)


def _pow_rule(a, b):
    ct, dt = exact(a, b)
    # tensor ** 0 and tensor ** 1 never reach a kernel in torch, so even bool works
    if dt is D.bool and (_is_tensor(b) or b not in (0, 1)):
        raise not_implemented("pow", dt)
    return ct, dt


def _pow_vjp(ctx, g):
    a, b = ctx.inputs
    ga = gb = None
    if ctx.needs(0):
        if not _is_tensor(b):
            ga = g.new_zeros(g.shape) if b == 0 else g * (b * a.pow(b - 1))
        else:
            ga = (g * (b * a.pow(b - 1))).masked_fill(b == 0, 0)
    if ctx.needs(1):
        out = ctx.output
        if not _is_tensor(a):
            if a == 0:
                gb = (g * out * float("-inf")).masked_fill(b >= 0, 0)
            else:
                gb = g * out * (math.log(a) if a > 0 else float("nan"))
        else:
            gb = (g * (out * a.log())).masked_fill((a == 0) & (b >= 0), 0)
    return ga, gb


pow = define_elementwise(  # noqa: A001
    "pow", _pow, _pow_rule, _pow_vjp,
    grad_name=by_operands({(True, True): "PowBackward1", (True, False): "PowBackward0",
                           (False, True): "PowBackward2"}), lowering=_lower_pow)


def _atan2_vjp(ctx, g):
    a, b = ctx.inputs
    denom = a * a + b * b
    recip = denom.reciprocal().masked_fill(denom == 0, 0)     # PyTorch's zero gradient at (0, 0)
    return (ctx.needs(0) and g * b * recip, ctx.needs(1) and g * -a * recip)


def _atan2(a, b):
    # torch's float kernel (SLEEF's vectorized atan2f, within an ulp; half types round its
    # float result) is nearer float64's atan2 rounded to float than numpy's float32 one: of a
    # million float results 1.4% differ from the first, 17% from the second; of half results
    # 3 and 32.  (Bit for bit would take SLEEF's algorithm itself.)
    a, b = _half_operands(a, b)
    if np.result_type(a, b) == np.float32:
        return np.arctan2(np.asarray(a, np.float64), b).astype(np.float32)
    return np.arctan2(a, b)


atan2 = define_elementwise("atan2", _atan2, _kept(promote_float), _atan2_vjp, lowering=_math("atan2"))


def _minmax_vjp(pick):
    """torch sends half the gradient to each side on a tie."""
    def vjp(ctx, g):
        a, b = ctx.inputs
        half = (g / 2).where(a == b, g)
        ga = ctx.needs(0) and half.masked_fill(pick(a, b), 0)
        gb = ctx.needs(1) and half.masked_fill(pick(b, a), 0)
        return ga, gb
    return vjp


maximum = define_elementwise("maximum", np.maximum, exact, _minmax_vjp(lambda a, b: a < b),
                             lowering=_lower_maximum)
minimum = define_elementwise("minimum", np.minimum, exact, _minmax_vjp(lambda a, b: a > b),
                             lowering=_lower_minimum)


def _fminmax_vjp(wins):
    """fmax/fmin: the whole gradient goes to the chosen side (a NaN loses)."""
    def vjp(ctx, g):
        a, b = ctx.inputs
        a_chosen = wins(a, b) | b.isnan()
        return (ctx.needs(0) and g.masked_fill(~a_chosen, 0),
                ctx.needs(1) and g.masked_fill(a_chosen, 0))
    return vjp


fmax = define_elementwise("fmax", np.fmax, exact, _fminmax_vjp(lambda a, b: a >= b), lowering=_lower_fmax)
fmin = define_elementwise("fmin", np.fmin, exact, _fminmax_vjp(lambda a, b: a <= b), lowering=_lower_fmin)


def _copysign_vjp(ctx, g):
    a = ctx.inputs[0]
    ratio = (ctx.output / a).masked_fill(a == 0, 0)
    return (g * ratio, ctx.needs(1) and g.new_zeros(g.shape))


copysign = define_elementwise(
    "copysign", np.copysign, promote_float, _copysign_vjp,
    grad_name=by_operands({(True, True): "CopysignBackward0", (True, False): "CopysignBackward1"}),
    lowering=_math("copysign"))
hypot = define_elementwise(
    "hypot", np.hypot, rejecting(promote, "hypot_cpu", INTEGRAL),
    lambda ctx, g: (ctx.needs(0) and g * ctx.inputs[0] / ctx.output,
                    ctx.needs(1) and g * ctx.inputs[1] / ctx.output), lowering=_math("hypot"))
logaddexp = define_elementwise(
    "logaddexp", np.logaddexp, rejecting(promote, "logaddexp_cpu", INTEGRAL),
    lambda ctx, g: (ctx.needs(0) and g / ((ctx.inputs[1] - ctx.inputs[0]).exp() + 1),
                    ctx.needs(1) and g / ((ctx.inputs[0] - ctx.inputs[1]).exp() + 1)),
                    lowering=_lower_logaddexp("exp", LN2))
logaddexp2 = define_elementwise(
    "logaddexp2", np.logaddexp2, rejecting(promote, "logaddexp2_cpu", INTEGRAL),
    lambda ctx, g: (ctx.needs(0) and g / ((ctx.inputs[1] - ctx.inputs[0]).exp2() + 1),
                    ctx.needs(1) and g / ((ctx.inputs[0] - ctx.inputs[1]).exp2() + 1)),
    lowering=_lower_logaddexp("exp2", 1.0, 1 / LN2))


def _xlogy(a, b):
    half = a.dtype if _is_half_array(a) else b.dtype if _is_half_array(b) else None
    a, b = _half_operands(a, b)
    log = np.log(b)
    if half is not None:            # torch's half kernel rounds log(b) to the half type
        log = _to_half(log, half)
    out = a * log
    return np.where((np.asarray(a) == 0) & ~np.isnan(b), 0, out)


def _xlogy_vjp(ctx, g):
    a, b = ctx.inputs
    ga = gb = None
    if ctx.needs(0):
        if _is_tensor(b):
            ga = g.xlogy(b).masked_fill((a == 0) & (b <= 0), 0)
        else:
            ga = g.xlogy(b) if b > 0 else g.xlogy(b).masked_fill(a == 0, 0)
    if ctx.needs(1):
        gb = g * a / b
    return ga, gb


xlogy = define_elementwise(
    "xlogy", _xlogy, _kept(promote_float), _xlogy_vjp,
    grad_name=by_operands({(True, True): "XlogyBackward0", (False, True): "XlogyBackward1",
                           (True, False): "XlogyBackward2"}), lowering=_lower_xlogy)


def _heaviside_rule(a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return a.dtype, a.dtype


def _heaviside(a, b):
    if a.dtype == np.bool_:
        return np.where(a, True, b)
    return np.heaviside(a, b).astype(a.dtype) if a.dtype.kind == "f" else \
        np.where(a == 0, b, (a > 0).astype(a.dtype))


heaviside = define_elementwise("heaviside", _heaviside, _heaviside_rule, _no_derivative("heaviside"),
                         grad_name=NOT_IMPLEMENTED, lowering=_lower_heaviside)
# PyTorch passes the gradient through to self (the step is below float resolution) and
# gives other a zero gradient
nextafter = define_elementwise("nextafter", np.nextafter,
                         rejecting(exact, "nextafter_cpu", INTEGRAL),
                         lambda ctx, g: (g, ctx.needs(1) and g.new_zeros(g.shape)),
                         lowering=_math("nextafter"))


def _cmp(fn):
    """Comparisons convert an out-of-range Python int to the tensor's dtype, as torch does."""
    def impl(a, b):
        if type(b) is int and type(a) is np.ndarray and a.dtype.kind in "iu":
            b = _wrap_int(b, a.dtype)
        elif type(a) is int and type(b) is np.ndarray and b.dtype.kind in "iu":
            a = _wrap_int(a, b.dtype)
        return fn(a, b)
    return impl


eq = define_elementwise("eq", _cmp(np.equal), compare, None, differentiable=False, lowering=_comparison("eq"))
ne = define_elementwise("ne", _cmp(np.not_equal), compare, None, differentiable=False,
                        lowering=_comparison("ne"))
lt = define_elementwise("lt", _cmp(np.less), compare, None, differentiable=False, lowering=_comparison("lt"))
le = define_elementwise("le", _cmp(np.less_equal), compare, None, differentiable=False,
                        lowering=_comparison("le"))
gt = define_elementwise("gt", _cmp(np.greater), compare, None, differentiable=False,
                        lowering=_comparison("gt"))
ge = define_elementwise("ge", _cmp(np.greater_equal), compare, None, differentiable=False,
                  lowering=_comparison("ge"))

logical_and = define_elementwise("logical_and", np.logical_and, logical, None, differentiable=False,
                           lowering=_logic("and_"))
logical_or = define_elementwise("logical_or", np.logical_or, logical, None, differentiable=False,
                          lowering=_logic("or_"))
logical_xor = define_elementwise("logical_xor", np.logical_xor, logical, None, differentiable=False,
                           lowering=_logic("xor"))
# gcd/lcm: integers only, no derivative (PyTorch records none); numpy's results are PyTorch's,
# wraparound of the unsigned and narrow types included
gcd = define_elementwise("gcd", np.gcd, rejecting(exact, "gcd_cpu", BOOL | FLOATS), None,
                   differentiable=False)
lcm = define_elementwise("lcm", np.lcm, rejecting(exact, "lcm_cpu", BOOL | FLOATS), None,
                   differentiable=False)
bitwise_and = define_elementwise("bitwise_and", np.bitwise_and, integral("bitwise_and_cpu"), None,
                           differentiable=False, lowering=lambda b, x, y: b.and_(x, y))
bitwise_or = define_elementwise("bitwise_or", np.bitwise_or, integral("bitwise_or_cpu"), None,
                          differentiable=False, lowering=lambda b, x, y: b.or_(x, y))
bitwise_xor = define_elementwise("bitwise_xor", np.bitwise_xor, integral("bitwise_xor_cpu"), None,
                           differentiable=False, lowering=lambda b, x, y: b.xor(x, y))


def _shift(fn, left):
    """Shifts by a negative amount or by at least the bit width give 0 (or -1 shifting a
    negative number right), as in torch, instead of C's undefined result."""
    def impl(a, b):
        arr = a if type(a) is np.ndarray else np.asarray(a, dtype=np.asarray(b).dtype)
        bits = arr.dtype.itemsize * 8
        b_arr = np.asarray(b)
        ok = (b_arr >= 0) & (b_arr < bits)
        if ok.all():
            return fn(a, b)
        r = fn(arr, np.where(ok, b_arr, 0).astype(b_arr.dtype))
        fill = 0 if left else np.where(arr < 0, -1, 0).astype(arr.dtype)
        return np.where(ok, r, fill).astype(arr.dtype)
    return impl


def _shift_rule(kernel):
    return rejecting(exact, kernel, FLOATS | BOOL)


bitwise_left_shift = define_elementwise("bitwise_left_shift", _shift(np.left_shift, True),
                                  _shift_rule("lshift_cpu"), None, differentiable=False,
                                  lowering=_lower_shift(True))
bitwise_right_shift = define_elementwise("bitwise_right_shift", _shift(np.right_shift, False),
                                   _shift_rule("rshift_cpu"), None, differentiable=False,
                                   lowering=_lower_shift(False))

# ---------------------------------------------------------------- ternary


def _where_rule(cond, a, b, **_):
    cdt = getattr(cond, "dtype", None)
    if cdt is not D.bool:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{type_name(cdt) if cdt is not None else type(cond).__name__}")
    dt = result_type(a, b)
    return dt, dt


def _where(cond, a, b):
    return np.where(cond, a, b)


def _where_vjp(ctx, g):
    c = ctx.inputs[0]
    return (None, ctx.needs(1) and g.masked_fill(~c, 0), ctx.needs(2) and g.masked_fill(c, 0))


# the condition is cast to the compute dtype too: its 0/1 values select the same elements
where = define_elementwise("where", _where, _where_rule, _where_vjp, lowering=_lower_where)


def _check_bound(v, dt):
    """torch converts a Python bound to the tensor dtype and rejects values that overflow."""
    if type(v) is int and dt in INTS:
        info = np.iinfo(dt.np)
        # unsigned types accept negative values down to -max (they wrap)
        low = -info.max if dt is D.uint8 else info.min
        if not low <= v <= info.max:
            raise RuntimeError(
                f"value cannot be converted to type {dt.cpp_type} without overflow")
    elif type(v) is float and dt in (D.float16, D.bfloat16) and math.isfinite(v):
        if builtins.abs(v) > D.finfo(dt).max:
            raise RuntimeError(
                f"value cannot be converted to type {dt.cpp_type} without overflow")



_NUMBER_OR_NONE = (int, float, type(None))


def _clamp_rule(x, lo=None, hi=None, fn="clamp"):
    dt = x.dtype
    if dt.is_floating_point and type(lo) in _NUMBER_OR_NONE and type(hi) in _NUMBER_OR_NONE:
        # fast path: Python bounds never change a floating tensor's dtype
        if dt.itemsize == 2:
            for v in (lo, hi):
                if v is not None:
                    _check_bound(v, dt)
        return dt, dt
    dt = result_type(*[v for v in (x, lo, hi) if v is not None])
    if dt is D.bool:
        # PyTorch's tensor-bound kernels take bool (one bound at a time); its scalar ones do not
        scalars = [v is not None and not _is_tensor(v) for v in (lo, hi)]
        if any(scalars):
            raise not_implemented("clamp_scalar_cpu" if all(scalars) else
                                  "clamp_min_scalar_cpu" if scalars[0] else "clamp_max_scalar_cpu", dt)
        if lo is not None and hi is not None:
            raise not_implemented("clamp_cpu", dt)
    if dt is getattr(x, "dtype", None):
        for v in (lo, hi):
            if v is not None and not _is_tensor(v):
                _check_bound(v, dt)
    return dt, dt


def _clamp(x, lo=None, hi=None, fn="clamp"):
    if type(lo) is int and x.dtype.kind in "iu":
        lo = _wrap_int(lo, x.dtype)
    if type(hi) is int and x.dtype.kind in "iu":
        hi = _wrap_int(hi, x.dtype)
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _clamp_vjp(ctx, g):
    """torch's clamp_backward_min_max: the input gets the gradient where min <= x <= max
    (ties included); a tensor bound gets it where it was the one applied."""
    x, lo, hi = ctx.inputs
    keep = None
    if lo is not None:
        keep = x >= lo
    if hi is not None:
        keep = (x <= hi) if keep is None else keep & (x <= hi)
    gx = ctx.needs(0) and g.masked_fill(~keep, 0)
    glo = ghi = None
    if ctx.needs(1):
        took_lo = (x < lo) if hi is None else (x < lo) & (lo < hi)
        glo = g.masked_fill(~took_lo, 0)
    if ctx.needs(2):
        took_hi = (x > hi) if lo is None else (x > hi) | (hi < lo)
        ghi = g.masked_fill(~took_hi, 0)
    return gx, glo, ghi


def _clamp_grad_name(is_tensor, attrs):
    fn = attrs.get("fn", "clamp")
    if fn == "clamp":
        return "ClampBackward0" if is_tensor[1] or is_tensor[2] else "ClampBackward1"
    bound = is_tensor[1] if fn == "clamp_min" else is_tensor[2]
    return ("ClampMinBackward" if fn == "clamp_min" else "ClampMaxBackward") + \
        ("1" if bound else "0")


clamp = define_elementwise("clamp", _clamp, _clamp_rule, _clamp_vjp, grad_name=_clamp_grad_name,
                     lowering=_lower_clamp)


def _masked_fill_rule(x, mask, value, **_):
    mdt = getattr(mask, "dtype", None)
    if mdt is not D.bool:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{mdt.type_meta_name}")
    if _is_tensor(value):
        if len(value.shape):
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {len(value.shape)} dimension(s).")
    else:
        _check_bound(value, x.dtype)
    return x.dtype, x.dtype


def _masked_fill(x, mask, value):
    if type(value) is np.ndarray:
        value = value.astype(x.dtype)               # torch converts the value to x's dtype
    elif type(value) is int and x.dtype.kind in "iu":
        value = _wrap_int(value, x.dtype)
    if type(value) is int and value == 0 and x.dtype in _ZERO_BY_MASK and mask.shape == x.shape \
            and x.flags.c_contiguous and mask.flags.c_contiguous:
        return _zero_where(x, mask)
    return np.where(mask, value, x)


# masked_fill(x, mask, 0) (relu's derivative) clears x's bits where mask holds: the same values
# as np.where (NaNs kept where the mask is false, +0 where it is true), branch-free: np.where
# on a random mask costs about ten times as much
_ZERO_BY_MASK = {np.dtype(t): np.dtype(f"i{np.dtype(t).itemsize}")
                 for t in (np.float32, np.float64, np.int32, np.int64)}


def _zero_where(x, mask):
    ints = _ZERO_BY_MASK[x.dtype]
    keep = mask.astype(ints)                    # 1 where cleared, 0 where kept
    np.subtract(keep, 1, out=keep)              # 0 where cleared, all bits set where kept
    return np.bitwise_and(x.view(ints), keep).view(x.dtype)


masked_fill = define_elementwise(
    "masked_fill", _masked_fill, _masked_fill_rule, cast_inputs=False, vjp=(
        lambda ctx, g: (ctx.needs(0) and g.masked_fill(ctx.inputs[1], 0), None,
                        ctx.needs(2) and g.masked_fill(~ctx.inputs[1], 0).sum())),
    grad_name=by_operands({(True, True, False): "MaskedFillBackward0",
                           (True, True, True): "MaskedFillBackward1"}), lowering=_lower_masked_fill)


def _lerp(a, b, w):
    # torch's formula, exact at both ends and monotonic, with its kernels' fused
    # multiply-add: w * (b - a) + a for small weights, (w - 1) * (b - a) + b otherwise
    if not isinstance(w, np.ndarray) or w.ndim == 0:
        w = a.dtype.type(w)                 # the weight in the compute dtype
        return fma(w, b - a, a) if builtins.abs(w) < 0.5 else fma(w - 1, b - a, b)
    small = np.abs(w) < 0.5
    return fma(np.where(small, w, w - 1), b - a, np.where(small, a, b))


def _lerp_rule(a, b, w):
    dt = a.dtype
    if b.dtype is not dt:
        raise RuntimeError(f"expected dtype {dt.type_meta_name} for `end` but got dtype "
                           f"{b.dtype.type_meta_name}")
    weight_tensor = _is_tensor(w)
    if weight_tensor and len(w.shape) and w.dtype is not dt:
        raise RuntimeError(f"expected dtype {dt.type_meta_name} for `weight` but got dtype "
                           f"{w.dtype.type_meta_name}")
    if not dt.is_floating_point:
        raise not_implemented("lerp_kernel_tensor" if weight_tensor else "lerp_kernel_scalar", dt)
    return _OPMATH.get(dt, dt), dt


def _lerp_vjp(ctx, g):
    a, b, w = ctx.inputs
    return (ctx.needs(0) and g * (1 - w), ctx.needs(1) and g * w,
            ctx.needs(2) and g * (b - a))


lerp = define_elementwise("lerp", _lerp, _lerp_rule, _lerp_vjp,
                    grad_name=by_operands({(True, True, False): "LerpBackward0",
                                           (True, True, True): "LerpBackward1"}), lowering=_lower_lerp)


def _addcmul(x, t1, t2, value=1):
    # torch: value * t1 * t2 + x, the multiply-add fused (value in the compute dtype)
    if x.dtype.kind in "iub":
        return np.add(x, np.multiply(t1, t2) * _addc_value_np(x, value))
    return fma(t1 if value == 1 else np.asarray(value, x.dtype) * t1, t2, x)


def _addc_value_np(x, value):
    """addcmul's ``value`` is converted to the tensors' dtype (1.5 is 1 for integers)."""
    if type(value) is float and x.dtype.kind in "iu":
        return int(value)
    return value


def _addcmul_rule(x, t1, t2, value=1):
    dt = result_type(x, t1, t2)
    if dt is D.bool:
        raise not_implemented("addcmul_cpu_out", dt)
    return _OPMATH.get(dt, dt), dt


ADDCDIV_INT_MESSAGE = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
    "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
    "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
    "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all "
    "dtypes.")


def _addcdiv_rule(x, t1, t2, value=1):
    if not t1.dtype.is_floating_point and not t2.dtype.is_floating_point:
        raise RuntimeError(ADDCDIV_INT_MESSAGE)
    return _addcmul_rule(x, t1, t2, value)


def _addcdiv(x, t1, t2, value=1):
    # torch: x + value * t1 / t2, in that order (value in the compute dtype)
    return np.add(x, np.true_divide(t1 if value == 1 else np.asarray(value, x.dtype) * t1, t2))


# the gradients as PyTorch's derivative formulas group them (which rounds alike in half types)
def _addcmul_vjp(ctx, g):
    _, t1, t2 = ctx.inputs
    v = ctx.attrs.get("value", 1)
    return (g, ctx.needs(1) and g * (t2 * v), ctx.needs(2) and g * (t1 * v))


def _addcdiv_vjp(ctx, g):
    _, t1, t2 = ctx.inputs
    v = ctx.attrs.get("value", 1)
    return (g, ctx.needs(1) and g * (v / t2), ctx.needs(2) and -g * (v * t1 / (t2 * t2)))


addcmul = define_elementwise("addcmul", _addcmul, _addcmul_rule, _addcmul_vjp, lowering=_lower_addcmul,
                             scalar_attrs=("value",))
addcdiv = define_elementwise("addcdiv", _addcdiv, _addcdiv_rule, _addcdiv_vjp, lowering=_lower_addcdiv,
                             scalar_attrs=("value",))


def _angle(x):
    # the argument of a real number: 0, pi for negatives, NaN stays NaN
    return np.where(x < 0, math.pi, np.where(np.isnan(x), x, 0))


angle = _unary("angle", _angle, promote_float, _zero_grad, lowering=_lower_angle)


# ---------------------------------------------------------------- two outputs


def _frexp(x):
    if not _is_float_array(x):
        raise TypeError("frexp needs a floating array")    # meta words the error
    mantissa, exponent = np.frexp(_opmath(x))
    return mantissa.astype(x.dtype), exponent.astype(np.int32)


def _frexp_meta(x):
    if not x.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return TensorSpec(tuple(x.shape), x.dtype), TensorSpec(tuple(x.shape), D.int32)


frexp = define("frexp", "other", _frexp, meta=_frexp_meta,
               vjp=lambda ctx, g_mantissa, g_exponent: (g_mantissa / ctx.output[1].exp2(),))

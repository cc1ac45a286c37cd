"""Elementwise primitives: unary math, binary arithmetic, comparisons, logic, where, clamp.

Each op's ``impl`` receives numpy arrays already converted to the compute dtype that its
``dtype_rule`` chose (Python scalars stay Python scalars, which numpy treats as weak),
so the implementations here are one numpy call each.  Derivative rules receive the
backward context ``ctx`` (``ctx.inputs``, ``ctx.output``, ``ctx.attrs``) and the output
gradient ``g`` and return one gradient per input; broadcasting is undone by the engine.
"""
import math

import numpy as np
from scipy import special as _special

from dynograph.runtime import dtypes as D
from .core import define, result_type, to_float, type_name, TensorSpec, broadcast_shapes

# ---------------------------------------------------------------- dtype rules
# Each returns (compute dtype, output dtype).


def promote(*xs, **_):
    dt = result_type(*xs)
    return dt, dt


def promote_float(*xs, **_):
    dt = to_float(result_type(*xs))
    return dt, dt


def compare(*xs, **_):
    return result_type(*xs), D.bool


def logical(*xs, **_):
    return D.bool, D.bool


def integral(*xs, **_):
    dt = result_type(*xs)
    if dt.is_floating_point:
        raise RuntimeError(f"\"bitwise_cpu\" not implemented for '{type_name(dt)}'")
    return dt, dt


def _shape(x):
    return tuple(x.shape) if hasattr(x, "dtype") else ()


def elementwise_meta(op):
    """Meta rule shared by elementwise ops: broadcast the shapes, apply the dtype rule."""
    def meta(*xs, **attrs):
        shape = broadcast_shapes(*[_shape(x) for x in xs])
        return TensorSpec(shape, op.dtype_rule(*xs, **attrs)[1])
    return meta


def _elementwise(name, impl, dtype_rule, vjp=None, **kw):
    op = define(name, "elementwise", impl, meta=None, dtype_rule=dtype_rule, vjp=vjp, **kw)
    op.meta = elementwise_meta(op)
    return op


LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# ---------------------------------------------------------------- unary


def _unary(name, fn, rule, vjp, **kw):
    return _elementwise(name, fn, rule, vjp, **kw)


def _no_grad(ctx, g):
    return (g * 0,)


neg = _unary("neg", np.negative, promote, lambda ctx, g: (-g,))
abs = _unary("abs", np.abs, promote, lambda ctx, g: (g * ctx.inputs[0].sign(),))  # noqa: A001
sign = _unary("sign", np.sign, promote, _no_grad)
exp = _unary("exp", np.exp, promote_float, lambda ctx, g: (g * ctx.output,))
exp2 = _unary("exp2", np.exp2, promote_float, lambda ctx, g: (g * ctx.output * LN2,))
expm1 = _unary("expm1", np.expm1, promote_float, lambda ctx, g: (g * (ctx.output + 1),))
log = _unary("log", np.log, promote_float, lambda ctx, g: (g / ctx.inputs[0],))
log2 = _unary("log2", np.log2, promote_float, lambda ctx, g: (g / (ctx.inputs[0] * LN2),))
log10 = _unary("log10", np.log10, promote_float, lambda ctx, g: (g / (ctx.inputs[0] * LN10),))
log1p = _unary("log1p", np.log1p, promote_float, lambda ctx, g: (g / (ctx.inputs[0] + 1),))
sqrt = _unary("sqrt", np.sqrt, promote_float, lambda ctx, g: (g / (2 * ctx.output),))
rsqrt = _unary("rsqrt", lambda x: 1 / np.sqrt(x), promote_float,
               lambda ctx, g: (g * ctx.output.pow(3) * -0.5,))
sin = _unary("sin", np.sin, promote_float, lambda ctx, g: (g * ctx.inputs[0].cos(),))
cos = _unary("cos", np.cos, promote_float, lambda ctx, g: (-g * ctx.inputs[0].sin(),))
tan = _unary("tan", np.tan, promote_float, lambda ctx, g: (g * (1 + ctx.output * ctx.output),))
asin = _unary("asin", np.arcsin, promote_float,
              lambda ctx, g: (g * (1 - ctx.inputs[0] * ctx.inputs[0]).rsqrt(),))
acos = _unary("acos", np.arccos, promote_float,
              lambda ctx, g: (-g * (1 - ctx.inputs[0] * ctx.inputs[0]).rsqrt(),))
atan = _unary("atan", np.arctan, promote_float,
              lambda ctx, g: (g / (1 + ctx.inputs[0] * ctx.inputs[0]),))
sinh = _unary("sinh", np.sinh, promote_float, lambda ctx, g: (g * ctx.inputs[0].cosh(),))
cosh = _unary("cosh", np.cosh, promote_float, lambda ctx, g: (g * ctx.inputs[0].sinh(),))
tanh = _unary("tanh", np.tanh, promote_float,
              lambda ctx, g: (g * (1 - ctx.output * ctx.output),))
sigmoid = _unary("sigmoid", _special.expit, promote_float,
                 lambda ctx, g: (g * ctx.output * (1 - ctx.output),))
erf = _unary("erf", _special.erf, promote_float,
             lambda ctx, g: (g * TWO_OVER_SQRT_PI * (-ctx.inputs[0] * ctx.inputs[0]).exp(),))
relu = _unary("relu", lambda x: np.maximum(x, 0), promote,
              lambda ctx, g: (g.masked_fill(ctx.output <= 0, 0),))
reciprocal = _unary("reciprocal", lambda x: 1 / x, promote_float,
                    lambda ctx, g: (-g * ctx.output * ctx.output,))
floor = _unary("floor", np.floor, promote, _no_grad)
ceil = _unary("ceil", np.ceil, promote, _no_grad)
trunc = _unary("trunc", np.trunc, promote, _no_grad)
frac = _unary("frac", lambda x: x - np.trunc(x), promote, lambda ctx, g: (g,))


def _round(x, decimals=0):
    if decimals == 0:
        return np.rint(x)          # half to even, like torch
    scale = 10.0 ** decimals
    return np.rint(x * scale) / scale


round = _unary("round", _round, promote, _no_grad)  # noqa: A001


def _logical_not(x):
    return np.logical_not(x)


logical_not = _unary("logical_not", _logical_not, logical, None, differentiable=False)
bitwise_not = _unary("bitwise_not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
                     integral, None, differentiable=False)
isnan = _unary("isnan", np.isnan, compare, None, differentiable=False)
isinf = _unary("isinf", np.isinf, compare, None, differentiable=False)
isfinite = _unary("isfinite", np.isfinite, compare, None, differentiable=False)

# ---------------------------------------------------------------- binary


def _add(a, b, alpha=1):
    return np.add(a, b if alpha == 1 else b * alpha)


def _sub(a, b, alpha=1):
    return np.subtract(a, b if alpha == 1 else b * alpha)


def _add_rule(*xs, **_):
    dt = result_type(*xs)
    return dt, dt


def _sub_rule(a, b, **_):
    dt = result_type(a, b)
    if dt is D.bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return dt, dt


add = _elementwise("add", _add, _add_rule,
                   lambda ctx, g: (g, g * ctx.attrs.get("alpha", 1)))
sub = _elementwise("sub", _sub, _sub_rule,
                   lambda ctx, g: (g, g * -ctx.attrs.get("alpha", 1)))
mul = _elementwise("mul", np.multiply, promote,
                   lambda ctx, g: (ctx.needs(0) and g * ctx.inputs[1],
                                   ctx.needs(1) and g * ctx.inputs[0]))


def _check_int_divisor(b):
    if (isinstance(b, np.ndarray) and b.dtype.kind in "iub" and not b.all()) or (type(b) is int and b == 0):
        raise RuntimeError("ZeroDivisionError")


def _div(a, b, rounding_mode=None):
    if rounding_mode is None:
        return np.true_divide(a, b)
    if rounding_mode == "floor":
        if np.asarray(a).dtype.kind in "iub":
            _check_int_divisor(b)
        return np.floor_divide(a, b)
    if np.asarray(a).dtype.kind in "iub":
        _check_int_divisor(b)
        q = np.floor_divide(a, b)
        # floor rounds toward -inf; trunc differs when the signs differ and there is a remainder
        fix = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q + fix.astype(q.dtype)
    return np.trunc(np.true_divide(a, b))


def _div_rule(a, b, rounding_mode=None):
    if rounding_mode is None:
        return promote_float(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' "
            f"but found '{rounding_mode}'")
    return promote(a, b)


def _div_vjp(ctx, g):
    if ctx.attrs.get("rounding_mode") is not None:
        return (g * 0, ctx.needs(1) and g * 0)
    a, b = ctx.inputs
    return (ctx.needs(0) and g / b, ctx.needs(1) and -g * a / (b * b))


div = _elementwise("div", _div, _div_rule, _div_vjp)


def _int_mod(fn):
    def impl(a, b):
        if np.asarray(a).dtype.kind in "iub":
            _check_int_divisor(b)
        return fn(a, b)
    return impl


remainder = _elementwise("remainder", _int_mod(np.remainder), promote,
                         lambda ctx, g: (g, ctx.needs(1) and -g * ctx.inputs[0].div(ctx.inputs[1], rounding_mode="floor")))
fmod = _elementwise("fmod", _int_mod(np.fmod), promote,
                    lambda ctx, g: (g, ctx.needs(1) and -g * ctx.inputs[0].div(ctx.inputs[1], rounding_mode="trunc")))


def _pow(a, b):
    if isinstance(a, np.ndarray) and a.dtype.kind in "iu":
        if (isinstance(b, int) and b < 0) or (isinstance(b, np.ndarray) and b.dtype.kind == "i" and (b < 0).any()):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    return np.power(a, b)


def _pow_vjp(ctx, g):
    a, b = ctx.inputs
    ga = gb = None
    if ctx.needs(0):
        if isinstance(b, (int, float)):
            ga = g * 0 if b == 0 else g * b * a.pow(b - 1)
        else:
            ga = (g * b * a.pow(b - 1)).masked_fill((b == 0) & (a == 0), 0)
    if ctx.needs(1):
        out = ctx.output
        if isinstance(a, (int, float)):
            gb = g * out * math.log(a) if a > 0 else (g * out * math.log(a) if a != 0 else (g * 0).masked_fill(b < 0, float("-inf")) * 0)
        else:
            gb = (g * out * a.log()).masked_fill((a == 0) & (b >= 0), 0)
    return ga, gb


pow = _elementwise("pow", _pow, promote, _pow_vjp)  # noqa: A001


def _atan2_vjp(ctx, g):
    a, b = ctx.inputs
    den = a * a + b * b
    return (ctx.needs(0) and g * b / den, ctx.needs(1) and -g * a / den)


atan2 = _elementwise("atan2", np.arctan2, promote_float, _atan2_vjp)


def _minmax_vjp(pick):
    """torch sends half the gradient to each side on a tie."""
    def vjp(ctx, g):
        a, b = ctx.inputs
        tie = a == b
        half = g.where(~tie, g / 2)
        ga = ctx.needs(0) and half.masked_fill(pick(a, b), 0)
        gb = ctx.needs(1) and half.masked_fill(pick(b, a), 0)
        return ga, gb
    return vjp


maximum = _elementwise("maximum", np.maximum, promote, _minmax_vjp(lambda a, b: a < b))
minimum = _elementwise("minimum", np.minimum, promote, _minmax_vjp(lambda a, b: a > b))

eq = _elementwise("eq", np.equal, compare, None, differentiable=False)
ne = _elementwise("ne", np.not_equal, compare, None, differentiable=False)
lt = _elementwise("lt", np.less, compare, None, differentiable=False)
le = _elementwise("le", np.less_equal, compare, None, differentiable=False)
gt = _elementwise("gt", np.greater, compare, None, differentiable=False)
ge = _elementwise("ge", np.greater_equal, compare, None, differentiable=False)

logical_and = _elementwise("logical_and", np.logical_and, logical, None, differentiable=False)
logical_or = _elementwise("logical_or", np.logical_or, logical, None, differentiable=False)
logical_xor = _elementwise("logical_xor", np.logical_xor, logical, None, differentiable=False)
bitwise_and = _elementwise("bitwise_and", np.bitwise_and, integral, None, differentiable=False)
bitwise_or = _elementwise("bitwise_or", np.bitwise_or, integral, None, differentiable=False)
bitwise_xor = _elementwise("bitwise_xor", np.bitwise_xor, integral, None, differentiable=False)


def _shift(fn):
    def impl(a, b):
        return fn(a, b)
    return impl


bitwise_left_shift = _elementwise("bitwise_left_shift", _shift(np.left_shift), integral, None,
                                  differentiable=False)
bitwise_right_shift = _elementwise("bitwise_right_shift", _shift(np.right_shift), integral, None,
                                   differentiable=False)

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


where = _elementwise("where", _where, None, _where_vjp, cast_inputs=False)
where.dtype_rule = _where_rule


def _clamp_rule(x, lo=None, hi=None):
    dt = result_type(*[v for v in (x, lo, hi) if v is not None])
    return dt, dt


def _clamp(x, lo=None, hi=None):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _clamp_vjp(ctx, g):
    x, lo, hi = ctx.inputs
    keep = None
    if lo is not None:
        keep = x >= lo
    if hi is not None:
        keep = (x <= hi) if keep is None else keep & (x <= hi)
    gx = g if keep is None else g.masked_fill(~keep, 0)
    glo = ctx.needs(1) and g.masked_fill(~(x < lo), 0)
    ghi = ctx.needs(2) and g.masked_fill(~(x > hi), 0)
    return gx, glo, ghi


clamp = _elementwise("clamp", _clamp, _clamp_rule, _clamp_vjp)


def _masked_fill_rule(x, mask, value, **_):
    mdt = getattr(mask, "dtype", None)
    if mdt is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mdt}")
    return x.dtype, x.dtype


def _masked_fill(x, mask, value):
    return np.where(mask, value, x)


masked_fill = _elementwise(
    "masked_fill", _masked_fill, _masked_fill_rule, cast_inputs=False, vjp=
    (lambda ctx, g: (ctx.needs(0) and g.masked_fill(ctx.inputs[1], 0), None,
                    ctx.needs(2) and g.masked_fill(~ctx.inputs[1], 0).sum())))

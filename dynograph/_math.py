"""Public elementwise functions (``dynograph.add`` ...), their Tensor methods and operators.

Each function parses PyTorch's signature and calls one primitive of the op set through
the dispatcher; composites (``square``, ``isclose``, ``float_power`` ...) are written
with those functions.  Arguments that PyTorch only accepts as tensors are checked here,
with PyTorch's TypeError, so that ``dynograph.exp(2.0)`` fails as ``torch.exp(2.0)`` does.
"""
import builtins
import math

import numpy as np

from dynograph.compiler.ops import elementwise as E
from dynograph.compiler.ops.core import type_name
from dynograph.runtime import dtypes as D
from ._dispatch import binary, call
from ._inplace import assign, write_out
from ._reduce import structseq
from ._tensor import Tensor, exporters, tensor_method
from .autograd.grad_mode import STATE

__all__ = []

_INF = float("inf")


_public = exporters(__all__)[0]


def finish(name, result, out):
    """Return ``result``, or write it into ``out`` (PyTorch refuses out= under autograd)."""
    if out is None:
        return result
    if result.requires_grad and STATE.grad_enabled:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.")
    return write_out(out, result)


def _inplace_of(fn, name=None):
    """Tensor.<name>_: compute out of place, then write into self."""
    def method(self, *args, **kwargs):
        return assign(self, fn(self, *args, **kwargs))
    method.__name__ = (name or fn.__name__) + "_"
    method.__doc__ = f"In-place version of :func:`{name or fn.__name__}`."
    tensor_method(method)
    return method


def _alias_of(alias, target, inplace=True):
    """dynograph.<alias> and Tensor.<alias>(_) mean the same as <target>."""
    globals()[alias] = globals()[target]
    setattr(Tensor, alias, getattr(Tensor, target))
    if inplace:
        setattr(Tensor, alias + "_", getattr(Tensor, target + "_"))
    __all__.append(alias)


# ---------------------------------------------------------------- argument checks

def _type_name(x):
    return "Tensor" if isinstance(x, Tensor) else type(x).__name__


def need_tensor(x, fname, argname="input", pos=1):
    """PyTorch's TypeError for a non-tensor where only a Tensor is accepted."""
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{fname}(): argument '{argname}' (position {pos}) must be Tensor, not {_type_name(x)}")


def _need_number_or_tensor(x, fname, argname, pos):
    if not isinstance(x, (Tensor, int, float)):
        raise TypeError(
            f"{fname}(): argument '{argname}' (position {pos}) must be Tensor, not {_type_name(x)}")


def _bad_combination(fname, *args):
    """PyTorch's TypeError when no overload of ``fname`` accepts these argument types."""
    got = ", ".join(_type_name(a) for a in args)
    return TypeError(
        f"{fname}() received an invalid combination of arguments - got ({got}), but expected "
        f"one of:\n * (Tensor input, Tensor other)\n * (Tensor input, Number other)")


# ---------------------------------------------------------------- unary

def _unary_fn(op):
    name = op.name

    def fn(input, *, out=None):
        if not isinstance(input, Tensor):
            need_tensor(input, name)
        if out is None:
            return call(op, input)
        return finish(name, call(op, input), out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} of ``input`` (torch.{name})."
    return fn


_WITH_INPLACE = (E.neg, E.abs, E.sign, E.sgn, E.exp, E.exp2, E.expm1, E.log, E.log2, E.log10,
                 E.log1p, E.sqrt, E.rsqrt, E.sin, E.cos, E.tan, E.asin, E.acos, E.atan, E.sinh,
                 E.cosh, E.tanh, E.asinh, E.acosh, E.atanh, E.sigmoid, E.erf, E.erfc, E.erfinv,
                 E.lgamma, E.digamma, E.deg2rad, E.rad2deg, E.sinc, E.relu, E.reciprocal,
                 E.floor, E.ceil, E.trunc, E.frac, E.logical_not, E.bitwise_not)

for _op in _WITH_INPLACE + (E.isnan, E.isinf, E.isfinite, E.signbit, E.angle):
    _f = _public(_unary_fn(_op))
    globals()[_op.name] = _f
    if _op in _WITH_INPLACE:
        _inplace_of(_f)

for _alias, _target in (("negative", "neg"), ("absolute", "abs"), ("arcsin", "asin"),
                        ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
                        ("arccosh", "acosh"), ("arctanh", "atanh"), ("fix", "trunc")):
    _alias_of(_alias, _target)


@_public
def round(input, *, decimals=0, out=None):  # noqa: A001
    """Round to the nearest integer (half to even), or to ``decimals`` decimal places."""
    need_tensor(input, "round")
    if decimals == 0:
        return finish("round", call(E.round, input), out)
    return finish("round", call(E.round, input, decimals=decimals), out)


_inplace_of(round)


@_public
def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)), with ``input`` first clamped to [eps, 1 - eps] when eps is given."""
    need_tensor(input, "logit")
    if eps is None:
        return finish("logit", call(E.logit, input), out)
    return finish("logit", call(E.logit, input, eps=eps), out)


_inplace_of(logit)


def polygamma(n, input, *, out=None):
    """The n-th derivative of the digamma function."""
    need_tensor(input, "polygamma", "input", 2)
    return finish("polygamma", call(E.polygamma, input, n=n), out)


__all__.append("polygamma")


@tensor_method(name="polygamma")
def _polygamma_method(self, n):
    """Tensor.polygamma(n): polygamma(n, self)."""
    return call(E.polygamma, self, n=n)


@tensor_method
def polygamma_(self, n):
    """In-place version of :func:`polygamma`."""
    return assign(self, call(E.polygamma, self, n=n))


@_public
def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: dtype's max/min)."""
    need_tensor(input, "nan_to_num")
    return finish("nan_to_num", call(E.nan_to_num, input, nan=nan, posinf=posinf, neginf=neginf),
                   out)


_inplace_of(nan_to_num)


@_public
def square(input, *, out=None):
    """``input ** 2``."""
    need_tensor(input, "square")
    return finish("square", call(E.pow, input, 2), out)


_inplace_of(square)


@_public
def positive(input):
    """Returns ``input`` itself (the unary ``+``); an error for bool tensors, as in torch."""
    need_tensor(input, "positive")
    if input.dtype is D.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@_public
def isposinf(input, *, out=None):
    """Whether each element is +inf."""
    need_tensor(input, "isposinf")
    return finish("isposinf", call(E.eq, input, _INF), out)


@_public
def isneginf(input, *, out=None):
    """Whether each element is -inf."""
    need_tensor(input, "isneginf")
    return finish("isneginf", call(E.eq, input, -_INF), out)


_frexp_result = structseq("frexp", ("mantissa", "exponent"))


@_public
def frexp(input, *, out=None):
    """Split into mantissa in [0.5, 1) and integer exponent: ``input = mantissa * 2 ** exponent``."""
    need_tensor(input, "frexp")
    r = _frexp_result(call(E.frexp, input))
    if out is None:
        return r
    return _frexp_result((finish("frexp", r[0], out[0]), finish("frexp", r[1], out[1])))


@_public
def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension ``p``."""
    need_tensor(input, "mvlgamma")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    r = call(E.lgamma, input)
    for j in range(1, p):
        r = r + call(E.lgamma, input - j / 2)
    return r + p * (p - 1) / 4 * math.log(math.pi)


_inplace_of(mvlgamma)


@_public
def resolve_neg(input):
    """``input`` with a lazy negation applied: dynograph tensors have none."""
    return input


@tensor_method
def is_neg(self):
    """Whether the tensor is a lazily negated view (never, in dynograph)."""
    return False


# (conj, real, imag, isreal ...: dynograph/_complex.py)


# ---------------------------------------------------------------- binary

def _binary_fn(op, argname="other"):
    """A function of two tensors (PyTorch accepts no Python number on either side)."""
    name = op.name

    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor):
            need_tensor(input, name)
        if not isinstance(other, Tensor):
            need_tensor(other, name, argname, 2)
        return finish(name, call(op, input, other), out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} of two tensors, with broadcasting (torch.{name})."
    return fn


def _tensor_scalar_fn(op, scalar_first=False):
    """A function whose ``other`` may be a Python number (``scalar_first``: or ``input``)."""
    name = op.name

    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor):
            if not (scalar_first and isinstance(other, Tensor) and
                    isinstance(input, (int, float))):
                raise _bad_combination(name, input, other)
        elif not isinstance(other, (Tensor, int, float)):
            raise _bad_combination(name, input, other)
        if out is None:
            return call(op, input, other)
        return finish(name, call(op, input, other), out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting (torch.{name})."
    return fn


for _op in (E.atan2, E.maximum, E.minimum, E.fmax, E.fmin, E.hypot, E.logaddexp,
            E.logaddexp2, E.nextafter, E.logical_and, E.logical_or, E.logical_xor, E.gcd, E.lcm):
    _f = _public(_binary_fn(_op))
    globals()[_op.name] = _f
    _inplace_of(_f)

for _op in (E.eq, E.ne, E.lt, E.le, E.gt, E.ge, E.fmod, E.copysign):
    _f = _public(_tensor_scalar_fn(_op))
    globals()[_op.name] = _f
    _inplace_of(_f)

for _op in (E.remainder, E.xlogy, E.bitwise_and, E.bitwise_or, E.bitwise_xor,
            E.bitwise_left_shift, E.bitwise_right_shift):
    _f = _public(_tensor_scalar_fn(_op, scalar_first=True))
    globals()[_op.name] = _f
    _inplace_of(_f)

for _alias, _target in (("arctan2", "atan2"), ("greater", "gt"),
                        ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                        ("not_equal", "ne")):
    _alias_of(_alias, _target)


@_public
def heaviside(input, values, *, out=None):
    """0 where input < 0, 1 where input > 0, ``values`` where input == 0."""
    need_tensor(input, "heaviside")
    need_tensor(values, "heaviside", "values", 2)
    return finish("heaviside", call(E.heaviside, input, values), out)


_inplace_of(heaviside)


def _scalars_ok(name, input, other):
    _need_number_or_tensor(input, name, "input", 1)
    _need_number_or_tensor(other, name, "other", 2)


@_public
def add(input, other, *, alpha=1, out=None):
    """``input + alpha * other`` with broadcasting and type promotion."""
    if type(alpha) is int and alpha == 1:
        r = call(E.add, input, other)
    elif isinstance(alpha, Tensor):     # a traced learning rate: the same arithmetic, as ops
        r = call(E.add, input, call(E.mul, other, alpha))
    else:
        r = call(E.add, input, other, alpha=alpha)
    return r if out is None else finish("add", r, out)


@_public
def sub(input, other, *, alpha=1, out=None):
    """``input - alpha * other``."""
    if type(alpha) is int and alpha == 1:
        r = call(E.sub, input, other)
    elif isinstance(alpha, Tensor):
        r = call(E.sub, input, call(E.mul, other, alpha))
    else:
        r = call(E.sub, input, other, alpha=alpha)
    return r if out is None else finish("sub", r, out)


@_public
def mul(input, other, *, out=None):
    """``input * other`` with broadcasting and type promotion."""
    r = call(E.mul, input, other)
    return r if out is None else finish("mul", r, out)


_inplace_of(mul)


@_public
def rsub(input, other, *, alpha=1):
    """``other - alpha * input``."""
    need_tensor(input, "rsub")
    return sub(other, input, alpha=alpha)


@_public
def div(input, other, *, rounding_mode=None, out=None):
    """True division, or division rounded with ``rounding_mode`` ('trunc' or 'floor')."""
    if rounding_mode is None:
        r = call(E.div, input, other)
    else:
        r = call(E.div, input, other, rounding_mode=rounding_mode)
    return r if out is None else finish("div", r, out)


@_public
def true_divide(input, other, *, out=None):
    """Alias of :func:`div` without rounding."""
    return div(input, other, out=out)


@_public
def floor_divide(input, other, *, out=None):
    """Division rounded toward negative infinity."""
    return finish("floor_divide", call(E.div, input, other, rounding_mode="floor"), out)


@_public
def pow(input, exponent, *, out=None):  # noqa: A001
    """``input ** exponent``; either (not both) may be a Python number."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise _bad_combination("pow", input, exponent)
    r = call(E.pow, input, exponent)
    return r if out is None else finish("pow", r, out)


for _f in (add, sub, div, true_divide, floor_divide, pow):
    _inplace_of(_f)

for _alias, _target in (("subtract", "sub"), ("divide", "div"), ("multiply", "mul")):
    _alias_of(_alias, _target)


def _to_double(x):
    return x.to(D.float64) if isinstance(x, Tensor) else x


@_public
def float_power(input, exponent, *, out=None):
    """``input ** exponent`` computed in float64."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise _bad_combination("float_power", input, exponent)
    base = _to_double(input) if isinstance(input, Tensor) else float(input)
    return finish("float_power", call(E.pow, base, _to_double(exponent)), out)


@tensor_method
def float_power_(self, exponent):
    """In-place version of :func:`float_power` (``self`` must be float64)."""
    if self.dtype is not D.float64:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {type_name(self.dtype)} but the "
            "operation's result requires dtype Double")
    return assign(self, float_power(self, exponent))


@_public
def ldexp(input, other, *, out=None):
    """``input * 2 ** other``."""
    need_tensor(input, "ldexp")
    need_tensor(other, "ldexp", "other", 2)
    return finish("ldexp", call(E.mul, input, call(E.pow, 2.0, other)), out)


_inplace_of(ldexp)

# ---------------------------------------------------------------- ternary and friends


@_public
def where(condition, input=None, other=None, *, out=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other``; with only
    ``condition``, the indices of its nonzero elements."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    need_tensor(condition, "where", "condition", 1)
    if out is not None:                 # only the all-tensor overload has out=
        need_tensor(input, "where", "input", 2)
        need_tensor(other, "where", "other", 3)
    return finish("where", call(E.where, condition, input, other), out)


@tensor_method(name="where")
def _where_method(self, condition, other):
    """Tensor.where(condition, y): ``where(condition, self, y)``."""
    return call(E.where, condition, self, other)


@_public
def masked_fill(input, mask, value):
    """``input`` with ``value`` written where ``mask`` is True."""
    need_tensor(input, "masked_fill")
    if not isinstance(mask, Tensor):
        raise _bad_combination("masked_fill", mask, value)
    return call(E.masked_fill, input, mask, value)


_inplace_of(masked_fill)


def _check_bounds(name, min, max):  # noqa: A002
    if min is None and max is None:
        raise RuntimeError(f"torch.{name}: At least one of 'min' or 'max' must not be None")
    if min is not None and max is not None and isinstance(min, Tensor) != isinstance(max, Tensor):
        raise TypeError(
            f"{name}() received an invalid combination of arguments - got (Tensor, "
            f"{_type_name(min)}, {_type_name(max)}), but expected one of:\n"
            " * (Tensor input, Tensor min = None, Tensor max = None)\n"
            " * (Tensor input, Number min = None, Number max = None)")


@_public
def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    """Limit every element to [min, max] (with min > max every element becomes max)."""
    need_tensor(input, "clamp")
    _check_bounds("clamp", min, max)
    return finish("clamp", call(E.clamp, input, min, max), out)


_inplace_of(clamp)
_alias_of("clip", "clamp")


@_public
def clamp_min(input, min):  # noqa: A002
    """Limit every element to at least ``min``."""
    need_tensor(input, "clamp_min")
    if min is None:
        raise _bad_combination("clamp_min", input, min)
    return call(E.clamp, input, min, None, fn="clamp_min")


@_public
def clamp_max(input, max):  # noqa: A002
    """Limit every element to at most ``max``."""
    need_tensor(input, "clamp_max")
    if max is None:
        raise _bad_combination("clamp_max", input, max)
    return call(E.clamp, input, None, max, fn="clamp_max")


_inplace_of(clamp_min)
_inplace_of(clamp_max)


@_public
def lerp(input, end, weight, *, out=None):
    """Linear interpolation ``input + weight * (end - input)``."""
    if not isinstance(input, Tensor) or not isinstance(end, Tensor):
        raise _bad_combination("lerp", input, end, weight)
    return finish("lerp", call(E.lerp, input, end, weight), out)


_inplace_of(lerp)


@_public
def xlogy(input, other, *, out=None):
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise _bad_combination("xlogy", input, other)
    return finish("xlogy", call(E.xlogy, input, other), out)


_inplace_of(xlogy)


@_public
def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2``."""
    need_tensor(input, "addcmul")
    need_tensor(tensor1, "addcmul", "tensor1", 2)
    need_tensor(tensor2, "addcmul", "tensor2", 3)
    if isinstance(value, Tensor):       # a traced step size: the same arithmetic, as ops
        # (in the kernel's order; the kernel's multiply-add is fused, these two round twice)
        prod = call(E.mul, call(E.mul, value, tensor1), tensor2)
        return finish("addcmul", call(E.add, input, prod), out)
    if value == 1:
        return finish("addcmul", call(E.addcmul, input, tensor1, tensor2), out)
    return finish("addcmul", call(E.addcmul, input, tensor1, tensor2, value=value), out)


@_public
def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2``."""
    need_tensor(input, "addcdiv")
    need_tensor(tensor1, "addcdiv", "tensor1", 2)
    need_tensor(tensor2, "addcdiv", "tensor2", 3)
    if isinstance(value, Tensor):       # a traced step size: the kernel's arithmetic, as ops
        quot = call(E.div, call(E.mul, value, tensor1), tensor2)
        return finish("addcdiv", call(E.add, input, quot), out)
    if value == 1:
        return finish("addcdiv", call(E.addcdiv, input, tensor1, tensor2), out)
    return finish("addcdiv", call(E.addcdiv, input, tensor1, tensor2, value=value), out)


_inplace_of(addcmul)
_inplace_of(addcdiv)

# ---------------------------------------------------------------- closeness


@_public
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|input - other| <= atol + rtol * |other|`` elementwise (plus exact equality)."""
    need_tensor(input, "isclose")
    need_tensor(other, "isclose", "other", 2)
    if input.dtype is not other.dtype:
        raise RuntimeError(
            f"{type_name(input.dtype)} did not match {type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = call(E.eq, input, other)
    floating = input.dtype.is_floating_point
    if equal_nan and floating:
        close = close | (call(E.isnan, input) & call(E.isnan, other))
    if rtol == 0 and atol == 0:
        return close
    if input.dtype is D.bool:        # torch computes the error of bools in the default dtype
        input, other = input * 1.0, other * 1.0
    allowed = call(E.abs, call(E.mul, other, rtol)) + atol
    actual = call(E.abs, call(E.sub, input, other))
    return close | (call(E.isfinite, actual) & (actual <= allowed))


@_public
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other`` (a Python bool)."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


@_public
def equal(input, other):
    """True if both tensors have the same size and elements (a Python bool)."""
    need_tensor(input, "equal")
    need_tensor(other, "equal", "other", 2)
    if input.shape != other.shape:
        return False
    return builtins.bool(call(E.eq, input, other).all())


# torch also exposes these in-place variants as functions: torch.relu_(x)
for _name in ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
              "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
              "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_",
              "expm1_", "fix_", "floor_", "frac_", "ldexp_", "log10_", "log1p_", "log2_", "log_",
              "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_",
              "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_",
              "tanh_", "trunc_", "xlogy_"):
    globals()[_name] = getattr(Tensor, _name)
    __all__.append(_name)

# ---------------------------------------------------------------- operators

_OPERANDS = (Tensor, int, float, complex)


def _operand(x):
    return isinstance(x, _OPERANDS)


_np_generic = np.generic


def _operator(op, reflected=False):
    """A binary operator; an operand that is not a tensor or a number gives NotImplemented,
    so Python raises its usual TypeError (or tries the other operand).  numpy scalars
    count as the Python numbers they hold, as in torch."""
    if reflected:
        def method(self, other):
            if not isinstance(other, _OPERANDS):       # _operand, inline: every operator
                if not isinstance(other, _np_generic):
                    return NotImplemented
                other = other.item()
            return binary(op, other, self)
    else:
        def method(self, other):
            if not isinstance(other, _OPERANDS):
                if not isinstance(other, _np_generic):
                    return NotImplemented
                other = other.item()
            return binary(op, self, other)
    return method


for _name, _op in (("add", E.add), ("sub", E.sub), ("mul", E.mul), ("truediv", E.div),
                   ("mod", E.remainder), ("pow", E.pow), ("and", E.bitwise_and),
                   ("or", E.bitwise_or), ("xor", E.bitwise_xor),
                   ("lshift", E.bitwise_left_shift), ("rshift", E.bitwise_right_shift)):
    setattr(Tensor, f"__{_name}__", _operator(_op))
    if _name not in ("truediv",):
        setattr(Tensor, f"__r{_name}__", _operator(_op, reflected=True))

for _name, _op in (("eq", E.eq), ("ne", E.ne), ("lt", E.lt), ("le", E.le), ("gt", E.gt),
                   ("ge", E.ge)):
    setattr(Tensor, f"__{_name}__", _operator(_op))


def _rtruediv(self, other):
    # torch computes ``number / tensor`` as ``tensor.reciprocal() * number``
    if not _operand(other):
        return NotImplemented
    return call(E.mul, call(E.reciprocal, self), other)


def _floordiv(self, other):
    if not _operand(other):
        return NotImplemented
    return call(E.div, self, other, rounding_mode="floor")


def _rfloordiv(self, other):
    if not _operand(other):
        return NotImplemented
    return call(E.div, other, self, rounding_mode="floor")


def _invert(self):
    if self.is_floating_point():
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return call(E.bitwise_not, self)


Tensor.__rtruediv__ = _rtruediv
Tensor.__floordiv__ = _floordiv
Tensor.__rfloordiv__ = _rfloordiv
Tensor.__neg__ = lambda self: call(E.neg, self)
Tensor.__pos__ = positive
Tensor.__abs__ = lambda self: call(E.abs, self)
Tensor.__invert__ = _invert
Tensor.__hash__ = object.__hash__


def _iop(method):
    def iop(self, other):
        if not _operand(other):
            return NotImplemented
        return getattr(self, method)(other)
    return iop


for _name, _method in (("add", "add_"), ("sub", "sub_"), ("mul", "mul_"), ("truediv", "div_"),
                       ("floordiv", "floor_divide_"), ("mod", "remainder_"), ("pow", "pow_"),
                       ("and", "bitwise_and_"), ("or", "bitwise_or_"), ("xor", "bitwise_xor_"),
                       ("lshift", "bitwise_left_shift_"), ("rshift", "bitwise_right_shift_")):
    setattr(Tensor, f"__i{_name}__", _iop(_method))

"""Public elementwise functions (``dynograph.add`` ...), their Tensor methods and operators.

Each function parses PyTorch's signature and calls one primitive of the op set through
the dispatcher; composites (``sub`` with a scalar first, ``square``, ``lerp`` ...) are
written with those functions.
"""
import builtins

from dynograph.compiler.ops import elementwise as E
from ._dispatch import call
from ._inplace import assign, write_out
from ._tensor import Tensor, tensor_method

__all__ = []


def _public(fn):
    """Export ``fn`` as dynograph.<name> and Tensor.<name>."""
    __all__.append(fn.__name__)
    tensor_method(fn)
    return fn


def _finish(result, out):
    return result if out is None else write_out(out, result)


def _inplace_of(fn):
    """Tensor.<name>_: compute out of place, then write into self."""
    def method(self, *args, **kwargs):
        return assign(self, fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    tensor_method(method)
    return method


def _alias_of(alias, target):
    """dynograph.<alias> and Tensor.<alias>(_) mean the same as <target>."""
    globals()[alias] = globals()[target]
    setattr(Tensor, alias, getattr(Tensor, target))
    setattr(Tensor, alias + "_", getattr(Tensor, target + "_"))
    __all__.append(alias)


# ---------------------------------------------------------------- unary

def _unary_fn(op):
    def fn(input, *, out=None):
        return _finish(call(op, input), out)
    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name} (torch.{op.name})."
    return fn


for _op in (E.neg, E.abs, E.sign, E.exp, E.exp2, E.expm1, E.log, E.log2, E.log10, E.log1p,
            E.sqrt, E.rsqrt, E.sin, E.cos, E.tan, E.asin, E.acos, E.atan, E.sinh, E.cosh,
            E.tanh, E.sigmoid, E.erf, E.relu, E.reciprocal, E.floor, E.ceil, E.trunc, E.frac,
            E.logical_not, E.bitwise_not, E.isnan, E.isinf, E.isfinite):
    _f = _public(_unary_fn(_op))
    globals()[_op.name] = _f
    if _op.differentiable or _op.name in ("logical_not", "bitwise_not"):
        _inplace_of(_f)

for _alias, _target in (("negative", "neg"), ("absolute", "abs"), ("arcsin", "asin"),
                        ("arccos", "acos"), ("arctan", "atan"), ("fix", "trunc")):
    _alias_of(_alias, _target)


@_public
def round(input, *, decimals=0, out=None):  # noqa: A001
    return _finish(call(E.round, input, decimals=decimals), out)


_inplace_of(round)


@_public
def square(input, *, out=None):
    return _finish(pow(input, 2), out)


_inplace_of(square)


# ---------------------------------------------------------------- binary

def _binary_fn(op):
    def fn(input, other, *, out=None):
        return _finish(call(op, input, other), out)
    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name} with broadcasting (torch.{op.name})."
    return fn


for _op in (E.mul, E.remainder, E.fmod, E.atan2, E.maximum, E.minimum, E.eq, E.ne, E.lt, E.le,
            E.gt, E.ge, E.logical_and, E.logical_or, E.logical_xor, E.bitwise_and, E.bitwise_or,
            E.bitwise_xor, E.bitwise_left_shift, E.bitwise_right_shift):
    _f = _public(_binary_fn(_op))
    globals()[_op.name] = _f
    _inplace_of(_f)

for _alias, _target in (("multiply", "mul"), ("arctan2", "atan2"), ("greater", "gt"),
                        ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                        ("not_equal", "ne")):
    _alias_of(_alias, _target)


@_public
def add(input, other, *, alpha=1, out=None):
    if alpha == 1:
        return _finish(call(E.add, input, other), out)
    return _finish(call(E.add, input, other, alpha=alpha), out)


@_public
def sub(input, other, *, alpha=1, out=None):
    if alpha == 1:
        return _finish(call(E.sub, input, other), out)
    return _finish(call(E.sub, input, other, alpha=alpha), out)


subtract = sub
Tensor.subtract = sub
__all__.append("subtract")


@_public
def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


@_public
def div(input, other, *, rounding_mode=None, out=None):
    if rounding_mode is None:
        return _finish(call(E.div, input, other), out)
    return _finish(call(E.div, input, other, rounding_mode=rounding_mode), out)


@_public
def true_divide(input, other, *, out=None):
    return div(input, other, out=out)


divide = div
Tensor.divide = div
__all__.append("divide")


@_public
def floor_divide(input, other, *, out=None):
    return div(input, other, rounding_mode="floor", out=out)


@_public
def pow(input, exponent, *, out=None):  # noqa: A001
    return _finish(call(E.pow, input, exponent), out)


@_public
def float_power(input, exponent, *, out=None):
    from dynograph.runtime.dtypes import float64
    a = input.to(float64) if isinstance(input, Tensor) else float(input)
    b = exponent.to(float64) if isinstance(exponent, Tensor) else exponent
    return _finish(pow(a, b), out)


for _f in (add, sub, div, true_divide, floor_divide, pow):
    _inplace_of(_f)
Tensor.subtract_ = Tensor.sub_
Tensor.divide_ = Tensor.div_


@_public
def where(condition, input=None, other=None, *, out=None):
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    return _finish(call(E.where, condition, input, other), out)


@_public
def masked_fill(input, mask, value):
    return call(E.masked_fill, input, mask, value)


_inplace_of(masked_fill)


@_public
def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return _finish(call(E.clamp, input, min, max), out)


clip = clamp
Tensor.clip = clamp
__all__.append("clip")
_inplace_of(clamp)
Tensor.clip_ = Tensor.clamp_


@_public
def clamp_min(input, min):  # noqa: A002
    return clamp(input, min=min)


@_public
def clamp_max(input, max):  # noqa: A002
    return clamp(input, max=max)


@_public
def lerp(input, end, weight, *, out=None):
    return _finish(input + weight * (end - input), out)


_inplace_of(lerp)


@_public
def xlogy(input, other):
    return where(input == 0, 0.0, input * log(other)) if isinstance(input, Tensor) else input * log(other)  # noqa: F821


@_public
def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    if not input.is_floating_point():
        return _finish(input.clone(), out)
    from dynograph.runtime.dtypes import finfo
    info = finfo(input.dtype)
    r = where(isnan(input), nan, input)  # noqa: F821
    r = where(r == float("inf"), info.max if posinf is None else posinf, r)
    r = where(r == float("-inf"), info.min if neginf is None else neginf, r)
    return _finish(r.to(input.dtype), out)


_inplace_of(nan_to_num)


# ---------------------------------------------------------------- operators

def _r(fn):
    def reflected(self, other):
        return fn(other, self)
    return reflected


Tensor.__add__ = lambda self, other: call(E.add, self, other)
Tensor.__radd__ = lambda self, other: call(E.add, other, self)
Tensor.__sub__ = lambda self, other: call(E.sub, self, other)
Tensor.__rsub__ = lambda self, other: call(E.sub, other, self)
Tensor.__mul__ = lambda self, other: call(E.mul, self, other)
Tensor.__rmul__ = lambda self, other: call(E.mul, other, self)
Tensor.__truediv__ = lambda self, other: call(E.div, self, other)
Tensor.__rtruediv__ = lambda self, other: call(E.div, other, self)
Tensor.__floordiv__ = lambda self, other: floor_divide(self, other)
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__mod__ = lambda self, other: call(E.remainder, self, other)
Tensor.__rmod__ = lambda self, other: call(E.remainder, other, self)
Tensor.__pow__ = lambda self, other: call(E.pow, self, other)
Tensor.__rpow__ = lambda self, other: call(E.pow, other, self)
Tensor.__neg__ = lambda self: call(E.neg, self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: call(E.abs, self)
Tensor.__invert__ = lambda self: call(E.bitwise_not, self)
Tensor.__and__ = lambda self, other: call(E.bitwise_and, self, other)
Tensor.__rand__ = lambda self, other: call(E.bitwise_and, other, self)
Tensor.__or__ = lambda self, other: call(E.bitwise_or, self, other)
Tensor.__ror__ = lambda self, other: call(E.bitwise_or, other, self)
Tensor.__xor__ = lambda self, other: call(E.bitwise_xor, self, other)
Tensor.__rxor__ = lambda self, other: call(E.bitwise_xor, other, self)
Tensor.__lshift__ = lambda self, other: call(E.bitwise_left_shift, self, other)
Tensor.__rlshift__ = lambda self, other: call(E.bitwise_left_shift, other, self)
Tensor.__rshift__ = lambda self, other: call(E.bitwise_right_shift, self, other)
Tensor.__rrshift__ = lambda self, other: call(E.bitwise_right_shift, other, self)
Tensor.__eq__ = lambda self, other: call(E.eq, self, other) if _operand(other) else NotImplemented
Tensor.__ne__ = lambda self, other: call(E.ne, self, other) if _operand(other) else NotImplemented
Tensor.__lt__ = lambda self, other: call(E.lt, self, other)
Tensor.__le__ = lambda self, other: call(E.le, self, other)
Tensor.__gt__ = lambda self, other: call(E.gt, self, other)
Tensor.__ge__ = lambda self, other: call(E.ge, self, other)
Tensor.__hash__ = object.__hash__


def _operand(x):
    return isinstance(x, (Tensor, int, float, builtins.bool))


def _iop(method):
    def iop(self, other):
        return getattr(self, method)(other)
    return iop


for _name, _method in (("add", "add_"), ("sub", "sub_"), ("mul", "mul_"), ("truediv", "div_"),
                       ("floordiv", "floor_divide_"), ("mod", "remainder_"), ("pow", "pow_"),
                       ("and", "bitwise_and_"), ("or", "bitwise_or_"), ("xor", "bitwise_xor_"),
                       ("lshift", "bitwise_left_shift_"), ("rshift", "bitwise_right_shift_")):
    setattr(Tensor, f"__i{_name}__", _iop(_method))

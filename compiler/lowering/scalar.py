"""The scalar builder interface that the op set's lowering rules are written against.

An elementwise primitive's ``lowering`` is a function ``rule(b, *args, **attrs)``: ``b`` is a
scalar builder, each tensor argument arrives as a scalar handle already converted to the op's
compute dtype (the first dtype its ``dtype_rule`` returns), and each Python number argument as a
constant of that dtype (``None`` stays ``None``; attributes stay Python values).  The rule returns
one scalar handle; the caller converts it to the op's output dtype.  A rule states the op's math
once; every code generator implements the builder, none restates an op::

    add = define_elementwise("add", _add, _add_rule, ..., lowering=lambda b, x, y, alpha=1: ...)

A handle has a ``dtype`` (a ``dynograph.runtime.dtypes`` dtype).  float16 and bfloat16 handles
hold float32 values in registers: ``cast`` to a half type rounds, stores round.

The builder's methods (all return a new handle):

============================  ========================================================
``const(value, dtype)``       a constant, converted like ``numpy.asarray(value).astype``
                              (integers wrap around, floats truncate toward zero)
``cast(x, dtype)``            C conversion (to bool: ``x != 0``; from bool: 0 or 1)
``add sub mul``               wrap-around arithmetic on integers, IEEE on floats
``div(x, y)``                 true division on floats; on integers C's truncating
                              division, total: ``x / 0`` is 0 and ``MIN / -1`` wraps
``rem(x, y)``                 C remainder (sign of ``x``; ``fmod`` on floats), ``x % 0`` is 0
``neg abs``
``max min``                   NaN-propagating on floats (as ``numpy.maximum``)
``cmp(op, x, y)``             bool; ``op`` in eq ne lt le gt ge (unordered compares are false,
                              ``ne`` is true)
``select(c, x, y)``           ``x`` where the bool ``c`` holds, else ``y``
``and_ or_ xor not_``         logical on bool, bitwise on integers
``shl shr``                   shifts by 0 <= s < bits (arithmetic right shift when signed)
``exp log sqrt``              floating functions
``call_math(name, *xs)``      a C math function of the handles' dtype: ``tanh``, ``sin``,
                              ``cos``, ``tan``, ``asin``, ``acos``, ``atan``, ``sinh``,
                              ``cosh``, ``asinh``, ``acosh``, ``atanh``, ``exp2``, ``expm1``,
                              ``log2``, ``log10``, ``log1p``, ``erf``, ``erfc``, ``lgamma``,
                              ``floor``, ``ceil``, ``trunc``, ``rint`` (half to even),
                              ``atan2``, ``pow``, ``hypot``, ``copysign``, ``nextafter``,
                              ``fmax``, ``fmin``, ``fma`` (x * y + z rounded once)
``literal(x)``                the Python value of a constant handle, else None (lets a rule
                              pick a cheaper formula for ``x ** 2``)
============================  ========================================================

A rule that cannot express a case (an integer power with a tensor exponent, say) raises
``Unsupported``; the back end then runs that node with the reference implementation.

A reduction's ``lowering`` is a ``Reduction``: the builder method that combines two partial
results (``add``, ``mul``, ``max``, ``min``, ``and_``, ``or_``; or ``argmax``/``argmin``: the
int64 row-major index over the reduced dims of the first largest/smallest element, a NaN
counting as the largest and the smallest), the identity, the accumulation dtype, and
optional ``prepare(b, x, **attrs)`` (each element, before combining) and
``finalize(b, acc, count, **attrs)`` (the result, ``count`` the number of elements reduced).
A reduction of several passes is a ``Composite``.
"""
import math

from dynograph.runtime import dtypes as D

MATH_FUNCTIONS = frozenset((
    "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
    "atanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "erf", "erfc",
    "lgamma", "floor", "ceil", "trunc", "rint", "atan2", "pow", "hypot", "copysign", "nextafter",
    "fmax", "fmin", "fma"))
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
COMBINES = ("add", "mul", "max", "min", "and_", "or_", "argmax", "argmin")
# argmax_pool (max pooling's rule: the first largest element or the last NaN) is used by
# compiler/lowering/pool.py's kernels, not by op rules


class Unsupported(Exception):
    """A node (or one case of it) that a code generator cannot lower."""


class Reduction:
    """How a reduction primitive lowers; see the module docstring."""
    __slots__ = ("combine", "identity", "acc_dtype", "prepare", "finalize")

    def __init__(self, combine, identity, acc_dtype, prepare=None, finalize=None):
        assert combine in COMBINES, combine
        self.combine = combine
        self.identity = identity        # dtype -> Python value
        self.acc_dtype = acc_dtype      # (input dtype, output dtype) -> accumulation dtype
        self.prepare = prepare
        self.finalize = finalize


class Composite:
    """A reduction made of several passes (variance: the mean, then the squared deviations).
    ``rule(b, x, count, reduce, **attrs)`` returns the result; ``reduce(combine, identity,
    value)`` reduces the handle ``value`` over the reduced dims (``identity`` a Python number,
    the accumulation dtype is ``value``'s) and returns the total, which later passes may read."""
    __slots__ = ("rule",)

    def __init__(self, rule):
        self.rule = rule


def lowest(dt):
    """The identity of ``max``: -inf, the smallest integer, or False."""
    if dt.is_floating_point:
        return -math.inf
    if dt is D.bool:
        return False
    return int(D.iinfo(dt).min)


def highest(dt):
    """The identity of ``min``."""
    if dt.is_floating_point:
        return math.inf
    if dt is D.bool:
        return True
    return int(D.iinfo(dt).max)


def isnan(b, x):
    """x != x: true only for NaN (false for every integer)."""
    return b.cmp("ne", x, x)

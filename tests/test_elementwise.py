"""Elementwise math, type promotion and comparisons against the PyTorch oracle.

``check(torch, fn, *args)`` runs ``fn(module, *args)`` with module = torch and with
module = dynograph (tensors converted) and asserts the same result (values, shape,
dtype) or the same error (type and message).  Most tests are tables of such checks.
"""
import math
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, from_torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]

# ---------------------------------------------------------------- the oracle


def tolerance(dtype):
    """How close ours must be to torch's in ``dtype`` (one rounding of half types)."""
    name = str(dtype).split(".")[-1]
    if name in ("float16", "bfloat16"):
        return dict(rtol=1e-2, atol=1e-2)
    if name == "float32":
        return dict(rtol=2e-5, atol=1e-6)
    return dict(rtol=1e-9, atol=1e-12)


def convert(torch, v):
    """The dynograph counterpart of an argument given for torch."""
    if isinstance(v, torch.Tensor):
        return from_torch(v)
    if isinstance(v, torch.dtype):
        return getattr(dynograph, str(v).split(".")[-1])
    if isinstance(v, (list, tuple)):
        return type(v)(convert(torch, x) for x in v)
    return v


def _message(e):
    # PyTorch's "invalid combination of arguments" lists signatures after the first line
    text = str(e)
    return text.split("\n")[0] if "invalid combination" in text else text


def check(torch, fn, *args, tol=None):
    """``fn(torch, *args)`` and ``fn(dynograph, *converted args)`` agree (result or error)."""
    ours_args = [convert(torch, a) for a in args]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = fn(torch, *args)
    except Exception as e:  # noqa: BLE001 - the oracle's error is the expected result
        try:
            fn(dynograph, *ours_args)
        except Exception as mine:  # noqa: BLE001
            assert type(mine) is type(e), f"{type(mine).__name__}: {mine} != {type(e).__name__}: {e}"
            assert _message(mine) == _message(e)
            return
        raise AssertionError(f"expected {type(e).__name__}: {_message(e)}") from None
    ours = fn(dynograph, *ours_args)
    if isinstance(theirs, torch.Tensor):
        assert_same(ours, theirs, **(tol or tolerance(theirs.dtype)))
    elif isinstance(theirs, tuple):           # frexp's (mantissa, exponent)
        assert type(ours).__name__ == type(theirs).__name__
        for a, b in zip(ours, theirs):
            assert_same(a, b, **(tol or tolerance(b.dtype)))
    else:
        assert ours == theirs and type(ours) is type(theirs), f"{ours!r} != {theirs!r}"
    return ours


def check_all(torch, fn, cases):
    """``check`` every argument tuple in ``cases``; report all mismatches together."""
    failures = []
    for args in cases:
        try:
            check(torch, fn, *args)
        except AssertionError as e:
            desc = ", ".join(_describe(a) for a in args)
            failures.append(f"({desc}): {str(e).strip()[:300]}")
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:12])


def _describe(a):
    if hasattr(a, "dtype") and hasattr(a, "shape"):
        return f"{str(a.dtype).split('.')[-1]}{list(a.shape)}"
    return repr(a)


def values(torch, dtype, shape, seed=0, nonzero=False, positive=False):
    """Deterministic test values of ``dtype``: small integers, or floats in [-3, 3]."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        a = rng.random(shape) > 0.5
        if nonzero:
            a = np.ones(shape, bool)
    elif dtype in INT_DTYPES:
        low = 0 if dtype == "uint8" or positive else -9
        a = rng.integers(low, 10, shape)
        if nonzero or positive:
            a[a == 0] = 3
    else:
        a = rng.uniform(0.1 if positive else -3, 3, shape)
        if nonzero:
            a[np.abs(a) < 0.1] = 0.5
    return torch.tensor(a).to(getattr(torch, dtype))


# ---------------------------------------------------------------- type promotion


def test_promote_types_table(torch):
    for a in DTYPES:
        for b in DTYPES:
            ours = dynograph.promote_types(getattr(dynograph, a), getattr(dynograph, b))
            theirs = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert str(ours).split(".")[-1] == str(theirs).split(".")[-1], (a, b)


SCALARS = [True, False, 3, -2, 2.5, -0.5]


@pytest.mark.parametrize("dtype", DTYPES)
def test_result_dtype_with_python_scalars(torch, dtype):
    x = values(torch, dtype, (2, 3))
    ops = [lambda m, a, s: a + s, lambda m, a, s: s + a, lambda m, a, s: a * s,
           lambda m, a, s: s * a, lambda m, a, s: a / s if s else a / 2,
           lambda m, a, s: a == s, lambda m, a, s: a < s, lambda m, a, s: m.maximum(a, a) + s,
           lambda m, a, s: m.where(a > 0, a, s), lambda m, a, s: m.clamp(a, s)]
    for op in ops:
        check_all(torch, op, [(x, s) for s in SCALARS])


@pytest.mark.parametrize("dtype", DTYPES)
def test_result_dtype_with_zero_dim_tensors(torch, dtype):
    """0-d tensors rank below dimensioned ones, above Python scalars."""
    x = values(torch, dtype, (3,))
    cases = []
    for other in DTYPES:
        z = values(torch, other, (), seed=1, nonzero=True)
        cases += [(x, z), (z, x), (z, values(torch, dtype, (), seed=2, nonzero=True))]
    check_all(torch, lambda m, a, b: a + b if a.dtype != m.bool or b.dtype != m.bool else a * b,
              cases)
    check_all(torch, lambda m, a, b: m.mul(a, b), cases)
    check_all(torch, lambda m, a, b: m.div(a, b), cases)
    check_all(torch, lambda m, a, b: m.eq(a, b), cases)
    check_all(torch, lambda m, a, b: m.maximum(a, b), cases)
    check_all(torch, lambda m, a, b: m.where(a != 0, a, b), cases)
    z = values(torch, dtype, (), seed=3, nonzero=True)
    check_all(torch, lambda m, a, s: a + s, [(z, s) for s in SCALARS])


def test_documented_promotion_examples(torch):
    i64 = torch.tensor([1, 2])
    i8 = torch.tensor([1, 2], dtype=torch.int8)
    b = torch.tensor([True, False])
    cases = [(lambda m, a: a + 2.5, i64), (lambda m, a: a + 5, i8), (lambda m, a: a + True, b),
             (lambda m, a: a + 1, b), (lambda m, a: a * 2.5, b), (lambda m, a: a + 300, i8),
             (lambda m, a: a - 1, torch.tensor([0], dtype=torch.uint8)),
             (lambda m, a: a + (-1), torch.tensor([0], dtype=torch.uint8)),
             (lambda m, a: a == 2 ** 40, torch.tensor([0], dtype=torch.int32)),
             (lambda m, a: a < -1, torch.tensor([0], dtype=torch.uint8)),
             (lambda m, a: a + torch_scalar(m, 2.0, "float64"), i8),
             (lambda m, a: a + torch_scalar(m, 2, "int64"), i8),
             (lambda m, a: a.half() + torch_scalar(m, 2.0, "float32"), i8),
             (lambda m, a: torch_scalar(m, 1, "int8") + torch_scalar(m, 2, "int64"), i8),
             (lambda m, a: torch_scalar(m, 1, "int8") + 2.5, i8),
             (lambda m, a: torch_scalar(m, 1.0, "float64") + a, i8),
             (lambda m, a: (a > 1) + torch_scalar(m, 1, "int8"), i8),
             (lambda m, a: torch_scalar(m, True, "bool") + 5, i8),
             (lambda m, a: a.to(m.uint8) + torch_scalar(m, 1, "int8"), i8)]
    for fn, arg in cases:
        check(torch, fn, arg)


def torch_scalar(m, value, dtype):
    """A 0-d tensor of ``dtype`` in module ``m``."""
    return m.tensor(value, dtype=getattr(m, dtype))


# ---------------------------------------------------------------- binary ops, all dtype pairs

BINARY = {
    "add": lambda m, a, b: m.add(a, b),
    "add_alpha": lambda m, a, b: m.add(a, b, alpha=2),
    "sub": lambda m, a, b: m.sub(a, b),
    "sub_alpha": lambda m, a, b: a.sub(b, alpha=-3),
    "mul": lambda m, a, b: m.mul(a, b),
    "div": lambda m, a, b: m.div(a, b),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "pow": lambda m, a, b: m.pow(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "fmax": lambda m, a, b: m.fmax(a, b),
    "fmin": lambda m, a, b: m.fmin(a, b),
    "eq": lambda m, a, b: m.eq(a, b),
    "ne": lambda m, a, b: a != b,
    "lt": lambda m, a, b: a < b,
    "le": lambda m, a, b: m.le(a, b),
    "gt": lambda m, a, b: m.greater(a, b),
    "ge": lambda m, a, b: a >= b,
    "logical_and": lambda m, a, b: m.logical_and(a, b),
    "logical_or": lambda m, a, b: m.logical_or(a, b),
    "logical_xor": lambda m, a, b: m.logical_xor(a, b),
    "bitwise_and": lambda m, a, b: m.bitwise_and(a, b),
    "bitwise_or": lambda m, a, b: a | b,
    "bitwise_xor": lambda m, a, b: a ^ b,
    "left_shift": lambda m, a, b: m.bitwise_left_shift(a, b),
    "right_shift": lambda m, a, b: a >> b,
    "copysign": lambda m, a, b: m.copysign(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "logaddexp2": lambda m, a, b: m.logaddexp2(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b),
    "heaviside": lambda m, a, b: m.heaviside(a, b),
    "nextafter": lambda m, a, b: m.nextafter(a, b),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_all_dtype_pairs(torch, name):
    cases = []
    for i, da in enumerate(DTYPES):
        for j, db in enumerate(DTYPES):
            a = values(torch, da, (2, 3), seed=i)
            b = values(torch, db, (3,), seed=10 + j, nonzero=True)
            cases.append((a, b))
    check_all(torch, BINARY[name], cases)


OPERATORS = {
    "+": lambda m, a, s: a + s, "r+": lambda m, a, s: s + a,
    "-": lambda m, a, s: a - s, "r-": lambda m, a, s: s - a,
    "*": lambda m, a, s: a * s, "r*": lambda m, a, s: s * a,
    "/": lambda m, a, s: a / s, "r/": lambda m, a, s: s / a,
    "//": lambda m, a, s: a // s, "r//": lambda m, a, s: s // a,
    "%": lambda m, a, s: a % s, "r%": lambda m, a, s: s % a,
    "**": lambda m, a, s: a ** s, "r**": lambda m, a, s: s ** a,
    "&": lambda m, a, s: a & s, "r&": lambda m, a, s: s & a,
    "|": lambda m, a, s: a | s, "r|": lambda m, a, s: s | a,
    "^": lambda m, a, s: a ^ s, "r^": lambda m, a, s: s ^ a,
    "<<": lambda m, a, s: a << s, ">>": lambda m, a, s: a >> s,
    "==": lambda m, a, s: a == s, "!=": lambda m, a, s: a != s,
    "<": lambda m, a, s: a < s, "<=": lambda m, a, s: a <= s,
    ">": lambda m, a, s: a > s, ">=": lambda m, a, s: a >= s,
}


@pytest.mark.parametrize("op", list(OPERATORS))
def test_operators_with_python_scalars(torch, op):
    cases = []
    for i, dt in enumerate(DTYPES):
        x = values(torch, dt, (2, 3), seed=i, nonzero=True)
        cases += [(x, s) for s in (True, 3, -2, 2.5, -0.5)]
    check_all(torch, OPERATORS[op], cases)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>",
                                "==", "<", ">="])
def test_operators_between_tensors(torch, op):
    cases = []
    for dt in ("bool", "uint8", "int32", "int64", "float16", "float32", "float64"):
        for dt2 in ("bool", "int64", "float32"):
            cases.append((values(torch, dt, (3, 1), seed=1, nonzero=True),
                          values(torch, dt2, (4,), seed=2, nonzero=True)))
    check_all(torch, lambda m, a, b: OPERATORS[op](m, a, b), cases)


# ---------------------------------------------------------------- unary ops, all dtypes

UNARY = ["neg", "abs", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
         "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma",
         "deg2rad", "rad2deg", "sinc", "relu", "reciprocal", "floor", "ceil", "trunc", "frac",
         "round", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "signbit",
         "square", "positive", "nan_to_num", "isposinf", "isneginf", "isreal", "logit",
         "negative", "absolute", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
         "fix"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_all_dtypes(torch, name):
    cases = [(values(torch, dt, (2, 5), seed=k),) for k, dt in enumerate(DTYPES)]
    cases += [(values(torch, dt, (), seed=7),) for dt in ("int64", "float32")]
    check_all(torch, lambda m, x: getattr(m, name)(x), cases)
    check_all(torch, lambda m, x: getattr(x, name)(), cases)


@pytest.mark.parametrize("name", [n for n in UNARY if n not in
                                  ("positive", "isposinf", "isneginf", "isreal", "signbit",
                                   "isnan", "isinf", "isfinite")])
def test_unary_inplace_all_dtypes(torch, name):
    cases = [(values(torch, dt, (2, 5), seed=k),) for k, dt in enumerate(DTYPES)]

    def fn(m, x):
        y = x.clone()
        r = getattr(y, name + "_")()
        assert r is y
        return y
    check_all(torch, fn, cases)


SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-30, -1e-30, 1e30, -1e30,
           0.5, -0.5, 1.0, -1.0, 2.0, -2.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("isreal", "positive")])
def test_unary_special_values(torch, name, dtype):
    x = torch.tensor(SPECIAL, dtype=getattr(torch, dtype))
    check(torch, lambda m, t: getattr(m, name)(t), x)


def test_signed_zero_results(torch):
    """-0.0 must come out as -0.0 where torch gives it (visible in printing)."""
    x = torch.tensor([-0.0, 0.0, -4.0, 4.0, -0.3])
    for fn in (lambda m, t: m.neg(t), lambda m, t: t.round(), lambda m, t: t.trunc(),
               lambda m, t: t.ceil(), lambda m, t: m.remainder(t, 2.0),
               lambda m, t: m.remainder(t, -2.0), lambda m, t: m.fmod(t, 2.0),
               lambda m, t: t * 0, lambda m, t: m.copysign(m.ones(5), t), lambda m, t: t.sgn(),
               lambda m, t: t.sign(), lambda m, t: m.div(t, 7.0, rounding_mode="floor"),
               lambda m, t: m.div(t, 7.0, rounding_mode="trunc")):
        ours = check(torch, fn, x)
        theirs = fn(torch, x)
        assert np.array_equal(np.signbit(ours.numpy()), np.signbit(theirs.numpy()))


# ---------------------------------------------------------------- errors with PyTorch's text


@pytest.mark.parametrize("fn, exc, msg", [
    (lambda m: m.tensor([1.5]) & m.tensor([1.5]), NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    (lambda m: m.tensor([1.5]) | 1, NotImplementedError,
     "\"bitwise_or_cpu\" not implemented for 'Float'"),
    (lambda m: m.bitwise_xor(m.tensor([1]), 1.5), NotImplementedError,
     "\"bitwise_xor_cpu\" not implemented for 'Float'"),
    (lambda m: m.tensor([1.5], dtype=m.float64) << 1, NotImplementedError,
     "\"lshift_cpu\" not implemented for 'Double'"),
    (lambda m: m.tensor([True]) >> m.tensor([True]), NotImplementedError,
     "\"rshift_cpu\" not implemented for 'Bool'"),
    (lambda m: m.bitwise_not(m.tensor([1.5], dtype=m.float16)), NotImplementedError,
     "\"bitwise_not_cpu\" not implemented for 'Half'"),
    (lambda m: ~m.tensor([1.5]), TypeError,
     "~ (operator.invert) is only implemented on integer and Boolean-type tensors"),
    (lambda m: -m.tensor([True]), RuntimeError,
     "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
     "invert a mask, use the `~` or `logical_not()` operator instead."),
    (lambda m: +m.tensor([True]), RuntimeError,
     "The `+` operator, on a bool tensor is not supported."),
    (lambda m: m.tensor([True]) - m.tensor([False]), RuntimeError,
     "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
     "`logical_xor()` operator instead."),
    (lambda m: m.tensor([True]) - 1, RuntimeError,
     "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
     "invert a mask, use the `~` or `logical_not()` operator instead."),
    (lambda m: 1.5 - m.tensor([True]), RuntimeError,
     "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
     "invert a mask, use the `~` or `logical_not()` operator instead."),
    (lambda m: m.tensor([3]) // 0, RuntimeError, "ZeroDivisionError"),
    (lambda m: m.tensor([3]) % m.tensor([0]), RuntimeError, "ZeroDivisionError"),
    (lambda m: m.fmod(m.tensor([3]), 0), RuntimeError, "ZeroDivisionError"),
    (lambda m: m.div(m.tensor([3]), 0, rounding_mode="trunc"), RuntimeError, "ZeroDivisionError"),
    (lambda m: m.tensor([3]) ** -1, RuntimeError,
     "Integers to negative integer powers are not allowed."),
    (lambda m: m.tensor([3]).add_(1.5), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda m: m.tensor([3]).div_(2), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda m: m.tensor([3]).mul_(m.tensor([1.5])), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda m: m.tensor([True]).add_(1), RuntimeError,
     "result type Long can't be cast to the desired output type Bool"),
    (lambda m: m.add(m.tensor([3]), 1, alpha=1.5), RuntimeError,
     "For integral input tensors, argument alpha must not be a floating point number."),
    (lambda m: m.add(m.tensor([3.]), 1, alpha=True), RuntimeError,
     "Boolean alpha only supported for Boolean results."),
    (lambda m: m.div(m.tensor([3.]), 2, rounding_mode="round"), RuntimeError,
     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
    (lambda m: m.abs(m.tensor([True])), NotImplementedError,
     "\"abs_cpu\" not implemented for 'Bool'"),
    (lambda m: m.frac(m.tensor([3])), NotImplementedError, "\"frac_cpu\" not implemented for 'Long'"),
    (lambda m: m.round(m.tensor([3]), decimals=1), NotImplementedError,
     "\"round_cpu\" not implemented for 'Long'"),
    (lambda m: m.relu(m.tensor([True])), RuntimeError, "Boolean inputs not supported for relu"),
    (lambda m: m.tensor([True]) ** 2.5 ** 0 if False else m.tensor([True]) ** m.tensor([True]),
     NotImplementedError, "\"pow\" not implemented for 'Bool'"),
    (lambda m: m.remainder(m.tensor([True]), m.tensor([True])), NotImplementedError,
     "\"remainder_cpu\" not implemented for 'Bool'"),
    (lambda m: m.hypot(m.tensor([3]), m.tensor([4])), NotImplementedError,
     "\"hypot_cpu\" not implemented for 'Long'"),
    (lambda m: m.where(m.tensor([1, 0]), 1.0, 0.0), RuntimeError,
     "where expected condition to be a boolean tensor, but got a tensor with dtype Long"),
    (lambda m: m.tensor([1.]).masked_fill(m.tensor([1]), 0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype long int"),
    (lambda m: m.tensor([1.]).masked_fill(m.tensor([True]), m.tensor([1.])), RuntimeError,
     "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 "
     "dimension(s)."),
    (lambda m: m.clamp(m.tensor([1.])), RuntimeError,
     "torch.clamp: At least one of 'min' or 'max' must not be None"),
    (lambda m: m.clamp(m.tensor([1], dtype=m.int8), 0, 300), RuntimeError,
     "value cannot be converted to type int8_t without overflow"),
    (lambda m: m.clamp(m.tensor([True]), True), NotImplementedError,
     "\"clamp_min_scalar_cpu\" not implemented for 'Bool'"),
    (lambda m: m.lerp(m.tensor([1.]), m.tensor([1.], dtype=m.float64), 0.5), RuntimeError,
     "expected dtype float for `end` but got dtype double"),
    (lambda m: m.lerp(m.tensor([1]), m.tensor([2]), 0.5), NotImplementedError,
     "\"lerp_kernel_scalar\" not implemented for 'Long'"),
    (lambda m: m.heaviside(m.tensor([1.]), m.tensor([1.], dtype=m.float64)), RuntimeError,
     "heaviside is not yet implemented for tensors with different dtypes."),
    (lambda m: m.isclose(m.tensor([1]), m.tensor([1.])), RuntimeError, "Long did not match Float"),
    (lambda m: m.isclose(m.tensor([1.]), m.tensor([1.]), rtol=-1), RuntimeError,
     "rtol must be greater than or equal to zero, but got -1"),
    (lambda m: m.polygamma(-1, m.tensor([1.])), RuntimeError,
     "polygamma(n, x) does not support negative n."),
    (lambda m: m.tensor([1., 2.]) + m.tensor([1., 2., 3.]), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
    (lambda m: m.tensor([1.]).float_power_(2), RuntimeError,
     "the base given to float_power_ has dtype Float but the operation's result requires "
     "dtype Double"),
    (lambda m: m.add(m.tensor([1.], requires_grad=True), 1, out=m.empty(1)), RuntimeError,
     "add(): functions with out=... arguments don't support automatic differentiation, but one "
     "of the arguments requires grad."),
    (lambda m: m.exp(2.0), TypeError, "exp(): argument 'input' (position 1) must be Tensor, not float"),
    (lambda m: m.maximum(m.tensor([1.]), 2), TypeError,
     "maximum(): argument 'other' (position 2) must be Tensor, not int"),
    (lambda m: m.heaviside(m.tensor([1.]), 2), TypeError,
     "heaviside(): argument 'values' (position 2) must be Tensor, not int"),
    (lambda m: m.tensor([1.]) + "a", TypeError, "unsupported operand type(s) for +: 'Tensor' and 'str'"),
    (lambda m: m.tensor([1.]) < None, TypeError,
     "'<' not supported between instances of 'Tensor' and 'NoneType'"),
])
def test_error_messages(torch, fn, exc, msg):
    with pytest.raises(exc) as theirs:
        fn(torch)
    assert str(theirs.value) == msg          # the expected text is PyTorch's own
    with pytest.raises(exc) as ours:
        fn(dynograph)
    assert str(ours.value) == msg


@pytest.mark.parametrize("fn", [
    lambda m: m.eq(2, m.tensor([1.])), lambda m: m.pow(2, 3), lambda m: m.remainder(2, 3),
    lambda m: m.fmod(2, m.tensor([1.])), lambda m: m.copysign(2, m.tensor([1.])),
    lambda m: m.xlogy(2, 3), lambda m: m.bitwise_and(2, 3), lambda m: m.clamp_min(m.tensor([1]), None),
    lambda m: m.clamp(m.tensor([1.]), m.tensor([0.]), 1.0),
    lambda m: m.addcmul(m.ones(2), 2, m.ones(2)), lambda m: m.addcdiv(m.ones(2), m.ones(2), 2),
    lambda m: m.ones(2).masked_fill([True, False], 1), lambda m: m.lerp(m.ones(2), 2, 0.5),
    lambda m: m.lerp(2, m.ones(2), 0.5)])
def test_invalid_argument_combinations(torch, fn):
    check(torch, lambda m: fn(m))


def test_scalar_only_arithmetic(torch):
    for fn in (lambda m: m.add(2, 3), lambda m: m.mul(2.5, 2), lambda m: m.sub(2, 3.5),
               lambda m: m.div(7, 2), lambda m: m.floor_divide(7, 2),
               lambda m: m.remainder(7, m.tensor([2, 3])), lambda m: m.pow(2, m.tensor([-1, 3])),
               lambda m: m.xlogy(2, m.tensor([1.5])), lambda m: m.bitwise_and(6, m.tensor([3]))):
        check(torch, fn)


# ---------------------------------------------------------------- division, remainder, pow


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "float16", "float32", "float64"])
def test_division_rounding_with_negative_operands(torch, dtype):
    dt = getattr(torch, dtype)
    a = torch.tensor([7, -7, 7, -7, 6, -6, 0, 1], dtype=dt)
    b = torch.tensor([2, 2, -2, -2, 3, -4, 5, -3], dtype=dt)
    for fn in (lambda m, x, y: m.div(x, y), lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
               lambda m, x, y: m.div(x, y, rounding_mode="floor"), lambda m, x, y: x // y,
               lambda m, x, y: m.remainder(x, y), lambda m, x, y: m.fmod(x, y),
               lambda m, x, y: x % -3, lambda m, x, y: m.fmod(x, -3), lambda m, x, y: x // -3,
               lambda m, x, y: m.div(x, -3, rounding_mode="trunc"), lambda m, x, y: 7 // y,
               lambda m, x, y: -7 % y):
        check(torch, fn, a, b)


def test_float_division_by_zero_and_infinity(torch):
    a = torch.tensor([1.0, -1.0, 0.0, 5.0, -5.0, float("inf"), float("nan")])
    for fn in (lambda m, x: x / 0, lambda m, x: x / -0.0, lambda m, x: x // 0.0,
               lambda m, x: m.div(x, 0.0, rounding_mode="trunc"), lambda m, x: x % 0.0,
               lambda m, x: m.fmod(x, 0.0), lambda m, x: x % float("inf"),
               lambda m, x: x % float("-inf"), lambda m, x: x // float("inf"),
               lambda m, x: m.fmod(x, float("inf")), lambda m, x: m.tensor([3, 0]) / 0,
               lambda m, x: m.tensor([3, -3]) // -0.0):
        check(torch, fn, a)


def test_integer_power_rules(torch):
    base = torch.tensor([0, 1, -1, 2, -2, 3])
    exps = torch.tensor([-1, -1, -3, -1, -2, 2])
    for fn in (lambda m, a, e: a ** e, lambda m, a, e: m.pow(-1, e), lambda m, a, e: m.pow(2, e),
               lambda m, a, e: m.pow(0, m.tensor([0, 2])), lambda m, a, e: a ** 0.5,
               lambda m, a, e: a ** 2, lambda m, a, e: a ** 0,
               lambda m, a, e: a.to(m.int32) ** 40, lambda m, a, e: a.to(m.uint8) ** 3,
               lambda m, a, e: a ** (a > 0), lambda m, a, e: (a > 0) ** 2,
               lambda m, a, e: 2 ** (a > 0), lambda m, a, e: a ** -1.5):
        check(torch, fn, base, exps)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_power_and_special_exponents(torch, dtype):
    x = torch.tensor([0.0, -0.0, 0.5, -2.0, 4.0, float("inf"), float("nan")],
                     dtype=getattr(torch, dtype))
    for e in (0, 1, 2, 3, -1, -2, 0.5, -0.5, 1.5, float("inf"), float("nan")):
        check(torch, lambda m, t: t ** e, x)
        check(torch, lambda m, t: e ** t, x)
    check(torch, lambda m, t: m.float_power(t, 2), x)
    check(torch, lambda m, t: m.float_power(t, t), x)
    check(torch, lambda m, t: m.float_power(2, t), x)
    check(torch, lambda m: m.float_power(m.tensor([2, -3]), -2))


def test_shift_amounts_outside_the_bit_width(torch):
    a = torch.tensor([-8, 8, 1, -1])
    for fn in (lambda m, x: x << 70, lambda m, x: x << -1, lambda m, x: x >> 70,
               lambda m, x: x >> -1, lambda m, x: x >> 64, lambda m, x: x << 63,
               lambda m, x: x.to(m.int8) << 9, lambda m, x: x.to(m.int8) >> 8,
               lambda m, x: x.to(m.uint8) << 7, lambda m, x: x << m.tensor([1, 64, -2, 3]),
               lambda m, x: 1 << m.tensor([1, 3]), lambda m, x: 64 >> m.tensor([1, 3])):
        check(torch, fn, a)


# ---------------------------------------------------------------- rounding, clamp, where


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_round_decimals(torch, dtype):
    x = torch.tensor([1234.5678, 2.5, 3.5, -0.5, -2.675, 1.005, 0.125, 1.25, -1e-3],
                     dtype=getattr(torch, dtype))
    for d in (0, 1, 2, 3, -1, -2):
        check(torch, lambda m, t: m.round(t, decimals=d), x)
        check(torch, lambda m, t: t.round(decimals=d), x)


def test_clamp_cases(torch):
    x = torch.tensor([-2.0, 0.0, 0.5, 1.0, 3.0, float("nan")])
    i = torch.tensor([-5, 0, 3, 9])
    for fn, args in [
        (lambda m, t: m.clamp(t, 0, 1), (x,)), (lambda m, t: m.clamp(t, min=0.5), (x,)),
        (lambda m, t: m.clamp(t, max=0.5), (x,)), (lambda m, t: m.clamp(t, 2, 1), (x,)),
        (lambda m, t: t.clamp(float("nan"), 1), (x,)), (lambda m, t: t.clip(-1, 1), (x,)),
        (lambda m, t: m.clamp(t, 1.5), (i,)), (lambda m, t: m.clamp(t, 1, 4), (i,)),
        (lambda m, t: m.clamp(t, m.tensor(1.5)), (i,)),
        (lambda m, t: m.clamp(t.to(m.uint8), -1, 100), (i,)),
        (lambda m, t: m.clamp(t > 0, 0, 1), (i,)), (lambda m, t: m.clamp(t > 0, 0.5), (i,)),
        (lambda m, t: m.clamp_min(t, 1.5), (i,)), (lambda m, t: m.clamp_max(t, 2), (i,)),
        (lambda m, t: m.clamp_min(t, m.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])), (x,)),
        (lambda m, t: m.clamp(t, m.zeros(6), m.ones(6)), (x,)),
        (lambda m, t: m.clamp(t, m.ones(2, 1), m.zeros(6)), (x,)),
        (lambda m, t: m.clamp(t, min=m.tensor([0.0, 0, 0, 0, 0, 0])), (x,)),
        (lambda m, t: m.clamp(t, m.tensor([0, 0, 0, 0]), m.tensor([1.5, 1.5, 1.5, 1.5])), (i,)),
        (lambda m, t: m.clamp(t.half(), 1e6), (x,)),
        (lambda m, t: m.clamp(t.int(), 2 ** 40), (i,)),
    ]:
        check(torch, fn, *args)


def test_clamp_inplace_and_out(torch):
    x = torch.tensor([-2.0, 0.0, 0.5, 3.0])
    check(torch, lambda m, t: t.clone().clamp_(0, 1), x)
    check(torch, lambda m, t: t.clone().clip_(max=0), x)
    check(torch, lambda m, t: t.clone().clamp_min_(0.5), x)
    check(torch, lambda m, t: t.clone().clamp_max_(0.5), x)
    check(torch, lambda m, t: m.clamp(t, 0, 1, out=m.empty(4)), x)


def test_where_cases(torch):
    c = torch.tensor([[True, False, True]])
    x = torch.tensor([[1.5, -2.0, 3.0], [0.0, 1.0, 2.0]])
    i = torch.tensor([1, 2, 3])
    for fn in (lambda m, c, x, i: m.where(c, x, 0.0), lambda m, c, x, i: m.where(c, 1, 2.5),
               lambda m, c, x, i: m.where(c, 1, 2), lambda m, c, x, i: m.where(c, True, False),
               lambda m, c, x, i: m.where(c, i, 2.5), lambda m, c, x, i: m.where(c, i, m.tensor(1.0)),
               lambda m, c, x, i: m.where(c, x.half(), 2.5),
               lambda m, c, x, i: m.where(c, i.to(m.uint8), i.to(m.int8)),
               lambda m, c, x, i: m.where(c, x, m.tensor(1.0, dtype=m.float64)),
               lambda m, c, x, i: m.where(c.t(), x.t(), -x.t()),
               lambda m, c, x, i: x.where(c, 9.0),
               lambda m, c, x, i: x.where(c, m.zeros(2, 3, dtype=m.float64)),
               lambda m, c, x, i: m.where(c, x, i),
               lambda m, c, x, i: m.where(c, x, m.tensor([1.0, 2.0])),
               lambda m, c, x, i: m.where(x > 0, x, 0.0, out=m.empty(2, 3)),
               lambda m, c, x, i: m.where(x > 0, x, -x, out=m.empty(2, 3))):
        check(torch, fn, c, x, i)


def test_masked_fill_cases(torch):
    x = torch.tensor([1.5, -2.5])
    i = torch.tensor([3, -7])
    b = torch.tensor([True, False])
    for fn in (lambda m, x, i, b: x.masked_fill(b, 0), lambda m, x, i, b: i.masked_fill(b, 2.5),
               lambda m, x, i, b: b.masked_fill(b, 2),
               lambda m, x, i, b: x.masked_fill(b, m.tensor(3.0, dtype=m.float64)),
               lambda m, x, i, b: i.masked_fill(b, m.tensor(3.5)),
               lambda m, x, i, b: x.masked_fill(m.tensor([[True], [False]]), -1),
               lambda m, x, i, b: x.clone().masked_fill_(b, 7),
               lambda m, x, i, b: i.to(m.int8).masked_fill(b, 300),
               lambda m, x, i, b: m.masked_fill(x, b, float("inf"))):
        check(torch, fn, x, i, b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int64", "bool"])
def test_nan_to_num(torch, dtype):
    x = torch.tensor([float("inf"), float("nan"), float("-inf"), 1.5, -0.0]).to(getattr(torch, dtype))
    check(torch, lambda m, t: m.nan_to_num(t), x)
    check(torch, lambda m, t: t.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0), x)
    check(torch, lambda m, t: m.nan_to_num(t, posinf=1e10, nan=1e9), x)
    check(torch, lambda m, t: m.nan_to_num(t, 0.5, out=m.empty(5, dtype=t.dtype)), x)
    check(torch, lambda m, t: t.clone().nan_to_num_(), x)


# ---------------------------------------------------------------- the remaining functions


def test_lerp(torch):
    a = torch.tensor([[1.0, -2.0, 3.0], [0.0, 5.0, -1.0]])
    b = torch.tensor([2.0, 2.0, -3.0])
    w = torch.tensor([0.0, 0.3, 0.75])
    for fn in (lambda m, a, b, w: m.lerp(a, b, 0.5), lambda m, a, b, w: m.lerp(a, b, w),
               lambda m, a, b, w: a.lerp(b, 1.0), lambda m, a, b, w: m.lerp(a, b, -0.5),
               lambda m, a, b, w: m.lerp(a, b, 2.0),
               lambda m, a, b, w: m.lerp(a, b, m.tensor(0.25, dtype=m.float64)),
               lambda m, a, b, w: m.lerp(a, b, m.tensor(1)),
               lambda m, a, b, w: m.lerp(a.half(), b.half(), 0.3),
               lambda m, a, b, w: m.lerp(a.double(), b, 0.5),
               lambda m, a, b, w: m.lerp(a, b, w.double()),
               lambda m, a, b, w: m.lerp(m.zeros(2, 1), m.ones(3), m.full((2, 3), 0.25)),
               lambda m, a, b, w: m.lerp(m.tensor(1.0), b, 0.5),
               lambda m, a, b, w: a.clone().lerp_(b, w),
               lambda m, a, b, w: m.lerp(m.tensor([1]), m.tensor([2]), m.tensor([1])),
               lambda m, a, b, w: m.lerp(a, b, 0.5, out=m.empty(2, 3))):
        check(torch, fn, a, b, w)


def test_addcmul_addcdiv(torch):
    x = torch.tensor([1.5, -2.5, 0.5])
    t1 = torch.tensor([[2.0, 3.0, -1.0], [1.0, 0.5, 4.0]])
    t2 = torch.tensor([0.5, -2.0, 3.0])
    i = torch.tensor([3, -7, 2])
    for fn in (lambda m, x, t1, t2, i: m.addcmul(x, t1, t2),
               lambda m, x, t1, t2, i: m.addcmul(x, t1, t2, value=-0.5),
               lambda m, x, t1, t2, i: m.addcdiv(x, t1, t2),
               lambda m, x, t1, t2, i: m.addcdiv(x, t1, t2, value=2),
               lambda m, x, t1, t2, i: m.addcmul(i, i, i, value=1.5),
               lambda m, x, t1, t2, i: m.addcmul(i, i, x),
               lambda m, x, t1, t2, i: m.addcmul(x, x.double(), x),
               lambda m, x, t1, t2, i: m.addcdiv(i, i, i),
               lambda m, x, t1, t2, i: m.addcdiv(x, i, i),
               lambda m, x, t1, t2, i: m.addcdiv(i, x, i),
               lambda m, x, t1, t2, i: m.addcmul(i > 0, i > 0, i > 0),
               lambda m, x, t1, t2, i: x.addcmul(t2, t2),
               lambda m, x, t1, t2, i: x.clone().addcdiv_(t2, t2, value=3),
               lambda m, x, t1, t2, i: m.addcmul(x.half(), x.half(), x.half(), value=0.1)):
        check(torch, fn, x, t1, t2, i)


def test_xlogy_and_special_functions(torch):
    a = torch.tensor([0.0, 0.0, 1.0, 2.0, -1.0, 0.0])
    b = torch.tensor([float("nan"), 0.0, float("nan"), 3.0, 2.0, -1.0])
    for fn in (lambda m, a, b: m.xlogy(a, b), lambda m, a, b: m.xlogy(a, 2),
               lambda m, a, b: m.xlogy(2, b), lambda m, a, b: a.xlogy(b)):
        check(torch, fn, a, b)
    for fn in (lambda m: m.xlogy(m.tensor([0, 1, 2]), m.tensor([0, 2, 3])),
               lambda m: m.polygamma(2, m.tensor([0.5, 1.0, 3.0])),
               lambda m: m.polygamma(0, m.tensor([0.5, 1.0])),
               lambda m: m.polygamma(1, m.tensor([3, 7])),
               lambda m: m.tensor([0.5, 2.0]).polygamma(3),
               lambda m: m.tensor([0.5, 2.0]).polygamma_(1),
               lambda m: m.digamma(m.tensor([0.0, -1.0, -0.0, -1.5])),
               lambda m: m.lgamma(m.tensor([0.0, -1.0, -0.5, -1.5])),
               lambda m: m.logit(m.tensor([0.0, 0.05, 0.5, 1.0, 1.2]), eps=0.1),
               lambda m: m.logit(m.tensor([0.0, 0.05, 0.5, 1.0, 1.2])),
               lambda m: m.logit(m.tensor([3, -7]), eps=0.1),
               lambda m: m.sinc(m.tensor([0.0, 1.0, 0.5, -2.5, float("inf")])),
               lambda m: m.erfinv(m.tensor([0, 1, -1])),
               lambda m: m.ldexp(m.tensor([1.5, -2.5]), m.tensor([3, -7])),
               lambda m: m.ldexp(m.tensor([3, -7]), m.tensor([3, -7])),
               lambda m: m.copysign(m.tensor([1.0, 2.0, 3.0]), m.tensor([-0.0, 0.0, -5.0])),
               lambda m: m.copysign(m.tensor([3, -7]), -1),
               lambda m: m.copysign(m.tensor([1.0]), True),
               lambda m: m.heaviside(m.tensor([-1.5, 0.0, 2.0]), m.tensor([0.5])),
               lambda m: m.heaviside(m.tensor([-1, 0, 2]), m.tensor([7])),
               lambda m: m.heaviside(m.tensor([True, False]), m.tensor([True, True])),
               lambda m: m.logaddexp(m.tensor([float("inf"), float("-inf"), 1e4]),
                                     m.tensor([float("inf"), float("-inf"), 1e4])),
               lambda m: m.fmax(m.tensor([float("nan"), 1.0, float("nan")]),
                                m.tensor([2.0, float("nan"), float("nan")])),
               lambda m: m.maximum(m.tensor([float("nan"), 1.0]), m.tensor([1.0, float("nan")])),
               lambda m: m.isposinf(m.tensor([float("inf"), float("-inf"), 1.0])),
               lambda m: m.isneginf(m.tensor([float("inf"), float("-inf"), 1.0])),
               lambda m: m.signbit(m.tensor([-0.0, 0.0, -1.0, float("nan"), -float("nan")])),
               lambda m: m.positive(m.tensor([1.5])), lambda m: m.isreal(m.tensor([1, 2]))):
        check(torch, fn)
    x = dynograph.tensor([1.0])
    assert dynograph.positive(x) is x


def test_isclose_allclose_equal(torch):
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([1.0, 1.0 + 1e-6, nan, inf, -inf, 0.0, 1e-9])
    b = torch.tensor([1.0, 1.0, nan, inf, inf, 1e-9, 0.0])
    for fn in (lambda m, a, b: m.isclose(a, b), lambda m, a, b: m.isclose(a, b, equal_nan=True),
               lambda m, a, b: m.isclose(a, b, rtol=0, atol=0),
               lambda m, a, b: a.isclose(b, atol=0),
               lambda m, a, b: m.isclose(a, b, rtol=1e-3, atol=1e-3),
               lambda m, a, b: m.isclose(a.double(), b.double()),
               lambda m, a, b: m.allclose(a, b), lambda m, a, b: m.allclose(a[:2], b[:2]),
               lambda m, a, b: m.allclose(a, b, equal_nan=True),
               lambda m, a, b: m.allclose(a[:2], m.tensor(1.0)),
               lambda m, a, b: m.allclose(a, m.ones(3)), lambda m, a, b: a.allclose(a),
               lambda m, a, b: a[:2].equal(b[:2]), lambda m, a, b: m.equal(a, a)):
        check(torch, fn, a, b)
    for fn in (lambda m: m.isclose(m.tensor([3, -7]), m.tensor([4, -7]), atol=1),
               lambda m: m.isclose(m.tensor([True, False]), m.tensor([True, True])),
               lambda m: m.equal(m.tensor([1, 2]), m.tensor([1.0, 2.0])),
               lambda m: m.equal(m.tensor([1, 2]), m.tensor([[1, 2]])),
               lambda m: m.equal(m.tensor([nan]), m.tensor([nan])),
               lambda m: m.tensor([1, 2]).equal(m.tensor([1, 3]))):
        check(torch, fn)


def test_logical_and_bitwise_on_bools_and_ints(torch):
    b = torch.tensor([True, False, True, False])
    c = torch.tensor([True, True, False, False])
    i = torch.tensor([12, -7, 0, 255])
    for fn in (lambda m, b, c, i: b & c, lambda m, b, c, i: b | c, lambda m, b, c, i: b ^ c,
               lambda m, b, c, i: ~b, lambda m, b, c, i: ~i, lambda m, b, c, i: i & 10,
               lambda m, b, c, i: 10 & i, lambda m, b, c, i: i | b, lambda m, b, c, i: i ^ True,
               lambda m, b, c, i: i.to(m.uint8) & i.to(m.int8),
               lambda m, b, c, i: ~i.to(m.uint8), lambda m, b, c, i: m.logical_and(i, b),
               lambda m, b, c, i: m.logical_or(i.float(), c),
               lambda m, b, c, i: m.logical_xor(i, i),
               lambda m, b, c, i: m.logical_not(i.float()),
               lambda m, b, c, i: b.clone().logical_and_(c),
               lambda m, b, c, i: i.float().logical_not_(),
               lambda m, b, c, i: i.clone().bitwise_and_(6),
               lambda m, b, c, i: b.clone().bitwise_not_()):
        check(torch, fn, b, c, i)


# ---------------------------------------------------------------- non-contiguous inputs


def _strided(torch, dtype):
    """(torch, dynograph) views of one numpy buffer: every other column, transposed."""
    base = np.arange(-12, 12, dtype=np.float64).reshape(4, 6) / 4
    if dtype in INT_DTYPES:
        base = np.arange(-12, 12).reshape(4, 6) if dtype != "uint8" else np.arange(24).reshape(4, 6)
    base = base.astype(dtype)
    return base, lambda m: m.from_numpy(base)[:, ::2].t()


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
def test_non_contiguous_inputs(torch, dtype):
    base, view = _strided(torch, dtype)
    assert not view(dynograph).is_contiguous()
    for fn in (lambda m, v: v + 1, lambda m, v: v * v.t().t(), lambda m, v: m.exp(v),
               lambda m, v: v.abs(), lambda m, v: m.maximum(v, v.flip(0)),
               lambda m, v: m.where(v > 0, v, -v), lambda m, v: v.clamp(-1, 1),
               lambda m, v: v / 3, lambda m, v: v // 2, lambda m, v: m.remainder(v, 5),
               lambda m, v: v == v.t().t(), lambda m, v: m.from_numpy(base)[::2] + 1,
               lambda m, v: m.from_numpy(base)[:, 1::3] * m.from_numpy(base)[:, ::3],
               lambda m, v: m.lerp(v.double(), v.double() * 2, 0.5),
               lambda m, v: m.nan_to_num(v), lambda m, v: v.sign()):
        check_all(torch, lambda m: fn(m, view(m)), [()])


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_inplace_on_non_contiguous_views_writes_through(torch, dtype):
    for op in (lambda v: v.add_(1), lambda v: v.mul_(v), lambda v: v.clamp_(-1, 1),
               lambda v: v.__imul__(3), lambda v: v.neg_(), lambda v: v.masked_fill_(v > 0, 7)):
        ours_base, ours_view = _strided(torch, dtype)
        theirs_base, theirs_view = _strided(torch, dtype)
        r = op(ours_view(dynograph))
        t = op(theirs_view(torch))
        assert_same(r, t)
        np.testing.assert_array_equal(ours_base, theirs_base)


# ---------------------------------------------------------------- in-place, out=, augmented ops


def test_inplace_forms(torch):
    x = torch.tensor([[1.5, -2.5, 3.0]])
    i = torch.tensor([3, -7, 2])
    for fn in (lambda m, x, i: x.clone().add_(i, alpha=2), lambda m, x, i: x.clone().sub_(1),
               lambda m, x, i: x.clone().mul_(i), lambda m, x, i: x.clone().div_(i),
               lambda m, x, i: x.clone().div_(2, rounding_mode="floor"),
               lambda m, x, i: i.clone().div_(2, rounding_mode="trunc"),
               lambda m, x, i: i.clone().floor_divide_(2), lambda m, x, i: i.clone().remainder_(4),
               lambda m, x, i: i.clone().pow_(2), lambda m, x, i: x.clone().pow_(i),
               lambda m, x, i: i.clone().mul_(3), lambda m, x, i: i.to(m.int8).mul_(1000),
               lambda m, x, i: i.to(m.int8).add_(i), lambda m, x, i: x.half().add_(x),
               lambda m, x, i: x.clone().eq_(1.5), lambda m, x, i: i.clone().eq_(1.5),
               lambda m, x, i: x.clone().atan2_(x), lambda m, x, i: x.clone().copysign_(-1),
               lambda m, x, i: x.clone().xlogy_(2), lambda m, x, i: x.clone().lerp_(x * 2, 0.5),
               lambda m, x, i: m.zeros(2).add_(m.ones(2, 2)),
               lambda m, x, i: x.clone().sub_(x, alpha=0.5),
               lambda m, x, i: i.clone().sqrt_(), lambda m, x, i: i.clone().bitwise_left_shift_(2),
               lambda m, x, i: x.clone().float_power_(2), lambda m, x, i: x.double().float_power_(2),
               lambda m, x, i: x.clone().square_(), lambda m, x, i: x.clone().logit_(),
               lambda m, x, i: x.clone().hypot_(x), lambda m, x, i: x.clone().fmod_(x.abs() + 1),
               lambda m, x, i: x.clone().logaddexp(x), lambda m, x, i: x.clone().sgn_(),
               lambda m, x, i: x.clone().arcsinh_(), lambda m, x, i: x.clone().multiply_(i),
               lambda m, x, i: x.clone().true_divide_(i), lambda m, x, i: x.clone().arctan2_(x),
               lambda m, x, i: i.clone().greater_(1), lambda m, x, i: x.clone().ldexp_(i),
               lambda m, x, i: x.clone().nextafter_(i.float())):
        check(torch, fn, x, i)


def test_augmented_assignment_keeps_the_tensor(torch):
    for dt, s, ops in (("float32", 2.0, ("+=", "-=", "*=", "/=", "//=", "%=", "**=")),
                       ("int64", 3, ("+=", "-=", "*=", "//=", "%=", "**=", "&=", "|=", "^=",
                                     "<<=", ">>=", "/="))):
        for op in ops:
            def fn(m, x):
                y = x.clone()
                before = id(y)
                ns = {"y": y, "s": s}
                exec(f"y {op} s", ns)
                assert id(ns["y"]) == before
                return ns["y"]
            check(torch, fn, values(torch, dt, (2, 3), seed=4, nonzero=True))


def test_out_argument(torch):
    x = torch.tensor([1.5, -2.5])
    for fn in (lambda m, x: m.add(x, 1, out=m.empty(2)), lambda m, x: m.add(x, 1, out=m.empty(5)),
               lambda m, x: m.add(x, 1, out=m.empty(2, dtype=m.long)),
               lambda m, x: m.add(x, 1, out=m.empty(2, dtype=m.float64)),
               lambda m, x: m.eq(x, 1.5, out=m.empty(2)), lambda m, x: m.exp(x, out=m.empty(0)),
               lambda m, x: m.mul(x, x, out=m.empty(2, 2)), lambda m, x: m.div(x, 2, out=m.empty(2)),
               lambda m, x: m.pow(x, 2, out=m.empty(2)), lambda m, x: m.atan2(x, x, out=m.empty(2)),
               lambda m, x: m.clamp(x, 0, out=m.empty(2)), lambda m, x: m.sqrt(m.tensor([4]), out=m.empty(1)),
               lambda m, x: m.sqrt(m.tensor([4]), out=m.empty(1, dtype=m.int64))):
        check(torch, fn, x)
    out = dynograph.empty(2)
    assert dynograph.add(from_torch(x), 1, out=out) is out


# ---------------------------------------------------------------- gradients


def grad_check(torch, fn, *inputs, tol=None, name=True):
    """Forward values, grad_fn name and every input's ``.grad`` agree with torch's."""
    t_in = [x.detach().clone().requires_grad_(True)
            if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    d_in = [from_torch(x, requires_grad=x.requires_grad) if isinstance(x, torch.Tensor) else x
            for x in t_in]
    t_out = fn(torch, *t_in)
    d_out = fn(dynograph, *d_in)
    assert_same(d_out, t_out, **(tol or tolerance(t_out.dtype)))
    if name:
        assert d_out.grad_fn.name() == t_out.grad_fn.name()
    # an upstream gradient whose sums do not cancel (sums are compared in float32 too)
    g = torch.linspace(-0.5, 1.5, t_out.numel(), dtype=t_out.dtype).reshape(t_out.shape)
    t_out.backward(g)
    d_out.backward(from_torch(g))
    for t, d in zip(t_in, d_in):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            if t.grad is None:                # an input the function does not use
                assert d.grad is None
                continue
            assert d.grad is not None, "no gradient reached an input"
            expected = t.grad
            if expected._is_zerotensor():
                expected = torch.zeros_like(expected)
            assert_same(d.grad, expected, **(tol or tolerance(t.dtype)))


def _rand(torch, shape, low=-2.0, high=2.0, seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.uniform(low, high, shape)).to(getattr(torch, dtype))


UNARY_GRAD = {  # name: (low, high) of the inputs
    "neg": (-2, 2), "abs": (-2, 2), "exp": (-2, 2), "exp2": (-2, 2), "expm1": (-2, 2),
    "log": (0.1, 3), "log2": (0.1, 3), "log10": (0.1, 3), "log1p": (-0.9, 3), "sqrt": (0.1, 3),
    "rsqrt": (0.1, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3), "sinh": (-2, 2),
    "cosh": (-2, 2), "tanh": (-2, 2), "asinh": (-3, 3), "acosh": (1.1, 3),
    "atanh": (-0.9, 0.9), "sigmoid": (-3, 3), "erf": (-2, 2), "erfc": (-2, 2),
    "erfinv": (-0.9, 0.9), "lgamma": (0.2, 4), "digamma": (0.2, 4), "deg2rad": (-3, 3),
    "rad2deg": (-3, 3), "sinc": (-2, 2), "relu": (-2, 2), "reciprocal": (0.2, 3),
    "floor": (-2, 2), "ceil": (-2, 2), "trunc": (-2, 2), "frac": (-2, 2), "round": (-2, 2),
    "sign": (-2, 2), "sgn": (-2, 2), "square": (-2, 2), "logit": (0.05, 0.95),
    "nan_to_num": (-2, 2),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY_GRAD))
def test_unary_gradients(torch, name, dtype):
    low, high = UNARY_GRAD[name]
    x = _rand(torch, (3, 4), low, high, dtype=dtype)
    grad_check(torch, lambda m, t: getattr(m, name)(t), x)
    grad_check(torch, lambda m, t: getattr(t, name)(), x[:, ::2].t())


BINARY_GRAD = {
    "add": lambda m, a, b: a + b, "add_alpha": lambda m, a, b: m.add(a, b, alpha=-1.5),
    "sub": lambda m, a, b: a - b, "sub_alpha": lambda m, a, b: m.sub(a, b, alpha=2),
    "mul": lambda m, a, b: a * b, "div": lambda m, a, b: a / b,
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "remainder": lambda m, a, b: a % b, "fmod": lambda m, a, b: m.fmod(a, b),
    "pow": lambda m, a, b: a.abs() ** b, "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "fmax": lambda m, a, b: m.fmax(a, b), "fmin": lambda m, a, b: m.fmin(a, b),
    "copysign": lambda m, a, b: m.copysign(a, b), "hypot": lambda m, a, b: m.hypot(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "logaddexp2": lambda m, a, b: m.logaddexp2(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b.abs()),
    "lerp": lambda m, a, b: m.lerp(a, b, 0.3), "lerp_big": lambda m, a, b: m.lerp(a, b, 0.7),
    "lerp_tensor": lambda m, a, b: m.lerp(a, b, b.sigmoid()),
    "where": lambda m, a, b: m.where(a > b, a, b),
    "clamp_tensors": lambda m, a, b: m.clamp(a, b, b + 1),
    "clamp_min_tensor": lambda m, a, b: m.clamp_min(a, b),
    "clamp_max_tensor": lambda m, a, b: m.clamp_max(a, b),
    "addcmul": lambda m, a, b: m.addcmul(a, b, b * 2, value=0.5),
    "addcdiv": lambda m, a, b: m.addcdiv(a, a, b, value=-2),
    "masked_fill_tensor": lambda m, a, b: a.masked_fill(a > 0, b.sum()),
}

SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((3, 4), ()), ((), (2, 3))]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(BINARY_GRAD))
def test_binary_gradients_with_broadcasting(torch, name, dtype):
    for k, (sa, sb) in enumerate(SHAPE_PAIRS):
        a = _rand(torch, sa, seed=k, dtype=dtype)
        b = _rand(torch, sb, seed=k + 10, dtype=dtype)
        if name in ("div", "remainder", "fmod", "div_floor", "div_trunc", "addcdiv"):
            b = b.sign() * (b.abs() + 0.5)        # away from 0
        grad_check(torch, BINARY_GRAD[name], a, b)


@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "maximum", "atan2", "where",
                                  "lerp_tensor", "hypot"])
def test_gradients_with_mixed_dtypes(torch, name):
    """float32 tensor with a float64 0-d tensor: the result is float32, each grad its input's dtype."""
    a = _rand(torch, (3, 4), 0.5, 2.0, dtype="float32")
    b = torch.tensor(1.25, dtype=torch.float64)
    fn = BINARY_GRAD[name]
    grad_check(torch, lambda m, x, y: fn(m, x, y) if name != "lerp_tensor" else m.lerp(x, x * 2, y),
               a, b, tol=dict(rtol=1e-5, atol=1e-6))
    grad_check(torch, lambda m, x, y: fn(m, y, x) if name not in ("lerp_tensor", "where")
               else fn(m, x, y.float()), a, b, tol=dict(rtol=1e-5, atol=1e-6))


@pytest.mark.parametrize("fn", [
    lambda m, x: x * 2, lambda m, x: 2 * x, lambda m, x: x + 1, lambda m, x: 1 - x,
    lambda m, x: x / 4, lambda m, x: 4 / x, lambda m, x: x ** 2, lambda m, x: x ** 0,
    lambda m, x: x ** 0.5, lambda m, x: 2 ** x, lambda m, x: 0 ** x.abs(),
    lambda m, x: (-2) ** x.round(), lambda m, x: x.pow(-1), lambda m, x: x % 0.75,
    lambda m, x: m.fmod(x, -0.75), lambda m, x: m.xlogy(x, 3), lambda m, x: m.xlogy(3, x.abs()),
    lambda m, x: m.copysign(x, -1), lambda m, x: m.clamp(x, -0.5, 0.5),
    lambda m, x: m.clamp(x, min=0), lambda m, x: m.clamp(x, max=0), lambda m, x: x.clamp_min(0.1),
    lambda m, x: x.clamp_max(0.1), lambda m, x: m.where(x > 0, x, 0.0),
    lambda m, x: x.masked_fill(x < 0, 1.5), lambda m, x: m.lerp(x, x.detach() * 3, 0.25),
    lambda m, x: m.float_power(x, 2), lambda m, x: m.float_power(x, x),
    lambda m, x: m.polygamma(2, x.abs() + 0.5), lambda m, x: m.logit(x.sigmoid(), eps=0.3),
    lambda m, x: m.round(x, decimals=1), lambda m, x: m.nan_to_num(x / x.round()),
    lambda m, x: x.square(), lambda m, x: m.rsub(x, 2, alpha=3),
    lambda m, x: m.isclose(x, x).float() * x, lambda m, x: m.addcmul(x, x, x),
])
def test_gradients_with_python_scalars(torch, fn):
    grad_check(torch, fn, _rand(torch, (2, 5), seed=3))


def test_boundary_and_tie_gradients(torch):
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    y = torch.tensor([-1.0, 1.0, 0.5, 0.0, 2.0], dtype=torch.float64)
    for fn in (lambda m, a, b: m.clamp(a, 0.0, 1.0),           # x == min and x == max pass
               lambda m, a, b: m.clamp(a, 1.0, 0.0),           # min > max: nothing passes
               lambda m, a, b: m.clamp(a, b, b),
               lambda m, a, b: m.clamp(a, b, b - 1),
               lambda m, a, b: m.clamp(a, min=b), lambda m, a, b: m.clamp(a, max=b),
               lambda m, a, b: m.maximum(a, b), lambda m, a, b: m.minimum(a, b),
               lambda m, a, b: m.fmax(a, b), lambda m, a, b: m.fmin(a, b),
               lambda m, a, b: a.abs() * b, lambda m, a, b: a.relu() + b,
               lambda m, a, b: a ** b, lambda m, a, b: a.abs() ** b, lambda m, a, b: a ** 0 + b,
               lambda m, a, b: m.sinc(a) + b, lambda m, a, b: m.copysign(a, b),
               lambda m, a, b: m.xlogy(a, b), lambda m, a, b: m.xlogy(b, a.abs()),
               lambda m, a, b: m.sqrt(a.abs()) + b, lambda m, a, b: m.logit(a / 3 + 0.5, eps=0.25),
               lambda m, a, b: m.hypot(a, b), lambda m, a, b: m.atan2(a, b)):
        grad_check(torch, fn, x, y)
    nan = float("nan")
    grad_check(torch, lambda m, a, b: m.fmax(a, b),
               torch.tensor([nan, 1.0, 2.0], dtype=torch.float64),
               torch.tensor([1.0, nan, 2.0], dtype=torch.float64))


def test_composite_gradients(torch):
    """Composites record their parts' nodes (torch has a node of its own for these)."""
    x = _rand(torch, (2, 5), seed=3)
    grad_check(torch, lambda m, t: m.ldexp(t, m.tensor([2])), x, name=False)
    grad_check(torch, lambda m, t: m.float_power(t.float(), 3), x, name=False,
               tol=dict(rtol=1e-6, atol=1e-6))


def test_heaviside_and_floor_divide_record_but_refuse_backward(torch):
    x = dynograph.tensor([0.5, -1.0], requires_grad=True)
    y = dynograph.heaviside(x, x)
    assert y.requires_grad and y.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        y.sum().backward()
    r = 2 % x
    assert r.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::remainder is not implemented"):
        r.sum().backward()


@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "clamp_tensors"])
def test_second_order_gradients(torch, name):
    """create_graph=True: derivative rules are differentiable themselves."""
    fn = BINARY_GRAD[name]
    results = []
    for m in (torch, dynograph):
        a = m.tensor([0.5, -1.5, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([1.5, 0.5, -2.0], dtype=m.float64, requires_grad=True)
        out = (fn(m, a, b) ** 2 * a).sum()
        ga, = m.autograd.grad(out, a, create_graph=True)
        ga.sum().backward()
        results.append((ga.detach(), a.grad, b.grad))
    for ours, theirs in zip(results[1], results[0]):
        assert_same(ours, theirs)


def test_grad_fn_names_by_overload(torch):
    cases = [lambda m, x, y: x ** 2, lambda m, x, y: x ** y, lambda m, x, y: 2 ** x,
             lambda m, x, y: x % y, lambda m, x, y: x % 2, lambda m, x, y: m.fmod(x, y),
             lambda m, x, y: m.fmod(x, 2), lambda m, x, y: 2 - x, lambda m, x, y: x - y,
             lambda m, x, y: 2 / x, lambda m, x, y: x.clamp(0, 1), lambda m, x, y: x.clamp(y),
             lambda m, x, y: x.clamp_min(0), lambda m, x, y: x.clamp_min(y),
             lambda m, x, y: x.clamp_max(1), lambda m, x, y: x.clamp_max(y),
             lambda m, x, y: x.round(), lambda m, x, y: x.round(decimals=2),
             lambda m, x, y: m.div(x, y, rounding_mode="floor"),
             lambda m, x, y: x.masked_fill(x > 0, 1), lambda m, x, y: x.masked_fill(x > 0, y[0]),
             lambda m, x, y: m.lerp(x, y, 0.5), lambda m, x, y: m.lerp(x, y, y),
             lambda m, x, y: m.xlogy(x, y), lambda m, x, y: m.xlogy(2, y),
             lambda m, x, y: m.xlogy(x, 2), lambda m, x, y: m.copysign(x, y),
             lambda m, x, y: m.copysign(x, -1), lambda m, x, y: x.log1p(),
             lambda m, x, y: x.deg2rad(), lambda m, x, y: x.rad2deg(), lambda m, x, y: x.sgn(),
             lambda m, x, y: m.logaddexp2(x, y), lambda m, x, y: x.erfinv(),
             lambda m, x, y: m.square(x), lambda m, x, y: m.where(x > 0, x, y),
             lambda m, x, y: x.nan_to_num(), lambda m, x, y: m.addcdiv(x, x, y)]
    for fn in cases:
        names = []
        for m in (torch, dynograph):
            x = m.tensor([0.5, 0.25], requires_grad=True)
            y = m.tensor([0.75, 0.5], requires_grad=True)
            names.append(fn(m, x, y).grad_fn.name())
        assert names[0] == names[1]


def test_erf_and_sigmoid_match_closely(torch):
    x = torch.linspace(-6, 6, 101, dtype=torch.float64)
    for name in ("erf", "erfc", "sigmoid", "erfinv", "lgamma", "digamma", "expm1", "log1p"):
        check(torch, lambda m, t: getattr(m, name)(t / 7 if name == "erfinv" else t), x,
              tol=dict(rtol=1e-12, atol=1e-14))


def test_sigmoid_tails_and_layouts_match_torch(torch):
    """float32/float64 sigmoid is 1 / (1 + exp(-x)) on numpy's vectorized exp: its tails (where
    exp(-x) overflows), infinities, NaN, strided and 0-d inputs and its gradient agree with
    torch, relatively, down to the smallest results."""
    values = [-1000.0, -104.0, -89.0, -88.5, -80.0, -30.0, -17.5, -1e-3, -0.0, 0.0, 1e-8, 0.5,
              9.0, 17.0, 30.0, 89.0, 1000.0, float("inf"), -float("inf"), float("nan")]
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(values, dtype=dtype)
        tiny = dict(rtol=4e-7 if dtype == torch.float32 else 1e-15, atol=0)
        check(torch, lambda m, t: m.sigmoid(t), x, tol=tiny)
        check(torch, lambda m, t: m.sigmoid(t.reshape(4, 5).t()), x, tol=tiny)
        check(torch, lambda m, t: t[3].sigmoid(), x, tol=tiny)
        check(torch, lambda m, t: m.sigmoid(t.to(m.float16)), x)
    grads = []
    for m in (torch, dynograph):
        t = m.tensor(values[:-3], dtype=m.float32, requires_grad=True)
        m.sigmoid(t).sum().backward()
        grads.append(t.grad)
    assert_same(grads[1], grads[0], rtol=1e-6, atol=1e-30)


def test_python_number_operand_kinds(torch):
    """math constants and ints beyond the dtype go through as PyTorch converts them."""
    x = torch.tensor([1, 2], dtype=torch.int8)
    check(torch, lambda m, t: t * math.pi, x)
    check(torch, lambda m, t: t + 255, x)
    check(torch, lambda m, t: t + 2 ** 62, x)


def test_frexp_angle_mvlgamma_and_real_tensor_complex_api(torch):
    x = torch.tensor([1.5, -2.0, 0.0, float("inf"), float("nan"), -0.3])
    for fn in (lambda m, t: m.frexp(t), lambda m, t: t.frexp().mantissa,
               lambda m, t: m.frexp(t.half()), lambda m, t: m.frexp(t.bfloat16()).exponent,
               lambda m, t: m.frexp(t.long()), lambda m, t: m.angle(t), lambda m, t: m.angle(t.long()),
               lambda m, t: m.mvlgamma(t.abs() + 3, 3), lambda m, t: t.abs().add(2).mvlgamma(1),
               lambda m, t: m.conj(t), lambda m, t: t.conj_physical(), lambda m, t: t.resolve_conj(),
               lambda m, t: t.real, lambda m, t: t.imag, lambda m, t: t.is_conj(),
               lambda m, t: m.relu_(t.clone()), lambda m, t: m.sigmoid_(t.clone()),
               lambda m, t: m.clamp_(t.clone(), 0, 1)):
        check(torch, fn, x)
    grad_check(torch, lambda m, t: m.frexp(t)[0] * 3, _rand(torch, (2, 3), seed=1))
    grad_check(torch, lambda m, t: m.angle(t) + t, _rand(torch, (2, 3), seed=2))


def test_numpy_scalars_act_as_python_numbers(torch):
    i = torch.tensor([1, 2])
    for fn in (lambda m, t: t + np.float32(2.5), lambda m, t: np.float32(2.5) * t,
               lambda m, t: t.to(m.int8) + np.int64(2), lambda m, t: t == np.int16(2),
               lambda m, t: np.float64(0.5) - t, lambda m, t: t < np.float32(1.5),
               lambda m, t: t ** np.int32(2), lambda m, t: t & np.int64(3)):
        check(torch, fn, i)

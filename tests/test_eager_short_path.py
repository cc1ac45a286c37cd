"""The dispatcher's short path for simple elementwise calls (one tensor, two tensors of one
dtype and shape, a tensor and a Python number): the same dtypes, values, errors and autograd
as the general path and as torch, on the first call and on later calls that reuse its answer."""
import numpy as np
import pytest

import dynograph

from conftest import from_torch, to_numpy

DTYPES = ["float32", "float64", "complex64", "int64", "float16", "bool"]


def _pair(torch, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)) * 3
    b = rng.standard_normal((3, 4)) * 3
    ta, tb = (torch.tensor(v).to(getattr(torch, dtype)) for v in (a, b))
    return ta, tb, from_torch(ta), from_torch(tb)


def _same(torch, fn):
    """fn(lib, a, b) gives the same dtype and values (or the same error) in both libraries."""
    try:
        want = fn(torch)
    except Exception as e:
        for _ in range(2):
            with pytest.raises(type(e)) as got:
                fn(dynograph)
            assert str(got.value) == str(e).replace("torch.", "dynograph.")
        return
    for _ in range(2):                  # the second call reuses the first one's answer
        got = fn(dynograph)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(to_numpy(got).astype(np.complex128),
                                   to_numpy(want).astype(np.complex128), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr", ["a + b", "a * b", "a - b", "a / b", "a & b", "a ** 2",
                                  "a + 1", "2 * a", "a / 3", "1 - a", "a + 2.5", "0.5 ** a",
                                  "a > b", "a == 1.5", "exp", "neg", "tanh", "bitwise_not"])
def test_simple_calls_match_torch(torch, dtype, expr):
    ta, tb, da, db = _pair(torch, dtype)

    def fn(lib):
        a, b = (ta, tb) if lib is torch else (da, db)
        if expr.isidentifier():
            return getattr(lib, expr)(a)
        return eval(expr, {"a": a, "b": b})
    _same(torch, fn)


def test_a_python_int_past_int32_takes_the_general_path(torch):
    _same(torch, lambda lib: lib.ones(3, dtype=lib.float32) + 2 ** 40)


def test_gradients_through_the_short_path(torch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5)
    tx = torch.tensor(x, requires_grad=True)
    dx = from_torch(tx, requires_grad=True)
    for lib, t in ((torch, tx), (dynograph, dx)):
        ((t * t + 1.5) / (2 - t).exp()).sigmoid().sum().backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    y = dx * 2
    assert y.grad_fn.name() == "MulBackward0" and y.requires_grad
    with dynograph.no_grad():
        assert not (dx * 2).requires_grad


def test_default_dtype_still_decides_integer_division():
    a = dynograph.tensor([1, 2])
    assert (a / a).dtype is dynograph.float32
    dynograph.set_default_dtype(dynograph.float64)
    try:
        assert (a / a).dtype is dynograph.float64
    finally:
        dynograph.set_default_dtype(dynograph.float32)


@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 1, 4), (1,)])
def test_an_operand_expanded_from_one_element_keeps_torch_strides(torch, shape):
    """A row-major tensor with one of its shape broadcast from a single element (the gradient
    of a sum, expanded) gives torch's values and strides, size-1 dims included."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for lib, make in ((torch, torch.from_numpy), (dynograph, dynograph.from_numpy)):
        a = make(x.copy())
        g = lib.full((), 2.5).expand(*shape)
        results = [g * a, a * g, a - g, g / a]
        if lib is torch:
            want = [(to_numpy(r), r.stride()) for r in results]
        else:
            for r, (values, strides) in zip(results, want):
                np.testing.assert_array_equal(to_numpy(r), values)
                assert r.stride() == strides

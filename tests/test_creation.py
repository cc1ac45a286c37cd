"""Creation functions compared with PyTorch: tensor() from data, factories, ``*_like``,
``Tensor.new_*``, arange/linspace/logspace/eye, legacy constructors; values, dtypes,
shapes, strides, errors and warnings.

Most cases are expressions evaluated twice, with ``T`` bound to torch and to dynograph.
"""
import math
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, assert_same_error, dtype_name, error_text, to_numpy


def _env(T):
    return {"T": T, "np": np, "math": math, "x": T.ones(2, 3), "xl": T.ones(2, 3, dtype=T.int64),
            "xt": T.ones(2, 3).t(), "x4": T.ones(2, 3, 4, 5)}


def _run(T, expr):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = eval(expr, _env(T))
        except Exception as e:          # the error is the result under test
            result = e
    # PyTorch says this one once per process, so whether it shows depends on test order
    once = "Creating a tensor from a list of numpy.ndarrays"
    return result, [str(w.message) for w in caught
                    if w.category is UserWarning and not str(w.message).startswith(once)]


def check(torch, expr, strides=True, values=True):
    """``expr`` gives the same result (or error type and text) with dynograph as with torch."""
    ours, ours_warn = _run(dynograph, expr)
    theirs, their_warn = _run(torch, expr)
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, expr)
        return
    assert not isinstance(ours, Exception), f"{expr}: raised {ours!r}, torch gave {theirs!r}"
    if isinstance(theirs, torch.Tensor):
        if values:
            assert_same(ours, theirs)
        else:
            assert tuple(ours.shape) == tuple(theirs.shape)
            assert dtype_name(ours.dtype) == dtype_name(theirs.dtype)
        if strides and theirs.numel() > 0:
            assert ours.stride() == theirs.stride(), f"{expr}: strides {ours.stride()} vs {theirs.stride()}"
        assert ours.requires_grad == theirs.requires_grad
    else:
        assert ours == theirs or str(ours) == str(theirs).replace("torch", "dynograph")
    assert [error_text(w) for w in ours_warn] == [error_text(w) for w in their_warn]


def check_all(torch, exprs, **kw):
    for e in exprs:
        check(torch, e, **kw)


# ---------------------------------------------------------------- tensor()

TENSOR_OK = [
    "T.tensor(3)", "T.tensor(3.5)", "T.tensor(True)", "T.tensor(-2**63)", "T.tensor([])",
    "T.tensor([[]])", "T.tensor([[], []])", "T.tensor([1, 2.0])", "T.tensor([True, 1])",
    "T.tensor([[1, 2], [3, 4]])", "T.tensor(((1, 2), (3, 4)))", "T.tensor(range(3))",
    "T.tensor([[True], [False]])", "T.tensor(np.float64(1.5))", "T.tensor([np.float64(1.5)])",
    "T.tensor([np.int32(1)])", "T.tensor([np.float32(1), 2])", "T.tensor(np.bool_(True))",
    "T.tensor([np.bool_(True), 1.5])", "T.tensor(T.Size([2, 3]))",
    "T.tensor([T.tensor(1.), T.tensor(2.)])", "T.tensor([T.tensor(1), T.tensor(2.)])",
    "T.tensor([T.tensor(1, dtype=T.int32), T.tensor(2, dtype=T.int32)])",
    "T.tensor([T.ones(1), T.ones(1)])", "T.tensor([T.ones(1, 1), T.ones(1, 1)])",
    "T.tensor([1., 2], dtype=T.int32)", "T.tensor([1.7, -1.7], dtype=T.int64)",
    "T.tensor(3.5, dtype=T.float16)", "T.tensor([1, 2], dtype=T.bfloat16)",
    "T.tensor([-1], dtype=T.uint8)", "T.tensor([-255], dtype=T.uint8)", "T.tensor([1.5], dtype=T.uint8)",
    "T.tensor([1e10], dtype=T.int64)", "T.tensor([2**40], dtype=T.float16)",
    "T.tensor([2**70], dtype=T.float32)", "T.tensor([3], dtype=T.bool)", "T.tensor([0.5], dtype=T.bool)",
    "T.tensor(2**62, dtype=T.float32)", "T.tensor([float('inf')], dtype=T.float16)",
    "T.tensor(np.array([1.5, -1.5, 300]), dtype=T.uint8)", "T.tensor(np.array([300]), dtype=T.uint8)",
    "T.tensor(np.array([1, 2], dtype=np.float64), dtype=T.float32)",
    "T.tensor(np.ones((2, 3))[:, ::2])", "T.tensor(np.ones((2, 3)).T)",
    "T.tensor(np.ones((2, 3, 4)).transpose(1, 0, 2))", "T.tensor(np.arange(6.).reshape(2, 3)[:, 1:])",
    "T.tensor([np.array([1, 2]), np.array([3, 4])])", "T.tensor([np.ones(2), [1, 2]])",
    "T.tensor([[1, 2], [3, 4]], device='cpu')", "T.tensor([1.], device=T.device('cpu'))",
    "T.tensor([1, 2], dtype=T.float64, requires_grad=True)", "T.tensor(x)", "T.tensor(xt)",
    "T.tensor(x, dtype=T.int64)", "T.tensor(T.ones(2, requires_grad=True))",
    "T.tensor([[0.1, 0.2], [1e-8, 3e8]], dtype=T.float64)",
]

TENSOR_ERRORS = [
    "T.tensor([[1, 2], [3]])", "T.tensor([[1, 2], 3])", "T.tensor([1, [2]])", "T.tensor([1.0, [2]])",
    "T.tensor([True, [2]])", "T.tensor([[1], [2, 3]])", "T.tensor([[[1], [2]], [[3], [4, 5]]])",
    "T.tensor([[1, 2], [3, 4], [5]])", "T.tensor('a')", "T.tensor(['a'])", "T.tensor([1, 'a'])",
    "T.tensor([None])", "T.tensor(None)", "T.tensor([1, None])", "T.tensor({1, 2})",
    "T.tensor([T.ones(2), T.ones(2)])", "T.tensor([1, 2], requires_grad=True)",
    "T.tensor(2**63)", "T.tensor([2**63])", "T.tensor([2**70], dtype=T.int8)",
    "T.tensor([300], dtype=T.uint8)", "T.tensor([-256], dtype=T.uint8)", "T.tensor([128], dtype=T.int8)",
    "T.tensor([1e10], dtype=T.int32)", "T.tensor([1e20], dtype=T.int64)", "T.tensor([2**40], dtype=T.int32)",
    "T.tensor([float('inf')], dtype=T.int32)", "T.tensor(float('nan'), dtype=T.int64)",
    "T.tensor([-1.5], dtype=T.uint8)", "T.tensor(np.ones(3)[::-1])", "T.tensor(np.ones((2, 3))[:, ::-1])",
    "T.tensor([1, 2], out=x)",
]


@pytest.mark.parametrize("expr", TENSOR_OK)
def test_tensor_from_data(torch, expr):
    check(torch, expr)


@pytest.mark.parametrize("expr", TENSOR_ERRORS)
def test_tensor_errors(torch, expr):
    check(torch, expr)


def test_unsupported_numpy_types():
    for make in (dynograph.tensor, dynograph.from_numpy, dynograph.as_tensor):
        with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.str_. The only "
                                            "supported types are: float64, float32, float16"):
            make(np.array(["a"]))
    assert dynograph.tensor(np.ones(2, dtype=np.complex64)).dtype is dynograph.complex64


def test_tensor_copies_and_warns():
    a = np.arange(4.0)
    t = dynograph.tensor(a)
    a[0] = 10
    assert t[0].item() == 0 if hasattr(t, "__getitem__") else t._data[0] == 0
    src = dynograph.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        c = dynograph.tensor(src)
    assert not c.requires_grad and c._data is not src._data


def test_tensor_large_lists(torch):
    rng = np.random.RandomState(0)
    data = rng.randn(40, 30).tolist()
    assert_same(dynograph.tensor(data), torch.tensor(data))
    ints = rng.randint(-100, 100, (7, 5, 3)).tolist()
    assert_same(dynograph.tensor(ints, dtype=dynograph.int16), torch.tensor(ints, dtype=torch.int16))


def test_tensor_follows_default_dtype(torch):
    for dt in ("float64", "float16", "bfloat16"):
        prev = dynograph.get_default_dtype()
        dynograph.set_default_dtype(getattr(dynograph, dt))
        torch.set_default_dtype(getattr(torch, dt))
        try:
            check_all(torch, ["T.tensor([1.5])", "T.tensor(2.5)", "T.tensor([1, 2.5])", "T.tensor([])",
                              "T.arange(0.5)", "T.arange(3)", "T.zeros(2)", "T.full((2,), 1.5)",
                              "T.linspace(0, 1, 3)", "T.tensor([np.float32(1), 2.])", "T.Tensor([1])",
                              "T.empty(2).dtype", "T.eye(2)", "T.ones_like(T.tensor([1, 2]))"])
            assert dynograph.rand(2).dtype is getattr(dynograph, dt)
            assert dynograph.randn(2).dtype is getattr(dynograph, dt)
        finally:
            dynograph.set_default_dtype(prev)
            torch.set_default_dtype(torch.float32)


def test_set_default_dtype_errors(torch):
    check_all(torch, ["T.set_default_dtype(T.int64)", "T.set_default_dtype('float')",
                      "T.get_default_dtype()"])


# ---------------------------------------------------------------- as_tensor, from_numpy

AS_TENSOR = [
    "T.as_tensor([1, 2])", "T.as_tensor(np.ones(2), dtype=T.float32)", "T.as_tensor(3)",
    "T.as_tensor(np.float32(3))", "T.as_tensor(np.ones((2, 3))[:, ::2])",
    "T.as_tensor(np.ones((2, 3))[:, ::-1])", "T.as_tensor([1, 2], dtype=T.float64)",
    "T.as_tensor(x, T.int64)", "T.as_tensor(x, dtype=T.int64)", "T.from_numpy([1])",
    "T.from_numpy(np.ones(3)[::-1])", "T.from_numpy(np.float64(1.0))",
    "T.from_numpy(np.ones((3, 4), dtype=np.int16)[::2, 1:])", "T.asarray([1, 2])",
    "T.asarray(np.ones(2))", "T.asarray(x, dtype=T.float64)",
]


@pytest.mark.parametrize("expr", AS_TENSOR)
def test_as_tensor_from_numpy(torch, expr):
    check(torch, expr)


def test_memory_sharing():
    a = np.zeros(3, dtype=np.float32)
    for t in (dynograph.from_numpy(a), dynograph.as_tensor(a), dynograph.asarray(a)):
        a[1] = 7
        assert t._data[1] == 7
    x = dynograph.ones(3)
    assert dynograph.as_tensor(x) is x
    assert dynograph.as_tensor(x, dtype=dynograph.float64)._data is not x._data
    assert not np.shares_memory(dynograph.asarray(a, copy=True)._data, a)
    with pytest.raises(ValueError):
        dynograph.asarray(a, dtype=dynograph.float64, copy=False)


# ---------------------------------------------------------------- zeros / ones / full / empty

FACTORIES = [
    "T.zeros(())", "T.zeros([])", "T.zeros(2, 3)", "T.zeros((2, 3))", "T.zeros([2, 3])",
    "T.zeros(T.Size([2, 3]))", "T.zeros(size=(2, 3))", "T.zeros(T.tensor(3))", "T.zeros(np.int64(3))",
    "T.zeros(2, dtype=T.int32)", "T.zeros(2, dtype=T.float64, requires_grad=True)",
    "T.zeros(2, 0, 3)", "T.ones(2, dtype=T.bool)", "T.ones(3, 1)", "T.ones(2, dtype=T.bfloat16)",
    "T.ones(2, dtype=T.float16)", "T.ones(4, dtype=T.uint8)", "T.full((2,), 1)", "T.full((2,), True)",
    "T.full((2,), 1.5)", "T.full([2, 3], 2.)", "T.full((2,), T.tensor(1.5))", "T.full((2,), T.tensor(2))",
    "T.full((2,), 1.5, dtype=T.int64)", "T.full(size=(2,), fill_value=3)", "T.full((), 3)",
    "T.full((2,), -1, dtype=T.uint8)", "T.full((2,), float('nan'))", "T.full((2,), float('-inf'))",
    "T.full((2,), float('nan'), dtype=T.bool)", "T.full((2, 2), np.float32(2.5))",
    "T.full((2,), 1e300, dtype=T.bool)", "T.full((2,), 7, dtype=T.float16, requires_grad=True)",
]

FACTORIES += [
    "T.scalar_tensor(3)", "T.scalar_tensor(True)", "T.scalar_tensor(2.5, dtype=T.int64)",
    "T.scalar_tensor(T.tensor(2.))", "T.scalar_tensor(1.5, requires_grad=True)",
    "T.zeros(2, dtype=float)", "T.ones(2, dtype=int)", "T.tensor([1], dtype=bool)",
    "x.new_zeros(2, dtype=float)",
]

FACTORY_ERRORS = [
    "T.scalar_tensor(1e300)", "T.scalar_tensor('a')", "T.scalar_tensor(300, dtype=T.uint8)",
    "T.zeros()", "T.zeros(size=2)", "T.zeros(2, (3,))", "T.zeros((2,), 3)", "T.zeros(2.5)",
    "T.zeros((2.5,))", "T.zeros(2, 3.0)", "T.zeros(-1)", "T.zeros(2, -3)", "T.zeros('a')",
    "T.zeros(None)", "T.zeros(2, dtype=T.int64, requires_grad=True)", "T.ones(-1)", "T.empty(-1)",
    "T.ones(2.5)", "T.empty(2, 3.0)", "T.full((-1,), 2.)", "T.full(3, 1.)", "T.full((2,), T.ones(2))",
    "T.full((2,), 'a')", "T.full((2,), None)", "T.full((2,), 300, dtype=T.uint8)",
    "T.full((2,), 2**70, dtype=T.int64)", "T.full((2,), 1e300, dtype=T.int8)",
    "T.full((2,), float('nan'), dtype=T.int32)", "T.full((2,), 1e300, dtype=T.float16)",
    "T.full((2,), 1e300, dtype=T.bfloat16)", "T.full((2,), 1e300)", "T.full((2,), -129, dtype=T.int8)",
    "T.empty((2, 3, 4), memory_format=T.channels_last)",
]


@pytest.mark.parametrize("expr", FACTORIES)
def test_factories(torch, expr):
    check(torch, expr)


@pytest.mark.parametrize("expr", FACTORY_ERRORS)
def test_factory_errors(torch, expr):
    check(torch, expr)


def test_empty(torch):
    check_all(torch, ["T.empty(2, 3)", "T.empty((2, 3), dtype=T.int16)", "T.empty(0)",
                      "T.empty(2, 3, 4, 5, memory_format=T.channels_last)",
                      "T.empty(2, memory_format=T.contiguous_format)",
                      "T.empty_strided((2, 3), (1, 2))", "T.empty_strided((2, 3), (3, 1), dtype=T.int64)",
                      "x.new_empty_strided((2, 2), (1, 2))"], values=False)


FACTORY_OUT = [
    "T.zeros(2, 3, out=T.empty(5))", "T.zeros(2, 3, out=T.empty(5, dtype=T.int64))",
    "T.zeros(2, 3, out=T.empty(5, dtype=T.int64), dtype=T.float32)",
    "T.ones(2, 3, out=T.empty(5, dtype=T.int64), dtype=T.int64)",
    "T.full((2,), 2.5, out=T.empty(0, dtype=T.int64))",
    "T.eye(2, out=T.empty(0, dtype=T.int64))", "T.eye(3, out=T.empty(0, dtype=T.int32))",
    "T.arange(3, out=T.empty(0))", "T.linspace(0, 1, 3, out=T.empty(0))",
    "T.arange(3, out=T.empty(0), dtype=T.int64)", "T.logspace(0, 1, 3, out=T.empty(2, dtype=T.float64))",
]


@pytest.mark.parametrize("expr", FACTORY_OUT)
def test_factory_out(torch, expr):
    check(torch, expr)


def test_out_is_written_in_place():
    out = dynograph.empty(5, dtype=dynograph.int64)
    r = dynograph.ones(2, 3, out=out)
    assert r is out and out.shape == (2, 3) and out._data.sum() == 6


# ---------------------------------------------------------------- *_like and new_*

LIKE = [
    "T.zeros_like(x)", "T.zeros_like(xt)", "T.zeros_like(x[:, ::2])",
    "T.zeros_like(xt, memory_format=T.contiguous_format)",
    "T.zeros_like(x.expand(2, 2, 3))", "T.zeros_like(T.ones(2, 1, 3).permute(2, 1, 0))",
    "T.ones_like(x, dtype=T.int64)", "T.ones_like(xl)", "T.full_like(x, 7)",
    "T.full_like(x, 7.5, dtype=T.int32)",
    "T.full_like(xl, 2.7)", "T.full_like(xl, True)", "T.zeros_like(x4, memory_format=T.channels_last)",
    "T.zeros_like([1])", "T.zeros_like(x, requires_grad=True)", "T.ones_like(T.ones(2, requires_grad=True))",
    "T.full_like(T.zeros(2, dtype=T.uint8), 1e300)", "T.full_like(x, 'a')",
    "T.ones_like(T.ones(2, 3, 4), memory_format=T.channels_last)",
    "T.ones_like(T.tensor(1.5))", "T.empty_like(xt).stride()", "T.empty_like(x, dtype=T.int8).dtype",
]

NEW = [
    "x.new_tensor([1, 2])", "x.new_tensor([1, 2], dtype=T.int64)", "xl.new_tensor([1.5, 2])",
    "x.new_tensor(T.ones(2))", "x.new_tensor([1, 2], requires_grad=True)", "x.new_empty(2, 3).shape",
    "x.new_empty((2, 3)).dtype", "x.new_zeros(2, 3)", "x.new_zeros((2,))", "x.new_zeros([2])",
    "x.new_zeros(size=(2,))", "x.new_ones(2, dtype=T.int64)", "x.new_full((2,), 3)", "x.new_full(2, 3)",
    "xl.new_full((2,), 3.5)", "x.new_ones(2, requires_grad=True)", "x.new(2, 3).shape", "x.new([1, 2])",
    "x.new()", "xl.new([1.5])", "x.new_zeros(-1)", "x.new_empty(-1)", "x.new_full((-1,), 1)",
    "xl.new_full((2,), 2**70)", "x.new_ones(2.5)",
]


@pytest.mark.parametrize("expr", LIKE)
def test_like(torch, expr):
    check(torch, expr)


@pytest.mark.parametrize("expr", NEW)
def test_new(torch, expr):
    check(torch, expr)


# ---------------------------------------------------------------- ranges and eye

RANGES = [
    "T.arange(5)", "T.arange(5.)", "T.arange(0.5)", "T.arange(1, 4)", "T.arange(1, 4, 0.5)",
    "T.arange(1, 2.5)",
    "T.arange(0, 10, 3)", "T.arange(10, 0, -3)", "T.arange(0, 1, 0.1)", "T.arange(0.5, 5, dtype=T.int64)",
    "T.arange(0, 5.5, dtype=T.int64)", "T.arange(-0.5, 5, 1.5, dtype=T.int64)",
    "T.arange(0, 5, 1.5, dtype=T.int32)",
    "T.arange(-0.5, 5, 1.5, dtype=T.int32)", "T.arange(5, dtype=T.float16)", "T.arange(300, dtype=T.uint8)",
    "T.arange(20, dtype=T.bfloat16)", "T.arange(-3, 3, dtype=T.int8)", "T.arange(T.tensor(5))",
    "T.arange(T.tensor(5.))",
    "T.arange(True)", "T.arange(start=1, end=3)", "T.arange(end=3)", "T.arange(1, end=3)",
    "T.arange(0, 5, step=2)",
    "T.arange(5., requires_grad=True)", "T.arange(0, 3, dtype=T.float64)",
    "T.arange(1, 2, 0.3, dtype=T.float32)",
    "T.arange(0, 1, 1/3)", "T.arange(-5, 5, 0.7)", "T.arange(0, 0)",
    "T.arange(-1.5, 2.25, 0.25, dtype=T.float64)",
    "T.arange(10**6, 10**6 + 5)", "T.arange(0, 1000, 7.3)", "T.arange(np.int64(4))",
    "T.linspace(0, 1, 5)", "T.linspace(0, 1, 1)", "T.linspace(0, 1, 0)",
    "T.linspace(0, 10, 4, dtype=T.int64)",
    "T.linspace(-1, 1, 7, dtype=T.int32)", "T.linspace(0, 1, steps=3)",
    "T.linspace(T.tensor(0.), T.tensor(1.), 3)",
    "T.linspace(0, 1, 5, dtype=T.float64)", "T.linspace(3, 3, 3)", "T.linspace(1, 0, 4, dtype=T.uint8)",
    "T.linspace(-2.3, 7.1, 11)", "T.linspace(-2.3, 7.1, 101, dtype=T.float64)", "T.linspace(10, -10, 8)",
    "T.linspace(0, 1, 9, dtype=T.float16)", "T.linspace(0, 1, 9, dtype=T.bfloat16)",
    "T.linspace(0.5, 9.5, 5, dtype=T.int64)",
    "T.logspace(0, 2, 3)", "T.logspace(0, 2, 3, base=2)", "T.logspace(0, 2, 3, 2)",
    "T.logspace(0, 3, 4, dtype=T.int64)",
    "T.logspace(0, 1, 1)", "T.logspace(-1, 1, 5, dtype=T.float64)",
    "T.logspace(0, 2, 3, base=2.5, dtype=T.int64)",
    "T.logspace(0.5, 2.5, 3, dtype=T.int64)", "T.logspace(-2, 2, 9)",
    "T.eye(3)", "T.eye(2, 3)", "T.eye(3, dtype=T.int64)", "T.eye(0)", "T.eye(2, m=4)", "T.eye(n=2)",
    "T.eye(3, 1, dtype=T.bool)", "T.eye(2, requires_grad=True)",
]

RANGE_ERRORS = [
    "T.arange(0, -1)", "T.arange(5, 0)", "T.arange(0, 5, -1)", "T.arange(0, 5, 0)",
    "T.arange(0, float('inf'))",
    "T.arange(0, float('nan'))", "T.arange(float('inf'), 1.0)", "T.arange(0.5, float('inf'))",
    "T.arange(0, 1e30)",
    "T.arange(0, 1e19)", "T.arange(0, 2**62)", "T.arange(0, 5, 0.5, dtype=T.int64)",
    "T.arange(5, dtype=T.bool)",
    "T.arange(T.tensor([5]))", "T.arange(5, requires_grad=True)", "T.arange('a')", "T.arange()",
    "T.linspace(0, 1, -1)", "T.linspace(0, 1)", "T.linspace(0, 1, 5.0)", "T.linspace(0, 1, 5, dtype=T.bool)",
    "T.logspace(0, 1, -2)", "T.eye(-1)", "T.eye(2, -1)", "T.eye(2.5)",
]


@pytest.mark.parametrize("expr", RANGES)
def test_ranges(torch, expr):
    check(torch, expr)


@pytest.mark.parametrize("expr", RANGE_ERRORS)
def test_range_errors(torch, expr):
    check(torch, expr)


def test_linspace_matches_float32_rounding(torch):
    for start, end, steps in [(-2.3, 7.1, 11), (0, 1, 1000), (1e-3, 3.7, 257), (5, -5, 64)]:
        ours = dynograph.linspace(start, end, steps)
        theirs = torch.linspace(start, end, steps)
        tol = 4e-7 * max(abs(start), abs(end))
        np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=0, atol=tol)


# ---------------------------------------------------------------- legacy constructors

LEGACY = [
    "T.Tensor((2, 3))", "T.Tensor([[1, 2], [3, 4]])", "T.Tensor()", "T.Tensor(np.ones(2))",
    "T.FloatTensor([True, False])", "T.LongTensor([1.7, -1.7])", "T.ByteTensor([1, 2])",
    "T.DoubleTensor([1, 2])", "T.IntTensor([[1], [2]])", "T.BoolTensor([0, 2])", "T.ShortTensor([3])",
    "T.CharTensor([-3])", "T.HalfTensor([1.5])", "T.BFloat16Tensor([1.5])", "T.LongTensor([])",
    "T.FloatTensor(T.ones(3))", "T.Tensor(T.ones(2, dtype=T.float64))",
    "T.Tensor(2.5)", "T.Tensor(2, 3.0)", "T.Tensor([[1, 2], [3]])", "T.Tensor(-1)",
    "T.FloatTensor([1], dtype=T.float32)", "T.LongTensor(2, 3).shape", "T.FloatTensor(T.Size([2, 3])).shape",
    "T.FloatTensor(T.Size([])).shape", "T.Tensor(2, device='cpu').shape", "T.FloatTensor(3, 4).dtype",
    "T.FloatTensor.dtype", "T.LongTensor.dtype", "T.HalfTensor.is_cuda",
    "isinstance(T.ones(2), T.FloatTensor)", "isinstance(T.ones(2), T.DoubleTensor)",
    "isinstance(T.ones(2, dtype=T.int64), T.LongTensor)", "isinstance(T.ones(2).bool(), T.BoolTensor)",
    "isinstance(3, T.FloatTensor)", "isinstance(T.FloatTensor(2), T.Tensor)",
]


@pytest.mark.parametrize("expr", LEGACY)
def test_legacy_constructors(torch, expr):
    check(torch, expr, values="(2, 3)" not in expr or "Tensor((2, 3))" in expr)


def test_legacy_aliases_and_names():
    x = dynograph.ones(3)
    alias = dynograph.Tensor(x)
    alias._data[0] = 5
    assert x._data[0] == 5
    assert repr(dynograph.FloatTensor) == "<class 'dynograph.FloatTensor'>"
    assert dynograph.FloatTensor(3, 4).shape == (3, 4)
    assert type(dynograph.FloatTensor(2)) is dynograph.Tensor
    with pytest.raises(TypeError, match="expected dynograph.float32"):
        dynograph.FloatTensor(dynograph.ones(2, dtype=dynograph.float64))


# ---------------------------------------------------------------- devices

CUDA_CALLS = [
    lambda: dynograph.zeros(2, device="cuda"), lambda: dynograph.tensor([1.], device="cuda:0"),
    lambda: dynograph.ones(2, device=dynograph.device("cuda")), lambda: dynograph.arange(3, device="cuda"),
    lambda: dynograph.full((2,), 1., device="cuda"), lambda: dynograph.eye(2, device="cuda"),
    lambda: dynograph.zeros_like(dynograph.ones(2), device="cuda"),
    lambda: dynograph.Tensor(2, device="cuda"),
    lambda: dynograph.as_tensor([1], device="cuda"), lambda: dynograph.linspace(0, 1, 2, device="cuda"),
    lambda: dynograph.ones(2).new_zeros(2, device="cuda"), lambda: dynograph.empty(1, device=0),
]


@pytest.mark.parametrize("make", CUDA_CALLS)
def test_cuda_device_raises_one_clear_error(make):
    with pytest.raises(RuntimeError, match="no CUDA device is available"):
        make()


def test_cpu_devices_accepted():
    for d in (None, "cpu", "cpu:0", dynograph.device("cpu")):
        assert dynograph.zeros(2, device=d).device == dynograph.device("cpu")
        assert dynograph.tensor([1], device=d).device.type == "cpu"


def test_creation_ops_are_primitives():
    from dynograph.compiler.ops import REGISTRY
    for name in ("full", "empty", "arange", "linspace", "logspace", "eye"):
        assert REGISTRY[name].kind == "creation"


def test_impossible_sizes(torch):
    # sizes whose byte count overflows are refused before any allocation
    check_all(torch, ["T.zeros(2**62)", "T.empty(2**61, 4)", "T.arange(0, 2**62)"])

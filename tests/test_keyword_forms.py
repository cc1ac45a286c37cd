"""Every creation and random function called with the keyword spellings PyTorch documents
(size=, out=, dtype=, generator=, requires_grad=, low/high, mean/std ...), compared with torch:
values where they are deterministic, otherwise shapes, dtypes and requires_grad; errors by type
and text (the "expected one of" list cut off)."""
import numpy as np
import pytest

import dynograph
from conftest import assert_same_error, dtype_name, eval_expr, to_numpy


def _env(T):
    return {"T": T, "np": np, "x": T.ones(2, 3), "xi": T.ones(2, 3, dtype=T.int64),
            "p": T.full((2, 3), 0.5), "w": T.tensor([[0.2, 0.8], [0.5, 0.5]]),
            "o": T.empty(0), "ol": T.empty(0, dtype=T.int64), "g": T.Generator().manual_seed(1),
            "a": np.arange(6.0).reshape(2, 3)}


DETERMINISTIC = [
    # zeros / ones / empty / full
    "T.zeros(2, 3)", "T.zeros((2, 3))", "T.zeros([2, 3])", "T.zeros(size=(2, 3))", "T.zeros(size=[2])",
    "T.zeros(2, out=o)", "T.zeros(2, dtype=T.int32)", "T.zeros(2, requires_grad=True)",
    "T.zeros(2, device='cpu')", "T.zeros(2, layout=T.strided)", "T.zeros(2, size=(2,))", "T.zeros()",
    "T.zeros(size=2)", "T.zeros(2, pin_memory=False)", "T.zeros(2, names=None)",
    "T.ones(size=(2, 3), dtype=T.float64)", "T.ones(2, 3, out=o)", "T.ones(size=(1,), requires_grad=True)",
    "T.empty(size=(2, 3)).shape", "T.empty(2, 3, memory_format=T.contiguous_format).shape",
    "T.empty(size=(2,), dtype=T.int64, requires_grad=False).dtype", "T.empty(2, out=o).shape",
    "T.full((2, 3), 7)", "T.full(size=(2, 3), fill_value=1.5)", "T.full((2,), fill_value=True)",
    "T.full([2], 3, dtype=T.float32)", "T.full((2,), 1.0, out=o)", "T.full((2,), 1.0, requires_grad=True)",
    "T.full(fill_value=2, size=(1,))", "T.full(2, 3)",
    # arange / range / linspace / logspace / eye
    "T.arange(5)", "T.arange(1, 5)", "T.arange(1, 5, 2)", "T.arange(end=5)", "T.arange(start=1, end=5)",
    "T.arange(start=1, end=5, step=0.5)", "T.arange(0, 1, step=0.25)", "T.arange(5, dtype=T.float64)",
    "T.arange(5, out=ol)", "T.arange(5.0, requires_grad=True)", "T.arange(1, end=4)",
    "T.linspace(0, 1, 5)", "T.linspace(start=0, end=1, steps=5)", "T.linspace(0, 1, steps=3, dtype=T.float64)",
    "T.linspace(0, 1, 3, out=o)", "T.linspace(0, 1, 3, requires_grad=True)", "T.linspace(0, 1)",
    "T.logspace(0, 2, 3)", "T.logspace(start=0, end=2, steps=3, base=2)", "T.logspace(0, 2, 3, 2.0)",
    "T.logspace(0, 2, steps=3, out=o)", "T.logspace(0, 2, 3, dtype=T.float64)",
    "T.eye(3)", "T.eye(2, 3)", "T.eye(n=2, m=3)", "T.eye(3, dtype=T.int64)", "T.eye(2, out=o)",
    "T.eye(2, requires_grad=True)", "T.eye(n=2)",
    # *_like and new_*
    "T.zeros_like(x)", "T.zeros_like(input=x)", "T.zeros_like(x, dtype=T.int64)",
    "T.zeros_like(x, requires_grad=True)", "T.zeros_like(x, memory_format=T.preserve_format)",
    "T.ones_like(input=xi)", "T.ones_like(x, device='cpu', layout=T.strided)",
    "T.empty_like(input=x).shape", "T.empty_like(x, dtype=T.float64).dtype",
    "T.full_like(x, 7)", "T.full_like(input=x, fill_value=2.5)", "T.full_like(xi, 2.5)",
    "T.full_like(x, 1, dtype=T.int32, requires_grad=False)",
    "x.new_zeros((2,))", "x.new_zeros(2, 3)", "x.new_zeros(size=(2,))", "x.new_zeros((2,), dtype=T.int64)",
    "x.new_zeros((2,), requires_grad=True)", "x.new_ones(size=(1, 2))", "x.new_ones(2, dtype=T.bool)",
    "x.new_empty(size=(2,)).shape", "x.new_empty((2,), dtype=T.int32).dtype",
    "x.new_full((2,), 3)", "x.new_full(size=(2,), fill_value=3)", "x.new_full((2,), 3, dtype=T.int64)",
    "x.new_full((2,), fill_value=1.5, requires_grad=True)",
    "x.new_tensor([1, 2])", "x.new_tensor(data=[1, 2])", "x.new_tensor([1, 2], dtype=T.int32)",
    "x.new_tensor([1.0], requires_grad=True)",
    # tensor / as_tensor / from_numpy
    "T.tensor([1, 2])", "T.tensor(data=[1, 2])", "T.tensor([1, 2], dtype=T.float64)",
    "T.tensor([1.0], requires_grad=True)", "T.tensor([1.0], device='cpu')", "T.tensor(3.5)",
    "T.tensor([1], pin_memory=False)", "T.tensor([1], T.float32)",
    "T.as_tensor([1, 2])", "T.as_tensor(data=[1, 2])", "T.as_tensor([1, 2], T.float64)",
    "T.as_tensor([1, 2], dtype=T.float64)", "T.as_tensor(a, device='cpu')", "T.as_tensor(a, None, 'cpu')",
    "T.from_numpy(a)", "T.from_numpy(ndarray=a)", "T.from_numpy([1])",
    "T.scalar_tensor(2)", "T.scalar_tensor(s=2, dtype=T.int64)",
]

RANDOM = [
    "T.rand(2, 3)", "T.rand((2, 3))", "T.rand(size=(2, 3))", "T.rand(2, generator=g)",
    "T.rand(2, out=o)", "T.rand(2, dtype=T.float64)", "T.rand(2, requires_grad=True)",
    "T.rand(size=(2,), generator=g, dtype=T.float16)", "T.rand(2, device='cpu', pin_memory=False)",
    "T.randn(2, 3)", "T.randn(size=(2, 3))", "T.randn(2, generator=g, out=o)", "T.randn(2, dtype=T.float64)",
    "T.randn(size=[2], requires_grad=True)",
    "T.randint(9, (1,))", "T.randint(0, 9, (1,))", "T.randint(0, 9, size=(1,))", "T.randint(9, size=(2,))",
    "T.randint(low=0, high=9, size=(1,))", "T.randint(high=9, size=(1,))", "T.randint(2, high=9, size=(3,))",
    "T.randint(0, high=9, size=(3,))", "T.randint(0, 9, (2,), generator=g)", "T.randint(0, 9, (2,), out=ol)",
    "T.randint(0, 9, (2,), dtype=T.int32)", "T.randint(0, 9, size=[2], dtype=T.float32)",
    "T.randint(0, 9, (2,), device='cpu')", "T.randint(9, (2,), size=(3,))", "T.randint(0, 9, 3)",
    "T.randint(0, 9)", "T.randint(2, 9, (3,), low=1)", "T.randint(low=2, size=(3,))",
    "T.randint(9, size=2)", "T.randint(9, (2,), generator=g, requires_grad=False)",
    "T.randint(low=2, high=9, size=(2,), generator=g)",
    "T.randperm(5)", "T.randperm(n=5)", "T.randperm(5, generator=g)", "T.randperm(5, out=ol)",
    "T.randperm(5, dtype=T.int32)", "T.randperm(5, dtype=T.float64, requires_grad=True)",
    "T.randperm(5, device='cpu')",
    "T.normal(x, x)", "T.normal(mean=x, std=x)", "T.normal(x, 2.0)", "T.normal(mean=x, std=2.0)",
    "T.normal(mean=x)", "T.normal(x)", "T.normal(0.0, x)", "T.normal(mean=0.0, std=x)",
    "T.normal(0.0, 1.0, (2, 3))", "T.normal(0.0, 1.0, size=(2, 3))", "T.normal(mean=0, std=1, size=(2,))",
    "T.normal(2, 3, size=(1, 4), generator=g)", "T.normal(0, 1, (2,), out=o)", "T.normal(x, x, out=o)",
    "T.normal(0, 1, (2,), dtype=T.float64)", "T.normal(0, 1, (2,), requires_grad=True)",
    "T.normal(x, x, generator=g)", "T.normal(0.0, 1.0)",
    "T.bernoulli(p)", "T.bernoulli(input=p)", "T.bernoulli(p, generator=g)", "T.bernoulli(p, out=o)",
    "T.bernoulli(p, 0.3)", "T.bernoulli(p, p=0.3)", "T.bernoulli(p, p=0.3, generator=g)",
    "T.multinomial(w, 1)", "T.multinomial(input=w, num_samples=2)", "T.multinomial(w, 2, True)",
    "T.multinomial(w, 4, replacement=True, generator=g)", "T.multinomial(w, 1, out=ol)", "T.multinomial(w, 3)",
    "T.poisson(p)", "T.poisson(input=p)", "T.poisson(p, g)", "T.poisson(p, generator=g)",
    "T.rand_like(x)", "T.rand_like(input=x)", "T.rand_like(x, dtype=T.float64)",
    "T.rand_like(x, requires_grad=True)", "T.rand_like(x, generator=g)", "T.rand_like(x, memory_format=T.preserve_format)",
    "T.randn_like(input=x, dtype=T.float16)", "T.randn_like(x, generator=g)",
    "T.randint_like(x, 5)", "T.randint_like(x, 2, 5)", "T.randint_like(x, high=5)",
    "T.randint_like(x, low=2, high=5)", "T.randint_like(input=x, high=5)", "T.randint_like(x, 2, high=5)",
    "T.randint_like(x, 5, dtype=T.int64)", "T.randint_like(xi, 5, generator=g)",
    "x.clone().uniform_()", "x.clone().uniform_(0, 2)", "x.clone().uniform_(generator=g)",
    "x.clone().uniform_(to=2)", "x.clone().uniform_(-1, to=2)", "x.clone().uniform_(**{'from': -1, 'to': 2})",
    "x.clone().normal_()", "x.clone().normal_(1, 2)", "x.clone().normal_(mean=1, std=2, generator=g)",
    "x.clone().normal_(std=2)",
    "x.clone().random_()", "x.clone().random_(5)", "x.clone().random_(1, 5)", "x.clone().random_(to=5)",
    "x.clone().random_(1, to=5)", "x.clone().random_(5, generator=g)", "x.clone().random_(**{'from': 1, 'to': 5})",
    "x.clone().random_(1, 5, generator=g)",
    "x.clone().exponential_()", "x.clone().exponential_(lambd=2)", "x.clone().exponential_(2, generator=g)",
    "x.clone().geometric_(0.5)", "x.clone().geometric_(p=0.5, generator=g)",
    "x.clone().log_normal_()", "x.clone().log_normal_(mean=0, std=1, generator=g)",
    "x.clone().cauchy_()", "x.clone().cauchy_(median=0, sigma=1, generator=g)",
    "x.clone().bernoulli_()", "x.clone().bernoulli_(0.3)", "x.clone().bernoulli_(p=0.3)",
    "x.clone().bernoulli_(p, generator=g)", "x.clone().bernoulli_(p=p)",
    "p.bernoulli()", "p.bernoulli(generator=g)", "p.bernoulli(0.3)", "p.bernoulli(p=0.3)",
    "w.multinomial(2)", "w.multinomial(num_samples=2, replacement=True)", "w.multinomial(2, generator=g)",
]


# torch's own argument parser words these errors differently from Python's: the type is compared
ERROR_TYPE_ONLY = ["T.from_numpy(ndarray=a)"]


def check(torch, expr, values):
    ours, theirs = eval_expr(expr, _env(dynograph)), eval_expr(expr, _env(torch))
    if isinstance(theirs, Exception):
        if expr in ERROR_TYPE_ONLY:
            assert type(ours).__name__ == type(theirs).__name__, f"{expr}: {ours!r} vs {theirs!r}"
        else:
            assert_same_error(ours, theirs, expr)
        return
    assert not isinstance(ours, Exception), f"{expr}: raised {ours!r}"
    if not isinstance(theirs, torch.Tensor):
        assert ours == theirs or str(ours) == str(theirs).replace("torch", "dynograph"), expr
        return
    assert isinstance(ours, dynograph.Tensor), f"{expr}: got {ours!r}"
    assert (tuple(ours.shape), dtype_name(ours.dtype), ours.requires_grad) == \
        (tuple(theirs.shape), dtype_name(theirs.dtype), theirs.requires_grad), expr
    if values:
        np.testing.assert_allclose(to_numpy(ours).astype(float), to_numpy(theirs).astype(float),
                                   rtol=1e-6, err_msg=expr)


@pytest.mark.parametrize("expr", DETERMINISTIC)
def test_deterministic_keyword_forms(torch, expr):
    check(torch, expr, values=True)


@pytest.mark.parametrize("expr", RANDOM)
def test_random_keyword_forms(torch, expr):
    check(torch, expr, values=False)


def test_randint_keyword_size_draws_in_range():
    # the tutorials' spelling: randint(low, high, size=...)
    sample = dynograph.randint(3, 9, size=(1000,))
    assert sample.min().item() >= 3 and sample.max().item() < 9

"""Autograd basics with exact values: the PyTorch tutorial examples, grad_fn names and the
graph's structure, errors, and autograd.grad, each compared with PyTorch."""
import numpy as np
import pytest

import dynograph
from conftest import assert_same, from_torch


def _both(torch, fn):
    """Run ``fn(module)`` for torch and dynograph."""
    return fn(torch), fn(dynograph)


# ---------------------------------------------------------------- the tutorial


def test_tutorial_mean_of_squares_gives_4_5():
    x = dynograph.ones(2, 2, requires_grad=True)
    y = x + 2
    assert y.grad_fn.name() == "AddBackward0"
    z = y * y * 3
    out = z.mean()
    assert z.grad_fn.name() == "MulBackward0"
    assert out.grad_fn.name() == "MeanBackward0"
    assert out.item() == 27.0
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 4.5, np.float32))
    assert x.grad.dtype is dynograph.float32 and x.grad.grad_fn is None


def test_tutorial_requires_grad_flag():
    a = dynograph.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = (a * 3) / (a - 1)
    assert a.requires_grad is False
    a.requires_grad_(True)
    assert a.requires_grad is True
    b = (a * a).sum()
    assert b.grad_fn.name() == "SumBackward0"


def test_tutorial_vector_jacobian_product(torch):
    results = []
    for m in (torch, dynograph):
        x = m.tensor([0.25, -0.5, 1.0], requires_grad=True)
        y = x * 2
        doublings = 1
        while y.data.abs().max() < 1000:
            y = y * 2
            doublings += 1
        v = m.tensor([0.1, 1.0, 0.0001])
        y.backward(v)
        results.append((doublings, x.grad))
    assert results[0][0] == results[1][0]
    assert_same(results[1][1], results[0][1])
    np.testing.assert_allclose(results[1][1].numpy(), np.array([0.1, 1.0, 0.0001]) * 2 ** 10,
                               rtol=1e-6)


def test_no_grad_and_detach():
    x = dynograph.ones(3, requires_grad=True)
    assert (x ** 2).requires_grad
    with dynograph.no_grad():
        assert not (x ** 2).requires_grad
    y = x.detach()
    assert not y.requires_grad
    assert dynograph.equal(x.eq(y), dynograph.ones(3, dtype=dynograph.bool))


# ---------------------------------------------------------------- grad_fn and the graph


def _structure(fn, depth=4, keep_none=True):
    """The graph below ``fn`` as nested (name, children) tuples, children as (node, output_nr).

    PyTorch leaves out of ``next_functions`` the inputs its op signature takes as Python
    numbers (``x ** 2``) or never differentiates (``where``'s condition); dynograph lists
    them as ``(None, 0)``, so graphs with such ops are compared without the None edges."""
    if fn is None or depth == 0:
        return fn and fn.name()
    return (fn.name(), tuple((_structure(f, depth - 1, keep_none), nr)
                             for f, nr in fn.next_functions if keep_none or f is not None))


GRAPHS = [
    lambda m, x, y: (x + 2) * (x + 2) * 3,
    lambda m, x, y: (x * y).exp().sum(),
    lambda m, x, y: m.where(x > y, x.sin(), y.cos()) / 2,
    lambda m, x, y: (x - y).abs().mean(),
    lambda m, x, y: m.maximum(x, y).sigmoid() + m.minimum(x, 1.0 + y),
    lambda m, x, y: (x / y - 1).tanh() ** 2,
    lambda m, x, y: m.clamp(x, -0.5, 0.5).sqrt().log(),
    lambda m, x, y: x.neg().relu() * y.detach(),
    lambda m, x, y: m.lerp(x, y, 0.25).erf(),
    lambda m, x, y: x.masked_fill(x > 0.3, 0.0) + y.reciprocal(),
]


EXACT = {0, 1, 3}         # graphs of ops whose operands torch lists exactly as we do


@pytest.mark.parametrize("k", range(len(GRAPHS)))
def test_graph_structure_matches_torch(torch, k):
    theirs, ours = [], []
    for m, out in ((torch, theirs), (dynograph, ours)):
        x = m.tensor([0.5, 0.2, 0.9], requires_grad=True)
        y = m.tensor([0.3, 0.7, 0.1], requires_grad=True)
        r = GRAPHS[k](m, x, y)
        out.append(_structure(r.grad_fn, keep_none=k in EXACT))
    assert ours == theirs


def test_next_functions_lists_constants_as_none_edges(torch):
    for m in (torch, dynograph):
        x = m.ones(2, requires_grad=True)
        z = (x + 2) * 3
        (mul_prev, nr), (const, const_nr) = z.grad_fn.next_functions
        assert mul_prev.name() == "AddBackward0" and nr == 0
        assert const is None and const_nr == 0
        acc, _ = mul_prev.next_functions[0]
        assert acc.name() == "torch::autograd::AccumulateGrad"
        assert acc.variable is x


def test_grad_fn_names(torch):
    ops = {
        "add": lambda m, x: x + x, "sub": lambda m, x: x - 1, "rsub": lambda m, x: 1 - x,
        "mul": lambda m, x: x * 2, "div": lambda m, x: x / 2, "rdiv": lambda m, x: 2 / x,
        "neg": lambda m, x: -x, "pow": lambda m, x: x ** 3, "rpow": lambda m, x: 3 ** x,
        "exp": lambda m, x: x.exp(), "log1p": lambda m, x: x.log1p(),
        "sigmoid": lambda m, x: x.sigmoid(), "relu": lambda m, x: x.relu(),
        "clamp": lambda m, x: x.clamp(0, 1), "where": lambda m, x: m.where(x > 0, x, 0.0),
        "mean": lambda m, x: x.mean(), "sum": lambda m, x: x.sum(),
        "abs": lambda m, x: x.abs(), "atan2": lambda m, x: m.atan2(x, x),
    }
    for name, fn in ops.items():
        t, d = _both(torch, lambda m: fn(m, m.tensor([0.5, 1.5], requires_grad=True)))
        assert d.grad_fn.name() == t.grad_fn.name(), name
        assert repr(d.grad_fn).startswith(f"<{t.grad_fn.name()} object at 0x")


def test_leaf_and_non_leaf():
    x = dynograph.ones(2, requires_grad=True)
    y = x * 2
    assert x.is_leaf and not y.is_leaf
    assert x.grad_fn is None
    assert dynograph.ones(2).is_leaf


def test_integer_results_do_not_require_grad(torch):
    for m in (torch, dynograph):
        x = m.tensor([0.5, 1.5], requires_grad=True)
        assert not (x > 1).requires_grad
        assert not x.isnan().requires_grad
        assert not x.floor().long().requires_grad
        assert x.floor().requires_grad


# ---------------------------------------------------------------- backward and its errors


def test_gradients_accumulate_across_backward_calls(torch):
    grads = []
    for m in (torch, dynograph):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        (x * 3).sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


def test_retain_graph_allows_a_second_backward(torch):
    grads = []
    for m in (torch, dynograph):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


@pytest.mark.parametrize("fn", [
    # backward twice through freed saved tensors
    lambda m: _twice(m),
    # implicit gradient of a non-scalar
    lambda m: (m.ones(2, requires_grad=True) * 2).backward(),
    # nothing requires grad
    lambda m: m.ones(2).sum().backward(),
    # gradient of the wrong shape
    lambda m: (m.ones(2, requires_grad=True) * 2).backward(m.ones(3)),
    # in-place on a leaf that requires grad
    lambda m: m.ones(2, requires_grad=True).add_(1),
    lambda m: m.ones(2, requires_grad=True).__imul__(2),
    # grad of something that does not require grad
    lambda m: m.autograd.grad(m.ones(2, requires_grad=True).sum(), m.ones(2)),
    # an input the output does not depend on
    lambda m: _unused(m),
])
def test_backward_errors(torch, fn):
    with pytest.raises(RuntimeError) as theirs:
        fn(torch)
    with pytest.raises(RuntimeError) as ours:
        fn(dynograph)
    assert str(ours.value) == str(theirs.value).replace("torch.", "dynograph.")


def _unused(m):
    a, b = m.ones(2, requires_grad=True), m.ones(2, requires_grad=True)
    m.autograd.grad((a * 2).sum(), [a, b])


def _twice(m):
    x = m.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


@pytest.mark.parametrize("fn", [
    lambda m, x: _modify_after(m, x.exp(), lambda t: t.add_(1)),       # a saved output
    lambda m, x: _modify_after(m, x.sigmoid(), lambda t: t.mul_(2)),
    lambda m, x: _modify_after(m, x.tanh(), lambda t: t.__isub__(1)),
    lambda m, x: _modify_input(m, x),                                  # a saved input
])
def test_modified_saved_tensor_is_detected(torch, fn):
    with pytest.raises(RuntimeError) as theirs:
        fn(torch, torch.ones(2, 3, requires_grad=True))
    with pytest.raises(RuntimeError) as ours:
        fn(dynograph, dynograph.ones(2, 3, requires_grad=True))
    assert str(ours.value) == str(theirs.value).replace("torch.", "dynograph.")


def _modify_after(m, y, change):
    change(y)
    y.sum().backward()


def _modify_input(m, x):
    a = x * 1
    b = a * a
    a.add_(1)
    b.sum().backward()


def test_inplace_on_a_result_not_saved_is_fine(torch):
    grads = []
    for m in (torch, dynograph):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        z = y + 1                 # add saves nothing
        z.mul_(3)
        z.sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


# ---------------------------------------------------------------- autograd.grad


def test_autograd_grad_values_and_no_accumulation(torch):
    results = []
    for m in (torch, dynograph):
        x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = m.tensor([1.5, 0.25, -0.5], requires_grad=True)
        out = (x * y + x.sin()).sum()
        gx, gy = m.autograd.grad(out, (x, y))
        results.append((gx, gy))
        assert x.grad is None and y.grad is None
    for ours, theirs in zip(results[1], results[0]):
        assert_same(ours, theirs)


def test_autograd_grad_second_derivative(torch):
    results = []
    for m in (torch, dynograph):
        x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = (x ** 3 + x.exp()).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        assert g.requires_grad and g.grad_fn is not None
        (h,) = m.autograd.grad(g.sum(), x)
        results.append((g.detach(), h))
    for ours, theirs in zip(results[1], results[0]):
        assert_same(ours, theirs)


def test_autograd_grad_with_grad_outputs_and_unused(torch):
    results = []
    for m in (torch, dynograph):
        x = m.tensor([0.5, -1.0], requires_grad=True)
        z = m.tensor([1.0, 1.0], requires_grad=True)
        y = x * 3
        (g, gz) = m.autograd.grad(y, (x, z), grad_outputs=m.tensor([1.0, 2.0]), allow_unused=True)
        assert gz is None
        results.append(g)
    assert_same(results[1], results[0])


def test_autograd_grad_of_self_product_accumulates_as_add(torch):
    names = []
    for m in (torch, dynograph):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        (g,) = m.autograd.grad((a * a).sum(), a, create_graph=True)
        names.append(g.grad_fn.name())
        assert g.tolist() == [2.0, 4.0]
    assert names[0] == names[1]


def test_backward_through_mixed_dtypes_and_broadcasting(torch):
    results = []
    for m in (torch, dynograph):
        x = m.tensor([[0.5, 1.0, 2.0]], requires_grad=True)
        s = m.tensor(1.5, dtype=m.float64, requires_grad=True)
        c = m.tensor([[1.0], [2.0]], requires_grad=True)
        out = ((x * s + c) ** 2).sum()
        out.backward()
        assert out.dtype == m.float32
        results.append((x.grad, s.grad, c.grad))
    for ours, theirs in zip(results[1], results[0]):
        assert_same(ours, theirs, rtol=1e-6)


def test_gradient_of_non_contiguous_input(torch):
    base = np.arange(12, dtype=np.float64).reshape(3, 4) / 5
    grads = []
    for m in (torch, dynograph):
        x = m.tensor(base, requires_grad=True)
        y = x.t()[::2]                      # a strided view of x
        (y.sin() * y).sum().backward()
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


def test_from_torch_gradients_roundtrip(torch):
    t = torch.tensor([0.5, 1.5], requires_grad=True)
    d = from_torch(t, requires_grad=True)
    (t * t).sum().backward()
    (d * d).sum().backward()
    assert_same(d.grad, t.grad)

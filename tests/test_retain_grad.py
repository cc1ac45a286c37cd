"""Tensor.retain_grad against PyTorch: alone (no hooks), with hooks, on views, across
backward passes, retain_graph, create_graph, in-place writes, and its error."""
import pytest

import dynograph
from conftest import assert_same, assert_same_error


def _scenario(T, name):
    """Run scenario ``name`` with module ``T`` (torch or dynograph); return what to compare."""
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 3
    if name == "alone":                         # the bug: no hook on y, so y.grad stayed None
        y.retain_grad()
        (y * y).sum().backward()
        return y.grad, y.retains_grad
    if name == "hook_before":
        y.register_hook(lambda g: g * 2)
        y.retain_grad()
        (y * y).sum().backward()
        return y.grad, x.grad
    if name == "hook_after":                    # PyTorch runs the retain_grad hook last
        y.retain_grad()
        y.register_hook(lambda g: g * 2)
        (y * y).sum().backward()
        return y.grad, x.grad
    if name == "removed_hook":
        y.retain_grad()
        y.register_hook(lambda g: g + 1).remove()
        (y * y).sum().backward()
        return y.grad
    if name == "view":
        v = y[1:]
        v.retain_grad()
        (v * v).sum().backward()
        return v.grad
    if name == "base_of_view":
        y.retain_grad()
        v = y[1:]
        (v * v).sum().backward()
        return y.grad
    if name == "accumulates":                   # a new tensor each pass, not the old one
        y.retain_grad()
        z = (y * y).sum()
        z.backward(retain_graph=True)
        first = y.grad
        z.backward()
        return y.grad, first, first is y.grad
    if name == "freed_graph":
        y.retain_grad()
        z = (y * y).sum()
        z.backward()
        z.backward()
    if name == "create_graph":
        y.retain_grad()
        (y * y).sum().backward(create_graph=True)
        return y.grad, y.grad.requires_grad, y.grad.grad_fn.name()
    if name == "create_graph_twice":
        y.retain_grad()
        z = (y * y).sum()
        z.backward(create_graph=True)
        z.backward(create_graph=True)
        return y.grad, y.grad.grad_fn.name()
    if name == "no_create_graph":
        y.retain_grad()
        (y * y).sum().backward()
        return y.grad.requires_grad, y.grad.is_leaf
    if name == "leaf":                          # a no-op on a leaf
        x.retain_grad()
        (x * x).sum().backward()
        return x.grad, x.retains_grad
    if name == "no_grad_tensor":
        T.ones(3).retain_grad()
    if name == "no_grad_tensor_attr":
        return T.ones(3).retains_grad, y.retains_grad, y.detach().retains_grad
    if name == "twice":
        y.retain_grad()
        y.retain_grad()
        (y * y).sum().backward()
        return y.grad
    if name == "inplace":                       # .grad is the gradient of the new value
        y.retain_grad()
        y.mul_(2)
        (y * y).sum().backward()
        return y.grad, x.grad
    if name == "inplace_through_view":
        y.retain_grad()
        y[0].mul_(2)
        (y * y).sum().backward()
        return y.grad, x.grad
    if name == "autograd_grad":
        y.retain_grad()
        T.autograd.grad((y * y).sum(), x)
        return y.grad, x.grad
    if name == "inputs_is_retained":
        y.retain_grad()
        w = y * 2
        (w * w).sum().backward(inputs=[y])
        return y.grad, x.grad
    if name == "inputs_elsewhere":
        y.retain_grad()
        w = y * 2
        w.retain_grad()
        (w * w).sum().backward(inputs=[x])
        return y.grad, w.grad
    if name == "not_reached":
        y.retain_grad()
        (x * 2).sum().backward()
        return y.grad
    if name == "multi_output":
        a, b = y.split([1, 2])
        b.retain_grad()
        a.retain_grad()
        (b * 5).sum().backward()
        return b.grad, a.grad
    if name == "root":
        s = y.sum()
        s.retain_grad()
        s.backward()
        return s.grad
    raise AssertionError(name)


SCENARIOS = ["alone", "hook_before", "hook_after", "removed_hook", "view", "base_of_view",
             "accumulates", "freed_graph", "create_graph", "create_graph_twice", "no_create_graph",
             "leaf", "no_grad_tensor", "no_grad_tensor_attr", "twice", "inplace",
             "inplace_through_view", "autograd_grad", "inputs_is_retained", "inputs_elsewhere",
             "not_reached", "multi_output", "root"]


def _run(T, name):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # reading .grad of a non-retaining non-leaf
        try:
            return _scenario(T, name)
        except Exception as e:                  # the error is the result under test
            return e


@pytest.mark.parametrize("name", SCENARIOS)
def test_retain_grad_matches_torch(torch, name):
    expect, got = _run(torch, name), _run(dynograph, name)
    if isinstance(expect, Exception):
        assert_same_error(got, expect, name)
        return
    assert not isinstance(got, Exception), f"{name}: {got!r}"
    expect = expect if isinstance(expect, tuple) else (expect,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expect)
    for a, b in zip(got, expect):
        if b is None or isinstance(b, (bool, str)):
            assert a == b, name
        else:
            assert_same(a, b)

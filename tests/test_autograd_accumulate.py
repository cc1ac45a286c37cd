"""A leaf's first gradient takes the engine's buffer when nothing else holds it (as PyTorch's
AccumulateGrad steals it), and is a copy whenever the gradient is reachable elsewhere."""
import numpy as np

import dynograph


def test_a_gradient_the_caller_holds_is_copied():
    x = dynograph.zeros(3, requires_grad=True)
    g = dynograph.ones(3)
    x.backward(g)
    g.add_(1)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))


def test_leaves_sharing_one_gradient_get_their_own():
    a = dynograph.zeros(3, requires_grad=True)
    b = dynograph.zeros(3, requires_grad=True)
    (a + b).sum().backward()
    a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(3, np.float32))
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())


def test_add_and_sub_pass_the_gradient_on_for_every_alpha():
    """add's second gradient is the incoming one itself for alpha 1 (its negation for -1), and
    still each leaf ends up with its own buffer."""
    for op, alpha, scale in (("add", 1, 1), ("add", -1, -1), ("add", 2.5, 2.5), ("sub", 1, -1),
                             ("sub", -1, 1), ("sub", 0.5, -0.5)):
        a = dynograph.zeros(3, requires_grad=True)
        b = dynograph.zeros(3, requires_grad=True)
        (getattr(dynograph, op)(a, b, alpha=alpha) * 3).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 3, np.float32))
        np.testing.assert_array_equal(b.grad.numpy(), np.full(3, 3 * scale, np.float32))
        assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())


def test_a_gradient_a_hook_kept_is_copied():
    x = dynograph.zeros(3, requires_grad=True)
    kept = []
    x.register_hook(lambda g: kept.append(g))
    (x * 2).sum().backward()
    kept[0].add_(1)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2, np.float32))


def test_a_retained_graph_keeps_its_values():
    x = dynograph.ones(2, 2, requires_grad=True)
    y = x * 3
    y.backward(dynograph.ones(2, 2), retain_graph=True)
    x.grad.mul_(10)
    x.grad = None
    y.backward(dynograph.ones(2, 2))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3, np.float32))


def test_fresh_gradients_are_taken_and_contiguous():
    w = dynograph.ones(4, 3, requires_grad=True)
    x = dynograph.ones(5, 4)
    (x @ w).sum().backward()
    assert w.grad.is_contiguous()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((4, 3), 5, np.float32))
    y = w * 2
    y.backward(dynograph.ones(4, 3))        # the product's buffer is the leaf's second gradient
    np.testing.assert_array_equal(w.grad.numpy(), np.full((4, 3), 7, np.float32))


def test_linear_gradients_match_torch_and_are_contiguous(torch):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (4, 5), (4,)))
    ours = [dynograph.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    dynograph.nn.functional.linear(*ours).square().sum().backward()
    torch.nn.functional.linear(*theirs).square().sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
        assert o.grad.is_contiguous() and o.grad.stride() == t.grad.stride()

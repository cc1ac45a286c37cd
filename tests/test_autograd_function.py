"""autograd.Function, gradcheck/gradgradcheck and autograd.functional against torch."""
import numpy as np
import pytest

import dynograph
from dynograph.autograd import Function, gradcheck, gradgradcheck, GradcheckError
from conftest import assert_same


class Exp(Function):
    @staticmethod
    def forward(ctx, x, scale):
        y = x.exp() * scale
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return g * y, None


def test_custom_function_forward_backward_and_name():
    x = dynograph.tensor([0.0, 1.0], requires_grad=True)
    y = Exp.apply(x, 2.0)
    assert y.grad_fn.name() == "ExpBackward"
    assert len(y.grad_fn.next_functions) == 1
    assert y.grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    y.sum().backward()
    np.testing.assert_allclose(x.grad._data, 2 * np.exp([0.0, 1.0]), rtol=1e-6)


def test_custom_function_without_grad_records_nothing():
    x = dynograph.tensor([1.0, 2.0])
    y = Exp.apply(x, 1.0)
    assert y.grad_fn is None and not y.requires_grad


def test_custom_function_saved_tensor_modified_inplace():
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * g * x

    a = dynograph.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    y = Square.apply(b)
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_setup_context_style_and_non_differentiable_output():
    class SortVals(Function):
        @staticmethod
        def forward(x):
            return x * 3, (x > 0)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, g_mask):
            return g * 3

    x = dynograph.tensor([-1.0, 2.0], requires_grad=True)
    y, mask = SortVals.apply(x)
    assert not mask.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_wrong_number_of_gradients():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g

    x = dynograph.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients \\(expected 2, got 1\\)"):
        Bad.apply(x, 2.0).sum().backward()


def test_gradcheck_passes_and_reports_mismatch(torch):
    x = dynograph.tensor([1.0, 2.0], dtype=dynograph.float64, requires_grad=True)
    assert gradcheck(lambda t: (t * t).sin(), (x,))

    def wrong(t):
        return t * t.detach()

    with pytest.raises(GradcheckError) as ours:
        gradcheck(wrong, (x,))
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.gradcheck(lambda t: t * t.detach(), (tx,))
    assert str(ours.value) == str(theirs.value).replace("torch.", "dynograph.")
    assert gradcheck(wrong, (x,), raise_exception=False) is False


def test_gradcheck_warns_on_float32():
    x = dynograph.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="is not a double precision floating point"):
        gradcheck(lambda t: t * 2, (x,), eps=1e-3, atol=1e-2)


def test_gradgradcheck():
    x = dynograph.tensor([0.5, 1.5], dtype=dynograph.float64, requires_grad=True)
    assert gradgradcheck(lambda t: (t * t * t).exp(), (x,))


def test_functional_jacobian_hessian_vjp_jvp(torch):
    F = dynograph.autograd.functional
    TF = torch.autograd.functional
    a = np.array([0.3, -1.2, 2.0])

    def f(x):
        return x.exp() * x.sum()

    def scalar(x):
        return (x * x * x).sum()

    x, tx = dynograph.tensor(a), torch.tensor(a)
    assert_same(F.jacobian(f, x), TF.jacobian(f, tx))
    assert_same(F.hessian(scalar, x), TF.hessian(scalar, tx))
    v = np.array([1.0, 0.5, -2.0])
    out, g = F.vjp(f, x, dynograph.tensor(v))
    tout, tg = TF.vjp(f, tx, torch.tensor(v))
    assert_same(out, tout)
    assert_same(g, tg)
    out, jv = F.jvp(f, x, dynograph.tensor(v))
    tout, tjv = TF.jvp(f, tx, torch.tensor(v))
    assert_same(jv, tjv)
    _, hv = F.hvp(scalar, x, dynograph.tensor(v))
    _, thv = TF.hvp(scalar, tx, torch.tensor(v))
    assert_same(hv, thv)

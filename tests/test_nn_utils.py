"""nn.utils: gradient clipping and parameter/vector conversion, against torch."""
import numpy as np
import pytest

import dynograph as dg
from dynograph import nn


def _pairs(torch, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (4,), (2, 2, 3)]
    ours, theirs = [], []
    for shape in shapes:
        value, grad = rng.normal(size=shape), rng.normal(size=shape) * scale
        p = nn.Parameter(dg.tensor(value, dtype=dg.float32))
        p.grad = dg.tensor(grad, dtype=dg.float32)
        q = torch.nn.Parameter(torch.tensor(value, dtype=torch.float32))
        q.grad = torch.tensor(grad, dtype=torch.float32)
        ours.append(p)
        theirs.append(q)
    return ours, theirs


def _assert_grads(ours, theirs):
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf"), "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(torch, norm_type, max_norm):
    ours, theirs = _pairs(torch)
    a = nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    b = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    _assert_grads(ours, theirs)


def test_clip_grad_norm_single_tensor_generator_and_empty(torch):
    ours, theirs = _pairs(torch)
    a = nn.utils.clip_grad_norm_(ours[0], 0.1)
    b = torch.nn.utils.clip_grad_norm_(theirs[0], 0.1)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    _assert_grads(ours[:1], theirs[:1])
    a = nn.utils.clip_grad_norm_((p for p in ours), 0.3)
    b = torch.nn.utils.clip_grad_norm_((p for p in theirs), 0.3)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    with pytest.warns(UserWarning, match="empty generator"):
        total = nn.utils.clip_grad_norm_((p for p in []), 1.0)
    assert total.item() == 0.0 and total.dtype == dg.float32


def test_clip_grad_norm_nonfinite():
    p = nn.Parameter(dg.ones(2))
    p.grad = dg.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert nn.utils.clip_grad_norm_([p], 1.0).isinf().item()


def test_clip_grad_value_matches_torch(torch):
    ours, theirs = _pairs(torch, scale=3.0)
    nn.utils.clip_grad_value_(ours, 1.5)
    torch.nn.utils.clip_grad_value_(theirs, 1.5)
    _assert_grads(ours, theirs)
    assert float(ours[0].grad.abs().max()) <= 1.5


def test_get_total_norm_and_clip_with_norm(torch):
    ours, theirs = _pairs(torch)
    a = nn.utils.get_total_norm([p.grad for p in ours], 3.0)
    b = torch.nn.utils.get_total_norm([q.grad for q in theirs], 3.0)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    nn.utils.clip_grads_with_norm_(ours, 0.2, a)
    torch.nn.utils.clip_grads_with_norm_(theirs, 0.2, b)
    _assert_grads(ours, theirs)


def test_parameters_to_vector_round_trip(torch):
    ours, theirs = _pairs(torch)
    v = nn.utils.parameters_to_vector(ours)
    w = torch.nn.utils.parameters_to_vector(theirs)
    np.testing.assert_array_equal(v.detach().numpy(), w.detach().numpy())
    assert v.grad_fn.name() == w.grad_fn.name()
    new = dg.arange(v.numel(), dtype=dg.float32)
    nn.utils.vector_to_parameters(new, ours)
    assert ours[1].shape == (4,)
    np.testing.assert_array_equal(ours[1].detach().numpy(), np.arange(12, 16, dtype=np.float32))
    np.testing.assert_array_equal(ours[2].detach().numpy().ravel(), np.arange(16, 28, dtype=np.float32))


def test_vector_to_parameters_rejects_non_tensor():
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0], [nn.Parameter(dg.ones(1))])

"""rrelu, gumbel_softmax, feature_alpha_dropout, pdist and NLLLoss2d against PyTorch: exact values
where they are deterministic, statistics and properties where they draw random numbers."""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch


def _grad_pair(torch, fn_t, fn_d, t):
    """Forward values and input gradients of torch's fn_t and dynograph's fn_d agree."""
    t = t.detach().requires_grad_()
    d = from_torch(t, requires_grad=True)
    out_t, out_d = fn_t(t), fn_d(d)
    assert_same(out_d, out_t, rtol=1e-10, atol=1e-12)
    g = torch.randn(out_t.shape, dtype=t.dtype)
    out_t.backward(g)
    out_d.backward(from_torch(g))
    assert_same(d.grad, t.grad, rtol=1e-10, atol=1e-12)


def test_rrelu_eval_matches_torch(torch):
    t = torch.tensor([-3.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)
    for lower, upper in ((1 / 8, 1 / 3), (0.1, 0.1), (0.0, 1.0)):
        _grad_pair(torch, lambda x: torch.nn.functional.rrelu(x, lower, upper),
                   lambda x: F.rrelu(x, lower, upper), t)
    m = nn.RReLU(0.1, 0.3).eval()
    assert repr(m) == repr(torch.nn.RReLU(0.1, 0.3)) and repr(nn.RReLU(inplace=True)) == repr(
        torch.nn.RReLU(inplace=True))
    assert_same(m(from_torch(t)), torch.nn.RReLU(0.1, 0.3).eval()(t))


def test_rrelu_training_draws_slopes(torch):
    dynograph.manual_seed(0)
    x = -dynograph.rand(20000, dtype=dynograph.float64) - 0.5
    x.requires_grad_()
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().numpy()
    assert slope.min() >= 0.1 and slope.max() <= 0.3
    assert abs(slope.mean() - 0.2) < 0.003 and abs(slope.std() - 0.2 / math.sqrt(12)) < 0.003
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope)          # the drawn slope is the gradient
    pos = dynograph.tensor([0.5, 2.0])
    assert_same(F.rrelu(pos, training=True), pos)
    z = x.detach().clone()
    assert F.rrelu_(z, training=True) is z and (z > x.detach()).all()
    assert nn.RReLU()(x).shape == x.shape


@pytest.mark.parametrize("expr", [
    "F.rrelu(x, 0.5, 0.1)", "F.rrelu(x, 0.5, 0.1, True)", "F.rrelu(x.long(), training=True)",
    "F.pdist(x)", "F.pdist(x[0], -1)", "F.pdist(x[0].long())",
    "F.feature_alpha_dropout(x[0, 0], 0.5, True)", "F.feature_alpha_dropout(x, 1.5, True)"])
def test_errors_match_torch(torch, expr):
    t = torch.randn(2, 3, 4)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "x": t})
    assert_same_error(eval_expr(expr, {"F": F, "x": from_torch(t)}), theirs, expr)


@pytest.mark.parametrize("p", [0, 1, 2, 3.5, math.inf])
def test_pdist_matches_torch(torch, p):
    t = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    if p:       # the 0-"norm" counts nonzeros: no gradient to compare
        _grad_pair(torch, lambda x: torch.nn.functional.pdist(x, p), lambda x: F.pdist(x, p), t)
    for n in (0, 1, 2):
        assert_same(F.pdist(from_torch(t[:n]), p), torch.nn.functional.pdist(t[:n], p), rtol=1e-10)
    assert_same(dynograph.pdist(from_torch(t), p), torch.pdist(t, p), rtol=1e-10)


def test_gumbel_softmax_soft_and_hard():
    dynograph.manual_seed(0)
    logits = dynograph.tensor([[1.0, 2.0, 0.5, -1.0]] * 4000, dtype=dynograph.float64, requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).detach().numpy(), 1.0)
    assert (soft > 0).all()
    hard = F.gumbel_softmax(logits, hard=True, dim=1)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(-1) == 1).all()
    # samples follow softmax(logits): the Gumbel-max trick
    expected = np.exp([1.0, 2.0, 0.5, -1.0]) / np.exp([1.0, 2.0, 0.5, -1.0]).sum()
    np.testing.assert_allclose(h.mean(0), expected, atol=0.03)
    # hard samples pass the soft sample's gradient: each row's gradient of sum(w * y) sums to 0
    w = dynograph.tensor([1.0, 2.0, 3.0, 4.0], dtype=dynograph.float64)
    (hard * w).sum().backward()
    g = logits.grad.numpy()
    assert np.abs(g).max() > 0 and np.allclose(g.sum(-1), 0)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(logits, eps=1e-5)


def test_feature_alpha_dropout(torch):
    dynograph.manual_seed(0)
    x = dynograph.randn(64, 32, 3, 2, dtype=dynograph.float64)
    assert F.feature_alpha_dropout(x, 0.5) is x                     # training=False by default
    y = F.feature_alpha_dropout(x, 0.3, training=True)
    ratio = (y - y.mean((2, 3), keepdim=True)) / (x - x.mean((2, 3), keepdim=True))
    kept = (ratio.numpy().std((2, 3)) < 1e-9) & (np.abs(ratio.numpy()[..., 0, 0]) > 1e-3)
    dropped = np.ptp(y.numpy(), axis=(2, 3)) < 1e-12                # a whole channel is constant
    assert (kept | dropped).all() and abs(dropped.mean() - 0.3) < 0.03
    # a dropped channel takes alpha dropout's value for its mask
    t = torch.tensor(x.numpy())
    torch.manual_seed(0)
    ref = torch.nn.functional.feature_alpha_dropout(t, 0.3, True).numpy()
    assert np.isclose(np.unique(y.numpy()[dropped]).round(9), np.unique(ref[np.ptp(ref, axis=(2, 3)) < 1e-12]).round(9)).all()
    m = nn.FeatureAlphaDropout(0.2)
    assert repr(m) == repr(torch.nn.FeatureAlphaDropout(0.2))
    assert m.eval()(x) is x
    assert_same(F.feature_alpha_dropout(x, 1.0, True), torch.zeros(t.shape, dtype=t.dtype))


def test_nll_loss2d_is_nll_loss(torch):
    t, target = torch.randn(2, 3, 4, 5).log_softmax(1), torch.randint(0, 3, (2, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = torch.nn.NLLLoss2d(ignore_index=1)(t, target)
    loss = nn.NLLLoss2d(ignore_index=1)
    assert isinstance(loss, nn.NLLLoss)
    assert_same(loss(from_torch(t), from_torch(target)), expect)


def test_top_level_names_match_functional(torch):
    t = torch.tensor([-2.0, -0.5, 0.0, 1.5], dtype=torch.float64)
    x = from_torch(t)
    assert_same(dynograph.rrelu(x, 0.1, 0.2), torch.rrelu(t, 0.1, 0.2))
    assert_same(dynograph.threshold(x, 0.1, 20.0), torch.threshold(t, 0.1, 20.0))
    assert_same(dynograph.celu_(x.clone(), 2.0), torch.celu_(t.clone(), 2.0))
    assert_same(dynograph.selu_(x.clone()), torch.selu_(t.clone()))
    assert_same(dynograph.threshold_(x.clone(), 0.0, 1.0), torch.threshold_(t.clone(), 0.0, 1.0))
    for name in ("dropout", "alpha_dropout", "feature_alpha_dropout"):
        assert getattr(dynograph, name)(x[None], 0.5, False) is not None

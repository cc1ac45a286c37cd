"""Normalization functionals and layers against PyTorch: values, gradients, running statistics."""
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch

DTYPES = ["float32", "float64"]


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)


def _pair(torch, shape, dtype="float32", seed=0, scale=2.0, noncontig=False):
    """A torch tensor and its dynograph twin, both requiring grad (optionally non-contiguous)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype)) * scale + 0.5
    if noncontig:
        t = base.transpose(0, -1).contiguous().transpose(0, -1).detach().requires_grad_()
        d = from_torch(base.transpose(0, -1).contiguous()).transpose(0, -1).requires_grad_()
        assert base.dim() < 2 or not d.is_contiguous()
        return t, d
    return base.detach().requires_grad_(), from_torch(base, requires_grad=True)


def _copy_params(ours, theirs):
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        with dynograph.no_grad():
            p.copy_(from_torch(tp))


def _check(torch, got, expect, inputs, dtype, seed=1):
    """Forward values, then the gradients of every (dynograph, torch) input pair."""
    tol = _tol(dtype)
    assert_same(got, expect, **tol)
    gt = torch.randn(expect.shape, generator=torch.Generator().manual_seed(seed), dtype=expect.dtype)
    expect.backward(gt)
    got.backward(from_torch(gt))
    for d, t in inputs:
        if t.grad is None:
            assert d.grad is None
        else:
            assert_same(d.grad, t.grad, **tol)


def _perturbed(torch, ours, theirs, seed=3):
    """Give both modules the same non-trivial parameters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    _copy_params(ours, theirs)


# ----------------------------------------------------------------------------- layer norm

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,norm,affine", [
    ((4, 5), (5,), "wb"), ((2, 3, 4), (3, 4), "wb"), ((2, 3, 4), (4,), "w"), ((3, 4), (4,), ""),
    ((6,), (6,), "b")])
@pytest.mark.parametrize("noncontig", [False, True])
def test_layer_norm_functional(torch, dtype, shape, norm, affine, noncontig):
    t, d = _pair(torch, shape, dtype, noncontig=noncontig)
    tw, dw = _pair(torch, norm, dtype, seed=5) if "w" in affine else (None, None)
    tb, db = _pair(torch, norm, dtype, seed=6) if "b" in affine else (None, None)
    expect = torch.nn.functional.layer_norm(t, norm, tw, tb, 1e-3)
    got = F.layer_norm(d, norm, dw, db, 1e-3)
    pairs = [(d, t)] + [(a, b) for a, b in ((dw, tw), (db, tb)) if a is not None]
    _check(torch, got, expect, pairs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"elementwise_affine": False}, {"bias": False}, {"eps": 0.1}])
def test_layer_norm_module(torch, dtype, kwargs):
    ours = nn.LayerNorm((3, 4), dtype=getattr(dynograph, dtype), **kwargs)
    theirs = torch.nn.LayerNorm((3, 4), dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (_, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_same(p, tp)                                  # default init: ones and zeros
    _perturbed(torch, ours, theirs)
    t, d = _pair(torch, (2, 3, 4), dtype)
    got, expect = ours(d), theirs(t)
    pairs = [(d, t)] + list(zip(ours.parameters(), theirs.parameters()))
    _check(torch, got, expect, pairs, dtype)
    assert repr(nn.LayerNorm(7)) == repr(torch.nn.LayerNorm(7))


def test_layer_norm_large_mean_is_stable(torch):
    t = torch.randn(3, 8, dtype=torch.float32) + 1000.0
    assert_same(F.layer_norm(from_torch(t), (8,)), torch.nn.functional.layer_norm(t, (8,)),
                rtol=1e-3, atol=2e-3)


# ----------------------------------------------------------------------------- rms norm

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(torch, dtype, eps, affine):
    ours = nn.RMSNorm([3, 4], eps=eps, elementwise_affine=affine, dtype=getattr(dynograph, dtype))
    theirs = torch.nn.RMSNorm([3, 4], eps=eps, elementwise_affine=affine, dtype=getattr(torch, dtype))
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _perturbed(torch, ours, theirs)
    t, d = _pair(torch, (2, 3, 4), dtype, noncontig=True)
    pairs = [(d, t)] + list(zip(ours.parameters(), theirs.parameters()))
    _check(torch, ours(d), theirs(t), pairs, dtype)


# ----------------------------------------------------------------------------- errors

ERRORS = [
    "F.layer_norm(x, (3,))", "F.layer_norm(x, (4,), T.ones(3))", "F.layer_norm(x, (4,), None, T.ones(3))",
    "F.layer_norm(x, (2, 3, 4))", "F.layer_norm(x, [])", "F.layer_norm(x, 4)",
    "F.rms_norm(x, (3,))", "F.rms_norm(x, (4,), T.ones(3))", "F.rms_norm(x, [])",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors(torch, expr):
    x = torch.randn(2, 4)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "T": torch, "x": x, "nn": torch.nn})
    ours = eval_expr(expr, {"F": F, "T": dynograph, "x": from_torch(x), "nn": nn})
    assert_same_error(ours, theirs, expr)


def test_no_warnings_and_numpy_free_graph(torch):
    x = dynograph.randn(2, 3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.layer_norm(x, (3,))
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()

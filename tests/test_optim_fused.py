"""The fused parameter updates (dynograph/optim/_fused.py): the compiled loop and the numpy
path compute what the tensor methods compute, bit for bit, and what torch.optim computes to
float tolerance."""
import numpy as np
import pytest

import dynograph as dg
from dynograph.optim import _fused
from dynograph.runtime import host_kernels

try:
    import torch
except ImportError:         # the comparisons with torch skip
    torch = None

SHAPE = (96, 80)            # above the thresholds below: the kernels compile

CASES = [
    ("SGD", dict(lr=0.01, momentum=0.9)),
    ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.01, momentum=0.9, dampening=0.3, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.6, 0.0))),        # lerp's large weight; addcmul's value 1
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, betas=(0.8, 0.99), eps=1e-6)),
]


def _run(lib, name, kw, dtype, steps=4):
    rng = np.random.default_rng(7)
    p0 = rng.standard_normal(SHAPE).astype(dtype)
    grads = [rng.standard_normal(SHAPE).astype(dtype) for _ in range(steps)]
    p = lib.tensor(p0, requires_grad=True)
    opt = getattr(lib.optim, name)([p], **kw)
    for i, g in enumerate(grads):
        p.grad = lib.tensor(g)
        if i == 2:
            for group in opt.param_groups:      # a changed learning rate is read, not compiled in
                group["lr"] = group["lr"] * 0.5
        opt.step()
    state = opt.state[p]
    bufs = {k: v.detach().numpy().copy() for k, v in state.items() if k != "step"}
    return p.detach().numpy().copy(), bufs


@pytest.fixture
def paths(monkeypatch):
    """Runs an optimizer with the kernels (where a backend lends them), then on numpy."""
    def run(name, kw, dtype):
        monkeypatch.setattr(_fused, "MIN_SGD", 1)
        monkeypatch.setattr(_fused, "MIN_ADAM", 1)
        monkeypatch.setattr(_fused, "WARM", {"sgd": 1, "adam": 1})     # numpy, then kernels
        fused = _run(dg, name, kw, dtype)
        monkeypatch.setattr(_fused, "MIN_SGD", 1 << 62)
        monkeypatch.setattr(_fused, "MIN_ADAM", 1 << 62)
        plain = _run(dg, name, kw, dtype)
        return fused, plain
    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CASES)
def test_kernel_matches_numpy_path(paths, name, kw, dtype):
    (p1, s1), (p2, s2) = paths(name, kw, dtype)
    np.testing.assert_array_equal(p1, p2)
    assert s1.keys() == s2.keys()
    for k in s1:
        np.testing.assert_array_equal(s1[k], s2[k], err_msg=k)


def test_kernels_compile():
    if host_kernels.compiler() is None:
        pytest.skip("no backend lends eager kernels here")
    _fused._plans.clear()
    old = _fused.MIN_SGD, _fused.MIN_ADAM, _fused.WARM
    _fused.MIN_SGD = _fused.MIN_ADAM = 1
    _fused.WARM = {"sgd": 0, "adam": 0}
    try:
        _run(dg, "SGD", dict(lr=0.1, momentum=0.9), np.float32)
        _run(dg, "Adam", dict(lr=0.1), np.float32)
    finally:
        _fused.MIN_SGD, _fused.MIN_ADAM, _fused.WARM = old
    assert {k[0] for k, plan in _fused._plans.items() if plan is not None} == {"sgd", "adam"}


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CASES)
def test_matches_torch(paths, name, kw, dtype):
    for ours, states in paths(name, kw, dtype):
        theirs, their_states = _run(torch, name, kw, dtype)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)
        for k, v in states.items():
            np.testing.assert_allclose(v, their_states[k], rtol=tol, atol=tol, err_msg=k)


def test_small_and_odd_tensors_keep_their_results():
    """Below the threshold, non-contiguous parameters and shared memory: the other paths."""
    p = dg.tensor(np.ones((4, 6), np.float32), requires_grad=True)
    q = dg.tensor(np.ones((6, 4), np.float32)).t().requires_grad_(True)     # column-major
    opt = dg.optim.Adam([p, q], lr=0.5)
    for _ in range(3):
        p.grad = dg.tensor(np.full((4, 6), 0.5, np.float32))
        q.grad = dg.tensor(np.full((4, 6), 0.5, np.float32))
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert opt.state[p]["step"].item() == 3.0


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_a_zero_dim_parameter_takes_the_numpy_path(name):
    """numpy's ufuncs give a 0-dim array's results as scalars, which ``out=`` refuses: the numpy
    path keeps them arrays, and computes what the methods compute on a 1-element parameter."""
    steps = []
    for shape in ((), (1,)):
        p = dg.tensor(np.full(shape, 1.5, np.float32), requires_grad=True)
        opt = getattr(dg.optim, name)([p], lr=0.1, weight_decay=0.1)
        for g in (0.3, -0.7, 0.2):
            p.grad = dg.tensor(np.full(shape, g, np.float32))
            opt.step()
        steps.append(p.detach().numpy().reshape(-1))
    np.testing.assert_array_equal(steps[0], steps[1])

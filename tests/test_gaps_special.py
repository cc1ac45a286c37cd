"""digamma and polygamma at their poles, infinities and NaN, and digamma's gradient there
(trigamma), eager and compiled, against torch: digamma is -inf/+inf at -0/+0 and NaN at the
negative integers and -inf; trigamma follows torch's algorithm, whose sin(pi x) is not exactly
zero at a negative integer (a large finite value there, inf at 0); polygamma(n >= 2, +inf) is NaN."""
import numpy as np
import pytest

import dynograph
from conftest import from_torch

SPECIAL = [0.0, -0.0, -1.0, -2.0, -7.0, -100.0, 1.0, 2.0, 0.5, -0.5, -1.5, 1e-30, -1e-30,
           1e30, -1e20, -2.5e7, float("inf"), float("-inf"), float("nan")]


def _inputs(torch, dt):
    rng = np.random.default_rng(0)
    x = np.concatenate([SPECIAL, rng.standard_normal(300) * 20, rng.uniform(-30, 30, 300),
                        -np.arange(1, 40, dtype=np.float64)])
    return torch.tensor(x, dtype=getattr(torch, dt))


def _close(ours, theirs, dt):
    t = theirs.detach().double().numpy()
    d = ours.detach().double().numpy()
    # float32 digamma near its root cancels (torch computes it in float32): atol
    rtol, atol = {"float64": (1e-12, 1e-14), "float32": (2e-6, 1e-6)}.get(dt, (8e-3, 1e-3))
    same = (t == d) | (np.isnan(t) & np.isnan(d)) | np.isclose(d, t, rtol=rtol, atol=atol)
    assert same.all(), list(zip(t[~same][:5], d[~same][:5]))


@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_at_poles_eager_and_compiled(torch, dt, n):
    x = _inputs(torch, dt)
    theirs = torch.polygamma(n, x)
    ours = dynograph.polygamma(n, from_torch(x))
    assert str(ours.dtype) == "dynograph." + dt
    _close(ours, theirs, dt)
    compiled = dynograph.compile(lambda v: dynograph.polygamma(n, v))
    _close(compiled(from_torch(x)), theirs, dt)
    if n == 0:
        _close(dynograph.digamma(from_torch(x)), torch.digamma(x), dt)
        _close(dynograph.special.psi(from_torch(x)), torch.special.psi(x), dt)


def test_digamma_pole_values_are_torchs(torch):
    x = torch.tensor([0.0, -0.0, -1.0, -3.0, float("-inf"), float("inf")])
    ours = dynograph.digamma(from_torch(x)).tolist()
    assert ours[:2] == [-float("inf"), float("inf")]
    assert all(np.isnan(ours[2:5])) and ours[5] == float("inf")
    assert torch.digamma(x)[:2].tolist() == ours[:2]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_digamma_gradient_at_poles(torch, dt):
    x = _inputs(torch, dt).requires_grad_(True)
    torch.digamma(x).sum().backward()
    ours = from_torch(x, requires_grad=True)
    dynograph.digamma(ours).sum().backward()
    _close(ours.grad, x.grad, dt)
    # torch's trigamma at x = -1 is finite (sin(pi x) rounds to a tiny nonzero), at 0 inf
    at = dynograph.polygamma(1, dynograph.tensor([-1.0, 0.0], dtype=getattr(dynograph, dt)))
    assert np.isfinite(at[0].item()) and at[0].item() > 1e14 and at[1].item() == float("inf")

"""SGD with momentum updates its tensors in place with numpy (optim/sgd.py): the same values
as torch, and the version counters move as the in-place methods move them."""
import numpy as np
import pytest

import dynograph


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dampening", [0.0, 0.25])
def test_momentum_steps_match_torch(torch, dtype, dampening):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((5, 3)).astype(dtype)
    x = rng.standard_normal((4, 5)).astype(dtype)
    ours, theirs = dynograph.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    opt_ours = dynograph.optim.SGD([ours], lr=0.05, momentum=0.9, dampening=dampening)
    opt_theirs = torch.optim.SGD([theirs], lr=0.05, momentum=0.9, dampening=dampening)
    for _ in range(3):
        for lib, w, opt in ((dynograph, ours, opt_ours), (torch, theirs, opt_theirs)):
            opt.zero_grad()
            (lib.tensor(x) @ w).square().sum().backward()
            opt.step()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)
    buf = opt_ours.state[ours]["momentum_buffer"]
    np.testing.assert_allclose(buf.numpy(), opt_theirs.state[theirs]["momentum_buffer"].numpy(),
                               rtol=tol, atol=tol)


def test_in_place_updates_bump_versions():
    w = dynograph.ones(3, requires_grad=True)
    opt = dynograph.optim.SGD([w], lr=0.1, momentum=0.5)
    for _ in range(2):
        opt.zero_grad()
        (w * 2).sum().backward()
        opt.step()
    buf = opt.state[w]["momentum_buffer"]
    before = (w._version, buf._version)
    opt.zero_grad()
    (w * 2).sum().backward()
    opt.step()
    assert w._version > before[0] and buf._version > before[1]
    np.testing.assert_allclose(buf.numpy(), np.full(3, 3.5, np.float32))

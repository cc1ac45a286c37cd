"""The PyTorch tutorial's CIFAR-10 network: builds, prints like torch, and trains like torch.

Both frameworks start from the same weights and see the same random CIFAR-shaped batches; the
20-step loss curves must agree to 1e-4."""
import numpy as np
import pytest

import dynograph as dg
import dynograph.nn as nn
from tools.bench.workloads.training import cifar_net, classifier_step


def data(steps=20, batch=4, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32),
             rng.integers(0, 10, size=batch)) for _ in range(steps)]


def test_repr_and_state_dict_match_torch(torch):
    ours, theirs = cifar_net(dg), cifar_net(torch)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == \
        [tuple(v.shape) for v in theirs.state_dict().values()]


def _train_both(torch, compiled=False, steps=20):
    theirs = cifar_net(torch)
    ours = cifar_net(dg)
    ours.load_state_dict({k: dg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    t_opt = torch.optim.SGD(theirs.parameters(), lr=0.001, momentum=0.9)
    o_opt = dg.optim.SGD(ours.parameters(), lr=0.001, momentum=0.9)
    step = classifier_step(ours, o_opt, dg, nn.CrossEntropyLoss())
    torch_step = classifier_step(theirs, t_opt, torch, torch.nn.CrossEntropyLoss())
    if compiled:
        step = dg.compile(step)
    ours_curve, torch_curve = [], []
    for x, y in data(steps):
        torch_curve.append(torch_step(torch.from_numpy(x), torch.from_numpy(y)).item())
        ours_curve.append(step(dg.tensor(x), dg.tensor(y)).item())
    return ours_curve, torch_curve, ours, theirs


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_training_matches_torch(torch, compiled):
    ours_curve, torch_curve, ours, theirs = _train_both(torch, compiled)
    np.testing.assert_allclose(ours_curve, torch_curve, atol=1e-4, rtol=0)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-4, err_msg=name)

"""nn layer, activation, loss and dropout modules against PyTorch (same weights, forward and backward)."""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
from conftest import assert_same, from_torch


def _copy_params(ours, theirs):
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        with dynograph.no_grad():
            p.copy_(dynograph.tensor(tp.detach().numpy()))


def _compare(torch, ours, theirs, shapes, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    ts = [(torch.randn(*s, generator=g) * scale).requires_grad_() for s in shapes]
    ds = [from_torch(t, requires_grad=True) for t in ts]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = theirs(*ts)
        got = ours(*ds)
    assert_same(got, expect, rtol=1e-5, atol=1e-6)
    gt = torch.randn(expect.shape, generator=g)
    expect.backward(gt)
    got.backward(from_torch(gt))
    for d, t in zip(ds, ts):
        assert_same(d.grad, t.grad, rtol=1e-5, atol=1e-6)
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_same(p.grad, tp.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3)])
def test_linear(torch, bias, shape):
    ours, theirs = nn.Linear(3, 4, bias=bias), torch.nn.Linear(3, 4, bias=bias)
    _copy_params(ours, theirs)
    _compare(torch, ours, theirs, [shape])
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_linear_default_init_bounds():
    m = nn.Linear(50, 200)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) gives the same bound as the bias
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.8 * bound
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    assert m.bias.shape == (200,) and m.weight.shape == (200, 50)


def test_bilinear(torch):
    ours, theirs = nn.Bilinear(3, 2, 4), torch.nn.Bilinear(3, 2, 4)
    _copy_params(ours, theirs)
    _compare(torch, ours, theirs, [(5, 3), (5, 2)])
    assert repr(ours) == repr(theirs)


def test_identity_flatten_unflatten(torch):
    x = dynograph.randn(2, 3, 4)
    assert nn.Identity(5, foo=1)(x) is x
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Unflatten(1, (3, 1))(x).shape == (2, 3, 1, 4)
    for ours, theirs in ((nn.Flatten(), torch.nn.Flatten()), (nn.Identity(), torch.nn.Identity()),
                         (nn.Unflatten(1, (2, 3)), torch.nn.Unflatten(1, (2, 3)))):
        assert repr(ours) == repr(theirs)


ACTIVATIONS = [
    ("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", ()), ("LeakyReLU", (0.2,)), ("ELU", ()),
    ("ELU", (0.5,)), ("SELU", ()), ("CELU", (2.0,)), ("GELU", ()), ("GELU", ("tanh",)), ("SiLU", ()),
    ("Mish", ()), ("Softplus", ()), ("Softplus", (2.0, 3.0)), ("Softsign", ()), ("Hardswish", ()),
    ("Hardsigmoid", ()), ("Hardtanh", ()), ("Hardtanh", (-0.5, 2.0)), ("Sigmoid", ()), ("Tanh", ()),
    ("LogSigmoid", ()), ("Tanhshrink", ()), ("Threshold", (0.1, 20.0)), ("GLU", ()), ("GLU", (0,)),
    ("Softmax", (1,)), ("LogSoftmax", (-1,)), ("Softmin", (0,)), ("Hardshrink", ()),
    ("Hardshrink", (1.5,)), ("Softshrink", ()), ("Softshrink", (2,)),
]


@pytest.mark.parametrize("name,args", ACTIVATIONS)
def test_activation_modules(torch, name, args):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    _compare(torch, ours, theirs, [(4, 6)], scale=3.0)


@pytest.mark.parametrize("name,kwargs", [("ReLU", {"inplace": True}), ("ELU", {"alpha": 0.3, "inplace": True}),
                                         ("LeakyReLU", {"negative_slope": 0.1, "inplace": True}),
                                         ("Hardtanh", {"min_val": 0.0, "max_val": 2.0, "inplace": True}),
                                         ("Threshold", {"threshold": 0.0, "value": 1, "inplace": True}),
                                         ("SiLU", {"inplace": True}), ("ReLU6", {"inplace": True})])
def test_activation_inplace_repr(torch, name, kwargs):
    assert repr(getattr(nn, name)(**kwargs)) == repr(getattr(torch.nn, name)(**kwargs))
    x = dynograph.randn(3, 4)
    y = getattr(nn, name)(**kwargs)(x)
    assert y is x


def test_softmax_module_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        nn.Softmax()(dynograph.randn(2, 3))


def _loss_inputs(torch, name, g):
    x = torch.randn(4, 3, generator=g)
    if name in ("CrossEntropyLoss", "NLLLoss"):
        if name == "NLLLoss":
            x = torch.log_softmax(x, 1)
        return x, torch.tensor([0, 2, 1, 2])
    if name == "BCELoss":
        return torch.rand(4, 3, generator=g).clamp(0.05, 0.95), torch.rand(4, 3, generator=g)
    if name == "BCEWithLogitsLoss":
        return x, torch.rand(4, 3, generator=g)
    if name == "KLDivLoss":
        return torch.log_softmax(x, 1), torch.softmax(torch.randn(4, 3, generator=g), 1)
    return x, torch.randn(4, 3, generator=g)


LOSSES = [
    ("MSELoss", {}), ("MSELoss", {"reduction": "sum"}), ("L1Loss", {"reduction": "none"}),
    ("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.7}),
    ("CrossEntropyLoss", {}), ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 1}),
    ("CrossEntropyLoss", {"weight": [0.5, 1.0, 2.0], "reduction": "sum"}),
    ("NLLLoss", {}), ("NLLLoss", {"weight": [0.5, 1.0, 2.0]}), ("NLLLoss", {"ignore_index": 2}),
    ("BCELoss", {}), ("BCELoss", {"reduction": "none"}),
    ("BCEWithLogitsLoss", {}), ("BCEWithLogitsLoss", {"pos_weight": [1.0, 2.0, 0.5]}),
    ("KLDivLoss", {"reduction": "batchmean"}), ("KLDivLoss", {"reduction": "sum"}),
    ("MSELoss", {"size_average": False}),
]


@pytest.mark.parametrize("name,kwargs", LOSSES)
def test_loss_modules(torch, name, kwargs):
    tkw = {k: torch.tensor(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    dkw = {k: dynograph.tensor(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = getattr(nn, name)(**dkw), getattr(torch.nn, name)(**tkw)
    assert repr(ours) == repr(theirs)
    assert ours.reduction == theirs.reduction
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x, t = _loss_inputs(torch, name, torch.Generator().manual_seed(0))
    x.requires_grad_()
    xd = from_torch(x, requires_grad=True)
    expect = theirs(x, t)
    got = ours(xd, from_torch(t))
    assert_same(got, expect, rtol=1e-5, atol=1e-6)
    expect.sum().backward()
    got.sum().backward()
    assert_same(xd.grad, x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,args", [("Dropout", ()), ("Dropout", (0.2, True)), ("Dropout2d", (0.3,)),
                                       ("AlphaDropout", (0.1,)), ("Dropout1d", ()), ("Dropout3d", ())])
def test_dropout_modules(torch, name, args):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    x = dynograph.randn(4, 6, 5)
    ours.eval()
    assert ours(x) is x
    ours.train()
    y = ours(x.clone())
    assert y.shape == x.shape


def test_dropout_module_training_stats():
    m = nn.Dropout(0.25)
    y = m(dynograph.ones(4000))
    frac = (y == 0).float().mean().item()
    assert 0.2 < frac < 0.3
    np.testing.assert_allclose(y[y != 0].numpy(), 1 / 0.75, rtol=1e-6)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got -0.1"):
        nn.Dropout(-0.1)


def test_dropout2d_module_channels():
    y = nn.Dropout2d(0.5)(dynograph.ones(6, 8, 2, 2)).sum((2, 3)).numpy()
    assert set(np.unique(y)).issubset({0.0, 8.0})


def test_mlp_training_step_matches_torch(torch):
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))
    ours = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    _copy_params(ours, theirs)
    x = torch.randn(6, 4)
    t = torch.tensor([0, 1, 2, 0, 1, 2])
    lt = torch.nn.CrossEntropyLoss()(theirs(x), t)
    ld = nn.CrossEntropyLoss()(ours(from_torch(x)), from_torch(t))
    assert_same(ld, lt, rtol=1e-5)
    lt.backward()
    ld.backward()
    for p, tp in zip(ours.parameters(), theirs.parameters()):
        assert_same(p.grad, tp.grad, rtol=1e-5, atol=1e-6)

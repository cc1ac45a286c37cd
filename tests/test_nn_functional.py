"""nn.functional and nn.init against PyTorch: values, gradients, errors, distributions."""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
from conftest import assert_same, from_torch


F = nn.functional
init = nn.init


def _inputs(torch, shapes, seed, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    ts = [(torch.randn(*s, generator=g, dtype=torch.float64) * scale).requires_grad_() for s in shapes]
    ds = [from_torch(t, requires_grad=True) for t in ts]
    return ts, ds


def _check(torch, fn_name, shapes, kwargs, seed=0, scale=2.0, rtol=1e-6, atol=1e-8):
    ts, ds = _inputs(torch, shapes, seed, scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = getattr(torch.nn.functional, fn_name)(*ts, **kwargs)
        got = getattr(F, fn_name)(*ds, **kwargs)
    assert_same(got, expect, rtol=rtol, atol=atol)
    gt = torch.randn(expect.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=expect.dtype)
    expect.backward(gt)
    got.backward(from_torch(gt))
    for d, t in zip(ds, ts):
        assert_same(d.grad, t.grad, rtol=1e-5, atol=1e-7)


ACTIVATIONS = [
    ("relu", {}), ("relu6", {}), ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}), ("elu", {"alpha": 0.5}), ("selu", {}), ("celu", {}), ("celu", {"alpha": 2.0}),
    ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}),
    ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 3.0}), ("softsign", {}),
    ("hardswish", {}), ("hardsigmoid", {}), ("hardtanh", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("sigmoid", {}), ("tanh", {}),
    ("logsigmoid", {}), ("tanhshrink", {}), ("threshold", {"threshold": 0.3, "value": -2.0}),
    ("glu", {}), ("glu", {"dim": 0}), ("softmax", {"dim": 1}), ("softmax", {"dim": 0}),
    ("log_softmax", {"dim": -1}), ("log_softmax", {"dim": 0}), ("softmin", {"dim": 1}),
    ("hardshrink", {}), ("hardshrink", {"lambd": 1.5}), ("softshrink", {}), ("softshrink", {"lambd": 2.0}),
]


@pytest.mark.parametrize("name,kwargs", ACTIVATIONS)
@pytest.mark.parametrize("shape", [(4, 6), (2, 4, 2)])
def test_activations(torch, name, kwargs, shape):
    _check(torch, name, [shape], kwargs, scale=3.0)


def test_activations_extreme_values(torch):
    t = torch.tensor([-1000.0, -30.0, 0.5, 30.0, 1000.0], dtype=torch.float64, requires_grad=True)
    for name in ("softplus", "logsigmoid", "elu", "selu", "celu", "mish", "silu"):
        d = from_torch(t, requires_grad=True)
        expect = getattr(torch.nn.functional, name)(t)
        got = getattr(F, name)(d)
        assert_same(got, expect)
        got.sum().backward()
        tg, = torch.autograd.grad(expect.sum(), t)
        assert_same(d.grad, tg)
    big = torch.tensor([[1000.0, 0.0, -1000.0]], dtype=torch.float64)
    assert_same(F.log_softmax(from_torch(big), 1), torch.log_softmax(big, 1))
    assert_same(F.softmax(from_torch(big), 1), torch.softmax(big, 1))


def test_softmax_implicit_dim_warns(torch):
    x = dynograph.randn(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(x)
    assert_same(y, torch.softmax(torch.tensor(x.numpy()), 1))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        F.log_softmax(dynograph.randn(3))


def test_softmax_dtype(torch):
    x = torch.randn(2, 3)
    assert_same(F.softmax(from_torch(x), 1, dtype=dynograph.float64),
                torch.softmax(x, 1, dtype=torch.float64))


def test_inplace_activations(torch):
    t = torch.randn(3, 4, dtype=torch.float64)
    for name, fn in (("relu", F.relu), ("elu", F.elu), ("leaky_relu", F.leaky_relu),
                     ("hardtanh", F.hardtanh), ("silu", F.silu), ("selu", F.selu)):
        d = from_torch(t)
        out = fn(d, inplace=True)
        assert out is d
        assert_same(d, getattr(torch.nn.functional, name)(t))


def test_glu_odd_error():
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 3"):
        F.glu(dynograph.randn(2, 3))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
def test_linear(torch, bias, shape):
    shapes = [shape, (4, 3)] + ([(4,)] if bias else [])
    _check(torch, "linear", shapes, {})


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(torch, bias):
    shapes = [(5, 3), (5, 2), (4, 3, 2)] + ([(4,)] if bias else [])
    _check(torch, "bilinear", shapes, {})


def test_dropout(torch):
    x = dynograph.ones(2000)
    y = F.dropout(x, 0.3)
    kept = y != 0
    frac = kept.float().mean().item()
    assert 0.62 < frac < 0.78
    np.testing.assert_allclose(y[kept].numpy(), 1 / 0.7, rtol=1e-6)
    assert F.dropout(x, 0.3, training=False) is x
    assert (F.dropout(x, 1.0) == 0).all().item()
    with pytest.raises(ValueError, match=r"dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(x, 1.5)
    z = dynograph.ones(10)
    assert F.dropout(z, 0.5, inplace=True) is z


def test_dropout_grad():
    x = dynograph.ones(50, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_dropout2d_zeroes_channels():
    x = dynograph.ones(8, 16, 3, 3)
    y = F.dropout2d(x, 0.5)
    per_channel = y.sum((2, 3)).numpy()
    assert set(np.unique(per_channel)).issubset({0.0, 18.0})


def test_alpha_dropout_keeps_moments():
    dynograph.manual_seed(0)
    x = dynograph.randn(200000)
    y = F.alpha_dropout(x, 0.2, training=True)
    assert abs(y.mean().item()) < 0.02
    assert abs(y.std().item() - 1) < 0.02
    assert F.alpha_dropout(x, 0.2) is x


def test_one_hot(torch):
    t = torch.tensor([[0, 2], [1, 3]])
    assert_same(F.one_hot(from_torch(t)), torch.nn.functional.one_hot(t))
    assert_same(F.one_hot(from_torch(t), 6), torch.nn.functional.one_hot(t, 6))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(from_torch(t), 3)


@pytest.mark.parametrize("kwargs", [{}, {"p": 1.0}, {"dim": 0}, {"p": 3.0, "dim": -1}])
def test_normalize(torch, kwargs):
    _check(torch, "normalize", [(3, 4)], kwargs)


@pytest.mark.parametrize("dim", [1, 0, -1])
def test_cosine_similarity(torch, dim):
    _check(torch, "cosine_similarity", [(3, 4), (3, 4)], {"dim": dim})


@pytest.mark.parametrize("kwargs", [{}, {"p": 1.0}, {"keepdim": True}, {"p": 3.0, "eps": 0.1}])
def test_pairwise_distance(torch, kwargs):
    _check(torch, "pairwise_distance", [(3, 4), (3, 4)], kwargs)


@pytest.mark.parametrize("pad,mode,value", [
    ((1, 2), "constant", None), ((1, 0, 2, 1), "constant", 3.5), ((-1, 2), "constant", None),
    ((1, 1, 1, 1), "reflect", None), ((2, 1, 0, 1), "replicate", None),
    ((1, 2, 2, 0), "circular", None),
])
def test_pad(torch, pad, mode, value):
    kwargs = {"pad": pad, "mode": mode}
    if value is not None:
        kwargs["value"] = value
    _check(torch, "pad", [(2, 3, 4, 5)], kwargs)


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(torch, name, reduction):
    _check(torch, name, [(4, 5), (4, 5)], {"reduction": reduction})


@pytest.mark.parametrize("name,kwargs", [("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
                                         ("huber_loss", {"delta": 2.5})])
def test_regression_loss_params(torch, name, kwargs):
    _check(torch, name, [(4, 5), (4, 5)], kwargs)


def test_mse_broadcast_warning():
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(dynograph.randn(3, 1), dynograph.randn(3))


def test_bad_reduction():
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.l1_loss(dynograph.randn(3), dynograph.randn(3), reduction="foo")


def _class_case(torch, name, in_shape, n_classes, kwargs, weight=False, probs=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*in_shape, dtype=torch.float64, generator=g, requires_grad=True)
    tshape = in_shape[:1] + in_shape[2:] if len(in_shape) > 1 else ()
    if probs:
        target = torch.softmax(torch.randn(*in_shape, dtype=torch.float64, generator=g), 1 if len(in_shape) > 1 else 0)
    else:
        target = torch.randint(0, n_classes, tshape, generator=g)
        if "ignore_index" in kwargs and target.dim():
            target.view(-1)[0] = kwargs["ignore_index"]
    kw = dict(kwargs)
    dkw = dict(kwargs)
    if weight:
        w = torch.rand(n_classes, dtype=torch.float64, generator=g) + 0.5
        kw["weight"], dkw["weight"] = w, from_torch(w)
    if name == "nll_loss":
        x_t = torch.log_softmax(x, 1 if x.dim() > 1 else 0)
        xd = from_torch(x, requires_grad=True)
        x_d = F.log_softmax(xd, 1 if x.dim() > 1 else 0)
    else:
        x_t = x
        xd = from_torch(x, requires_grad=True)
        x_d = xd
    expect = getattr(torch.nn.functional, name)(x_t, target, **kw)
    got = getattr(F, name)(x_d, from_torch(target), **dkw)
    assert_same(got, expect, rtol=1e-6, atol=1e-9)
    expect.sum().backward()
    got.sum().backward()
    assert_same(xd.grad, x.grad, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("in_shape", [(5, 4), (3, 4, 2), (4,)])
@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 1},
                                    {"ignore_index": 2, "reduction": "none"}])
@pytest.mark.parametrize("weight", [False, True])
def test_class_losses(torch, name, in_shape, kwargs, weight):
    _class_case(torch, name, in_shape, 4, kwargs, weight)


@pytest.mark.parametrize("in_shape", [(5, 4), (3, 4, 2)])
@pytest.mark.parametrize("kwargs", [{"label_smoothing": 0.1}, {"label_smoothing": 0.3, "reduction": "sum"},
                                    {"label_smoothing": 0.2, "reduction": "none"},
                                    {"label_smoothing": 0.2, "ignore_index": 0}])
@pytest.mark.parametrize("weight", [False, True])
def test_cross_entropy_label_smoothing(torch, in_shape, kwargs, weight):
    _class_case(torch, "cross_entropy", in_shape, 4, kwargs, weight)


@pytest.mark.parametrize("in_shape", [(5, 4), (3, 4, 2), (4,)])
@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"label_smoothing": 0.2}])
@pytest.mark.parametrize("weight", [False, True])
def test_cross_entropy_probabilities(torch, in_shape, kwargs, weight):
    _class_case(torch, "cross_entropy", in_shape, 4, kwargs, weight, probs=True)


def test_nll_out_of_bounds():
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        F.nll_loss(dynograph.randn(2, 3), dynograph.tensor([0, 7]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(3\)."):
        F.nll_loss(dynograph.randn(2, 3), dynograph.tensor([0, 1, 2]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [False, True])
def test_binary_cross_entropy(torch, reduction, weight):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(4, 3, dtype=torch.float64, generator=g).clamp(0.05, 0.95).requires_grad_()
    t = torch.rand(4, 3, dtype=torch.float64, generator=g)
    w = torch.rand(4, 3, dtype=torch.float64, generator=g) if weight else None
    xd = from_torch(x, requires_grad=True)
    expect = torch.nn.functional.binary_cross_entropy(x, t, w, reduction=reduction)
    got = F.binary_cross_entropy(xd, from_torch(t), None if w is None else from_torch(w), reduction=reduction)
    assert_same(got, expect)
    expect.sum().backward()
    got.sum().backward()
    assert_same(xd.grad, x.grad)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("pos_weight", [False, True])
@pytest.mark.parametrize("weight", [False, True])
def test_bce_with_logits(torch, reduction, pos_weight, weight):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(4, 3, dtype=torch.float64, generator=g) * 3)
    x[0, 0], x[0, 1] = 1000.0, -1000.0
    x.requires_grad_()
    t = torch.rand(4, 3, dtype=torch.float64, generator=g)
    kw = {"reduction": reduction}
    dkw = dict(kw)
    if pos_weight:
        pw = torch.rand(3, dtype=torch.float64, generator=g) + 0.5
        kw["pos_weight"], dkw["pos_weight"] = pw, from_torch(pw)
    if weight:
        w = torch.rand(4, 3, dtype=torch.float64, generator=g)
        kw["weight"], dkw["weight"] = w, from_torch(w)
    xd = from_torch(x, requires_grad=True)
    expect = torch.nn.functional.binary_cross_entropy_with_logits(x, t, **kw)
    got = F.binary_cross_entropy_with_logits(xd, from_torch(t), **dkw)
    assert_same(got, expect)
    expect.sum().backward()
    got.sum().backward()
    assert_same(xd.grad, x.grad)


def test_bce_shape_errors():
    with pytest.raises(ValueError, match=r"Target size \(dynograph.Size\(\[3\]\)\) must be the same as input size"):
        F.binary_cross_entropy_with_logits(dynograph.randn(3, 1), dynograph.rand(3))
    with pytest.raises(ValueError, match="Using a target size"):
        F.binary_cross_entropy(dynograph.rand(3, 1), dynograph.rand(3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(torch, reduction, log_target):
    g = torch.Generator().manual_seed(5)
    x = torch.log_softmax(torch.randn(3, 4, dtype=torch.float64, generator=g), 1).detach().requires_grad_()
    t = torch.softmax(torch.randn(3, 4, dtype=torch.float64, generator=g), 1)
    t[0, 0] = 0.0
    if log_target:
        t = t.clamp_min(1e-3).log()
    xd = from_torch(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = torch.nn.functional.kl_div(x, t, reduction=reduction, log_target=log_target)
        got = F.kl_div(xd, from_torch(t), reduction=reduction, log_target=log_target)
    assert_same(got, expect)
    expect.sum().backward()
    got.sum().backward()
    assert_same(xd.grad, x.grad)


# ----------------------------------------------------------------------------- nn.init

@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu",)])
def test_calculate_gain(torch, args):
    assert init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_simple_fills():
    t = dynograph.empty(3, 4, requires_grad=True)
    assert init.constant_(t, 2.5) is t
    assert (t == 2.5).all().item() and t.requires_grad and t.grad_fn is None
    assert (init.zeros_(t) == 0).all().item()
    assert (init.ones_(t) == 1).all().item()
    np.testing.assert_array_equal(init.eye_(t).detach().numpy(), np.eye(3, 4))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(dynograph.empty(3))


def test_dirac(torch):
    for shape, groups in (((4, 2, 3), 1), ((4, 2, 3, 3), 2), ((2, 3, 1, 3, 3), 1)):
        t = torch.empty(shape)
        torch.nn.init.dirac_(t, groups)
        d = dynograph.empty(*shape)
        assert init.dirac_(d, groups) is d
        assert_same(d, t)
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        init.dirac_(dynograph.empty(3, 3))


def _bound_and_std(fn, shape, **kw):
    t = dynograph.empty(*shape)
    assert fn(t, **kw) is t
    a = t.numpy()
    return np.abs(a).max(), a.std(), a.mean()


@pytest.mark.parametrize("shape", [(200, 300), (64, 32, 3, 3)])
def test_xavier_and_kaiming_bounds(shape):
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    a = math.sqrt(6.0 / (fan_in + fan_out))
    m, s, mu = _bound_and_std(init.xavier_uniform_, shape)
    assert m <= a and m > 0.95 * a and abs(s - a / math.sqrt(3)) < 0.03 * a
    _, s, mu = _bound_and_std(init.xavier_normal_, shape, gain=2.0)
    assert abs(s - 2 * math.sqrt(2.0 / (fan_in + fan_out))) < 0.03 * s and abs(mu) < 0.05 * s
    b = math.sqrt(2.0) * math.sqrt(3.0 / fan_in)
    m, s, _ = _bound_and_std(init.kaiming_uniform_, shape, nonlinearity="relu")
    assert m <= b and m > 0.95 * b
    _, s, _ = _bound_and_std(init.kaiming_normal_, shape, mode="fan_out", nonlinearity="relu")
    assert abs(s - math.sqrt(2.0 / fan_out)) < 0.03 * s
    b = math.sqrt(2.0 / (1 + 5)) * math.sqrt(3.0 / fan_in)
    m, _, _ = _bound_and_std(init.kaiming_uniform_, shape, a=math.sqrt(5))
    assert m <= b and m > 0.95 * b


def test_fan_errors():
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2"):
        init.xavier_uniform_(dynograph.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported, please use one of fan_in, fan_out"):
        init.kaiming_uniform_(dynograph.empty(3, 3), mode="fan_avg")


def test_uniform_normal_trunc():
    m, s, mu = _bound_and_std(init.uniform_, (100000,), a=-2.0, b=4.0)
    assert m <= 4.0 and abs(mu - 1.0) < 0.03
    _, s, mu = _bound_and_std(init.normal_, (100000,), mean=3.0, std=0.5)
    assert abs(mu - 3.0) < 0.01 and abs(s - 0.5) < 0.01
    t = init.trunc_normal_(dynograph.empty(100000), mean=0.5, std=1.0, a=-1.0, b=1.5).numpy()
    assert t.min() >= -1.0 and t.max() <= 1.5 and t.min() < -0.99 and t.max() > 1.49
    assert abs(t.mean() - 0.3550) < 0.02  # mean of N(0.5, 1) truncated to [-1, 1.5]


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 2, 2)])
def test_orthogonal(shape):
    t = init.orthogonal_(dynograph.empty(*shape), gain=2.0)
    flat = t.reshape(shape[0], -1).numpy()
    small = min(flat.shape)
    prod = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    np.testing.assert_allclose(prod, 4 * np.eye(small), atol=1e-5)


def test_sparse():
    t = init.sparse_(dynograph.empty(10, 6), 0.3, std=0.5).numpy()
    assert ((t == 0).sum(0) == 3).all()
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(dynograph.empty(3), 0.1)


def test_error_texts():
    with pytest.raises(ValueError, match=r"Expected input batch_size \(5\) to match target batch_size \(4\)."):
        F.cross_entropy(dynograph.randn(5, 3), dynograph.randn(4, 3))
    with pytest.raises(RuntimeError, match="ZeroDivisionError: alpha cannot be 0 for CELU"):
        F.celu(dynograph.randn(2), 0.0)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh."):
        F.gelu(dynograph.randn(2), approximate="x")
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(dynograph.randn(2), (1,))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(5x3 and 4x4\)"):
        F.linear(dynograph.randn(5, 3), dynograph.randn(4, 4))


@pytest.mark.parametrize("name", ["gelu", "softplus", "logsigmoid", "elu", "hardswish", "mish"])
def test_non_contiguous_inputs(torch, name):
    t = torch.randn(4, 3, 5, dtype=torch.float64).permute(2, 0, 1)[:, ::2].requires_grad_()
    base = from_torch(t.detach().permute(1, 2, 0).contiguous(), requires_grad=True)
    d = base.permute(2, 0, 1)
    expect = getattr(torch.nn.functional, name)(t)
    got = getattr(F, name)(d)
    assert not d.is_contiguous()
    assert_same(got, expect)
    expect.sum().backward()
    got.sum().backward()
    assert_same(base.grad.permute(2, 0, 1), t.grad)


def test_losses_float32_and_expanded_target(torch):
    x = torch.randn(4, 3, requires_grad=True)
    t = torch.randn(1, 3).expand(4, 3)
    xd = from_torch(x, requires_grad=True)
    td = from_torch(t[:1]).expand(4, 3)
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        assert_same(getattr(F, name)(xd, td), getattr(torch.nn.functional, name)(x, t))
    logits = torch.randn(3, 5).t()
    target = torch.tensor([0, 2, 1, 1, 0])
    assert_same(F.cross_entropy(from_torch(logits.contiguous()).t().t(), from_torch(target)),
                torch.nn.functional.cross_entropy(logits, target))


def test_top_level_and_method_forms_of_functional_ops():
    torch = pytest.importorskip("torch")
    from dynograph import _functional_exports
    for name in _functional_exports.__all__:
        assert callable(getattr(torch, name)), name          # torch has the same top-level name
        assert getattr(dynograph, name) is getattr(_functional_exports, name)
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    for dim in (0, 1, -1):
        np.testing.assert_allclose(dynograph.softmax(dynograph.tensor(x), dim).numpy(),
                                   torch.softmax(torch.tensor(x), dim).numpy(), rtol=1e-6)
        np.testing.assert_allclose(dynograph.tensor(x).log_softmax(dim, dtype=dynograph.float64).numpy(),
                                   torch.tensor(x).log_softmax(dim, dtype=torch.float64).numpy(), rtol=1e-12)
    w = np.ones((2, 3, 2), np.float32)
    np.testing.assert_allclose(dynograph.conv1d(dynograph.tensor(x[None]), dynograph.tensor(w)).numpy(),
                               torch.conv1d(torch.tensor(x[None]), torch.tensor(w)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["hardshrink", "softshrink"])
@pytest.mark.parametrize("lambd", [0.5, 0.0, 1, -1.0, 1e39])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_shrink_edges(torch, name, lambd, dtype):
    # the band's edges, zero width, NaN and inf; PyTorch's errors for integers and bad lambdas
    values = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, float("nan"), float("inf"), -float("inf")]
    t = torch.tensor(values if dtype != "int64" else [-2, -1, 0, 1, 2], dtype=getattr(torch, dtype))
    d = from_torch(t)
    try:
        expect = getattr(torch.nn.functional, name)(t, lambd)
    except Exception as e:          # the error is the result under test
        with pytest.raises(type(e)) as got:
            getattr(F, name)(d, lambd)
        assert str(got.value) == str(e)
        return
    assert_same(getattr(F, name)(d, lambd), expect)


def test_hardshrink_top_level_and_method(torch):
    t = torch.tensor([-1.0, 0.2, 0.7])
    assert_same(dynograph.hardshrink(from_torch(t), 0.6), torch.hardshrink(t, 0.6))
    assert_same(from_torch(t).hardshrink(), t.hardshrink())
    assert not hasattr(dynograph.Tensor, "softshrink") and not hasattr(torch.Tensor, "softshrink")


def test_linear_grad_fn_is_addmm_for_a_batch(torch):
    """A tutorial prints ``grad_fn=<AddmmBackward0>`` for nn.Linear on a batch of vectors."""
    w, b = dynograph.randn(4, 3, requires_grad=True), dynograph.randn(4, requires_grad=True)
    out = F.linear(dynograph.ones(2, 3), w, b)
    expected = torch.nn.functional.linear(torch.ones(2, 3), torch.randn(4, 3, requires_grad=True),
                                          torch.randn(4))
    assert out.grad_fn.name() == expected.grad_fn.name() == "AddmmBackward0"
    out.sum().backward()
    assert w.grad.tolist() == [[2.0] * 3] * 4 and b.grad.tolist() == [2.0] * 4

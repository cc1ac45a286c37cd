"""Normalization functionals and layers against PyTorch: values, gradients, running statistics."""
import collections
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
    base = torch.randn(tuple(shape), generator=g, dtype=getattr(torch, dtype)) * scale + 0.5
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


# ----------------------------------------------------------------------------- batch norm

def _stats_pair(torch, c, dtype):
    """Running mean and var that are not the defaults, for torch and dynograph."""
    g = torch.Generator().manual_seed(9)
    tm = torch.randn(c, generator=g, dtype=getattr(torch, dtype))
    tv = torch.rand(c, generator=g, dtype=getattr(torch, dtype)) + 0.5
    return (tm, tv), (from_torch(tm), from_torch(tv))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 5), (2, 3, 2, 3)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_functional(torch, dtype, shape, training, affine):
    t, d = _pair(torch, shape, dtype, noncontig=len(shape) > 2)
    (tm, tv), (dm, dv) = _stats_pair(torch, 3, dtype)
    tw, dw = _pair(torch, (3,), dtype, seed=5) if affine else (None, None)
    tb, db = _pair(torch, (3,), dtype, seed=6) if affine else (None, None)
    expect = torch.nn.functional.batch_norm(t, tm, tv, tw, tb, training, 0.3, 1e-4)
    got = F.batch_norm(d, dm, dv, dw, db, training, 0.3, 1e-4)
    pairs = [(d, t)] + ([(dw, tw), (db, tb)] if affine else [])
    _check(torch, got, expect, pairs, dtype)
    assert_same(dm, tm, **_tol(dtype))
    assert_same(dv, tv, **_tol(dtype))


def test_batch_norm_without_running_stats(torch):
    t, d = _pair(torch, (4, 3, 2), "float64")
    expect = torch.nn.functional.batch_norm(t, None, None, training=True)
    _check(torch, F.batch_norm(d, None, None, training=True), expect, [(d, t)], "float64")


def _train_steps(torch, ours, theirs, shape, dtype, steps=3, noncontig=False):
    """A few training steps: outputs, input and parameter gradients, then the buffers."""
    for step in range(steps):
        t, d = _pair(torch, shape, dtype, seed=10 + step, noncontig=noncontig)
        pairs = [(d, t)] + list(zip(ours.parameters(), theirs.parameters()))
        for p in list(ours.parameters()) + list(theirs.parameters()):
            p.grad = None
        _check(torch, ours(d), theirs(t), pairs, dtype, seed=20 + step)
    for (name, b), (tname, tb) in zip(ours.named_buffers(), theirs.named_buffers()):
        assert name == tname
        assert_same(b, tb, **_tol(dtype))


BATCH_NORMS = [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 4, 2)),
               ("BatchNorm3d", (2, 3, 2, 2, 3))]


@pytest.mark.parametrize("name,shape", BATCH_NORMS)
@pytest.mark.parametrize("dtype,kwargs", [
    ("float32", {}), ("float64", {}), ("float32", {"momentum": None}),
    ("float64", {"affine": False, "momentum": 0.5}), ("float32", {"track_running_stats": False}),
    ("float64", {"bias": False, "eps": 1e-3})])
def test_batch_norm_modules(torch, dtype, name, shape, kwargs):
    ours = getattr(nn, name)(3, dtype=getattr(dynograph, dtype), **kwargs)
    theirs = getattr(torch.nn, name)(3, dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, v), (tk, tv) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert_same(v, tv)                              # dtypes too: num_batches_tracked is int64
    _perturbed(torch, ours, theirs)
    _train_steps(torch, ours, theirs, shape, dtype, noncontig=len(shape) > 2)
    ours.eval()
    theirs.eval()
    _train_steps(torch, ours, theirs, shape, dtype, steps=1)


def test_batch_norm_reset_and_load(torch):
    m = nn.BatchNorm1d(3)
    m(dynograph.randn(4, 3) * 3 + 1)
    assert int(m.num_batches_tracked) == 1 and m.running_mean.abs().sum() > 0
    m.reset_running_stats()
    assert_same(m.running_mean, torch.zeros(3))
    assert_same(m.running_var, torch.ones(3))
    assert_same(m.num_batches_tracked, torch.tensor(0))
    # a checkpoint without version metadata (from before num_batches_tracked existed) still loads
    # strictly, as in torch; one saved at version 2 must have the key
    for mod in (nn, torch.nn):
        state = collections.OrderedDict((k, v) for k, v in mod.BatchNorm1d(3).state_dict().items()
                                        if k != "num_batches_tracked")
        mod.BatchNorm1d(3).load_state_dict(state)
        state._metadata = {"": {"version": 2}}
        with pytest.raises(RuntimeError, match="Missing key.*num_batches_tracked"):
            mod.BatchNorm1d(3).load_state_dict(state)


def test_batch_norm_modules_train_in_no_grad(torch):
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    t = torch.randn(2, 3, 2, 2)
    with torch.no_grad(), dynograph.no_grad():
        assert_same(ours(from_torch(t)), theirs(t), rtol=1e-5)
    assert_same(ours.running_var, theirs.running_var, rtol=1e-5)


# ----------------------------------------------------------------------------- instance norm

INSTANCE_NORMS = [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm1d", (3, 5)),
                  ("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm2d", (3, 2, 3)),
                  ("InstanceNorm3d", (2, 3, 2, 2, 2))]


@pytest.mark.parametrize("name,shape", INSTANCE_NORMS)
@pytest.mark.parametrize("dtype,kwargs", [
    ("float32", {}), ("float64", {"affine": True}),
    ("float32", {"affine": True, "track_running_stats": True}),
    ("float64", {"track_running_stats": True, "momentum": None})])
def test_instance_norm_modules(torch, dtype, name, shape, kwargs):
    ours = getattr(nn, name)(3, dtype=getattr(dynograph, dtype), **kwargs)
    theirs = getattr(torch.nn, name)(3, dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _perturbed(torch, ours, theirs)
    _train_steps(torch, ours, theirs, shape, dtype, steps=2, noncontig=True)
    ours.eval()
    theirs.eval()
    _train_steps(torch, ours, theirs, shape, dtype, steps=1)


def test_instance_norm_functional_with_stats(torch):
    t, d = _pair(torch, (2, 3, 4), "float64")
    (tm, tv), (dm, dv) = _stats_pair(torch, 3, "float64")
    tw, dw = _pair(torch, (3,), "float64", seed=4)
    expect = torch.nn.functional.instance_norm(t, tm, tv, tw, None, True, 0.2, 1e-3)
    _check(torch, F.instance_norm(d, dm, dv, dw, None, True, 0.2, 1e-3), expect, [(d, t), (dw, tw)],
           "float64")
    assert_same(dm, tm)
    assert_same(dv, tv)


def test_instance_norm_feature_mismatch(torch):
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(4)(dynograph.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(4\)"):
        nn.InstanceNorm1d(4, affine=True)(dynograph.randn(2, 3, 5))


# ----------------------------------------------------------------------------- group norm, LRN

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("groups,shape", [(1, (2, 4, 3)), (2, (2, 4, 3)), (4, (2, 4, 3)), (2, (3, 4)),
                                          (2, (1, 4, 2, 3))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": False}, {"bias": False, "eps": 1e-2}])
def test_group_norm(torch, dtype, groups, shape, kwargs):
    ours = nn.GroupNorm(groups, 4, dtype=getattr(dynograph, dtype), **kwargs)
    theirs = torch.nn.GroupNorm(groups, 4, dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _perturbed(torch, ours, theirs)
    t, d = _pair(torch, shape, dtype, noncontig=True)
    pairs = [(d, t)] + list(zip(ours.parameters(), theirs.parameters()))
    _check(torch, ours(d), theirs(t), pairs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(2, 5, 3), (2, 4, 2, 3), (1, 3, 2, 2, 2)])
def test_local_response_norm(torch, dtype, size, shape):
    ours, theirs = nn.LocalResponseNorm(size, 0.1, 0.6, 2.0), torch.nn.LocalResponseNorm(size, 0.1, 0.6, 2.0)
    assert repr(ours) == repr(theirs)
    t, d = _pair(torch, shape, dtype, noncontig=len(shape) < 5)   # torch views 5-D input
    _check(torch, ours(d), theirs(t), [(d, t)], dtype)
    assert repr(nn.LocalResponseNorm(2)) == repr(torch.nn.LocalResponseNorm(2))


# ----------------------------------------------------------------------------- prelu, softmax2d, distances

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num,shape", [(1, (5,)), (1, (2, 3, 4)), (3, (2, 3)), (3, (2, 3, 2, 2)), (1, ())])
def test_prelu(torch, dtype, num, shape):
    ours = nn.PReLU(num, dtype=getattr(dynograph, dtype))
    theirs = torch.nn.PReLU(num, dtype=getattr(torch, dtype))
    assert repr(ours) == repr(theirs)
    assert_same(ours.weight, theirs.weight)                 # init 0.25
    _perturbed(torch, ours, theirs)
    t, d = _pair(torch, shape, dtype)
    pairs = [(d, t), (ours.weight, theirs.weight)]
    _check(torch, ours(d), theirs(t), pairs, dtype)
    assert_same(nn.PReLU(init=0.1).weight, torch.nn.PReLU(init=0.1).weight)


@pytest.mark.parametrize("shape", [(2, 3, 2, 2), (3, 2, 4)])
def test_softmax2d(torch, shape):
    t, d = _pair(torch, shape, "float64")
    assert repr(nn.Softmax2d()) == repr(torch.nn.Softmax2d())
    _check(torch, nn.Softmax2d()(d), torch.nn.Softmax2d()(t), [(d, t)], "float64")


@pytest.mark.parametrize("kwargs", [{}, {"dim": 0, "eps": 1e-3}])
def test_cosine_similarity(torch, kwargs):
    (t1, d1), (t2, d2) = _pair(torch, (3, 4), "float64"), _pair(torch, (3, 4), "float64", seed=1)
    ours, theirs = nn.CosineSimilarity(**kwargs), torch.nn.CosineSimilarity(**kwargs)
    assert repr(ours) == repr(theirs)
    _check(torch, ours(d1, d2), theirs(t1, t2), [(d1, t1), (d2, t2)], "float64")


@pytest.mark.parametrize("kwargs", [{}, {"p": 1.0, "keepdim": True}, {"p": 3.0, "eps": 1e-2}])
def test_pairwise_distance(torch, kwargs):
    (t1, d1), (t2, d2) = _pair(torch, (3, 4), "float64"), _pair(torch, (3, 4), "float64", seed=1)
    ours, theirs = nn.PairwiseDistance(**kwargs), torch.nn.PairwiseDistance(**kwargs)
    assert repr(ours) == repr(theirs)
    _check(torch, ours(d1, d2), theirs(t1, t2), [(d1, t1), (d2, t2)], "float64")


# ----------------------------------------------------------------------------- errors

ERRORS = [
    "F.layer_norm(x, (3,))", "F.layer_norm(x, (4,), T.ones(3))", "F.layer_norm(x, (4,), None, T.ones(3))",
    "F.layer_norm(x, (2, 3, 4))", "F.layer_norm(x, [])", "F.layer_norm(x, 4)",
    "F.rms_norm(x, (3,))", "F.rms_norm(x, (4,), T.ones(3))", "F.rms_norm(x, [])",
    "F.batch_norm(x3, None, None, training=False)", "F.batch_norm(x3, T.zeros(4), T.ones(3), training=True)",
    "F.batch_norm(x3, T.zeros(3), T.ones(4), training=True)", "F.batch_norm(x3, T.zeros(3), T.ones(3), T.ones(4))",
    "F.batch_norm(x3, T.zeros(3), T.ones(3), None, T.ones(4))", "F.batch_norm(x[:1], None, None, training=True)",
    "F.batch_norm(x3, None, None, training=True, eps=0)", "F.batch_norm(x3, None, None, eps=-1.0)",
    "F.batch_norm(x3, None, None, training=True, momentum=None)",
    "F.group_norm(x3, 2)", "F.group_norm(x3, 3, T.ones(4))", "F.group_norm(x[0], 1)",
    "F.group_norm(T.ones(1, 3), 3, None, None)",
    "F.instance_norm(x3, T.zeros(4), T.ones(3))", "F.instance_norm(x3, weight=T.ones(4))",
    "F.instance_norm(x3[:, :, :1])", "F.instance_norm(x)",
    "F.local_response_norm(x, 2)",
    "F.prelu(x, T.ones(2))", "F.prelu(x, T.ones(1, 1))", "F.prelu(x[0], T.ones(4))",
    "nn.BatchNorm1d(3)(x3[0, 0])", "nn.BatchNorm1d(3)(x3[None])", "nn.BatchNorm2d(3)(x3)",
    "nn.BatchNorm3d(3)(x3)", "nn.InstanceNorm1d(3)(x3[0, 0])", "nn.InstanceNorm2d(3)(x)",
    "nn.InstanceNorm3d(3)(x3)", "nn.GroupNorm(2, 3)", "nn.Softmax2d()(x)",
    "F.instance_norm(x3, use_input_stats=False)", "nn.BatchNorm1d(3)(x)", "nn.BatchNorm1d(4)(x3)",
    "F.batch_norm(x3, T.zeros(3), T.ones(5), T.ones(5), T.ones(5))", "nn.LayerNorm(5)(x)",
    "F.layer_norm(x.long(), (4,))", "F.layer_norm(x.int(), (4,))", "F.group_norm(x3.long(), 1)",
    "F.batch_norm(x3.long(), None, None, training=True)", "F.instance_norm(x3.long())",
    "F.rms_norm(x.long(), (4,))", "F.prelu(x.long(), T.ones(1).long())",
    "F.batch_norm(x3.double(), T.zeros(3), T.ones(3), training=True)",
    "F.layer_norm(x.double(), (4,), T.ones(4))", "F.group_norm(x3.double(), 1, T.ones(3))",
    "F.local_response_norm(x3, 0)", "F.local_response_norm(x3[None], -1)",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors(torch, expr):
    x, x3 = torch.randn(2, 4), torch.randn(2, 3, 4)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "T": torch, "x": x, "x3": x3, "nn": torch.nn})
    ours = eval_expr(expr, {"F": F, "T": dynograph, "x": from_torch(x), "x3": from_torch(x3), "nn": nn})
    assert_same_error(ours, theirs, expr)


def test_no_warnings_and_numpy_free_graph(torch):
    x = dynograph.randn(2, 3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.layer_norm(x, (3,))
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", ["layer", "rms", "batch", "instance", "group"])
def test_low_precision_computes_in_float32(torch, dtype, case):
    x = torch.randn(4, 4, 6, dtype=torch.float32) * 3 + 10
    t, d = x.to(getattr(torch, dtype)), from_torch(x).to(getattr(dynograph, dtype))
    calls = {
        # a float32 weight goes with low-precision input
        "layer": lambda f, y: f.layer_norm(y, (6,), y.new_ones(6) if y.element_size() > 2
                                           else y.new_ones(6).float()),
        "rms": lambda f, y: f.rms_norm(y, (4, 6)),
        "batch": lambda f, y: f.batch_norm(y, None, None, training=True),
        "instance": lambda f, y: f.instance_norm(y),
        "group": lambda f, y: f.group_norm(y, 2),
    }
    got, expect = calls[case](F, d), calls[case](torch.nn.functional, t)
    tol = 2e-2 if dtype == "bfloat16" else 4e-3         # a few units in the last place
    assert_same(got, expect, rtol=tol, atol=2.5 * tol)  # (torch rounds more in some kernels)
    # no less accurate than torch against a float64 evaluation of the same rounded input
    exact = calls[case](torch.nn.functional, t.double()).numpy()
    ours_err = np.abs(got.double().numpy() - exact).max()
    assert ours_err <= 1.5 * np.abs(expect.double().numpy() - exact).max() + tol / 10


@pytest.mark.parametrize("expr", [
    "F.layer_norm(x, (4,))", "F.layer_norm(x, (3, 4), T.ones(3, 4), T.zeros(3, 4))",
    "F.batch_norm(x, None, None, training=True)", "F.batch_norm(x, T.zeros(3), T.ones(3), T.ones(3))",
    "F.group_norm(x, 3, T.ones(3))", "F.rms_norm(x, (4,), T.ones(4))", "F.prelu(x, T.ones(3))",
    "nn.LayerNorm(4)(x)", "nn.BatchNorm1d(3)(x)", "nn.GroupNorm(1, 3)(x)"])
def test_grad_fn_names(torch, expr):
    x = torch.randn(2, 3, 4)
    env = {"F": torch.nn.functional, "T": torch, "nn": torch.nn, "x": x.requires_grad_()}
    theirs = eval(expr, env).grad_fn.name()
    env = {"F": F, "T": dynograph, "nn": nn, "x": from_torch(x, requires_grad=True)}
    assert eval(expr, env).grad_fn.name() == theirs


def test_prelu_gradient_at_zero(torch):
    t, w = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True), torch.tensor([0.25], requires_grad=True)
    d, dw = from_torch(t, requires_grad=True), from_torch(w, requires_grad=True)
    torch.nn.functional.prelu(t, w).sum().backward()
    F.prelu(d, dw).sum().backward()
    assert_same(d.grad, t.grad)
    assert_same(dw.grad, w.grad)


@pytest.mark.parametrize("case", ["layer", "batch", "batch_eval", "group", "instance", "rms"])
def test_double_backward(case):
    from grad_inputs import r
    x, w, b = r(3, 2, 4), r(2, seed=1), r(2, seed=2)
    stats = (r(2, seed=3).detach(), r(2, lo=0.5, hi=1.5, seed=4).detach())
    fns = {
        "layer": lambda x, w, b: F.layer_norm(x.transpose(1, 2), (2,), w, b),
        "batch": lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        "batch_eval": lambda x, w, b: F.batch_norm(x, *stats, w, b),
        "group": lambda x, w, b: F.group_norm(x, 1, w, b),
        "instance": lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        "rms": lambda x, w, b: F.rms_norm(x.transpose(1, 2), (2,), w) + b,
    }
    assert dynograph.autograd.gradcheck(fns[case], (x, w, b))
    assert dynograph.autograd.gradgradcheck(fns[case], (x, w, b))


def test_instance_norm_old_checkpoint_with_running_stats(torch):
    """A checkpoint without version metadata holding running stats that the layer does not track."""
    messages = []
    for mod, T in ((nn, dynograph), (torch.nn, torch)):
        state = collections.OrderedDict(running_mean=T.zeros(3), running_var=T.ones(3))
        with pytest.raises(RuntimeError) as err:
            mod.InstanceNorm1d(3).load_state_dict(state)
        messages.append(str(err.value).replace("torch", "dynograph"))
    assert messages[0] == messages[1]
    assert "Unexpected running stats buffer(s)" in messages[0]

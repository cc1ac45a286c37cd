"""The remaining losses against PyTorch: values and gradients for every reduction, argument
combinations, float32/float64, non-contiguous inputs, errors, legacy flags and module reprs."""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
from conftest import assert_same, assert_same_error, eval_expr, from_torch

F = nn.functional
REDUCTIONS = ["none", "mean", "sum"]


def _tol(dtype_name):
    return (1e-5, 1e-6) if dtype_name == "float32" else (1e-7, 1e-9)


def _sign(torch, g, shape, dtype):
    return torch.randint(0, 2, shape, generator=g).to(dtype) * 2 - 1


# Each case: name -> (inputs(torch, g, dtype) -> list of torch args, indices of args with grads).
def _poisson(torch, g, dt):
    return [torch.randn(4, 5, generator=g, dtype=dt), torch.poisson(torch.rand(4, 5, generator=g, dtype=dt) * 4)]


def _poisson_rate(torch, g, dt):
    return [torch.rand(4, 5, generator=g, dtype=dt) * 3 + 0.1,
            torch.poisson(torch.rand(4, 5, generator=g, dtype=dt) * 4)]


def _gauss(var_shape):
    def make(torch, g, dt):
        return [torch.randn(4, 3, generator=g, dtype=dt), torch.randn(4, 3, generator=g, dtype=dt),
                torch.rand(*var_shape, generator=g, dtype=dt) + 0.05]
    return make


def _pair(torch, g, dt, shape=(4, 5)):
    return [torch.randn(*shape, generator=g, dtype=dt), torch.randn(*shape, generator=g, dtype=dt),
            _sign(torch, g, shape, dt)]


def _signed(torch, g, dt, shape=(4, 5)):
    return [torch.randn(*shape, generator=g, dtype=dt) * 2, _sign(torch, g, shape, dt)]


def _multilabel(torch, g, dt):
    return [torch.randn(4, 5, generator=g, dtype=dt), torch.randint(0, 2, (4, 5), generator=g).to(dt)]


def _cos(torch, g, dt, batched=True):
    shape = (5, 4) if batched else (4,)
    return [torch.randn(*shape, generator=g, dtype=dt), torch.randn(*shape, generator=g, dtype=dt),
            _sign(torch, g, shape[:1] if batched else (), dt)]


def _triplet(shape):
    def make(torch, g, dt):
        return [torch.randn(*shape, generator=g, dtype=dt) for _ in range(3)]
    return make


def _multi_margin(torch, g, dt):
    return [torch.randn(5, 4, generator=g, dtype=dt), torch.tensor([0, 3, 1, 1, 2])]


def _multilabel_margin(torch, g, dt):
    target = torch.tensor([[0, 3, -1, 1], [1, 1, -1, -1], [-1, 0, 0, 0], [3, 2, 1, 0], [2, -1, 3, 1]])
    return [torch.randn(5, 4, generator=g, dtype=dt), target]


CASES = [
    ("poisson_nll_loss", _poisson, {}, (0, 1)),
    ("poisson_nll_loss", _poisson, {"full": True}, (0,)),
    ("poisson_nll_loss", _poisson_rate, {"log_input": False}, (0, 1)),
    ("poisson_nll_loss", _poisson_rate, {"log_input": False, "full": True, "eps": 1e-3}, (0,)),
    ("gaussian_nll_loss", _gauss((4, 3)), {}, (0, 1, 2)),
    ("gaussian_nll_loss", _gauss((4,)), {"full": True}, (0, 1, 2)),
    ("gaussian_nll_loss", _gauss((4, 1)), {"eps": 0.3}, (0, 1, 2)),
    ("gaussian_nll_loss", _gauss((1, 3)), {}, (0, 1, 2)),
    ("margin_ranking_loss", _pair, {}, (0, 1)),
    ("margin_ranking_loss", _pair, {"margin": 0.5}, (0, 1)),
    ("hinge_embedding_loss", _signed, {}, (0,)),
    ("hinge_embedding_loss", _signed, {"margin": 2.5}, (0,)),
    ("soft_margin_loss", _signed, {}, (0,)),
    ("multilabel_soft_margin_loss", _multilabel, {}, (0,)),
    ("cosine_embedding_loss", _cos, {}, (0, 1)),
    ("cosine_embedding_loss", _cos, {"margin": 0.2}, (0, 1)),
    ("cosine_embedding_loss", _cos, {"margin": -0.5}, (0, 1)),
    ("cosine_embedding_loss", lambda t, g, dt: _cos(t, g, dt, False), {"margin": -0.5}, (0, 1)),
    ("triplet_margin_loss", _triplet((5, 4)), {}, (0, 1, 2)),
    ("triplet_margin_loss", _triplet((5, 4)), {"margin": 2.0, "p": 1, "swap": True}, (0, 1, 2)),
    ("triplet_margin_loss", _triplet((5, 4)), {"p": 3, "eps": 1e-3, "swap": True}, (0, 1, 2)),
    ("triplet_margin_loss", _triplet((4,)), {"margin": 3.0}, (0, 1, 2)),
    ("triplet_margin_loss", _triplet((2, 3, 4)), {"margin": 3.0}, (0, 1, 2)),
    ("triplet_margin_with_distance_loss", _triplet((5, 4)), {}, (0, 1, 2)),
    ("triplet_margin_with_distance_loss", _triplet((5, 4)), {"margin": 2.0, "swap": True}, (0, 1, 2)),
    ("multi_margin_loss", _multi_margin, {}, (0,)),
    ("multi_margin_loss", _multi_margin, {"p": 2, "margin": 0.6}, (0,)),
    ("multi_margin_loss", lambda t, g, dt: [a[1] for a in _multi_margin(t, g, dt)], {}, (0,)),
    ("multilabel_margin_loss", _multilabel_margin, {}, (0,)),
    ("multilabel_margin_loss", lambda t, g, dt: [a[2] for a in _multilabel_margin(t, g, dt)], {}, (0,)),
]


def _to_ours(t, requires_grad):
    return from_torch(t, requires_grad=requires_grad) if hasattr(t, "detach") else t


def _run(torch, name, args, kwargs, grad_idx, rtol, atol, noncontig=False, fn_ours=None, fn_theirs=None):
    ts = [a.clone().requires_grad_() if i in grad_idx else a for i, a in enumerate(args)]
    ds = [_to_ours(a, i in grad_idx) for i, a in enumerate(args)]
    leaves, grad_of = ds, (lambda g: g)
    if noncontig:
        # same values in transposed storage (2-D args): the loss must not depend on memory layout
        assert all(a.dim() == 2 for a in args)
        leaves = [_to_ours(a.t().contiguous(), i in grad_idx) for i, a in enumerate(args)]
        ds, grad_of = [leaf.t() for leaf in leaves], (lambda g: g.t())
        assert not ds[0].is_contiguous()
    dkw = {k: from_torch(v) if hasattr(v, "detach") else v for k, v in kwargs.items()}
    expect = (fn_theirs or getattr(torch.nn.functional, name))(*ts, **kwargs)
    got = (fn_ours or getattr(F, name))(*ds, **dkw)
    assert_same(got, expect, rtol=rtol, atol=atol)
    gt = torch.rand(expect.shape, generator=torch.Generator().manual_seed(7), dtype=expect.dtype) + 0.5
    expect.backward(gt)
    got.backward(from_torch(gt))
    for i in grad_idx:
        assert_same(grad_of(leaves[i].grad), ts[i].grad, rtol=max(rtol, 1e-6), atol=atol)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{c[2]}" for c in CASES])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loss_against_torch(torch, case, reduction, dtype):
    name, make, kwargs, grad_idx = CASES[case]
    dt = getattr(torch, dtype)
    args = make(torch, torch.Generator().manual_seed(case), dt)
    _run(torch, name, args, dict(kwargs, reduction=reduction), grad_idx, *_tol(dtype))


@pytest.mark.parametrize("case", [0, 4, 8, 10, 12, 13, 18, 28])
def test_noncontiguous_inputs(torch, case):
    name, make, kwargs, grad_idx = CASES[case]
    args = make(torch, torch.Generator().manual_seed(case), torch.float64)
    if name == "multilabel_margin_loss":
        args[1] = args[1].t().contiguous().t()
    _run(torch, name, args, kwargs, grad_idx, 1e-7, 1e-9, noncontig=True)


@pytest.mark.parametrize("weighted", ["multilabel_soft_margin_loss", "multi_margin_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_class_weights(torch, weighted, reduction):
    g = torch.Generator().manual_seed(3)
    w = torch.rand(4, generator=g, dtype=torch.float64) + 0.2
    if weighted == "multi_margin_loss":
        args = [torch.randn(5, 4, generator=g, dtype=torch.float64), torch.tensor([0, 3, 1, 1, 2])]
        kwargs = {"p": 2, "weight": w}
    else:
        args = [torch.randn(5, 4, generator=g, dtype=torch.float64),
                torch.randint(0, 2, (5, 4), generator=g).double()]
        kwargs = {"weight": w}
    _run(torch, weighted, args, dict(kwargs, reduction=reduction), (0,), 1e-7, 1e-9)


@pytest.mark.parametrize("name", ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
                                  "multilabel_soft_margin_loss", "multi_margin_loss", "poisson_nll_loss",
                                  "triplet_margin_loss", "cosine_embedding_loss", "multilabel_margin_loss"])
@pytest.mark.parametrize("legacy", [{"size_average": False}, {"reduce": False}, {"size_average": True},
                                    {"size_average": False, "reduce": True}])
def test_legacy_reduction_flags(torch, name, legacy):
    case = next(i for i, c in enumerate(CASES) if c[0] == name)
    _, make, kwargs, grad_idx = CASES[case]
    args = make(torch, torch.Generator().manual_seed(0), torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(torch, name, args, dict(kwargs, **legacy), grad_idx, 1e-7, 1e-9)


def test_kinks_follow_torch(torch):
    """Gradients exactly at the hinge: clamp-style losses pass them, ATen's margin kernels do not."""
    zeros = torch.zeros(4, dtype=torch.float64)
    signs = torch.tensor([-1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    _run(torch, "hinge_embedding_loss", [zeros + 1.0, signs], {"reduction": "sum"}, (0,), 1e-7, 1e-9)
    _run(torch, "margin_ranking_loss", [zeros, zeros.clone(), signs], {"reduction": "sum"}, (0, 1), 1e-7, 1e-9)
    _run(torch, "multi_margin_loss", [torch.tensor([[0.5, 0.0, 0.2]], dtype=torch.float64), torch.tensor([0])],
         {"margin": 0.5}, (0,), 1e-7, 1e-9)
    _run(torch, "multilabel_margin_loss", [torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64),
                                           torch.tensor([[0, -1, 0]])], {}, (0,), 1e-7, 1e-9)
    _run(torch, "soft_margin_loss", [zeros, signs], {}, (0,), 1e-7, 1e-9)
    _run(torch, "multilabel_soft_margin_loss", [zeros.reshape(2, 2), (signs.reshape(2, 2) + 1) / 2], {}, (0,),
         1e-7, 1e-9)


def test_logistic_losses_stable_for_huge_logits(torch):
    """soft margin losses stay finite (and exact) where torch's log(1 + exp(.)) overflows."""
    x = torch.tensor([-1000.0, -30.0, -0.5, 0.0, 0.5, 30.0, 1000.0], dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    xd = from_torch(x, requires_grad=True)
    got = F.soft_margin_loss(xd, from_torch(y), reduction="none")
    xt = x.clone().requires_grad_()
    # the same quantity through torch's stable softplus
    expect = torch.nn.functional.softplus(-y * xt)
    assert_same(got, expect, rtol=1e-12, atol=1e-300)
    got.sum().backward()
    expect.sum().backward()
    assert_same(xd.grad, xt.grad, rtol=1e-12, atol=1e-300)
    x32 = dynograph.tensor([[-1000.0, 1000.0]], requires_grad=True)
    loss = F.multilabel_soft_margin_loss(x32, dynograph.tensor([[1.0, 0.0]]))
    loss.backward()
    assert math.isclose(loss.item(), 1000.0, rel_tol=1e-6)
    np.testing.assert_allclose(x32.grad.numpy(), [[-0.5, 0.5]], rtol=1e-6)


def test_poisson_full_target_gradient_is_finite(torch):
    """Stirling's term is masked where target <= 1: no nan leaks into the target's gradient."""
    x = dynograph.ones(3, requires_grad=True)
    t = dynograph.tensor([0.0, 1.0, 2.0], requires_grad=True)
    F.poisson_nll_loss(x, t, full=True, reduction="sum").backward()
    xt = torch.ones(3, requires_grad=True)
    tt = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    torch.nn.functional.poisson_nll_loss(xt, tt, full=True, reduction="sum").backward()
    assert_same(x.grad, xt.grad)
    assert_same(t.grad[1:], tt.grad[1:])
    assert math.isfinite(t.grad[0].item())


def test_gaussian_var_clamp_passes_gradient(torch):
    """var below eps is clamped in value only; its gradient goes straight through, as in torch."""
    v = torch.tensor([1e-8, 1e-3, 1.0], dtype=torch.float64)
    args = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), v]
    _run(torch, "gaussian_nll_loss", args, {"reduction": "sum", "eps": 1e-4}, (0, 1, 2), 1e-10, 0)
    _run(torch, "gaussian_nll_loss", args[:2] + [0.5], {"reduction": "none"}, (0, 1), 1e-10, 0)


def test_triplet_with_custom_distance(torch):
    def cos_dist(a, b, F_):
        return 1.0 - F_.cosine_similarity(a, b)
    args = _triplet((5, 4))(torch, torch.Generator().manual_seed(1), torch.float64)
    _run(torch, "triplet_margin_with_distance_loss", args, {"swap": True}, (0, 1, 2), 1e-7, 1e-9,
         fn_ours=lambda *a, **k: F.triplet_margin_with_distance_loss(
             *a, distance_function=lambda x, y: cos_dist(x, y, F), **k),
         fn_theirs=lambda *a, **k: torch.nn.functional.triplet_margin_with_distance_loss(
             *a, distance_function=lambda x, y: cos_dist(x, y, torch.nn.functional), **k))


# ----------------------------------------------------------------------------- CTC

def _ctc_inputs(torch, dtype, seed=0, T=7, N=3, C=5):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(T, N, C, generator=g, dtype=dtype)
    targets = torch.tensor([[1, 2, 2, 4], [3, 1, 3, 3], [4, 4, 1, 2]])[:N]
    return logits, targets


CTC_CASES = [
    ([7, 5, 6], [3, 2, 4], {}),
    ([7, 7, 7], [4, 1, 0], {"blank": 0}),
    ([6, 4, 7], [2, 3, 1], {"blank": 0, "zero_infinity": True}),
    ([7, 2, 6], [3, 3, 2], {"zero_infinity": True}),        # sample 1 cannot be aligned: zeroed
    ([0, 7, 3], [0, 2, 1], {}),                              # an empty input with an empty target
]


CTC_GRID = [(case, reduction, "float64", layout) for case in range(len(CTC_CASES)) for reduction in REDUCTIONS
            for layout in ("padded", "concatenated")] + \
           [(case, "mean", "float32", "padded") for case in range(len(CTC_CASES))]


@pytest.mark.parametrize("case,reduction,dtype,layout", CTC_GRID)
def test_ctc_loss(torch, case, reduction, dtype, layout):
    """Both target layouts; gradients reach the logits through log_softmax and match torch."""
    in_lens, tg_lens, kwargs = CTC_CASES[case]
    logits, targets = _ctc_inputs(torch, getattr(torch, dtype), case)
    if layout == "concatenated":
        targets = torch.cat([targets[n, :k] for n, k in enumerate(tg_lens)])
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (1e-9, 1e-10)
    _run(torch, "ctc_loss", [logits, targets, torch.tensor(in_lens), torch.tensor(tg_lens)],
         dict(kwargs, reduction=reduction), (0,), rtol, atol,
         fn_ours=lambda x, *a, **k: F.ctc_loss(F.log_softmax(x, 2), *a, **k),
         fn_theirs=lambda x, *a, **k: torch.nn.functional.ctc_loss(x.log_softmax(2), *a, **k))


@pytest.mark.parametrize("blank", [0, 3])
def test_ctc_log_probs_leaf_gradient(torch, blank):
    """torch's gradient convention for a log_probs leaf (exp(log_probs) - posterior), to 1e-9."""
    logits, _ = _ctc_inputs(torch, torch.float64, 5)
    targets = torch.tensor([[1, 2, 2], [4, 1, 0], [2, 4, 4]])    # no target equals either blank
    lp = logits.log_softmax(2)
    for kw in ({"reduction": "none"}, {"reduction": "mean"}, {"reduction": "sum", "zero_infinity": True}):
        _run(torch, "ctc_loss", [lp, targets, [7, 5, 4], [3, 2, 3]], dict(kw, blank=blank), (0,), 1e-9, 1e-10)


def test_ctc_unbatched_and_length_forms(torch):
    logits, targets = _ctc_inputs(torch, torch.float64, 2)
    lp = logits.log_softmax(2)
    for lens in ((torch.tensor(7), torch.tensor(3)), ([6], [3]), ((7,), (2,))):
        tg = targets[0, :lens[1][0] if isinstance(lens[1], (list, tuple)) else 3]
        for reduction in REDUCTIONS:
            _run(torch, "ctc_loss", [lp[:, 0], tg, *lens], {"reduction": reduction}, (0,), 1e-9, 1e-10)
    # unbatched log_probs with a padded (1, S) target, lengths as int tensors of other widths
    _run(torch, "ctc_loss", [lp[:, 1], targets[1:2], torch.tensor([5], dtype=torch.int32),
                             torch.tensor([2], dtype=torch.int32)], {}, (0,), 1e-9, 1e-10)
    # float targets are accepted as class indices
    _run(torch, "ctc_loss", [lp, targets.double(), [7, 7, 7], [4, 4, 4]], {}, (0,), 1e-9, 1e-10)


def test_ctc_infinite_loss_without_zero_infinity(torch):
    logits, targets = _ctc_inputs(torch, torch.float64, 3)
    lp = from_torch(logits.log_softmax(2), requires_grad=True)
    loss = F.ctc_loss(lp, from_torch(targets), [2, 7, 7], [4, 1, 1], reduction="none")
    expect = torch.nn.functional.ctc_loss(logits.log_softmax(2), targets, [2, 7, 7], [4, 1, 1], reduction="none")
    assert_same(loss, expect, rtol=1e-9, atol=1e-10)
    assert math.isinf(loss[0].item())


def test_ctc_longer_sequence_matches(torch):
    """A realistic size (T=40, N=4, C=12, S=10) in float32: value and logits gradient."""
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(40, 4, 12, generator=g)
    targets = torch.randint(1, 12, (4, 10), generator=g)
    _run(torch, "ctc_loss", [logits, targets, torch.tensor([40, 33, 25, 40]), torch.tensor([10, 7, 9, 1])],
         {}, (0,), 1e-5, 1e-5,
         fn_ours=lambda x, *a, **k: F.ctc_loss(F.log_softmax(x, 2), *a, **k),
         fn_theirs=lambda x, *a, **k: torch.nn.functional.ctc_loss(x.log_softmax(2), *a, **k))


# ----------------------------------------------------------------------------- errors

ERRORS = [
    "F.poisson_nll_loss(T.randn(3, 4), T.ones(3, 4), reduction='bad')",
    "F.poisson_nll_loss(T.randn(3, 4), T.ones(5))",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), T.ones(3, 4), reduction='bad')",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), T.ones(4))",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), T.ones(1, 1))",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), T.ones(()))",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), -1.0)",
    "F.gaussian_nll_loss(T.randn(3, 4), T.randn(3, 4), -T.ones(3, 4))",
    "F.margin_ranking_loss(T.randn(3, 4), T.randn(3, 4), T.ones(3))",
    "F.margin_ranking_loss(T.randn(3, 4), T.randn(3, 4), T.ones(3, 4), reduction='bad')",
    "F.hinge_embedding_loss(T.randn(3, 4), T.ones(5))",
    "F.soft_margin_loss(T.randn(3, 4), T.ones(5))",
    "F.multilabel_soft_margin_loss(T.randn(3, 4), T.ones(3, 4), reduction='bad')",
    "F.cosine_embedding_loss(T.randn(3, 4), T.randn(3, 4), T.ones(3, 1))",
    "F.cosine_embedding_loss(T.randn(3, 4), T.randn(3, 4), T.ones(()))",
    "F.cosine_embedding_loss(T.randn(4), T.randn(4), T.ones(1))",
    "F.cosine_embedding_loss(T.randn(3, 4), T.randn(3, 3), T.ones(3))",
    "F.cosine_embedding_loss(T.randn(3, 4), T.randn(3, 4), T.ones(2))",
    "F.triplet_margin_loss(T.randn(3, 4), T.randn(3, 4), T.randn(4))",
    "F.triplet_margin_loss(T.randn(3, 4), T.randn(3, 4), T.randn(3, 4), margin=0)",
    "F.triplet_margin_loss(T.randn(3, 4), T.randn(3, 4), T.randn(3, 4), reduction='x')",
    "F.triplet_margin_with_distance_loss(T.randn(3, 4), T.randn(3, 4), T.randn(4))",
    "F.triplet_margin_with_distance_loss(T.randn(3, 4), T.randn(3, 4), T.randn(3, 4), margin=-1.0)",
    "F.triplet_margin_with_distance_loss(T.randn(3, 4), T.randn(3, 4), T.randn(3, 4), reduction='x')",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1]))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([[0, 1, 1]]))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 5]))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, -1]))",
    "F.multi_margin_loss(T.randn(2, 3, 4), T.tensor([1, 2]))",
    "F.multi_margin_loss(T.randn(3, 0), T.tensor([1, 2, 0]))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]), weight=T.ones(3))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]), weight=T.ones(4, 1))",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]), p=3)",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]).float())",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]).int())",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]), weight=T.ones(4).double())",
    "F.multi_margin_loss(T.randn(3, 4), T.tensor([0, 1, 2]), reduction='foo')",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([[0, 1, -1, 2]] * 2))",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([[0, 1, -1, 7]] * 3))",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([[0, 1, -2, 3]] * 3))",
    "F.multilabel_margin_loss(T.randn(4), T.tensor([[0, 1, -1, 2]]))",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([0, 1, -1, 2]))",
    "F.multilabel_margin_loss(T.randn(2, 3, 4), T.tensor([[0, 1, -1]] * 3))",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([[0, 1, -1, 2]] * 3).float())",
    "F.multilabel_margin_loss(T.randn(3, 4), T.tensor([[0, 1, -1, 2]] * 3).int())",
    "F.ctc_loss(LP, TG, T.tensor([6, 4]), TL)",
    "F.ctc_loss(LP, TG, T.tensor([-1, 4]), TL)",
    "F.ctc_loss(LP, TG, IL, T.tensor([4, 2]))",
    "F.ctc_loss(LP, TG, IL, T.tensor([-1, 2]))",
    "F.ctc_loss(LP, TG, IL, T.tensor([3, 2, 1]))",
    "F.ctc_loss(LP, TG, T.tensor([5, 4, 3]), TL)",
    "F.ctc_loss(LP, TG[:1], IL, TL)",
    "F.ctc_loss(LP, T.tensor([1, 2, 2, 3]), IL, TL)",
    "F.ctc_loss(LP, TG[None], IL, TL)",
    "F.ctc_loss(LP, TG[0, 0], IL, TL)",
    "F.ctc_loss(LP, TG, IL, TL, blank=4)",
    "F.ctc_loss(LP, TG, IL, TL, blank=-1)",
    "F.ctc_loss(LP, TG, IL.float(), TL)",
    "F.ctc_loss(LP, TG, IL, TL.float())",
    "F.ctc_loss(LP, TG, IL, TL, reduction='bad')",
    "F.ctc_loss(LP[0], TG[0], IL[0], TL[0])",
    "F.ctc_loss(LP.unsqueeze(0), TG[0], IL[0], TL[0])",
    "F.ctc_loss(LP[:, 0], TG[0], T.tensor(5), T.tensor(2))",
    "F.ctc_loss(LP[:0], TG, T.tensor([0, 0]), T.tensor([0, 1]))",
    "M.TripletMarginLoss(margin=0.0)",
    "M.TripletMarginWithDistanceLoss(margin=-2)",
    "M.MultiMarginLoss(p=3)",
    "M.MultiMarginLoss(weight=T.ones(2, 2))",
]


def _env(mod):
    lp = mod.zeros(5, 2, 4)
    return {"F": mod.nn.functional, "M": mod.nn, "T": mod, "LP": lp, "TG": mod.tensor([[1, 2, 2], [3, 1, 0]]),
            "IL": mod.tensor([5, 4]), "TL": mod.tensor([3, 2])}


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    ours, theirs = eval_expr(expr, _env(dynograph)), eval_expr(expr, _env(torch))
    assert isinstance(theirs, Exception), f"torch accepted {expr}"
    assert_same_error(ours, theirs, expr)


def test_ctc_target_label_out_of_range():
    with pytest.raises(RuntimeError, match="ctc_loss: target label 7 is out of range for 4 classes"):
        F.ctc_loss(dynograph.zeros(5, 2, 4), dynograph.tensor([[1, 7], [3, 1]]), [5, 5], [2, 2])


# ----------------------------------------------------------------------------- modules

MODULES = [
    ("PoissonNLLLoss", {}, "poisson_nll_loss", 0),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 1e-3, "reduction": "sum"}, "poisson_nll_loss", 3),
    ("PoissonNLLLoss", {"size_average": False}, "poisson_nll_loss", 0),
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3, "reduction": "none"}, "gaussian_nll_loss", 5),
    ("MarginRankingLoss", {"margin": 0.5}, "margin_ranking_loss", 8),
    ("HingeEmbeddingLoss", {"margin": 2.0, "reduce": False}, "hinge_embedding_loss", 10),
    ("CosineEmbeddingLoss", {"margin": 0.1, "reduction": "sum"}, "cosine_embedding_loss", 14),
    ("SoftMarginLoss", {}, "soft_margin_loss", 12),
    ("MultiLabelSoftMarginLoss", {"weight": [0.5, 1.0, 2.0, 1.5, 0.3]}, "multilabel_soft_margin_loss", 13),
    ("MultiLabelMarginLoss", {"reduction": "none"}, "multilabel_margin_loss", 28),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5, "weight": [0.5, 1.0, 2.0, 1.5]}, "multi_margin_loss", 25),
    ("TripletMarginLoss", {"margin": 2.0, "p": 1.0, "swap": True}, "triplet_margin_loss", 18),
    ("TripletMarginWithDistanceLoss", {"swap": True, "reduction": "sum"}, "triplet_margin_with_distance_loss", 23),
]


@pytest.mark.parametrize("name,kwargs,fn,case", MODULES, ids=[m[0] for m in MODULES])
def test_loss_modules(torch, name, kwargs, fn, case):
    tkw = {k: torch.tensor(v, dtype=torch.float64) if isinstance(v, list) else v for k, v in kwargs.items()}
    dkw = {k: dynograph.tensor(v, dtype=dynograph.float64) if isinstance(v, list) else v
           for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = getattr(nn, name)(**dkw), getattr(torch.nn, name)(**tkw)
    assert repr(ours) == repr(theirs)
    assert ours.reduction == theirs.reduction
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for attr in ("margin", "p", "eps", "swap", "full", "log_input"):
        assert getattr(ours, attr, None) == getattr(theirs, attr, None), attr
    _, make, _, grad_idx = CASES[case]
    args = make(torch, torch.Generator().manual_seed(case), torch.float64)
    _run(torch, fn, args, {}, grad_idx, 1e-7, 1e-9, fn_ours=ours, fn_theirs=theirs)


@pytest.mark.parametrize("kwargs", [{}, {"blank": 3, "reduction": "sum"}, {"zero_infinity": True, "reduction": "none"}])
def test_ctc_module(torch, kwargs):
    ours, theirs = nn.CTCLoss(**kwargs), torch.nn.CTCLoss(**kwargs)
    assert repr(ours) == repr(theirs) == "CTCLoss()"
    assert (ours.blank, ours.reduction, ours.zero_infinity) == (theirs.blank, theirs.reduction, theirs.zero_infinity)
    logits, _ = _ctc_inputs(torch, torch.float64, 4)
    targets = torch.tensor([[1, 2, 2, 4], [4, 1, 0, 0], [2, 1, 1, 2]])
    lens = [torch.tensor([7, 3, 6]), torch.tensor([4, 2, 4])]
    _run(torch, "ctc_loss", [logits.log_softmax(2), targets, *lens], {}, (0,), 1e-9, 1e-10, fn_ours=ours,
         fn_theirs=theirs)


def test_triplet_with_distance_module_default_distance(torch):
    ours = nn.TripletMarginWithDistanceLoss()
    theirs = torch.nn.TripletMarginWithDistanceLoss()
    assert repr(ours) == repr(theirs)
    assert (ours.distance_function.norm, ours.distance_function.eps, ours.distance_function.keepdim) == \
        (theirs.distance_function.norm, theirs.distance_function.eps, theirs.distance_function.keepdim)
    custom = nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: (a - b).abs().sum(-1))
    assert repr(custom) == "TripletMarginWithDistanceLoss()"


def test_functions_exported():
    for name in ("poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "multi_margin_loss", "soft_margin_loss"):
        assert getattr(dynograph.nn.functional, name) is getattr(F, name)
    for name in ("CTCLoss", "GaussianNLLLoss", "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss"):
        assert isinstance(getattr(nn, name), type)


LOSS_GRAD_FN_CASES = {
    "cross_entropy": lambda f, x, t, y, p: f.cross_entropy(x, y),
    "cross_entropy_none": lambda f, x, t, y, p: f.cross_entropy(x, y, reduction="none"),
    "nll_loss": lambda f, x, t, y, p: f.nll_loss(x, y),
    "nll_loss_sum": lambda f, x, t, y, p: f.nll_loss(x, y, reduction="sum"),
    "mse_loss": lambda f, x, t, y, p: f.mse_loss(x, t),
    "mse_loss_none": lambda f, x, t, y, p: f.mse_loss(x, t, reduction="none"),
    "mse_loss_sum": lambda f, x, t, y, p: f.mse_loss(x, t, reduction="sum"),
    "l1_loss": lambda f, x, t, y, p: f.l1_loss(x, t),
    "smooth_l1_loss": lambda f, x, t, y, p: f.smooth_l1_loss(x, t),
    "huber_loss": lambda f, x, t, y, p: f.huber_loss(x, t),
    "binary_cross_entropy_with_logits": lambda f, x, t, y, p: f.binary_cross_entropy_with_logits(x, p),
    "binary_cross_entropy": lambda f, x, t, y, p: f.binary_cross_entropy(x.sigmoid(), p),
    "soft_margin_loss": lambda f, x, t, y, p: f.soft_margin_loss(x, t.sign()),
    "multi_margin_loss": lambda f, x, t, y, p: f.multi_margin_loss(x, y),
    "kl_div": lambda f, x, t, y, p: f.kl_div(x.log_softmax(1), p, reduction="batchmean"),
}


@pytest.mark.parametrize("name", list(LOSS_GRAD_FN_CASES))
def test_loss_grad_fn_names_print_as_in_torch(torch, name):
    """Tutorials print loss.grad_fn: a composite loss shows the node PyTorch records."""
    g = torch.Generator().manual_seed(0)
    x, t, p = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g), torch.rand(4, 3, generator=g)
    y = torch.tensor([0, 2, 1, 0])
    fn = LOSS_GRAD_FN_CASES[name]
    theirs = fn(torch.nn.functional, x.requires_grad_(), t, y, p).grad_fn.name()
    ours = fn(dynograph.nn.functional, from_torch(x, requires_grad=True), from_torch(t), from_torch(y),
              from_torch(p)).grad_fn.name()
    assert ours == theirs

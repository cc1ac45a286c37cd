"""Eager shortcuts off the dispatcher's general path: broadcasting elementwise calls on the short
path, nll_loss/cross_entropy without masks where no target is ignored.  They give torch's
values, dtypes, strides and errors, and exactly what the general path gives (each is compared
with the general path forced, bit for bit, gradients included)."""
import numpy as np
import pytest

import dynograph
import dynograph.nn.functional as F
from dynograph import _dispatch
from dynograph.compiler.ops import evaluate

from conftest import assert_same, from_torch, to_numpy


def _bits_equal(a, b):
    a, b = to_numpy(a), to_numpy(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


# ---------------------------------------------------------------- broadcasting elementwise

PAIRS = [((128, 10), (128, 1)), ((128, 10), (10,)), ((10, 1), (1, 10)), ((1, 10), (10, 1)),
         ((3, 1, 4), (1, 5, 1)), ((4,), (3, 1)), ((2, 3, 4), (3, 1)), ((1,), (5,)),
         ((), (3, 4)), ((3, 4), ()), ((3, 4), (1, 1, 1, 4)), ((3, 1), (1, 1))]
EXPRS = ["a - b", "a + b", "a * b", "a / b", "a > b", "a == b", "torch.maximum(a, b)",
         "torch.atan2(a, b)"]


def _operands(torch, sa, sb, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = np.asarray(rng.standard_normal(sa) * 3).astype(dtype)
    b = np.asarray(rng.standard_normal(sb) * 3).astype(dtype)
    return torch.from_numpy(a), torch.from_numpy(b), dynograph.from_numpy(a.copy()), \
        dynograph.from_numpy(b.copy())


def _general(monkeypatch):
    """Force the dispatcher's general path (and elementwise()'s own broadcast check)."""
    monkeypatch.setattr(_dispatch, "_simple", lambda op, args: None)
    monkeypatch.setattr(evaluate, "_BROADCASTS", set())
    monkeypatch.setattr(evaluate, "_known", lambda shapes: None)


# (dtype, expression): complex numbers have no order (>, maximum) and no atan2
TYPED = [(dtype, expr) for dtype in ("float32", "float64", "complex64") for expr in EXPRS
         if dtype != "complex64" or not any(f in expr for f in (">", "maximum", "atan2"))]


@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize("dtype, expr", TYPED)
def test_broadcasting_pairs_match_torch_and_the_general_path(torch, monkeypatch, dtype, shapes,
                                                             expr):
    ta, tb, da, db = _operands(torch, *shapes, dtype)
    want = eval(expr, {"a": ta, "b": tb, "torch": torch})
    fast = [eval(expr, {"a": da, "b": db, "torch": dynograph}) for _ in range(2)]
    for got in fast:                    # the second call reuses the first one's answers
        assert_same(got, want, rtol=1e-6, atol=1e-6)
        assert got.stride() == want.stride()
    _general(monkeypatch)
    slow = eval(expr, {"a": da, "b": db, "torch": dynograph})
    _bits_equal(fast[0], slow)
    assert fast[0].stride() == slow.stride()


@pytest.mark.parametrize("shapes", [((3, 4), (4, 3)), ((2, 3), (2,)), ((5,), (4,)),
                                    ((2, 1, 3), (4, 2))])
def test_shapes_that_do_not_broadcast_raise_torchs_error(torch, shapes):
    ta, tb, da, db = _operands(torch, *shapes, "float32")
    with pytest.raises(RuntimeError) as want:
        ta - tb
    for _ in range(2):
        with pytest.raises(RuntimeError) as got:
            da - db
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("shapes", [((0, 4), (1, 4)), ((3, 1), (3, 0)), ((1,), (0,)),
                                    ((2, 0, 3), (1, 1, 3))])
def test_empty_broadcast_results_take_torchs_strides(torch, shapes):
    ta, tb, da, db = _operands(torch, *shapes, "float32")
    for _ in range(2):
        got, want = da * db, ta * tb
        assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()


def test_refused_operands_take_the_general_path(torch):
    """Strided operands, mixed dtypes: the general path's layout and promotion, as torch."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 1)).astype(np.float32)
    cases = [(lambda m: m.from_numpy(a).t(), lambda m: m.from_numpy(b)),
             (lambda m: m.from_numpy(a), lambda m: m.from_numpy(a[:, :1].astype(np.float64))),
             (lambda m: m.from_numpy(a)[:, ::2], lambda m: m.from_numpy(b[:3, :1].T.copy()))]
    for make_a, make_b in cases:
        want = make_a(torch) + make_b(torch)
        got = make_a(dynograph) + make_b(dynograph)
        assert_same(got, want)
        assert got.stride() == want.stride()


def test_broadcasting_gradients_match_torch(torch):
    rng = np.random.default_rng(4)
    x, m = rng.standard_normal((6, 5)), rng.standard_normal((6, 1))
    tx, tm = torch.tensor(x, requires_grad=True), torch.tensor(m, requires_grad=True)
    dx, dm = from_torch(tx, True), from_torch(tm, True)
    for lib, a, b in ((torch, tx, tm), (dynograph, dx, dm)):
        (((a - b) * (a / b.exp())).sum()).backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(dm.grad.numpy(), tm.grad.numpy(), rtol=1e-12)
    assert (dx - dm).grad_fn.name() == "SubBackward0"


# ---------------------------------------------------------------- nll_loss, cross_entropy

def _loss_inputs(torch, shape, dtype, targets, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    return tx, from_torch(tx, True), torch.tensor(targets), dynograph.tensor(np.asarray(targets))


TARGETS = {
    "all valid": ([1, 0, 3, 2, 2, 0], -100),
    "some ignored": ([1, -100, 3, 2, -100, 0], -100),
    "all ignored": ([-100] * 6, -100),
    "ignore_index a class": ([1, 0, 3, 2, 2, 0], 2),
    "ignore_index a class, unused": ([1, 0, 3, 1, 3, 0], 2),
}


def _compare(torch, monkeypatch, fn, tx, dx, *args, **kwargs):
    """fn(F, x, ...) on torch and on dynograph (fast, then general): values, dtypes, gradients."""
    want = fn(torch.nn.functional, tx, *args[0::2], **kwargs)
    got = fn(F, dx, *args[1::2], **kwargs)
    assert_same(got, want, rtol=1e-6, atol=1e-7)
    if tx.dim() <= 2:         # (torch names the spatial forms' nodes differently)
        assert got.grad_fn.name() == want.grad_fn.name()
    want.sum().backward()
    got.sum().backward()
    assert_same(dx.grad, tx.grad, rtol=1e-6, atol=1e-7)
    fast_grad, dx.grad = dx.grad, None
    with monkeypatch.context() as m:
        m.setattr(F, "_host_targets", lambda *a: None)
        slow = fn(F, dx, *args[1::2], **kwargs)
        slow.sum().backward()
    _bits_equal(got, slow)
    _bits_equal(fast_grad, dx.grad)


@pytest.mark.parametrize("case", TARGETS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nll_loss_and_cross_entropy_match_torch_and_the_general_path(torch, monkeypatch, case,
                                                                     reduction, weighted, dtype):
    targets, ignore = TARGETS[case]
    w = np.asarray([0.5, 2.0, 1.5, 0.25], dtype=dtype)
    tw, dw = (torch.tensor(w), dynograph.tensor(w)) if weighted else (None, None)
    for name in ("nll_loss", "cross_entropy"):
        tx, dx, tt, dt = _loss_inputs(torch, (6, 4), dtype, targets)

        def fn(lib, x, t, wt):
            inp = lib.log_softmax(x, 1) if name == "nll_loss" else x
            return getattr(lib, name)(inp, t, weight=wt, ignore_index=ignore, reduction=reduction)
        _compare(torch, monkeypatch, fn, tx, dx, tt, dt, tw, dw)


@pytest.mark.parametrize("shape,targets", [((4,), 2), ((3, 4, 5), [[0, 1, 3, 3, 2]] * 3),
                                           ((0, 4), []), ((2, 3, 2, 2), [[[0, 2], [1, 1]]] * 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unbatched_spatial_and_empty_inputs(torch, monkeypatch, shape, targets, reduction):
    tx, dx, tt, dt = _loss_inputs(torch, shape, "float32", targets)
    if shape[0] == 0:
        tt, dt = tt.long(), dt.long()
    _compare(torch, monkeypatch, lambda lib, x, t: lib.cross_entropy(x, t, reduction=reduction),
             tx, dx, tt, dt)


def test_weights_of_another_dtype_keep_the_general_paths_promotion(torch, monkeypatch):
    tx, dx, tt, dt = _loss_inputs(torch, (5, 3), "float32", [0, 2, 1, 1, 0])
    w = np.asarray([0.3, 1.7, 0.9])
    for dtype in (np.float64, np.float16):
        want_slow = None
        for forced in (False, True):
            with monkeypatch.context() as m:
                if forced:
                    m.setattr(F, "_host_targets", lambda *a: None)
                got = F.nll_loss(dx, dt, weight=dynograph.tensor(w.astype(dtype)))
            if want_slow is None:
                want_slow = got
            else:
                _bits_equal(want_slow, got)


@pytest.mark.parametrize("targets,ignore", [([0, 4, 1], -100), ([0, -1, 1], -100),
                                            ([-100, 7, 1], -100), ([5, 1, 1], 5),
                                            ([2, 9, -3], 2), ([1, 2, 3], 3)])
def test_targets_out_of_range_raise_torchs_error(torch, targets, ignore):
    tx, dx, tt, dt = _loss_inputs(torch, (3, 4), "float32", targets)
    try:
        want = torch.nn.functional.cross_entropy(tx, tt, ignore_index=ignore)
    except IndexError as e:
        with pytest.raises(IndexError) as got:
            F.cross_entropy(dx, dt, ignore_index=ignore)
        assert str(got.value) == str(e)
        with pytest.raises(IndexError) as got:
            F.nll_loss(dx, dt, ignore_index=ignore)
        assert str(got.value) == str(e)
    else:
        assert_same(F.cross_entropy(dx, dt, ignore_index=ignore), want)


def test_uint8_targets_and_half_inputs_match_torch(torch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.asarray([1, 0, 3, 2, 2, 0], dtype=np.uint8)
    want = torch.nn.functional.nll_loss(torch.tensor(x), torch.tensor(t))
    assert_same(F.nll_loss(dynograph.tensor(x), dynograph.tensor(t)), want)
    xb = torch.tensor(x).to(torch.bfloat16)
    tl = torch.tensor(t.astype(np.int64))
    want = torch.nn.functional.cross_entropy(xb, tl)
    assert_same(F.cross_entropy(from_torch(xb), dynograph.tensor(t.astype(np.int64))), want,
                rtol=1e-2, atol=1e-2)

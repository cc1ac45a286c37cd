"""Reductions, scans and sorting compared with PyTorch: values, dtypes, shapes, grads, errors."""
import pytest

import dynograph
from conftest import assert_same, from_torch

SHAPES = [(), (5,), (2, 3, 4), (0, 3)]
DIMS_3D = [None, 0, -1, (0, 2), [1, -1], (), (0, 1, 2)]


def _make(torch, shape, dtype, seed=0):
    """A torch tensor of ``shape`` and ``dtype`` with values that exercise the op."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _noncontig(torch, dtype):
    """A permuted, sliced (non-contiguous) torch tensor of shape (3, 2, 4)."""
    base = _make(torch, (4, 6, 3), dtype, seed=3)
    return base.permute(2, 0, 1)[:, ::2, :].transpose(1, 2)


def _both(torch, t):
    return from_torch(t), t


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if dtype in ("float16", "bfloat16") else {}


def _grad_check(torch, fn, t, rtol=1e-5, atol=1e-5):
    """d(sum(fn(x) * w))/dx equals torch's for random weights w."""
    tt = t.detach().clone().double().requires_grad_(True)
    ours = from_torch(tt, requires_grad=True)
    rt = fn(tt)
    rt = rt[0] if isinstance(rt, tuple) else rt
    w = torch.randn(rt.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (rt * w).sum().backward()
    ro = fn(ours)
    ro = ro[0] if isinstance(ro, tuple) else ro
    assert ro.grad_fn is not None and ro.grad_fn.name() == rt.grad_fn.name()
    (ro * from_torch(w)).sum().backward()
    assert_same(ours.grad, tt.grad, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- sum, mean

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "bool", "uint8"])
@pytest.mark.parametrize("shape", SHAPES)
def test_sum_full(torch, dtype, shape):
    ours, theirs = _both(torch, _make(torch, shape, getattr(torch, dtype)))
    assert_same(ours.sum(), theirs.sum(), **_tol(dtype))
    assert_same(dynograph.sum(ours, dtype=dynograph.float64), torch.sum(theirs, dtype=torch.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dims(torch, dtype, dim, keepdim):
    ours, theirs = _both(torch, _make(torch, (2, 3, 4), getattr(torch, dtype)))
    assert_same(ours.sum(dim, keepdim), theirs.sum(dim, keepdim))
    assert_same(dynograph.sum(ours, dim=dim, keepdim=keepdim), torch.sum(theirs, dim=dim, keepdim=keepdim))
    nc = _noncontig(torch, getattr(torch, dtype))
    assert_same(from_torch(nc).sum(dim, keepdim), nc.sum(dim, keepdim))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_dims(torch, dtype, dim, keepdim):
    ours, theirs = _both(torch, _make(torch, (2, 3, 4), getattr(torch, dtype)))
    assert_same(ours.mean(dim, keepdim), theirs.mean(dim, keepdim), **_tol(dtype))
    nc = _noncontig(torch, getattr(torch, dtype))
    assert_same(from_torch(nc).mean(dim, keepdim=keepdim), nc.mean(dim, keepdim=keepdim), **_tol(dtype))


def test_sum_mean_edge_cases(torch):
    e, et = _both(torch, torch.empty(0, 3))
    assert_same(e.sum(), et.sum())
    assert_same(e.sum(0), et.sum(0))
    assert_same(e.mean(), et.mean())
    assert_same(e.mean(1), et.mean(1))
    s, st = _both(torch, torch.tensor(3.5))
    for d in (0, -1, (0,), None):
        assert_same(s.sum(d), st.sum(d))
        assert_same(s.mean(d, True), st.mean(d, True))
    i, it = _both(torch, torch.arange(6).reshape(2, 3).int())
    assert_same(i.mean(1, dtype=dynograph.float64), it.mean(1, dtype=torch.float64))
    assert_same(i.sum(0, dtype=dynograph.int32), it.sum(0, dtype=torch.int32))
    f, ft = _both(torch, torch.tensor([1.7, -2.6, 3.2]))
    assert_same(f.sum(dtype=dynograph.int64), ft.sum(dtype=torch.int64))


def test_sum_out(torch):
    x, xt = _both(torch, _make(torch, (3, 4), torch.float32))
    o, ot = dynograph.empty(4), torch.empty(4)
    r = dynograph.sum(x, 0, out=o)
    torch.sum(xt, 0, out=ot)
    assert r is o
    assert_same(o, ot)
    o = dynograph.empty(0)
    dynograph.mean(x, 1, keepdim=True, out=o)
    assert_same(o, xt.mean(1, keepdim=True))


def test_sum_mean_errors(torch):
    x = dynograph.ones(3, 4)
    with pytest.raises(IndexError,
                       match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.sum(2)
    with pytest.raises(IndexError, match=r"but got -3\)"):
        x.mean(-3)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.sum((0, -2))
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1\)"):
        dynograph.tensor(1.0).sum(1)
    with pytest.raises(TypeError):
        x.sum(1.5)
    for dt, name in ((dynograph.int64, "Long"), (dynograph.int32, "Int"), (dynograph.bool, "Bool")):
        with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype. Input dtype "
                           f"must be either a floating point or complex dtype. Got: {name}"):
            dynograph.ones(3, dtype=dt).mean()
    with pytest.raises(RuntimeError, match="Optional dtype must be either a floating point"):
        x.mean(dtype=dynograph.int64)


def test_grad_names(torch):
    x = dynograph.ones(2, 3, requires_grad=True)
    assert x.sum().grad_fn.name() == "SumBackward0"
    assert x.sum(0).grad_fn.name() == "SumBackward1"
    assert x.sum(()).grad_fn.name() == "SumBackward1"
    assert x.mean().grad_fn.name() == "MeanBackward0"
    assert x.mean((0, 1)).grad_fn.name() == "MeanBackward1"


def _have(*methods):
    return all(hasattr(dynograph.Tensor, m) for m in methods)


needs_movement = pytest.mark.skipif(not _have("reshape", "expand"),
                                    reason="reshape/expand (movement ops) not available yet")


@needs_movement
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_grad(torch, dim, keepdim):
    t = _make(torch, (2, 3, 4), torch.float64)
    _grad_check(torch, lambda x: x.sum(dim, keepdim), t)
    _grad_check(torch, lambda x: x.mean(dim, keepdim), t)


@needs_movement
def test_sum_mean_grad_full(torch):
    t = _make(torch, (2, 3), torch.float64)
    _grad_check(torch, lambda x: x.sum(), t)
    _grad_check(torch, lambda x: x.mean(), t)
    s = torch.tensor(2.0, dtype=torch.float64)
    _grad_check(torch, lambda x: x.sum(0, True), s)

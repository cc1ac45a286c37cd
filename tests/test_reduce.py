"""Reductions, scans and sorting compared with PyTorch: values, dtypes, shapes, grads, errors."""
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, dtype_name, from_torch

FLOATS = ["float32", "float64"]
DIMS_3D = [None, 0, -1, (0, 2), [1, -1], (), (0, 1, 2)]
NAN = float("nan")


# ---------------------------------------------------------------- helpers

def _make(torch, shape, dtype, seed=0):
    """A torch tensor of ``shape`` and ``dtype`` with values that exercise the op."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        lo = 0 if dtype == torch.uint8 else -5
        return torch.randint(lo, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _distinct(torch, shape, dtype="float64", seed=0):
    """Values without ties (so every index-returning op has one right answer)."""
    n = int(np.prod(shape)) if shape else 1
    g = torch.Generator().manual_seed(seed)
    vals = torch.randperm(n, generator=g).to(torch.float64) - n / 2
    return vals.reshape(shape).to(getattr(torch, dtype))


def _noncontig(torch, dtype, distinct=False):
    """A permuted, sliced (non-contiguous) torch tensor of shape (3, 4, 2)."""
    base = _distinct(torch, (4, 6, 3), dtype) if distinct else _make(torch, (4, 6, 3), dtype, 3)
    t = base.permute(2, 0, 1)[:, :, ::3]
    assert not t.is_contiguous()
    return t


def _to_ours(torch, v):
    if isinstance(v, torch.Tensor):
        return from_torch(v)
    if isinstance(v, torch.dtype):
        return getattr(dynograph, dtype_name(v))
    if isinstance(v, (tuple, list)):
        return type(v)(_to_ours(torch, a) for a in v)
    return v


def _tol(dtype):
    name = dtype if isinstance(dtype, str) else dtype_name(dtype)
    return dict(rtol=3e-3, atol=3e-3) if name in ("float16", "bfloat16") else {}


def check(torch, fn, *args, tol=None, **kw):
    """fn(lib, *args) gives the same result with lib=dynograph (args converted) and lib=torch."""
    theirs = fn(torch, *args, **kw)
    ours = fn(dynograph, *[_to_ours(torch, a) for a in args], **kw)
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple)
        if type(theirs) is not tuple:                 # torch.return_types.<name>
            assert type(ours).__name__ == type(theirs).__name__
    assert_same(ours, theirs, **(tol or {}))
    return ours, theirs


def check_ties(torch, fn, t, dim):
    """fn(lib, x) -> (values, indices) along ``dim`` where several elements qualify (ties, or
    several NaNs): torch does not promise which index wins, so compare the values and check
    that each of our indices points at an element holding its value."""
    values, indices = fn(dynograph, from_torch(t))
    assert_same(values, fn(torch, t)[0])
    x = from_torch(t)
    picked = x.gather(dim, indices if indices.dim() == x.dim() else indices.unsqueeze(dim))
    a, b = picked.numpy().reshape(values.shape), values.numpy()
    assert ((a == b) | (np.isnan(a) & np.isnan(b))).all()


def grad_check(torch, fn, t, rtol=1e-6, atol=1e-7):
    """d(sum(fn(x) * w))/dx matches torch for random weights w; so does the grad_fn name."""
    tt = t.detach().clone().double().requires_grad_(True)
    ours = from_torch(tt, requires_grad=True)
    rt = fn(torch, tt)
    rt = rt[0] if isinstance(rt, tuple) else rt
    w = torch.randn(rt.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (rt * w).sum().backward()
    ro = fn(dynograph, ours)
    ro = ro[0] if isinstance(ro, tuple) else ro
    assert ro.grad_fn is not None and ro.grad_fn.name() == rt.grad_fn.name()
    (ro * from_torch(w)).sum().backward()
    if tt.grad is None:
        assert ours.grad is None
    else:
        assert_same(ours.grad, tt.grad, rtol=rtol, atol=atol)


def _have(*methods):
    return all(hasattr(dynograph.Tensor, m) for m in methods)


def needs(*methods):
    return pytest.mark.skipif(not _have(*methods), reason=f"needs Tensor.{'/'.join(methods)}")


# ---------------------------------------------------------------- sum, mean

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (0, 3)])
def test_sum_full(torch, dtype, shape):
    t = _make(torch, shape, dtype)
    check(torch, lambda m, x: x.sum(), t, tol=_tol(dtype))
    check(torch, lambda m, x: m.sum(x, dtype=m.float64), t)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dims(torch, dtype, dim, keepdim):
    check(torch, lambda m, x: x.sum(dim, keepdim), _make(torch, (2, 3, 4), dtype))
    check(torch, lambda m, x: m.sum(x, dim=dim, keepdim=keepdim), _noncontig(torch, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_dims(torch, dtype, dim, keepdim):
    check(torch, lambda m, x: x.mean(dim, keepdim), _make(torch, (2, 3, 4), dtype), tol=_tol(dtype))
    check(torch, lambda m, x: m.mean(x, dim, keepdim=keepdim), _noncontig(torch, dtype),
          tol=_tol(dtype))


def test_sum_mean_edge_cases(torch):
    e = torch.empty(0, 3)
    for f in (lambda m, x: x.sum(), lambda m, x: x.sum(0), lambda m, x: x.mean(),
              lambda m, x: x.mean(1), lambda m, x: x.sum(1, keepdim=True)):
        check(torch, f, e)
    for d in (0, -1, (0,), None):
        check(torch, lambda m, x: (x.sum(d), x.mean(d, True)), torch.tensor(3.5))
    i = torch.arange(6).reshape(2, 3).int()
    check(torch, lambda m, x: x.mean(1, dtype=m.float64), i)
    check(torch, lambda m, x: x.sum(0, dtype=m.int32), i)
    check(torch, lambda m, x: x.sum(dtype=m.int64), torch.tensor([1.7, -2.6, 3.2]))
    check(torch, lambda m, x: x.sum(None, True), i)


def test_float32_sum_accuracy(torch):
    t = torch.rand(100000, generator=torch.Generator().manual_seed(0)) + 1000
    check(torch, lambda m, x: x.sum(), t, tol=dict(rtol=1e-6, atol=0))
    check(torch, lambda m, x: x.mean(), t, tol=dict(rtol=1e-6, atol=0))


def test_sum_out(torch):
    t = _make(torch, (3, 4), "float32")
    x = from_torch(t)
    o = dynograph.empty(4)
    assert dynograph.sum(x, 0, out=o) is o
    assert_same(o, t.sum(0))
    o = dynograph.empty(0)
    dynograph.mean(x, 1, keepdim=True, out=o)
    assert_same(o, t.mean(1, keepdim=True))


def test_dim_errors():
    x = dynograph.ones(3, 4)
    msg = r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    for f in (lambda: x.sum(2), lambda: x.mean((0, 2)), lambda: x.amax(2), lambda: x.max(2),
              lambda: x.argmax(2), lambda: x.cumsum(2), lambda: x.sort(2), lambda: x.all(2),
              lambda: x.std(2), lambda: x.logsumexp(2), lambda: x.median(2), lambda: x.norm(dim=2)):
        with pytest.raises(IndexError, match=msg):
            f()
    with pytest.raises(IndexError, match=r"but got -3\)"):
        x.mean(-3)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.sum((0, -2))
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1\)"):
        dynograph.tensor(1.0).sum(1)
    with pytest.raises(TypeError):
        x.sum(1.5)
    with pytest.raises(TypeError):
        x.cumsum("a")


def test_mean_dtype_errors():
    for dt, name in ((dynograph.int64, "Long"), (dynograph.int32, "Int"), (dynograph.bool, "Bool")):
        with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype. Input dtype "
                           f"must be either a floating point or complex dtype. Got: {name}"):
            dynograph.ones(3, dtype=dt).mean()
    with pytest.raises(RuntimeError, match="Optional dtype must be either a floating point"):
        dynograph.ones(3).mean(dtype=dynograph.int64)
    with pytest.raises(RuntimeError, match=r"nanmean\(\): expected input to have floating point"):
        dynograph.ones(3, dtype=dynograph.int64).nanmean()


# ---------------------------------------------------------------- nansum, nanmean, prod

def _with_nans(torch, dtype="float64"):
    t = _make(torch, (3, 4), dtype)
    t[0, 1] = NAN
    t[2, 2] = NAN
    t[1] = NAN
    return t


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_nanmean(torch, dim, keepdim):
    t = _with_nans(torch)
    check(torch, lambda m, x: m.nansum(x, dim, keepdim), t)
    check(torch, lambda m, x: x.nanmean(dim, keepdim), t)
    check(torch, lambda m, x: m.nansum(x, dim, keepdim, dtype=m.float32), t)
    check(torch, lambda m, x: x.nansum(dim, keepdim), _make(torch, (3, 4), "int32"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "float16"])
def test_prod(torch, dtype):
    t = _make(torch, (2, 3, 4), dtype)
    tol = _tol(dtype)
    check(torch, lambda m, x: x.prod(), t, tol=tol)
    for d in (0, -1, 1):
        check(torch, lambda m, x: (x.prod(d), m.prod(x, d, True)), t, tol=tol)
    check(torch, lambda m, x: x.prod(1, dtype=m.float64), t)
    check(torch, lambda m, x: (x.prod(), x.prod(0)), torch.empty(0, 2))
    check(torch, lambda m, x: x.prod(0), _noncontig(torch, dtype), tol=tol)


# ---------------------------------------------------------------- max, min, amax, amin, arg*

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "uint8", "float16"])
def test_max_min(torch, dtype):
    t = _make(torch, (2, 3, 4), dtype)
    check(torch, lambda m, x: (x.max(), x.min(), m.max(x), m.min(x)), t)
    check(torch, lambda m, x: (x.amax(), x.amin(), m.amax(x, (0, 2)), m.amin(x, -1, True)), t)
    check(torch, lambda m, x: (m.aminmax(x), m.aminmax(x, dim=1, keepdim=True)), t)
    nc = _noncontig(torch, dtype, distinct=dtype not in ("bool", "uint8"))
    if dtype == "bool":
        with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
            from_torch(t).argmax()
    else:
        check(torch, lambda m, x: (x.argmax(), x.argmin(), x.argmax(keepdim=True), x.argmin(0)), nc)
        check(torch, lambda m, x: (x.argmax(), x.argmin(), x.argmax(keepdim=True)), t)
    check(torch, lambda m, x: (x.max(), x.amin(1)), nc)
    check(torch, lambda m, x: (m.max(x, 0), x.min(-1, True)), _noncontig(torch, dtype, distinct=True)
          if dtype not in ("bool", "uint8") else nc[:, :1])


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_dim_distinct(torch, dim, keepdim):
    t = _distinct(torch, (2, 3, 4))
    check(torch, lambda m, x: (x.max(dim, keepdim), m.min(x, dim=dim, keepdim=keepdim)), t)
    check(torch, lambda m, x: (x.argmax(dim, keepdim), m.argmin(x, dim, keepdim)), t)
    check(torch, lambda m, x: (m.amax(x, dim, keepdim), m.amin(x, dim, keepdim)), t)


def test_max_ties_and_nan_pick_first(torch):
    t = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, NAN, 5.0, NAN], [4.0, 4.0, 4.0, 4.0]])
    check(torch, lambda m, x: (x.max(1), x.min(1), x.argmax(1), x.argmin(1), x.amax(1)), t)
    check(torch, lambda m, x: (x.max(), x.min(), x.argmax()), t)


def test_max_return_type(torch):
    t = _distinct(torch, (3, 4), "float32")
    ours, theirs = check(torch, lambda m, x: m.max(x, 1), t)
    _, predicted = ours
    assert predicted is ours.indices and ours[0] is ours.values
    assert type(ours).__name__ == "max" and isinstance(ours, tuple)
    assert repr(ours).startswith("dynograph.return_types.max(\nvalues=tensor(")
    assert "\nindices=tensor([" in str(ours)
    assert dynograph.return_types.max((1, 2)).indices == 2
    a, b = check(torch, lambda m, x: m.aminmax(x), t)
    assert a.min is a[0] and a.max is a[1]


def test_max_binary(torch):
    a, b = _make(torch, (3, 4), "float32"), _make(torch, (4,), "float32", seed=1)
    check(torch, lambda m, x, y: (m.max(x, y), x.max(y), m.min(x, y), x.min(other=y)), a, b)


def test_max_out(torch):
    t = _distinct(torch, (3, 4), "float32")
    v, i = dynograph.empty(0), dynograph.empty(0, dtype=dynograph.int64)
    r = dynograph.max(from_torch(t), 1, out=(v, i))
    assert r.values is v and r.indices is i
    assert_same(v, t.max(1).values)
    assert_same(i, t.max(1).indices)


def test_extreme_errors(torch):
    e = dynograph.empty(0, 3)
    full = r"Expected reduction dim to be specified for input.numel\(\) == 0"
    for f, name in ((lambda: e.max(), "max"), (lambda: e.min(), "min"), (lambda: e.amax(), "amax"),
                    (lambda: dynograph.empty(0).amin(), "amin")):
        with pytest.raises(RuntimeError, match=name + r"\(\): " + full):
            f()
    for f, name in ((lambda: e.max(0), "max"), (lambda: e.amax(0), "amax"), (lambda: e.argmax(0), "argmax"),
                    (lambda: e.amin((0, 1)), "amin"), (lambda: e.median(0), "median"),
                    (lambda: e.mode(0), "mode")):
        with pytest.raises(IndexError, match=name + r"\(\): Expected reduction dim 0 to have non-zero size"):
            f()
    with pytest.raises(IndexError, match=r"argmax\(\): " + full):
        e.argmax()
    with pytest.raises(IndexError, match="aminmax: Expected reduction dim 0 to have non-zero size"):
        dynograph.aminmax(e, dim=0)
    with pytest.raises(RuntimeError, match="aminmax\\(\\): cannot compute aminmax over an empty"):
        dynograph.aminmax(e)
    check(torch, lambda m, x: (x.max(1), x.amax(1), x.argmin(1), m.aminmax(x, dim=1)), torch.empty(0, 3))
    with pytest.raises(TypeError, match="max\\(\\) received an invalid combination of arguments"):
        dynograph.max(dynograph.ones(2), 1.5)


def test_scalar_tensor_reductions(torch):
    s = torch.tensor(2.5)
    check(torch, lambda m, x: (x.max(0), x.min(-1, True), x.argmax(0), x.amax(0), x.sort(), x.topk(1),
                               x.cumsum(0), x.cumprod(-1), x.cummax(0), x.median(0), x.mode(),
                               x.kthvalue(1), x.logsumexp(0), x.norm(), x.prod(0)), s)


# ---------------------------------------------------------------- var, std

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(torch, dtype, dim, keepdim):
    t = _make(torch, (2, 3, 4), dtype)
    tol = _tol(dtype)
    check(torch, lambda m, x: (x.var(dim, keepdim=keepdim), m.std(x, dim, keepdim=keepdim)), t, tol=tol)
    check(torch, lambda m, x: (x.var(dim, correction=0, keepdim=keepdim),
                               x.std(dim, unbiased=False, keepdim=keepdim)), t, tol=tol)
    check(torch, lambda m, x: (m.var_mean(x, dim, keepdim=keepdim), m.std_mean(x, dim, correction=2)),
          _noncontig(torch, dtype), tol=tol)


def test_var_legacy_signatures(torch):
    t = _make(torch, (3, 4), "float64")
    check(torch, lambda m, x: (x.var(True), x.var(False), x.std(0, True), x.std(0, False, True),
                               m.var(x, 1, True, True)), t)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        check(torch, lambda m, x: x.std(), torch.ones(1))
    with pytest.warns(UserWarning):
        check(torch, lambda m, x: m.var_mean(x, 0, correction=5), t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(torch, lambda m, x: (x.var(), x.std(0)), torch.empty(0, 2))
    with pytest.raises(RuntimeError, match="std and var only support floating point and complex dtypes"):
        dynograph.ones(3, dtype=dynograph.int64).std()


# ---------------------------------------------------------------- norms, logsumexp

@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), "fro", -1.5])
@pytest.mark.parametrize("dim", [None, 0, (0, 2), -1])
def test_norm(torch, p, dim):
    t = _make(torch, (2, 3, 4), "float32")
    t[0, 0, 0] = 0
    if p == "fro" and dim is not None and not isinstance(dim, tuple):
        dim = (dim,)
    check(torch, lambda m, x: (m.norm(x, p, dim), x.norm(p, dim, True)), t)
    check(torch, lambda m, x: m.norm(x, p, dim, dtype=m.float64), _noncontig(torch, "float32"))


def test_norm_special(torch):
    t = _make(torch, (3, 4), "float64")
    check(torch, lambda m, x: (x.norm(), m.norm(x, dim=1), x.norm(p=2, dim=0, dtype=m.float64)), t)
    with pytest.raises(RuntimeError, match=r"the dtype of the input \(Double\) should be convertible "
                       r"without narrowing to the specified dtype \(Float\)"):
        from_torch(t).norm(dtype=dynograph.float32)
    check(torch, lambda m, x: x.norm(), torch.empty(0, 3))
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        dynograph.empty(0).norm(float("inf"))
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point or complex "
                       "tensor as input. Got Long"):
        dynograph.ones(3, dtype=dynograph.int64).norm()
    with pytest.raises(RuntimeError, match="Order abc not supported"):
        dynograph.ones(3).norm("abc")


@pytest.mark.skipif(not hasattr(dynograph, "linalg") or not hasattr(dynograph.linalg, "matrix_norm"),
                    reason="needs dynograph.linalg.matrix_norm")
def test_norm_nuclear(torch):
    check(torch, lambda m, x: m.norm(x, "nuc"), _make(torch, (3, 4), "float64"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
@pytest.mark.parametrize("dim", [0, -1, (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(torch, dtype, dim, keepdim):
    t = _make(torch, (2, 3, 4), dtype)
    check(torch, lambda m, x: m.logsumexp(x, dim, keepdim), t, tol=_tol(dtype))


def test_logsumexp_stable(torch):
    t = torch.tensor([[1000.0, 1000.0, -1000.0], [-float("inf")] * 3, [float("inf"), 1.0, 2.0]])
    check(torch, lambda m, x: (x.logsumexp(1), x.logsumexp(0, True)), t)
    check(torch, lambda m, x: (x.logsumexp(1), x.logsumexp(0)), torch.empty(0, 3))


# ---------------------------------------------------------------- scans

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "float16"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(torch, dtype, dim):
    t = _make(torch, (2, 3, 4), dtype)
    tol = _tol(dtype)
    check(torch, lambda m, x: (x.cumsum(dim), m.cumprod(x, dim)), t, tol=tol)
    check(torch, lambda m, x: (x.cumsum(dim, dtype=m.float64), x.cumprod(dim, dtype=m.int64)), t, tol=tol)
    check(torch, lambda m, x: (x.cumsum(dim), m.cumprod(x, dim)), _noncontig(torch, dtype), tol=tol)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(torch, dtype, dim):
    t = _make(torch, (3, 4, 5), dtype)
    for x in (t, _noncontig(torch, dtype)):        # many ties: which index wins is not promised
        check_ties(torch, lambda m, x: x.cummax(dim), x, dim)
        check_ties(torch, lambda m, x: m.cummin(x, dim), x, dim)


def test_cummax_nan(torch):
    t = torch.tensor([[1.0, NAN, 3.0, NAN, 0.0], [2.0, 2.0, 0.0, 5.0, 5.0]])
    check(torch, lambda m, x: x.cumsum(1), t)
    check_ties(torch, lambda m, x: x.cummax(1), t, 1)
    check_ties(torch, lambda m, x: x.cummin(1), t, 1)


def test_cumsum_inplace(torch):
    t = _make(torch, (3, 4), "float32")
    x = from_torch(t)
    r = x.cumsum_(1)
    assert r is x
    assert_same(x, t.cumsum(1))
    x = from_torch(t)
    x.cumprod_(0)
    assert_same(x, t.cumprod(0))


def test_logcumsumexp(torch):
    t = _make(torch, (3, 4), "float64") * 300
    check(torch, lambda m, x: (x.logcumsumexp(0), m.logcumsumexp(x, -1)), t)


# ---------------------------------------------------------------- all, any, count_nonzero

@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8"])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_any(torch, dtype, dim, keepdim):
    t = _make(torch, (2, 3, 4), dtype)
    check(torch, lambda m, x: (x.all(dim, keepdim), m.any(x, dim, keepdim)), t)
    check(torch, lambda m, x: (x.all(), x.any(), x.all(dim)), _noncontig(torch, dtype))
    if dim is None or isinstance(dim, tuple) or not keepdim:
        check(torch, lambda m, x: m.count_nonzero(x, dim), t)


def test_all_any_edge(torch):
    check(torch, lambda m, x: (x.all(), x.any(), x.all(0), x.any(1)), torch.empty(0, 3))
    check(torch, lambda m, x: (x.all(), x.any()), torch.tensor([1.0, NAN]))
    check(torch, lambda m, x: x.count_nonzero(), torch.empty(0))


# ---------------------------------------------------------------- median, mode

@pytest.mark.parametrize("shape", [(7,), (3, 4, 5), (2, 6)])
def test_median(torch, shape):
    t = _distinct(torch, shape)
    check(torch, lambda m, x: (x.median(), x.nanmedian(), m.median(x)), t)
    for d in range(-1, len(shape)):
        check(torch, lambda m, x: (x.median(d), m.nanmedian(x, d, True)), t)


def test_median_nan_and_ints(torch):
    t = torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 7.0, 0.0, 5.0], [NAN, 4.0, NAN, NAN], [3.0, NAN, 1.0, 2.0]])
    check(torch, lambda m, x: (x.median(), x.nanmedian(), x.nanmedian(1)), t)
    check_ties(torch, lambda m, x: x.median(1), t, 1)         # rows with several NaNs
    t[2] = NAN
    # an all-NaN row's nanmedian index is an artefact of std::nth_element: compare the values
    check(torch, lambda m, x: x.nanmedian(1).values, t)
    check(torch, lambda m, x: (x.median(), x.median(0)), torch.tensor([[5, 1, 3], [2, 8, 4]]))
    check(torch, lambda m, x: (x.median(), x.nanmedian(), x.median(1)), torch.empty(0, 3))


def test_mode(torch):
    z = torch.tensor([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4], [7, 6, 5, 4, 3]])
    # which of several equally frequent values wins, and which of its positions, torch does
    # not promise: check that ours is a most frequent value and that its index points at it
    for t, dim in [(z, 0), (z, 1), (z, -1), (_noncontig(torch, "int64"), 0),
                   (torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 2.0, 0.0, 5.0]]), 1)]:
        for keepdim in (False, True):
            check_mode(torch, t, dim, keepdim)


def check_mode(torch, t, dim, keepdim):
    ours = from_torch(t).mode(dim, keepdim)
    theirs = t.mode(dim, keepdim)
    assert ours.values.shape == theirs.values.shape and ours.values.dtype == from_torch(t).dtype
    x = np.moveaxis(t.numpy(), dim, -1)
    values, indices = ours.values.numpy(), ours.indices.numpy()
    if keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    for pos in np.ndindex(x.shape[:-1]):
        row = x[pos]
        counts = [max(1, int(np.sum(row == v))) for v in row]     # NaN equals nothing: 1 each
        v, i = values[pos], indices[pos]
        assert counts[i] == max(counts) and (row[i] == v or np.isnan(v) and np.isnan(row[i]))


# ---------------------------------------------------------------- sort, topk, kthvalue

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "float16"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(torch, dtype, dim, descending):
    t = _make(torch, (4, 5, 6), dtype)              # many ties: stable order must match
    check(torch, lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True), t)
    check(torch, lambda m, x: m.argsort(x, dim=dim, descending=descending, stable=True), t)
    # the default sort is not stable: the order of tied elements is not promised
    check_ties(torch, lambda m, x: x.sort(dim, descending), t, dim)
    check_ties(torch, lambda m, x: (x.sort(dim, descending).values, x.argsort(dim, descending)), t, dim)
    check_ties(torch, lambda m, x: x.sort(dim, descending=descending), _noncontig(torch, dtype), dim)


def test_sort_nan_and_msort(torch):
    t = torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 2.0, 0.0, 5.0]])
    check(torch, lambda m, x: (x.sort(0), m.msort(x)), t)
    check_ties(torch, lambda m, x: x.sort(1), t, 1)            # two NaNs, and a tie
    check_ties(torch, lambda m, x: x.sort(1, descending=True), t, 1)
    check(torch, lambda m, x: (x.sort(0), x.argsort(1)), torch.empty(0, 3))


@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(torch, k, dim, largest):
    t = _distinct(torch, (5, 6))
    check(torch, lambda m, x: m.topk(x, k, dim, largest), t)
    check(torch, lambda m, x: x.topk(k, dim=dim, largest=largest, sorted=True), t.t())


def test_topk_kthvalue_errors_and_nan(torch):
    t = torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 7.0, 0.0, 5.0]])
    check_ties(torch, lambda m, x: x.topk(2), t, -1)          # two NaNs
    check_ties(torch, lambda m, x: x.topk(2, largest=False), t, -1)
    x = dynograph.ones(3, 4)
    for k in (-1, 5):
        with pytest.raises(RuntimeError, match="selected index k out of range"):
            x.topk(k)
    for k in (0, 5):
        with pytest.raises(RuntimeError,
                           match=r"kthvalue\(\): selected number k out of range for dimension 1"):
            x.kthvalue(k)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_kthvalue(torch, k):
    t = _distinct(torch, (5, 6))
    check(torch, lambda m, x: (x.kthvalue(k), m.kthvalue(x, k, 0, True), x.kthvalue(k, -1, keepdim=True)), t)


# ---------------------------------------------------------------- unique, bincount, histc

@pytest.mark.parametrize("dtype", ["int64", "float32", "bool"])
def test_unique(torch, dtype):
    t = _make(torch, (3, 5), dtype)
    for inv in (False, True):
        for counts in (False, True):
            check(torch, lambda m, x: m.unique(x, return_inverse=inv, return_counts=counts), t)
            check(torch, lambda m, x: x.unique(sorted=True, return_inverse=inv, return_counts=counts,
                                               dim=1), t)
            kw = dict(return_inverse=inv, return_counts=counts)
            check(torch, lambda m, x: m.unique_consecutive(x, **kw), t)
            check(torch, lambda m, x: m.unique_consecutive(x, **kw, dim=0), t.repeat_interleave(2, 0))


def test_unique_nan_and_empty(torch):
    check(torch, lambda m, x: (x.unique(), m.unique_consecutive(x)), torch.tensor([NAN, 1.0, NAN, 1.0]))
    check(torch, lambda m, x: x.unique(return_inverse=True, return_counts=True), torch.empty(0))
    z = torch.tensor([[1, 2], [1, 2], [0, 5]])
    check(torch, lambda m, x: m.unique(x, dim=0, return_inverse=True, return_counts=True), z)


def test_unique_meta_marks_data_dependent_sizes():
    from dynograph.compiler.ops import reduction as R
    from dynograph.compiler.ops.core import TensorSpec
    from dynograph.compiler.ops.indexing import DATA_DEPENDENT
    vals, inv, counts = R.unique.meta(TensorSpec((3, 4), dynograph.int64))
    assert vals.shape[0] is DATA_DEPENDENT and inv.shape == (3, 4) and counts.shape[0] is DATA_DEPENDENT
    assert R.bincount.meta(TensorSpec((3,), dynograph.int64)).shape[0] is DATA_DEPENDENT


def test_bincount(torch):
    x = torch.tensor([1, 1, 3, 0, 7])
    check(torch, lambda m, a: (m.bincount(a), a.bincount(minlength=10)), x)
    for w in (torch.tensor([0.5, 1.0, 2.0, 1.5, 3.0]), torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32),
              torch.tensor([0.5, 1.0, 2.0, 1.5, 3.0], dtype=torch.float64)):
        check(torch, lambda m, a, b: m.bincount(a, b, 3), x, w)
    check(torch, lambda m, a: a.bincount(), torch.tensor([], dtype=torch.int64))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        dynograph.bincount(dynograph.tensor([-1]))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        dynograph.bincount(dynograph.tensor([[1]]))
    with pytest.raises(NotImplementedError, match="\"bincount_cpu\" not implemented for 'Float'"):
        dynograph.bincount(dynograph.tensor([1.0]))


def test_histc(torch):
    for t in (torch.tensor([1.0, 2, 1, 7]), torch.tensor([1.0, 1]), _make(torch, (50,), "float64"),
              torch.tensor([0.0, 1, 2, 3, 3, -1, 4])):
        check(torch, lambda m, x: (m.histc(x), x.histc(bins=4), x.histc(5, min=0, max=3)), t)
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        dynograph.histc(dynograph.ones(3), bins=0)
    with pytest.raises(RuntimeError, match="torch.histc: max must be larger than min"):
        dynograph.histc(dynograph.ones(3), bins=3, min=3, max=1)
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Long'"):
        dynograph.histc(dynograph.tensor([1, 2]))


# ---------------------------------------------------------------- quantile

@needs("gather", "movedim", "unsqueeze", "expand", "reshape", "squeeze", "to")
@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_quantile(torch, interp, dim, keepdim):
    t = _make(torch, (4, 5), "float64")
    for q in (0.3, 0.0, 1.0, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), torch.tensor(0.25).double()):
        check(torch, lambda m, x, q: m.quantile(x, q, dim, keepdim, interpolation=interp), t, q)
        n = t.clone()
        n[1, 2] = NAN
        n[3] = NAN
        check(torch, lambda m, x, q: (m.quantile(x, q, dim, keepdim, interpolation=interp),
                                      x.nanquantile(q, dim, keepdim, interpolation=interp)), n, q)


@needs("gather", "movedim", "unsqueeze", "expand", "reshape", "squeeze", "to")
def test_quantile_errors():
    x = dynograph.ones(3, 4)
    with pytest.raises(RuntimeError, match=r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"):
        x.quantile(1.5)
    with pytest.raises(RuntimeError, match="input tensor must be either float or double dtype"):
        dynograph.ones(3, dtype=dynograph.int64).quantile(0.5)
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input tensor"):
        x.quantile(dynograph.tensor([0.5], dtype=dynograph.float64))
    with pytest.raises(RuntimeError, match="interpolation must be one of linear"):
        x.quantile(0.5, interpolation="foo")


# ---------------------------------------------------------------- gradients

def test_grad_names():
    x = dynograph.ones(2, 3, requires_grad=True)
    names = {
        "SumBackward0": x.sum(), "SumBackward1": x.sum(0), "MeanBackward0": x.mean(),
        "MeanBackward1": x.mean((0, 1)), "ProdBackward0": x.prod(), "ProdBackward1": x.prod(1),
        "MaxBackward1": x.max(), "MaxBackward0": x.max(1)[0], "MinBackward1": x.min(),
        "MinBackward0": x.min(0).values, "AmaxBackward0": x.amax(), "AminBackward0": x.amin(1),
        "AminmaxBackward0": dynograph.aminmax(x)[0], "StdBackward0": x.std(), "VarBackward0": x.var(0),
        "VarMeanBackward0": dynograph.var_mean(x)[1], "StdMeanBackward0": dynograph.std_mean(x)[0],
        "LinalgVectorNormBackward0": x.norm(), "LogsumexpBackward0": x.logsumexp(1),
        "CumsumBackward0": x.cumsum(0), "CumprodBackward0": x.cumprod(1), "CummaxBackward0": x.cummax(0)[0],
        "CumminBackward0": x.cummin(0)[0], "MedianBackward0": x.median(), "MedianBackward1": x.median(0)[0],
        "NanmedianBackward0": x.nanmedian(), "NanmedianBackward1": x.nanmedian(1)[0],
        "ModeBackward0": x.mode()[0], "SortBackward0": x.sort()[0], "TopkBackward0": x.topk(2)[0],
        "KthvalueBackward0": x.kthvalue(1)[0], "NansumBackward0": x.nansum(),
        "LogcumsumexpBackward0": x.logcumsumexp(0),
    }
    for name, t in names.items():
        assert t.grad_fn.name() == name
    assert x.max(1)[1].grad_fn is None and not x.argmax().requires_grad and not x.all().requires_grad


needs_movement = needs("reshape", "expand")


@needs_movement
@pytest.mark.parametrize("dim", DIMS_3D)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_grad(torch, dim, keepdim):
    t = _make(torch, (2, 3, 4), "float64")
    grad_check(torch, lambda m, x: x.sum(dim, keepdim), t)
    grad_check(torch, lambda m, x: x.mean(dim, keepdim), t)
    grad_check(torch, lambda m, x: m.nansum(x, dim, keepdim), _with_nans(torch).reshape(2, 3, 2))


@needs_movement
def test_full_reduction_grads(torch):
    t = _make(torch, (2, 3), "float64")
    for f in (lambda m, x: x.sum(), lambda m, x: x.mean(), lambda m, x: x.sum(dtype=m.float32),
              lambda m, x: x.prod(), lambda m, x: x.var(), lambda m, x: x.std(), lambda m, x: x.norm(),
              lambda m, x: m.logsumexp(x, (0, 1))):
        grad_check(torch, f, t)
    s = torch.tensor(2.0, dtype=torch.float64)
    grad_check(torch, lambda m, x: x.sum(0, True), s)
    grad_check(torch, lambda m, x: x.mean(), s)


@needs_movement
@pytest.mark.parametrize("values", [
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
    [[1.0, 0.0, 3.0], [4.0, 5.0, 6.0]],
    [[0.0, 2.0, 0.0], [0.0, 5.0, 6.0]],
    [[0.0, 0.0, 0.0], [2.0, 0.0, -1.0]],
])
def test_prod_grad_with_zeros(torch, values):
    t = torch.tensor(values, dtype=torch.float64)
    grad_check(torch, lambda m, x: x.prod(), t)
    grad_check(torch, lambda m, x: x.prod(0), t)
    grad_check(torch, lambda m, x: m.prod(x, 1, True), t)


@needs_movement
def test_extreme_grads_split_ties(torch):
    t = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], dtype=torch.float64)
    for f in (lambda m, x: x.max(), lambda m, x: x.min(), lambda m, x: x.amax(), lambda m, x: x.amax(1),
              lambda m, x: x.amin((0, 1), True), lambda m, x: x.median(), lambda m, x: x.nanmedian(),
              lambda m, x: m.aminmax(x)[1], lambda m, x: m.aminmax(x, dim=0)[0],
              lambda m, x: x.norm(float("inf")), lambda m, x: x.norm(float("-inf"), 1)):
        grad_check(torch, f, t)


@needs_movement
def test_aminmax_grad_both_outputs(torch):
    t = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], dtype=torch.float64)
    tt = t.clone().requires_grad_(True)
    ours = from_torch(t, requires_grad=True)
    lo, hi = torch.aminmax(tt, dim=1)
    (lo * 2 + hi * 3).sum().backward()
    lo, hi = dynograph.aminmax(ours, dim=1)
    (lo * 2 + hi * 3).sum().backward()
    assert_same(ours.grad, tt.grad)


@needs("reshape", "expand", "unsqueeze", "scatter")
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_selecting_grads(torch, dim, keepdim):
    t = _distinct(torch, (3, 4, 5))
    for f in (lambda m, x: x.max(dim, keepdim), lambda m, x: m.min(x, dim, keepdim),
              lambda m, x: x.median(dim, keepdim), lambda m, x: x.nanmedian(dim, keepdim),
              lambda m, x: x.kthvalue(2, dim, keepdim), lambda m, x: x.mode(dim, keepdim)):
        grad_check(torch, f, t)
    t = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], dtype=torch.float64)
    grad_check(torch, lambda m, x: x.max(1), t)     # the tie's gradient goes to torch's index


@needs("scatter")
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_topk_grads(torch, dim):
    t = _distinct(torch, (4, 5))
    for f in (lambda m, x: x.sort(dim), lambda m, x: x.sort(dim, descending=True),
              lambda m, x: x.topk(3, dim), lambda m, x: x.topk(2, dim, largest=False),
              lambda m, x: m.msort(x)):
        grad_check(torch, f, t)
    grad_check(torch, lambda m, x: x.sort(0), torch.tensor(1.5, dtype=torch.float64))


@needs_movement
@pytest.mark.parametrize("dim", [None, 0, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std_grads(torch, dim, keepdim):
    t = _make(torch, (2, 3, 4), "float64")
    grad_check(torch, lambda m, x: x.var(dim, keepdim=keepdim), t)
    grad_check(torch, lambda m, x: x.std(dim, correction=0, keepdim=keepdim), t)
    grad_check(torch, lambda m, x: m.var_mean(x, dim, keepdim=keepdim)[0], t)
    grad_check(torch, lambda m, x: m.std_mean(x, dim, keepdim=keepdim)[1], t)
    grad_check(torch, lambda m, x: sum(m.std_mean(x, dim, keepdim=keepdim)), t)


@needs_movement
@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, 1.5, float("inf"), -1.0])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_norm_grads(torch, p, dim):
    t = _make(torch, (2, 3, 4), "float64")
    t[0, 0, 0] = 0
    grad_check(torch, lambda m, x: x.norm(p, dim), t)
    grad_check(torch, lambda m, x: x.norm(p, dim, keepdim=True), t)
    grad_check(torch, lambda m, x: x.norm(p, dim), torch.zeros(2, 3, 4, dtype=torch.float64))


@needs_movement
@pytest.mark.parametrize("dim", [0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_grad(torch, dim, keepdim):
    grad_check(torch, lambda m, x: x.logsumexp(dim, keepdim), _make(torch, (2, 3, 4), "float64"))


@needs("flip")
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_grads(torch, dim):
    t = _make(torch, (3, 4, 5), "float64")
    grad_check(torch, lambda m, x: x.cumsum(dim), t)
    grad_check(torch, lambda m, x: x.cumsum(dim, dtype=m.float32), t, rtol=1e-5, atol=1e-6)
    grad_check(torch, lambda m, x: x.cumprod(dim), t)
    z = t.clone()
    z[0, 1, 1] = 0
    z[1, 2, 0] = 0
    z[1, 2, 3] = 0
    z[2, :, 2] = 0
    grad_check(torch, lambda m, x: x.cumprod(dim), z)
    grad_check(torch, lambda m, x: x.cumsum(0), torch.tensor(2.0, dtype=torch.float64))


@needs("scatter_add")
@pytest.mark.parametrize("dim", [0, -1])
def test_cummax_grads(torch, dim):
    t = _make(torch, (4, 5), "float64")
    grad_check(torch, lambda m, x: x.cummax(dim), t)
    grad_check(torch, lambda m, x: x.cummin(dim), t)


@needs("isnan")
def test_nanmean_grad(torch):
    grad_check(torch, lambda m, x: x.nanmean(1), _with_nans(torch))


@needs("flip")
def test_logcumsumexp_grad(torch):
    grad_check(torch, lambda m, x: x.logcumsumexp(1), _make(torch, (3, 4), "float64") * 50)
    grad_check(torch, lambda m, x: x.logcumsumexp(0), _make(torch, (3, 4), "float64"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int16", "int8", "uint8", "bool", "int64",
                                   "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_large_with_ties(torch, dtype, descending):
    """Big enough for the packed-key sort; many ties, NaN, -0.0 and infinities."""
    t = _make(torch, (12, 40), dtype)
    if t.is_floating_point():
        t[0, :7] = NAN
        t[1, ::3] = -0.0
        t[1, 1::3] = 0.0
        t[2, 5], t[2, 9] = float("inf"), -float("inf")
    for dim in (0, 1):
        check(torch, lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True), t)
        check(torch, lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True), t.t())
    # torch's default (unstable) sort orders big runs of ties its own way: compare values only
    check(torch, lambda m, x: x.sort(0, descending).values, t.reshape(-1))
    d = _distinct(torch, (12, 40), dtype if dtype in ("float32", "float64", "int32", "int64") else "float32")
    check(torch, lambda m, x: (x.topk(3), x.topk(5, 0, largest=False), x.median(1)), d)


def test_numpy_argument_names(torch):
    t = _make(torch, (3, 4), "float32")
    check(torch, lambda m, x: (x.sum(axis=0), m.mean(x, axis=1, keepdims=True), x.max(axis=1),
                               x.amax(axis=0), x.argmax(axis=1), x.cumsum(axis=0), x.sort(axis=0),
                               x.std(axis=0, keepdims=True), m.var_mean(x, axis=1), x.all(axis=0),
                               x.topk(2, axis=0), x.logsumexp(axis=1)), t)
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        from_torch(t).sum(axis=0, dim=1)


@needs_movement
def test_double_backward(torch):
    """Derivative rules are written with differentiable ops: second derivatives match torch."""
    t = _make(torch, (3, 4), "float64")
    t[1, 2] = 0
    fns = (lambda m, x: x.var(1), lambda m, x: x.std(), lambda m, x: x.prod(1), lambda m, x: x.norm(3, 0),
           lambda m, x: x.logsumexp(1), lambda m, x: x.mean(0), lambda m, x: (x * x).amax(1),
           lambda m, x: x.norm())
    for fn in fns:
        tt = t.clone().requires_grad_(True)
        ours = from_torch(t, requires_grad=True)
        results = []
        for lib, x in ((torch, tt), (dynograph, ours)):
            y = fn(lib, x)
            (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
            (g * g).sum().backward()
            results.append(x.grad)
        assert_same(results[1], results[0], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_topk_selection_path(torch, dtype):
    """Long rows with a small k take the linear-time selection path."""
    t = _distinct(torch, (5, 130), dtype)
    for k in (1, 4, 30):
        check(torch, lambda m, x: (x.topk(k), x.topk(k, largest=False), x.topk(k, 0 if k < 5 else 1)), t)
        check(torch, lambda m, x: x.t().topk(k, 0), t)
    if dtype != "int64":
        n = t.clone()
        n[1, 5] = NAN
        n[2, ::7] = NAN
        check(torch, lambda m, x: (x.topk(3).values, x.topk(3, largest=False)), n)
    grad_check(torch, lambda m, x: x.topk(4, 1), _distinct(torch, (5, 130)))


def test_dtype_support_errors():
    b = dynograph.ones(2, 3, dtype=dynograph.bool)
    i = dynograph.ones(3, dtype=dynograph.int64)
    cases = [
        (lambda: b.median(), NotImplementedError, "\"median_cpu\" not implemented for 'Bool'"),
        (lambda: b.nanmedian(), NotImplementedError, "\"median_cpu\" not implemented for 'Bool'"),
        (lambda: b.median(0), NotImplementedError, "\"median_out\" not implemented for 'Bool'"),
        (lambda: b.kthvalue(1, 0), NotImplementedError, "\"kthvalue_cpu\" not implemented for 'Bool'"),
        (lambda: b.topk(1), RuntimeError, "topk does not support bool dtypes on CPU"),
        (lambda: i.logcumsumexp(0), NotImplementedError,
         "\"logcumsumexp_out_cpu\" not implemented for 'Long'"),
        (lambda: dynograph.var_mean(i), RuntimeError, "var_mean only support floating point and complex"),
        (lambda: dynograph.std_mean(i), RuntimeError, "std_mean only support floating point and complex"),
        (lambda: i.var(), RuntimeError, "std and var only support floating point and complex dtypes"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


@needs("permute", "scatter", "flip", "scatter_add")
def test_grads_through_noncontiguous_views(torch):
    t = _distinct(torch, (4, 6, 3))
    for f in (lambda m, x: x.permute(2, 0, 1)[:, ::2].sum(1), lambda m, x: x.permute(2, 0, 1).amax((0, 2)),
              lambda m, x: x.transpose(0, 2).max(1), lambda m, x: x[:, 1::2].sort(0),
              lambda m, x: x.permute(1, 2, 0).cumsum(1), lambda m, x: x[::2].cumprod(2),
              lambda m, x: x.transpose(1, 2).var(1), lambda m, x: x.permute(2, 0, 1).cummax(2),
              lambda m, x: x[..., ::2].logsumexp(0), lambda m, x: x.transpose(0, 1).norm(dim=1)):
        grad_check(torch, f, t)

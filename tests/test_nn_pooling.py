"""Pooling functionals and modules against PyTorch: values, indices, input gradients, errors, reprs."""
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn  # noqa: F401  (the module tests eval "nn.<spec>")
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch


def _inputs(torch, shape, dtype="float32", seed=0, noncontig=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype))
    if noncontig:                        # same values, transposed storage
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    t.requires_grad_()
    d = from_torch(t, requires_grad=True)
    if noncontig:
        d = d.detach().transpose(-1, -2).contiguous().transpose(-1, -2).requires_grad_()
        assert not d.is_contiguous()
    return t, d


def _check(torch, theirs, ours, shape, dtype="float32", noncontig=False, seed=0):
    """Forward outputs (values and any indices) and the input gradient agree with torch."""
    t, d = _inputs(torch, shape, dtype, seed, noncontig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect, got = theirs(t), ours(d)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    assert_same(got, expect, **tol)
    e0 = expect[0] if isinstance(expect, tuple) else expect
    g0 = got[0] if isinstance(got, tuple) else got
    gt = torch.randn(e0.shape, dtype=e0.dtype, generator=torch.Generator().manual_seed(seed + 1))
    e0.backward(gt)
    g0.backward(from_torch(gt))
    assert_same(d.grad, t.grad, **tol)
    return g0


MAX2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=[3, 1], stride=[1], padding=[1, 0]),
]


@pytest.mark.parametrize("kw", MAX2D)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d(torch, kw, dtype):
    out = _check(torch, lambda x: torch.nn.functional.max_pool2d(x, return_indices=True, **kw),
                 lambda x: F.max_pool2d(x, return_indices=True, **kw), (2, 3, 7, 8), dtype)
    assert out.grad_fn.name() == "MaxPool2DWithIndicesBackward0"


@pytest.mark.parametrize("kw", MAX2D[:3])
def test_max_pool2d_unbatched_and_noncontiguous(torch, kw):
    _check(torch, lambda x: torch.nn.functional.max_pool2d(x, return_indices=True, **kw),
           lambda x: F.max_pool2d(x, return_indices=True, **kw), (3, 7, 8))
    _check(torch, lambda x: torch.nn.functional.max_pool2d(x, return_indices=True, **kw),
           lambda x: F.max_pool2d(x, return_indices=True, **kw), (2, 3, 7, 8), noncontig=True)


def test_max_pool2d_cifar_shapes(torch):
    _check(torch, lambda x: torch.nn.functional.max_pool2d(x, 2, 2),
           lambda x: F.max_pool2d(x, 2, 2), (8, 6, 28, 28))
    _check(torch, lambda x: torch.nn.functional.max_pool2d(x, 2, 2),
           lambda x: F.max_pool2d(x, 2, 2), (8, 16, 10, 10))


def test_max_pool2d_ties_nan_and_infinity(torch):
    t = torch.zeros(1, 2, 5, 5)
    t[0, 0, 0, :3] = float("nan")
    t[0, 0, 3, 3] = float("nan")
    t[0, 0, 4, 4] = float("nan")
    t[0, 1] = -float("inf")                     # every window all -inf: padding never chosen
    d = from_torch(t)
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
               dict(kernel_size=3, stride=1, padding=1, ceil_mode=True)):
        assert_same(F.max_pool2d(d, return_indices=True, **kw),
                    torch.nn.functional.max_pool2d(t, return_indices=True, **kw))


def test_max_pool_integer_input(torch):
    t = torch.randint(-50, 50, (2, 3, 7, 7))
    for dt in (torch.int64, torch.int32):
        assert_same(F.max_pool2d(from_torch(t.to(dt)), 3, 2, 1, return_indices=True),
                    torch.nn.functional.max_pool2d(t.to(dt), 3, 2, 1, return_indices=True))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3, 2), stride=1, dilation=(1, 1, 2)),
                                dict(kernel_size=3, stride=2, ceil_mode=True)])
def test_max_pool3d(torch, kw):
    out = _check(torch, lambda x: torch.nn.functional.max_pool3d(x, return_indices=True, **kw),
                 lambda x: F.max_pool3d(x, return_indices=True, **kw), (2, 2, 5, 6, 5), "float64")
    assert out.grad_fn.name() == "MaxPool3DWithIndicesBackward0"
    _check(torch, lambda x: torch.nn.functional.max_pool3d(x, **kw),
           lambda x: F.max_pool3d(x, **kw), (2, 5, 6, 5))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=1, dilation=2, ceil_mode=True),
                                dict(kernel_size=4, stride=3, ceil_mode=True)])
@pytest.mark.parametrize("shape", [(2, 3, 10), (3, 10)])
def test_max_pool1d(torch, kw, shape):
    out = _check(torch, lambda x: torch.nn.functional.max_pool1d(x, return_indices=True, **kw),
                 lambda x: F.max_pool1d(x, return_indices=True, **kw), shape)
    assert out.grad_fn.name() == "SqueezeBackward1"


AVG = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), divisor_override=5),
    dict(kernel_size=2, stride=3, ceil_mode=True),
]


@pytest.mark.parametrize("kw", AVG)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_avg_pool2d(torch, kw, dtype):
    out = _check(torch, lambda x: torch.nn.functional.avg_pool2d(x, **kw),
                 lambda x: F.avg_pool2d(x, **kw), (2, 3, 7, 8), dtype)
    assert out.grad_fn.name() == "AvgPool2DBackward0"
    _check(torch, lambda x: torch.nn.functional.avg_pool2d(x, **kw),
           lambda x: F.avg_pool2d(x, **kw), (3, 7, 8), dtype, noncontig=True)


def test_avg_pool_integer_input(torch):
    t = torch.randint(-50, 50, (2, 3, 7, 7))
    assert_same(F.avg_pool2d(from_torch(t), 3, 2, 1), torch.nn.functional.avg_pool2d(t, 3, 2, 1))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1,
                                                          count_include_pad=False),
                                dict(kernel_size=(3, 2, 2), stride=2, ceil_mode=True),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool3d(torch, kw):
    out = _check(torch, lambda x: torch.nn.functional.avg_pool3d(x, **kw),
                 lambda x: F.avg_pool3d(x, **kw), (2, 2, 5, 6, 5), "float64")
    assert out.grad_fn.name() == "AvgPool3DBackward0"
    _check(torch, lambda x: torch.nn.functional.avg_pool3d(x, **kw),
           lambda x: F.avg_pool3d(x, **kw), (2, 5, 6, 5))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False,
                                     ceil_mode=True)])
@pytest.mark.parametrize("shape", [(2, 3, 10), (3, 9)])
def test_avg_pool1d(torch, kw, shape):
    out = _check(torch, lambda x: torch.nn.functional.avg_pool1d(x, **kw),
                 lambda x: F.avg_pool1d(x, **kw), shape)
    assert out.grad_fn.name() == "SqueezeBackward1"


@pytest.mark.parametrize("size", [1, 2, 3, (4, 3), (None, 2), (7, 9), (5, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adaptive_pool2d(torch, size, dtype):
    _check(torch, lambda x: torch.nn.functional.adaptive_avg_pool2d(x, size),
           lambda x: F.adaptive_avg_pool2d(x, size), (2, 3, 7, 9), dtype)
    _check(torch, lambda x: torch.nn.functional.adaptive_max_pool2d(x, size, return_indices=True),
           lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), (2, 3, 7, 9), dtype)
    _check(torch, lambda x: torch.nn.functional.adaptive_max_pool2d(x, size),
           lambda x: F.adaptive_max_pool2d(x, size), (3, 7, 9), dtype, noncontig=True)


def test_adaptive_pool_grad_fn_names(torch):
    x = dynograph.randn(2, 3, 6, 6, requires_grad=True)
    assert F.adaptive_avg_pool2d(x, 3).grad_fn.name() == "AdaptiveAvgPool2DBackward0"
    assert F.adaptive_avg_pool2d(x, 1).grad_fn.name() == "MeanBackward1"
    assert F.adaptive_max_pool2d(x, 3).grad_fn.name() == "AdaptiveMaxPool2DBackward0"
    x3 = dynograph.randn(1, 2, 4, 4, 4, requires_grad=True)
    assert F.adaptive_avg_pool3d(x3, 3).grad_fn.name() == "AdaptiveAvgPool3DBackward0"
    assert F.adaptive_max_pool3d(x3, 3).grad_fn.name() == "AdaptiveMaxPool3DBackward0"


@pytest.mark.parametrize("size", [1, 3, (2, 3, 4), (None, 2, 5)])
def test_adaptive_pool3d(torch, size):
    _check(torch, lambda x: torch.nn.functional.adaptive_avg_pool3d(x, size),
           lambda x: F.adaptive_avg_pool3d(x, size), (2, 2, 5, 4, 7), "float64")
    _check(torch, lambda x: torch.nn.functional.adaptive_max_pool3d(x, size, return_indices=True),
           lambda x: F.adaptive_max_pool3d(x, size, return_indices=True), (2, 5, 4, 7))


@pytest.mark.parametrize("size", [1, 3, 4, 7, 10])
@pytest.mark.parametrize("shape", [(2, 3, 7), (3, 7)])
def test_adaptive_pool1d(torch, size, shape):
    _check(torch, lambda x: torch.nn.functional.adaptive_avg_pool1d(x, size),
           lambda x: F.adaptive_avg_pool1d(x, size), shape)
    _check(torch, lambda x: torch.nn.functional.adaptive_max_pool1d(x, size, return_indices=True),
           lambda x: F.adaptive_max_pool1d(x, size, return_indices=True), shape)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool(torch, n):
    pool = getattr(torch.nn.functional, f"max_pool{n}d")
    unpool_t = getattr(torch.nn.functional, f"max_unpool{n}d")
    unpool_d = getattr(F, f"max_unpool{n}d")
    even, odd = (2, 3) + (6, 6, 4)[:n], (2, 3) + (7, 7, 5)[:n]
    cases = [(even, dict(kernel_size=2), None), (odd, dict(kernel_size=3, stride=2, padding=1), None),
             (odd, dict(kernel_size=2), odd[2:]), (odd, dict(kernel_size=2), odd)]
    for shape, kw, out_size in cases:
        v, i = pool(torch.randn(*shape, dtype=torch.float64), return_indices=True, **kw)
        di = from_torch(i)
        out = _check(torch, lambda x: unpool_t(x, i, output_size=out_size, **kw),
                     lambda x: unpool_d(x, di, output_size=out_size, **kw), tuple(v.shape), "float64")
        if n > 1:
            assert out.grad_fn.name() == f"MaxUnpool{n}DBackward0"


@pytest.mark.parametrize("p", [1, 2, 3.5])
def test_lp_pool(torch, p):
    for n, shape in ((1, (2, 3, 9)), (2, (2, 3, 7, 8)), (3, (1, 2, 5, 4, 6))):
        for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, ceil_mode=True)):
            _check(torch, lambda x: getattr(torch.nn.functional, f"lp_pool{n}d")(x.abs() + 0.1, p, **kw),
                   lambda x: getattr(F, f"lp_pool{n}d")(x.abs() + 0.1, p, **kw), shape, "float64")


def test_double_backward_through_pools(torch):
    for name, kw in (("max_pool2d", dict(kernel_size=2, stride=1)),
                     ("avg_pool2d", dict(kernel_size=2, stride=1, padding=1))):
        t, d = _inputs(torch, (1, 2, 4, 4), "float64")
        gt = torch.autograd.grad((getattr(torch.nn.functional, name)(t, **kw) ** 2).sum(), t,
                                 create_graph=True)[0]
        gd = dynograph.autograd.grad((getattr(F, name)(d, **kw) ** 2).sum(), d, create_graph=True)[0]
        assert_same(gd, gt)
        (gt * t).sum().backward()
        (gd * d).sum().backward()
        assert_same(d.grad, t.grad)


ERRORS = [
    "F.max_pool2d(x, 3, padding=2)",
    "F.max_pool2d(x, 6)",
    "F.max_pool2d(x, 2, stride=0)",
    "F.max_pool2d(x, 0)",
    "F.max_pool2d(x, 2, dilation=0)",
    "F.max_pool2d(x, 2, padding=-1)",
    "F.max_pool2d(x, 0, 1)",
    "F.max_pool2d(x, 2, -1)",
    "F.max_pool2d(x, (3, 1), padding=(0, 1))",
    "F.max_pool2d(x, 2, dilation=(1, 0))",
    "F.max_pool3d(x[None], 2, dilation=0)",
    "F.max_pool2d(x[0, 0, 0], 2)",
    "F.max_pool2d(x, (2, 2, 2))",
    "F.max_pool2d(z, 2)",
    "F.avg_pool2d(x, 3, padding=2)",
    "F.avg_pool2d(x, 6)",
    "F.avg_pool2d(x, 2, stride=0)",
    "F.avg_pool2d(x, 2, divisor_override=0)",
    "F.avg_pool2d(x[0, 0, 0], 2)",
    "F.max_pool1d(x[0], 3, padding=2)",
    "F.max_pool1d(x[0], 6)",
    "F.max_pool1d(x, 2)",
    "F.avg_pool1d(x[0], 6)",
    "F.avg_pool1d(x[0], 3, padding=2)",
    "F.avg_pool1d(x, 2)",
    "F.avg_pool3d(x[0], 2)",
    "F.max_pool3d(x[0], 6)",
    "F.avg_pool3d(x, 6)",
    "F.adaptive_avg_pool2d(x, (2, 2, 2))",
    "F.adaptive_avg_pool2d(x[0, 0, 0], 2)",
    "F.adaptive_max_pool2d(x[0, 0, 0], 2)",
    "F.adaptive_avg_pool1d(x, 2)",
    "F.adaptive_max_pool1d(x, 2)",
    "F.adaptive_max_pool2d(x, -1)",
    "F.max_unpool2d(x, i, 2, output_size=(3, 3))",
    "F.max_unpool2d(x, i * 0 + 100, 2)",
    "F.max_unpool2d(x, i.float(), 2)",
    "F.max_unpool2d(x, i[:, :, :4], 2)",
    "F.max_unpool2d(x, i, 2, output_size=(1, 2, 3))",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    t = torch.randn(2, 3, 5, 5)
    ti = torch.zeros(2, 3, 5, 5, dtype=torch.long)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "x": t, "i": ti, "z": torch.zeros(2, 0, 4, 4)})
    ours = eval_expr(expr, {"F": F, "x": from_torch(t), "i": from_torch(ti),
                            "z": dynograph.zeros(2, 0, 4, 4)})
    assert isinstance(theirs, Exception), expr
    assert_same_error(ours, theirs, expr)


def test_empty_batch(torch):
    t = torch.zeros(0, 2, 4, 4)
    assert_same(F.max_pool2d(from_torch(t), 2), torch.nn.functional.max_pool2d(t, 2))
    assert_same(F.avg_pool2d(from_torch(t), 2), torch.nn.functional.avg_pool2d(t, 2))


MODULES = [
    ("MaxPool1d(2)", (2, 3, 8)), ("MaxPool2d(2)", (2, 3, 6, 6)),
    ("MaxPool2d((2, 3), stride=1, padding=1, dilation=2, ceil_mode=True)", (2, 3, 7, 8)),
    ("MaxPool2d(3, 2, 1, return_indices=True)", (2, 3, 7, 7)),
    ("MaxPool3d(2)", (1, 2, 4, 4, 4)), ("AvgPool1d(3, 2, 1)", (2, 3, 8)), ("AvgPool2d(2)", (2, 3, 6, 6)),
    ("AvgPool2d(3, 2, 1, True, False, 2)", (2, 3, 7, 7)), ("AvgPool3d(2, 1)", (1, 2, 4, 4, 4)),
    ("AdaptiveAvgPool1d(3)", (2, 3, 8)), ("AdaptiveAvgPool2d((None, 3))", (2, 3, 6, 7)),
    ("AdaptiveAvgPool3d(2)", (1, 2, 4, 5, 4)), ("AdaptiveMaxPool1d(3)", (2, 3, 8)),
    ("AdaptiveMaxPool2d(2, True)", (2, 3, 6, 7)), ("AdaptiveMaxPool3d((2, 1, 3))", (1, 2, 4, 5, 4)),
    ("LPPool1d(2, 3)", (2, 3, 8)), ("LPPool2d(2.0, 3, 2, True)", (2, 3, 7, 7)),
    ("LPPool3d(1, 2)", (1, 2, 4, 4, 4)),
]


@pytest.mark.parametrize("spec,shape", MODULES)
def test_modules(torch, spec, shape):
    ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    if spec.startswith("LPPool"):
        _check(torch, lambda x: theirs(x.abs() + 0.1), lambda x: ours(x.abs() + 0.1), shape)
    else:
        _check(torch, theirs, ours, shape)


@pytest.mark.parametrize("spec", ["MaxUnpool1d(2)", "MaxUnpool2d(2)", "MaxUnpool3d(2, 1, 1)",
                                  "MaxUnpool2d((2, 3), stride=1, padding=(1, 0))"])
def test_unpool_modules(torch, spec):
    ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
    assert repr(ours) == repr(theirs)
    n = int(spec[9])
    shape = (2, 3) + (6, 5, 4)[:n]
    pool = getattr(torch.nn.functional, f"max_pool{n}d")
    v, i = pool(torch.randn(*shape), theirs.kernel_size, theirs.stride, theirs.padding,
                return_indices=True)
    di = from_torch(i)
    _check(torch, lambda x: theirs(x, i, output_size=shape[2:]),
           lambda x: ours(x, di, output_size=shape[2:]), tuple(v.shape))


def test_indices_match_torch_on_plateaus(torch):
    """Equal values everywhere: the first element of each window is the index (as in torch)."""
    t = torch.ones(1, 1, 6, 7)
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, dilation=2)):
        assert_same(F.max_pool2d(from_torch(t), return_indices=True, **kw)[1],
                    torch.nn.functional.max_pool2d(t, return_indices=True, **kw)[1])
    assert_same(F.adaptive_max_pool2d(from_torch(t), (4, 5), return_indices=True)[1],
                torch.nn.functional.adaptive_max_pool2d(t, (4, 5), return_indices=True)[1])
    assert np.all(F.max_pool2d(from_torch(t), 2).numpy() == 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,k,out", [((2, 3, 7, 9), 3, (5, 7)), ((2, 3, 7, 9), (3, 2), (4, 8)),
                                         ((3, 7, 9), 2, (3, 3)), ((2, 2, 5, 6, 7), 2, (3, 4, 5)),
                                         ((2, 5, 6, 7), (2, 3, 1), (3, 3, 6))])
def test_fractional_max_pool(torch, dtype, shape, k, out):
    n = len(out)
    batch = shape[0] if len(shape) == n + 2 else 1
    s = torch.rand(batch, shape[-n - 1], n, dtype=getattr(torch, dtype),
                   generator=torch.Generator().manual_seed(3))
    ds = from_torch(s)
    name = f"fractional_max_pool{n}d"
    got = _check(torch,
                 lambda x: getattr(torch.nn.functional, name)(x, k, out, return_indices=True,
                                                              _random_samples=s),
                 lambda x: getattr(F, name)(x, k, out, return_indices=True, _random_samples=ds),
                 shape, dtype)
    assert got.grad_fn.name() == f"FractionalMaxPool{n}DBackward0"


def test_fractional_max_pool_modules_and_ratio(torch):
    for spec in ("FractionalMaxPool2d(3, output_size=4)",
                 "FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)",
                 "FractionalMaxPool3d(2, output_size=(2, 3, 3))"):
        ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert (ours.kernel_size, ours.output_size, ours.output_ratio) == \
            (theirs.kernel_size, theirs.output_size, theirs.output_ratio)
    m = nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.7))
    x = dynograph.randn(2, 3, 8, 10, requires_grad=True)
    y = m(x)
    assert tuple(y.shape) == (2, 3, 4, 7)
    y.sum().backward()
    assert x.grad.sum().item() == pytest.approx(2 * 3 * 4 * 7)
    s = torch.rand(2, 3, 2)
    t = torch.randn(2, 3, 8, 8)
    theirs = torch.nn.FractionalMaxPool2d(3, output_size=5, _random_samples=s)
    ours = nn.FractionalMaxPool2d(3, output_size=5, _random_samples=from_torch(s))
    assert_same(ours(from_torch(t)), theirs(t))


FRACTIONAL_ERRORS = [
    "F.fractional_max_pool2d(x, 3)",
    "F.fractional_max_pool2d(x, 3, output_ratio=(0.5, 0.5, 0.5))",
    "F.fractional_max_pool2d(x, 3, output_size=(6, 7), _random_samples=s)",
    "F.fractional_max_pool2d(x, 3, output_size=(5, 8), _random_samples=s)",
    "F.fractional_max_pool2d(x, 3, output_size=4, _random_samples=s[:1])",
    "F.fractional_max_pool2d(x, 3, output_size=4, _random_samples=s[..., :1])",
    "F.fractional_max_pool2d(x, 3, output_size=4, _random_samples=s[:, :2])",
    "F.fractional_max_pool2d(x, 3, output_size=4, _random_samples=s.double())",
    "F.fractional_max_pool3d(x[None], (1, 2, 2), output_size=(3, 3, 3))",
    "F.fractional_max_pool3d(x[None], (1, 2, 2), output_size=(1, 6, 3))",
    "F.fractional_max_pool3d(x[None], (1, 2, 2), output_size=(1, 3, 8))",
    "nn.FractionalMaxPool2d(3)",
    "nn.FractionalMaxPool2d(3, output_size=2, output_ratio=0.5)",
    "nn.FractionalMaxPool3d(2, output_ratio=1.5)",
    "nn.FractionalMaxPool3d((2, 0, 1), output_size=2)",
]


@pytest.mark.parametrize("expr", FRACTIONAL_ERRORS)
def test_fractional_errors_match_torch(torch, expr):
    t, s = torch.randn(2, 3, 7, 9), torch.rand(2, 3, 2)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "nn": torch.nn, "x": t, "s": s})
    ours = eval_expr(expr, {"F": F, "nn": nn, "x": from_torch(t), "s": from_torch(s)})
    assert isinstance(theirs, Exception), expr
    assert_same_error(ours, theirs, expr)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_pools(torch, dtype):
    t = torch.randn(2, 3, 7, 7).to(getattr(torch, dtype))
    t[0, 0, 0, 0] = float("nan")
    d = from_torch(t)
    tf = torch.nn.functional
    for name, args in (("max_pool2d", (3, 2, 1)), ("avg_pool2d", (3, 2, 1)),
                       ("adaptive_max_pool2d", ((3, 2),)), ("adaptive_avg_pool2d", ((3, 2),))):
        assert_same(getattr(F, name)(d, *args), getattr(tf, name)(t, *args), rtol=1e-2, atol=1e-2)
    assert_same(F.max_pool2d(d, 2, return_indices=True)[1], tf.max_pool2d(t, 2, return_indices=True)[1])

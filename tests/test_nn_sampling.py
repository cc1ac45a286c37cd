"""Interpolation, grid sampling, affine grids, pixel/channel shuffles, upsampling and padding modules
against PyTorch: forward values, input gradients, errors and reprs."""
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn  # noqa: F401  (the module tests eval "nn.<spec>")
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch


def _check(torch, theirs, ours, shapes, dtype="float32", noncontig=False, seed=0, grads=True):
    """Outputs and the gradients of every input agree with torch."""
    gen = torch.Generator().manual_seed(seed)
    ts = [torch.randn(*s, generator=gen, dtype=getattr(torch, dtype)) for s in shapes]
    ds = [from_torch(t) for t in ts]
    if noncontig:
        ds[0] = ds[0].transpose(-1, -2).contiguous().transpose(-1, -2)
        assert not ds[0].is_contiguous()
    for t, d in zip(ts, ds):
        t.requires_grad_()
        d.requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect, got = theirs(*ts), ours(*ds)
    tol = dict(rtol=1e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    assert_same(got, expect, **tol)
    if not grads:
        return got
    gt = torch.randn(expect.shape, dtype=expect.dtype, generator=gen)
    expect.backward(gt)
    got.backward(from_torch(gt))
    for d, t in zip(ds, ts):
        if t.grad is None or d.grad is None:
            assert d.grad is None or not d.grad.abs().sum().item()
            assert t.grad is None or not t.grad.abs().sum().item()
            continue
        assert_same(d.grad, t.grad, **tol)
    return got


SIZES = [dict(size=9), dict(scale_factor=2), dict(scale_factor=0.6), dict(scale_factor=1.7),
         dict(scale_factor=1.7, recompute_scale_factor=True), dict(scale_factor=3.0)]
CASES = [((2, 3, 7), m) for m in ("nearest", "nearest-exact", "linear", "area")] + \
    [((2, 3, 5, 7), m) for m in ("nearest", "nearest-exact", "bilinear", "bicubic", "area")] + \
    [((1, 2, 3, 4, 5), m) for m in ("nearest", "nearest-exact", "trilinear", "area")]


@pytest.mark.parametrize("shape,mode", CASES)
@pytest.mark.parametrize("kw", SIZES)
def test_interpolate(torch, shape, mode, kw):
    for ac in ([None] if mode in ("nearest", "nearest-exact", "area") else [False, True]):
        fn = (lambda f: lambda x: f(x, mode=mode, align_corners=ac, **kw))
        _check(torch, fn(torch.nn.functional.interpolate), fn(F.interpolate), [shape])


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_sizes_float64_noncontiguous(torch, mode):
    for size in [(3, 11), (5, 7), (1, 1), (10, 2)]:
        fn = (lambda f: lambda x: f(x, size=size, mode=mode))
        _check(torch, fn(torch.nn.functional.interpolate), fn(F.interpolate), [(2, 2, 5, 7)],
               "float64", noncontig=True)
    fn = (lambda f: lambda x: f(x, scale_factor=(1.5, 0.5), mode=mode))
    _check(torch, fn(torch.nn.functional.interpolate), fn(F.interpolate), [(2, 2, 5, 7)])


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_long_dims(torch, mode):
    """Dims longer than 64 take the scatter (bincount) backward instead of the dense matmul."""
    for size in [(3, 150), (2, 61)]:
        fn = (lambda f: lambda x: f(x, size=size, mode=mode))
        _check(torch, fn(torch.nn.functional.interpolate), fn(F.interpolate), [(1, 2, 2, 70)],
               "float64")


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [dict(size=(5, 6)), dict(scale_factor=0.3), dict(size=(20, 30))])
def test_interpolate_antialias(torch, mode, kw):
    for ac in (False, True):
        fn = (lambda f: lambda x: f(x, mode=mode, align_corners=ac, antialias=True, **kw))
        _check(torch, fn(torch.nn.functional.interpolate), fn(F.interpolate), [(2, 3, 17, 13)],
               "float64")


def test_upsample_aliases_warn(torch):
    x = dynograph.randn(1, 2, 3, 4)
    t = torch.tensor(x.numpy())
    for name, kw in (("upsample", dict(scale_factor=2, mode="bilinear")),
                     ("upsample_nearest", dict(scale_factor=2)),
                     ("upsample_bilinear", dict(size=(5, 7)))):
        with pytest.warns(UserWarning, match=f"nn.functional.{name}` is deprecated"):
            got = getattr(F, name)(x, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(got, getattr(torch.nn.functional, name)(t, **kw))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(torch, mode, padding_mode, align_corners):
    def fn(f):
        return lambda x, g: f(x, g * 1.3, mode=mode, padding_mode=padding_mode,
                              align_corners=align_corners)
    _check(torch, fn(torch.nn.functional.grid_sample), fn(F.grid_sample), [(2, 3, 5, 6), (2, 4, 3, 2)],
           "float64")


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d(torch, mode, padding_mode):
    for ac in (False, True):
        def fn(f):
            return lambda x, g: f(x, g * 1.3, mode=mode, padding_mode=padding_mode, align_corners=ac)
        _check(torch, fn(torch.nn.functional.grid_sample), fn(F.grid_sample),
               [(2, 2, 4, 5, 3), (2, 3, 2, 2, 3)], "float64")


def test_grid_sample_float32_and_default_warning(torch):
    _check(torch, lambda x, g: torch.nn.functional.grid_sample(x, g, align_corners=False),
           lambda x, g: F.grid_sample(x, g, align_corners=False), [(1, 2, 6, 6), (1, 5, 5, 2)])
    x, g = dynograph.randn(1, 1, 3, 3), dynograph.rand(1, 2, 2, 2)
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior"):
        F.grid_sample(x, g)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(torch, align_corners):
    for theta, size in (((2, 2, 3), (2, 3, 4, 5)), ((2, 3, 4), (2, 3, 4, 5, 3)),
                        ((1, 2, 3), (1, 1, 1, 5))):
        def fn(f):
            return lambda t: f(t, size, align_corners=align_corners)
        _check(torch, fn(torch.nn.functional.affine_grid), fn(F.affine_grid), [theta], "float64")


def test_affine_grid_then_grid_sample(torch):
    def fn(f):
        def run(x, theta):
            grid = f.affine_grid(theta, list(x.shape), align_corners=False)
            return f.grid_sample(x, grid, align_corners=False)
        return run
    _check(torch, fn(torch.nn.functional), fn(F), [(2, 3, 6, 5), (2, 2, 3)], "float64")


def test_pixel_and_channel_shuffle(torch):
    for shape, r in (((2, 8, 3, 4), 2), ((9, 2, 3), 3), ((2, 1, 4, 2, 3), 1)):
        _check(torch, lambda x: torch.nn.functional.pixel_shuffle(x, r),
               lambda x: F.pixel_shuffle(x, r), [shape])
    for shape, r in (((2, 3, 4, 6), 2), ((1, 6, 9), 3), ((2, 1, 2, 2, 2), 2)):
        _check(torch, lambda x: torch.nn.functional.pixel_unshuffle(x, r),
               lambda x: F.pixel_unshuffle(x, r), [shape])
    for shape, g in (((2, 6, 3), 3), ((2, 4, 2, 2), 2), ((1, 6, 1, 2, 2), 1)):
        _check(torch, lambda x: torch.nn.functional.channel_shuffle(x, g),
               lambda x: F.channel_shuffle(x, g), [shape], grads=False)


ERRORS = [
    "F.interpolate(x, size=3, scale_factor=2)",
    "F.interpolate(x)",
    "F.interpolate(x, size=(2, 3, 4))",
    "F.interpolate(x, scale_factor=(2, 3, 4))",
    "F.interpolate(x, size=(2.5, 3))",
    "F.interpolate(x, size=3, recompute_scale_factor=True)",
    "F.interpolate(x, size=3, align_corners=True)",
    "F.interpolate(x, size=3, mode='linear')",
    "F.interpolate(x, size=3, mode='trilinear')",
    "F.interpolate(x[0], size=3, mode='bilinear')",
    "F.interpolate(x[0, 0], size=3)",
    "F.interpolate(x, size=3, mode='cubic')",
    "F.interpolate(x[0], size=3, mode='linear', antialias=True)",
    "F.interpolate(x, size=3, mode='lanczos')",
    "F.grid_sample(x, g, mode='cubic', align_corners=False)",
    "F.grid_sample(x, g, padding_mode='wrap', align_corners=False)",
    "F.grid_sample(x[0], g, align_corners=False)",
    "F.grid_sample(x[:, None], g, align_corners=False)",
    "F.grid_sample(x[..., :0], g, align_corners=False)",
    "F.grid_sample(x[None], g5, mode='bicubic', align_corners=False)",
    "F.grid_sample(x, g[..., :1], align_corners=False)",
    "F.grid_sample(x, g[:1], align_corners=False)",
    "F.affine_grid(th, (2, 3, 4, 5, 6), align_corners=False)",
    "F.affine_grid(th, (2, 3, 4), align_corners=False)",
    "F.affine_grid(th.long(), (2, 3, 4, 5), align_corners=False)",
    "F.affine_grid(th, (2, 3, 0, 5), align_corners=False)",
    "F.pixel_shuffle(x, 3)",
    "F.pixel_shuffle(x[0, 0], 2)",
    "F.pixel_shuffle(x, 0)",
    "F.pixel_unshuffle(x, 4)",
    "F.pixel_unshuffle(x[..., :5], 2)",
    "F.channel_shuffle(x, 3)",
    "F.channel_shuffle(x, 0)",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    t, tg, th = torch.randn(2, 4, 6, 6), torch.rand(2, 3, 3, 2), torch.randn(2, 2, 3)
    g5 = torch.rand(1, 2, 2, 2, 3)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "x": t, "g": tg, "th": th, "g5": g5})
    ours = eval_expr(expr, {"F": F, "x": from_torch(t), "g": from_torch(tg), "th": from_torch(th),
                            "g5": from_torch(g5)})
    assert isinstance(theirs, Exception), expr
    assert_same_error(ours, theirs, expr)


MODULES = [
    ("Upsample(scale_factor=2)", (2, 3, 4, 5)),
    ("Upsample(size=(3, 4), mode='bilinear', align_corners=True)", (2, 3, 4, 5)),
    ("Upsample(scale_factor=2.5, mode='bicubic')", (1, 2, 4, 5)),
    ("Upsample(scale_factor=(2, 3))", (1, 2, 4, 5)),
    ("Upsample(scale_factor=1.5, mode='linear')", (2, 3, 5)),
    ("Upsample(size=(2, 3, 4), mode='trilinear')", (1, 2, 3, 4, 5)),
    ("UpsamplingNearest2d(scale_factor=2)", (2, 3, 4, 5)),
    ("UpsamplingBilinear2d(size=4)", (2, 3, 3, 5)),
    ("PixelShuffle(2)", (2, 8, 3, 4)), ("PixelUnshuffle(2)", (2, 2, 4, 6)), ("ChannelShuffle(2)", (2, 4, 3)),
    ("ZeroPad1d(2)", (2, 3, 4)), ("ZeroPad2d((1, 2, 3, 0))", (2, 3, 4, 5)), ("ZeroPad3d(1)", (1, 2, 3, 4, 2)),
    ("ConstantPad1d(2, 3.5)", (3, 4)), ("ConstantPad2d((1, 2, -1, 2), 0)", (2, 3, 4, 5)),
    ("ConstantPad3d(1, -1.0)", (2, 3, 4, 2)),
    ("ReflectionPad1d(2)", (2, 3, 4)), ("ReflectionPad2d((1, 1, 2, 0))", (2, 3, 4, 5)),
    ("ReflectionPad3d(1)", (1, 2, 3, 4, 2)),
    ("ReplicationPad1d(1)", (2, 3, 4)), ("ReplicationPad2d(2)", (3, 4, 5)),
    ("ReplicationPad3d((1, 0, 2, 1, 0, 1))", (1, 2, 3, 4, 2)),
    ("CircularPad1d(1)", (2, 3, 4)), ("CircularPad2d((1, 2, 0, 3))", (2, 3, 4, 5)),
    ("CircularPad3d((1, 1, 1, 1, 1, 1))", (1, 2, 3, 4, 2)),
]


@pytest.mark.parametrize("spec,shape", MODULES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_modules(torch, spec, shape, dtype):
    ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    _check(torch, theirs, ours, [shape], dtype, grads=not spec.startswith("ChannelShuffle"))


def test_padding_module_attributes_and_errors(torch):
    for spec in ("ZeroPad2d(2)", "ConstantPad1d((1, 2), 0.5)", "ReflectionPad3d(1)", "CircularPad2d(1)"):
        ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
        assert ours.padding == theirs.padding
        assert getattr(ours, "value", None) == getattr(theirs, "value", None)
    x = torch.randn(2, 3)
    for spec in ("CircularPad2d(1)", "CircularPad1d(1)", "CircularPad3d(1)"):
        theirs = eval_expr(f"torch.nn.{spec}(x)", {"torch": torch, "x": x})
        ours = eval_expr(f"nn.{spec}(x)", {"nn": dynograph.nn, "x": from_torch(x)})
        if isinstance(theirs, Exception):
            assert_same_error(ours, theirs)
    assert np.array_equal(nn_out(), torch.nn.ZeroPad2d(1)(torch.ones(1, 1, 1)).numpy())


def nn_out():
    return dynograph.nn.ZeroPad2d(1)(dynograph.ones(1, 1, 1)).numpy()


def test_grid_sample_infinity_outside_stays_out(torch):
    """Out-of-range corners contribute nothing even where the border holds inf or nan."""
    t = torch.randn(1, 1, 4, 4, dtype=torch.float64)
    t[0, 0, 0, :] = float("inf")
    t[0, 0, :, 0] = float("nan")
    g = torch.tensor([[[[-1.2, -1.3], [0.1, 0.2], [1.3, 1.1]]]], dtype=torch.float64)
    for mode in ("bilinear", "nearest", "bicubic"):
        expect = torch.nn.functional.grid_sample(t, g, mode=mode, align_corners=False)
        assert_same(F.grid_sample(from_torch(t), from_torch(g), mode=mode, align_corners=False),
                    expect)

"""F.interpolate against PyTorch, swept over every mode, input rank, scale factor, explicit size,
align_corners, recompute_scale_factor, dtype and memory layout, with gradients and errors.

Sizes of 5 make scale factors 1.1 and 2.1 keep or double the size: PyTorch's kernels take
shortcuts there that some of them (and some of their backward kernels) do not."""
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn.functional as F
from conftest import assert_same_error, eval_expr, from_torch

MODES = {
    3: ["nearest", "nearest-exact", "linear", "area"],
    4: ["nearest", "nearest-exact", "bilinear", "bicubic", "area", "antialias-bilinear",
        "antialias-bicubic"],
    5: ["nearest", "nearest-exact", "trilinear", "area"],
}
SHAPES = {3: (2, 3, 5), 4: (1, 2, 5, 4), 5: (1, 2, 3, 5, 4)}
SCALES = [0.3, 0.5, 0.75, 1.1, 1.5, 1.7, 2, 2.1, 3.3]
SIZES = [1, 2, 3, 5, 10, 13]


def _options(mode):
    """(mode, antialias, align_corners values) of a MODES entry."""
    antialias = mode.startswith("antialias-")
    mode = mode.removeprefix("antialias-")
    corners = [None] if mode in ("nearest", "nearest-exact", "area") else [False, True]
    return mode, antialias, corners


def _calls(rank):
    """Keyword arguments of every interpolate call the sweep makes at this rank."""
    for entry in MODES[rank]:
        mode, antialias, corners = _options(entry)
        for ac in corners:
            base = dict(mode=mode, antialias=antialias, align_corners=ac)
            for s in SCALES:
                for recompute in (None, False, True):
                    yield dict(base, scale_factor=s, recompute_scale_factor=recompute)
            yield dict(base, scale_factor=(1.1, 2.1, 0.6)[:rank - 2])
            for n in SIZES:
                yield dict(base, size=n)
            # not (7, 1): PyTorch's anti-aliased kernels then repeat the first output row down
            # the whole height, a bug of theirs not copied here
            yield dict(base, size=(7, 2, 1)[:rank - 2])
            yield dict(base, size=(1, 7, 2)[:rank - 2])


def _layouts(torch, t, rank):
    """The input as is, transposed (non-contiguous) and channels_last, in both libraries."""
    d = from_torch(t)
    yield t, d
    yield t.transpose(-1, -2).contiguous().transpose(-1, -2), d.transpose(-1, -2).contiguous().transpose(-1, -2)
    if rank > 3:
        fmt = "channels_last" if rank == 4 else "channels_last_3d"
        yield (t.contiguous(memory_format=getattr(torch, fmt)),
               d.contiguous(memory_format=getattr(dynograph, fmt)))


def _compare(torch, t, d, kw, grad):
    """interpolate(**kw) of torch tensor t and dynograph tensor d agree (and so do the gradients)."""
    if grad:
        t, d = t.detach().requires_grad_(), d.detach().requires_grad_()
    expect = eval_expr("F.interpolate(x, **kw)", {"F": torch.nn.functional, "x": t, "kw": kw})
    got = eval_expr("F.interpolate(x, **kw)", {"F": F, "x": d, "kw": kw})
    if isinstance(expect, Exception):       # an output size of 0
        assert_same_error(got, expect, str(kw))
        return
    tol = dict(rtol=1e-5, atol=2e-6) if t.dtype == torch.float32 else dict(rtol=1e-11, atol=1e-12)
    assert tuple(got.shape) == tuple(expect.shape), kw
    assert got.dtype == getattr(dynograph, str(t.dtype).split(".")[-1]), kw
    np.testing.assert_allclose(got.detach().numpy(), expect.detach().numpy(), **tol, err_msg=str(kw))
    if grad and expect.numel():     # (area mode gives empty outputs, whose backward torch refuses)
        g = torch.randn(expect.shape, dtype=t.dtype, generator=torch.Generator().manual_seed(1))
        expect.backward(g)
        got.backward(from_torch(g))
        np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), **tol, err_msg=f"grad {kw}")


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_values_float32_every_layout(torch, rank):
    t = torch.randn(*SHAPES[rank], generator=torch.Generator().manual_seed(0))
    layouts = list(_layouts(torch, t, rank))
    for i, kw in enumerate(_calls(rank)):
        tt, dd = layouts[i % len(layouts)]
        _compare(torch, tt, dd, kw, grad=False)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_values_and_grads_float64(torch, rank):
    t = torch.randn(*SHAPES[rank], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    layouts = list(_layouts(torch, t, rank))
    for i, kw in enumerate(_calls(rank)):
        tt, dd = layouts[i % len(layouts)]
        _compare(torch, tt, dd, kw, grad=True)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_size_one_inputs(torch, rank):
    t = torch.randn(*(2, 3) + (1,) * (rank - 2), dtype=torch.float64)
    for entry in MODES[rank]:
        mode, antialias, corners = _options(entry)
        for ac in corners:
            for kw in (dict(size=1), dict(size=4), dict(scale_factor=3.3), dict(scale_factor=2)):
                _compare(torch, t, from_torch(t), dict(kw, mode=mode, antialias=antialias,
                                                       align_corners=ac), grad=True)


ERRORS = [
    "F.interpolate(x, size=3, scale_factor=2)",
    "F.interpolate(x)",
    "F.interpolate(x, size=(2, 3, 4))",
    "F.interpolate(x, scale_factor=(2, 3, 4))",
    "F.interpolate(x, size=(2.5, 3))",
    "F.interpolate(x, size=3, recompute_scale_factor=True)",
    "F.interpolate(x, size=3, align_corners=True)",
    "F.interpolate(x, size=3, mode='nearest-exact', align_corners=False)",
    "F.interpolate(x, size=3, mode='area', align_corners=True)",
    "F.interpolate(x, size=3, mode='linear')",
    "F.interpolate(x, size=3, mode='trilinear')",
    "F.interpolate(x[0], size=3, mode='bilinear')",
    "F.interpolate(x[0, 0], size=3)",
    "F.interpolate(x[None], size=3, mode='bicubic')",
    "F.interpolate(x, size=3, mode='cubic')",
    "F.interpolate(x[0], size=3, mode='linear', antialias=True)",
    "F.interpolate(x, size=3, mode='nearest', antialias=True)",
    "F.interpolate(x, size=3, mode='area', antialias=True)",
    "F.interpolate(x[None], size=3, mode='trilinear', antialias=True)",
    "F.interpolate(x, size=3, mode='lanczos')",
    "F.interpolate(x, size=0)",
    "F.interpolate(x[0], size=0)",
    "F.interpolate(x[None], size=0)",
    "F.interpolate(x, size=0, mode='bilinear')",
    "F.interpolate(x, scale_factor=0.1)",
    "F.interpolate(x[0], scale_factor=0.1, mode='linear')",
    "F.interpolate(x, scale_factor=0.1, mode='bicubic', antialias=True)",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    t = torch.randn(2, 4, 6, 6)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "x": t})
    ours = eval_expr(expr, {"F": F, "x": from_torch(t)})
    assert isinstance(theirs, Exception), expr
    assert_same_error(ours, theirs, expr)


def test_no_warnings(torch):
    x = dynograph.randn(1, 2, 5, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.interpolate(x, scale_factor=1.7, mode="bicubic", antialias=True)

"""F.pad against PyTorch: every mode over sweeps of pad widths (negative, zero, larger than
the input) on 1-d, 2-d and 3-d padding, with values, errors and gradients."""
import itertools
import random

import numpy as np
import pytest

import dynograph
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, from_torch

MODES = ["constant", "reflect", "replicate", "circular"]
SHAPES = {1: [(2, 3), (2, 3, 5)], 2: [(2, 3, 4), (1, 2, 3, 4)], 3: [(2, 3, 4, 2), (1, 2, 3, 2, 4)]}


def _pads(k):
    """Pad widths for k padded dims: all of them for one dim, a fixed sample beyond."""
    if k == 1:
        return list(itertools.product(range(-5, 6), repeat=2))
    widths = range(-4, 5) if k == 2 else range(-3, 4)
    pads = list(itertools.product(widths, repeat=2 * k))
    return random.Random(k).sample(pads, 300)


def _kept(size, lo, hi):
    return size - max(-lo, 0) - max(-hi, 0)


def _torch_defined(shape, pad, mode):
    """Whether PyTorch's result is defined: circular padding past the cropped (kept) part of
    a dim reads memory its kernel never wrote, or fails with an unrelated internal error."""
    if mode != "circular":
        return True
    dims = [(shape[-1 - i], pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    if any(lo > size or hi > size or size + lo + hi < 0 for size, lo, hi in dims):
        return True                                     # PyTorch's own checks reject these
    if any(_kept(*d) < 0 for d in dims):
        return False
    empty = any(size + lo + hi == 0 for size, lo, hi in dims)
    return empty or all(max(lo, hi) <= _kept(size, lo, hi) for size, lo, hi in dims)


def _run(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:          # the error is the result under test
        return e


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_pad_sweep(torch, mode, k):
    for shape in SHAPES[k]:
        xt = torch.arange(float(np.prod(shape)), dtype=torch.float64).reshape(shape)
        xd = from_torch(xt)
        for pad in _pads(k):
            got = _run(F.pad, xd, pad, mode=mode)
            if not _torch_defined(shape, pad, mode):
                assert isinstance(got, RuntimeError), (shape, pad)
                continue
            expect = _run(torch.nn.functional.pad, xt, pad, mode=mode)
            if isinstance(expect, Exception):
                if "numel: integer multiplication overflow" in str(expect):
                    # reflect 2-d: PyTorch's kernel overflows on a negative output size
                    assert "negative dimension" in str(got), (shape, pad, got)
                    continue
                assert_same_error(got, expect, (shape, pad))
            else:
                assert not isinstance(got, Exception), (shape, pad, got)
                assert_same(got, expect, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", [((2, 5), (2, -1)), ((2, 5), (-2, 3)), ((2, 4, 5), (1, 2, -1, 3)),
                                       ((1, 2, 3, 4, 5), (1, -1, 2, 0, -1, 2))])
def test_pad_gradients(torch, mode, shape, pad):
    g = torch.Generator().manual_seed(0)
    xt = torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)
    xd = from_torch(xt, requires_grad=True)
    yt = torch.nn.functional.pad(xt, pad, mode=mode)
    yd = F.pad(xd, pad, mode=mode)
    w = torch.randn(*yt.shape, generator=g, dtype=torch.float64)
    (yt * w).sum().backward()
    (yd * from_torch(w)).sum().backward()
    assert_same(yd, yt)
    assert_same(xd.grad, xt.grad)


ARG_CASES = [
    ("zeros(4)", (1, 1), "reflect", None), ("zeros(4)", (1, 1), "circular", None),
    ("zeros(2, 4)", (1, 1, 1, 1), "replicate", None), ("zeros(1, 2, 3, 4, 5, 6)", (1, 1), "reflect", None),
    ("zeros(2, 4)", (1, 1), "reflect", 1.0), ("zeros(2, 4)", (1, 1), "reflect", 0.0),
    ("zeros(2, 4)", (1, 1, 1), "constant", None), ("zeros(2, 4)", (1,) * 6, "replicate", None),
    ("zeros(2, 4)", (1, 1), "wrap", None), ("zeros(2, 4)", (1.5, 1), "reflect", None),
    ("zeros(2, 4)", 3, "constant", None), ("zeros(2, 4)", (1, True), "constant", None),
    ("zeros(2, 0)", (1, 1), "reflect", None), ("zeros(2, 0)", (1, 1), "replicate", None),
    ("zeros(2, 0)", (1, 1), "circular", None), ("zeros(2, 0)", (0, 0), "circular", None),
    ("zeros(0, 3, 4)", (1, 1, 1, 1), "reflect", None), ("zeros(0, 2, 3)", (1, 1), "replicate", None),
    ("zeros(2, 2, 3, 0, 5)", (1,) * 6, "reflect", None), ("zeros(2, 3, 0, 4)", (0,) * 4, "replicate", None),
    ("arange(8).reshape(2, 4)", (1, 2), "reflect", None), ("arange(8).reshape(2, 4)", (3, 1), "circular", None),
    ("arange(8).reshape(2, 4)", (1, 2), "constant", 1.5),
]


@pytest.mark.parametrize("expr,pad,mode,value", ARG_CASES)
def test_pad_arguments(torch, expr, pad, mode, value):
    expect = _run(torch.nn.functional.pad, eval("torch." + expr), pad, mode=mode, value=value)
    got = _run(F.pad, eval("dynograph." + expr), pad, mode=mode, value=value)
    if isinstance(expect, Exception):
        assert_same_error(got, expect, expr)
    else:
        assert_same(got, expect)


@pytest.mark.parametrize("name,args", [("CircularPad1d", (3,)), ("CircularPad2d", ((1, 2, -1, 0),)),
                                       ("ReflectionPad2d", ((2, 0, 1, 1),)),
                                       ("ReplicationPad3d", ((1, -1, 0, 2, 1, 0),))])
def test_pad_modules(torch, name, args):
    xt = torch.randn(1, 2, 3, 4, 5, dtype=torch.float64)
    if name.endswith("1d"):
        xt = xt[0, 0]
    elif name.endswith("2d"):
        xt = xt[0]
    expect = getattr(torch.nn, name)(*args)(xt)
    got = getattr(dynograph.nn, name)(*args)(from_torch(xt))
    assert_same(got, expect)

"""Convolutions, transposed convolutions, unfold and fold against PyTorch (values and grads)."""
import itertools
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch
from dynograph.autograd import gradcheck, gradgradcheck
from grad_inputs import r

TOL = {"float64": dict(rtol=1e-7, atol=1e-9), "float32": dict(rtol=2e-5, atol=2e-5)}


def _pair(torch, shape, dtype, seed, requires_grad=True):
    """The same random tensor in torch and dynograph."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype))
    return t.requires_grad_(requires_grad), from_torch(t, requires_grad=requires_grad)


def _check(torch, ours, theirs, inputs, dtype="float64", seed=9):
    """Forward values, then the gradient of every input against torch."""
    tol = TOL[dtype]
    got = ours(*[d for _, d in inputs])
    expect = theirs(*[t for t, _ in inputs])
    assert_same(got, expect, **tol)
    gt = torch.randn(expect.shape, generator=torch.Generator().manual_seed(seed),
                     dtype=expect.dtype)
    expect.backward(gt)
    got.backward(from_torch(gt))
    for t, d in inputs:
        if t is not None and t.requires_grad:
            assert_same(d.grad, t.grad, **tol)
    return got


def _maybe(torch, shape, dtype, seed, present):
    return _pair(torch, shape, dtype, seed) if present else (None, None)


# ---------------------------------------------------------------- functional convolutions

CONV_ARGS = list(itertools.product((1, 2), (0, 1), (1, 2), (1, 2)))   # stride, padding, dilation, groups


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,groups", CONV_ARGS)
def test_conv_matches_torch(torch, nd, stride, padding, dilation, groups):
    sizes, ksize = (7, 6, 5)[:nd], (3, 2, 2)[:nd]
    bias = (stride + padding + dilation) % 2 == 0
    x = _pair(torch, (2, 4) + sizes, "float64", 0)
    w = _pair(torch, (6, 4 // groups) + ksize, "float64", 1)
    b = _maybe(torch, (6,), "float64", 2, bias)
    name = f"conv{nd}d"
    y = _check(torch, lambda x, w, b: getattr(F, name)(x, w, b, stride, padding, dilation, groups),
               lambda x, w, b: getattr(torch.nn.functional, name)(x, w, b, stride, padding,
                                                                  dilation, groups),
               [x, w, b])
    assert y.grad_fn.name() == "ConvolutionBackward0"


TRANSPOSED_ARGS = [(1, 0, 0, 1, 1), (2, 0, 1, 1, 1), (2, 1, 1, 1, 2), (3, 2, 2, 2, 2),
                   (1, 1, 1, 2, 1), (2, 2, 0, 3, 2)]   # stride, padding, output_padding, dilation, groups


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", TRANSPOSED_ARGS)
def test_conv_transpose_matches_torch(torch, nd, stride, padding, output_padding, dilation, groups):
    sizes, ksize = (5, 4, 3)[:nd], (3, 2, 2)[:nd]
    x = _pair(torch, (2, 4) + sizes, "float64", 0)
    w = _pair(torch, (4, 6 // groups) + ksize, "float64", 1)
    b = _maybe(torch, (6,), "float64", 2, stride != 3)
    name = f"conv_transpose{nd}d"
    y = _check(torch, lambda x, w, b: getattr(F, name)(x, w, b, stride, padding, output_padding,
                                                       groups, dilation),
               lambda x, w, b: getattr(torch.nn.functional, name)(x, w, b, stride, padding,
                                                                  output_padding, groups, dilation),
               [x, w, b])
    assert y.grad_fn.name() == "ConvolutionBackward0"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,kernel,stride", [((2, 3, 12, 12), 5, 1), ((3, 2, 9, 10), 3, 2),
                                                 ((2, 3, 20, 20), 3, 1),
                                                 ((1, 4, 16, 16), (3, 5), (1, 2))])
def test_conv2d_dtypes_and_layouts(torch, dtype, shape, kernel, stride):
    ks = (kernel, kernel) if isinstance(kernel, int) else kernel
    x = _pair(torch, shape, dtype, 0)
    w = _pair(torch, (5, shape[1]) + ks, dtype, 1)
    b = _pair(torch, (5,), dtype, 2)
    y = _check(torch, lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=1),
               lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=stride, padding=1),
               [x, w, b], dtype)
    assert y.dtype == getattr(dynograph, dtype) and y.is_contiguous()


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dilation", [1, 2])
def test_same_and_valid_padding(torch, nd, dilation):
    for ksize in ((4, 3, 2)[:nd], (3, 2, 5)[:nd]):
        x = _pair(torch, (2, 2) + (9, 7, 11)[:nd], "float64", 0)
        w = _pair(torch, (3, 2) + ksize, "float64", 1)
        name = f"conv{nd}d"
        for padding in ("same", "valid"):
            _check(torch, lambda x, w: getattr(F, name)(x, w, padding=padding, dilation=dilation),
                   lambda x, w: getattr(torch.nn.functional, name)(x, w, padding=padding,
                                                                   dilation=dilation), [x, w])
            x[0].grad = w[0].grad = x[1].grad = w[1].grad = None


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_unbatched_input(torch, nd):
    x = _pair(torch, (3,) + (6, 5, 4)[:nd], "float64", 0)
    w = _pair(torch, (4, 3) + (2, 2, 2)[:nd], "float64", 1)
    b = _pair(torch, (4,), "float64", 2)
    y = _check(torch, lambda x, w, b: getattr(F, f"conv{nd}d")(x, w, b, padding=1),
               lambda x, w, b: getattr(torch.nn.functional, f"conv{nd}d")(x, w, b, padding=1),
               [x, w, b])
    assert y.dim() == nd + 1
    wt = _pair(torch, (3, 2) + (2, 2, 2)[:nd], "float64", 3)
    x[0].grad = x[1].grad = None
    _check(torch, lambda x, w: getattr(F, f"conv_transpose{nd}d")(x, w, stride=2),
           lambda x, w: getattr(torch.nn.functional, f"conv_transpose{nd}d")(x, w, stride=2),
           [x, wt])


@pytest.mark.parametrize("flat", [True, False])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_both_column_layouts(torch, monkeypatch, nd, flat):
    """Stride-1 convolutions read windows over flattened lines or per output position."""
    from dynograph.compiler.ops import conv as ops
    monkeypatch.setattr(ops, "_use_flat", lambda stride, *_: flat and all(s == 1 for s in stride))
    x = _pair(torch, (2, 4) + (6, 5, 4)[:nd], "float64", 0)
    w = _pair(torch, (6, 2) + (3, 2, 2)[:nd], "float64", 1)
    wt = _pair(torch, (4, 3) + (3, 2, 2)[:nd], "float64", 2)
    conv, tconv = getattr(F, f"conv{nd}d"), getattr(torch.nn.functional, f"conv{nd}d")
    _check(torch, lambda x, w: conv(x, w, padding=1, dilation=2, groups=2),
           lambda x, w: tconv(x, w, padding=1, dilation=2, groups=2), [x, w])
    x[0].grad = x[1].grad = None
    convt = getattr(F, f"conv_transpose{nd}d")
    tconvt = getattr(torch.nn.functional, f"conv_transpose{nd}d")
    _check(torch, lambda x, w: convt(x, w, padding=1, output_padding=1, groups=2, dilation=2),
           lambda x, w: tconvt(x, w, padding=1, output_padding=1, groups=2, dilation=2), [x, wt])


def test_non_contiguous_inputs(torch):
    tx, dx = _pair(torch, (3, 2, 9, 8), "float32", 0)
    tw, dw = _pair(torch, (4, 3, 3, 2), "float32", 1)
    t_in, d_in = tx.detach().transpose(0, 1), dx.detach().transpose(0, 1)     # (2, 3, 9, 8)
    t_in = t_in[:, :, ::2].requires_grad_()
    d_in = d_in[:, :, ::2].detach().requires_grad_()
    assert not d_in.is_contiguous()
    t_w = tw.detach().transpose(2, 3).requires_grad_()
    d_w = dw.detach().transpose(2, 3).requires_grad_()
    _check(torch, lambda x, w: F.conv2d(x, w, stride=(1, 2), padding=(1, 0)),
           lambda x, w: torch.nn.functional.conv2d(x, w, stride=(1, 2), padding=(1, 0)),
           [(t_in, d_in), (t_w, d_w)], "float32")
    expanded = dynograph.ones(1, 3, 1, 1).expand(2, 3, 5, 5)
    texp = torch.ones(1, 3, 1, 1).expand(2, 3, 5, 5)
    assert_same(F.conv2d(expanded, d_w.detach()), torch.nn.functional.conv2d(texp, t_w.detach()),
                **TOL["float32"])


def test_large_channels_and_zero_sizes(torch):
    x = _pair(torch, (2, 16, 6, 6), "float32", 0)
    w = _pair(torch, (32, 4, 3, 3), "float32", 1)
    _check(torch, lambda x, w: F.conv2d(x, w, groups=4), lambda x, w: torch.nn.functional.conv2d(
        x, w, groups=4), [x, w], "float32")
    empty = F.conv2d(dynograph.zeros(0, 3, 5, 5), dynograph.ones(2, 3, 3, 3))
    assert empty.shape == (0, 2, 3, 3)
    no_channels = F.conv2d(dynograph.zeros(1, 0, 5, 5), dynograph.ones(2, 0, 3, 3),
                           dynograph.tensor([1.0, 2.0]))
    # PyTorch: no input channels give no output channels (the bias is not broadcast)
    assert_same(no_channels, torch.nn.functional.conv2d(torch.zeros(1, 0, 5, 5), torch.ones(2, 0, 3, 3),
                                                        torch.tensor([1.0, 2.0])))


def test_integer_and_half_precision(torch):
    xi = torch.randint(-3, 4, (2, 2, 5, 5))
    wi = torch.randint(-3, 4, (3, 2, 2, 2))
    assert_same(F.conv2d(from_torch(xi), from_torch(wi)), torch.nn.functional.conv2d(xi, wi))
    xh, wh = torch.randn(1, 2, 5, 5).to(torch.bfloat16), torch.randn(3, 2, 3, 3).to(torch.bfloat16)
    got = F.conv2d(from_torch(xh), from_torch(wh))
    assert got.dtype == dynograph.bfloat16
    assert_same(got, torch.nn.functional.conv2d(xh.float(), wh.float()).to(torch.bfloat16),
                rtol=2e-2, atol=2e-2)


def test_second_order_gradients():
    """Double backward through the direct and the transposed directions."""
    def direct(x, w, b):
        return F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2)

    def transposed(x, w, b):
        return F.conv_transpose2d(x, w, b, stride=(2, 1), padding=1, output_padding=(1, 0),
                                  dilation=(1, 2), groups=2)

    inputs = (r(2, 4, 7), r(4, 2, 2, seed=1), r(4, seed=2))
    assert gradcheck(direct, inputs) and gradgradcheck(direct, inputs)
    inputs = (r(1, 4, 3, 3), r(4, 1, 2, 2, seed=1), r(2, seed=2))
    assert gradcheck(transposed, inputs) and gradgradcheck(transposed, inputs)
    # output_padding >= stride is allowed when dilation is larger: the weight gradient then
    # covers fewer positions than the matching convolution produces
    odd = (r(1, 2, 3), r(2, 2, 2, seed=1), r(2, seed=2))

    def wide(x, w, b):
        return F.conv_transpose1d(x, w, b, stride=1, output_padding=2, dilation=3)

    assert gradcheck(wide, odd) and gradgradcheck(wide, odd)


# ---------------------------------------------------------------- errors

ERRORS = [
    "F.conv2d(T(2, 3, 8), W(4, 3, 3, 3))",
    "F.conv2d(T(1, 2, 3, 8, 8), W(4, 3, 3, 3))",
    "F.conv2d(T(2, 4, 8, 8), W(4, 3, 3, 3))",
    "F.conv2d(T(4, 8, 8), W(4, 3, 3, 3))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 9, 9))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 5, 5), dilation=2)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), W(3))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), W(4, 1))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), stride=0)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), padding=-1)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), dilation=0)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), stride=(1, 1, 1))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 1, 3, 3), groups=2)",
    "F.conv2d(T(2, 4, 8, 8), W(3, 2, 3, 3), groups=2)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), groups=0)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), padding='same', stride=2)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), padding='foo')",
    "F.conv2d(T(2, 3, 8, 8).double(), W(4, 3, 3, 3))",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3), W(4).double())",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3).long())",
    "F.conv1d(T(2, 3, 8, 8), W(4, 3, 3, 3))",
    "F.conv3d(T(2, 3, 8, 8), W(4, 3, 3, 3))",
    "F.conv_transpose2d(T(2, 3, 8, 8), W(4, 3, 3, 3))",
    "F.conv_transpose2d(T(2, 3, 8, 8), W(3, 4, 3, 3), output_padding=1)",
    "F.conv_transpose2d(T(2, 3, 8, 8), W(3, 4, 3, 3), stride=2, output_padding=2)",
    "F.conv_transpose1d(T(2, 3, 8), W(3, 4, 3), stride=2, output_padding=(2,))",
    "F.conv_transpose3d(T(1, 3, 4, 4, 4), W(3, 4, 2, 2, 2), output_padding=(0, 1, 0))",
    "F.conv_transpose2d(T(2, 3, 8, 8), W(3, 4, 3, 3), groups=2)",
    "F.conv2d(T(2, 3, 8, 8), W(4, 3, 3, 3).double())",
    "F.conv2d(T(2, 3, 8, 8).bool(), W(4, 3, 3, 3).bool())",
    "F.conv_transpose2d(T(2, 3, 8, 8).double(), W(3, 4, 3, 3))",
    "F.conv1d(T(2, 3, 8), W(4, 3, 3), padding=(1, 1))",
    "F.conv_transpose2d(T(2, 3, 8), W(3, 4, 3, 3, 3))",
    "F.unfold(T(2, 3, 8, 8), 9)",
    "F.unfold(T(3, 8), 3)",
    "F.unfold(T(8), 3)",
    "F.unfold(T(2, 3, 4, 8, 8), 3)",
    "F.unfold(T(2, 3, 8, 8), (3, 3, 3))",
    "F.fold(T(27), (8, 8), 3)",
    "F.fold(T(2, 27, 36), (8, 8, 8), 3)",
    "F.fold(T(2, 27, 35), (8, 8), 3)",
    "F.fold(T(2, 28, 36), (8, 8), 3)",
    "F.fold(T(2, 2, 27, 36), (8, 8), 3)",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    theirs = eval_expr(expr, {"F": torch.nn.functional, "T": torch.randn, "W": torch.randn})
    ours = eval_expr(expr, {"F": F, "T": dynograph.randn, "W": dynograph.randn})
    assert_same_error(ours, theirs, expr)


MODULE_ERRORS = [
    "nn.Conv2d(3, 4, 3, groups=0)",
    "nn.Conv2d(3, 4, 3, groups=2)",
    "nn.Conv2d(4, 3, 3, groups=2)",
    "nn.Conv2d(3, 4, 3, padding='same', stride=2)",
    "nn.ConvTranspose2d(3, 4, 3, padding_mode='reflect')",
    "nn.ConvTranspose2d(3, 4, 3, stride=2)(T(1, 3, 4, 4), output_size=(20, 20))",
    "nn.ConvTranspose2d(3, 4, 3, stride=2)(T(1, 3, 4, 4), output_size=(9,))",
]


@pytest.mark.parametrize("expr", MODULE_ERRORS)
def test_module_errors_match_torch(torch, expr):
    theirs = eval_expr(expr, {"nn": torch.nn, "T": torch.randn})
    ours = eval_expr(expr, {"nn": nn, "T": dynograph.randn})
    assert_same_error(ours, theirs, expr)


def test_invalid_padding_mode_and_string():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="edge")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(3, 4, 3, padding="full")


# ---------------------------------------------------------------- modules

def _copy_params(ours, theirs):
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        with dynograph.no_grad():
            p.copy_(from_torch(tp))


def _module_pair(torch, spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = eval(spec, {"nn": torch.nn})
    ours = eval(spec, {"nn": nn})
    _copy_params(ours, theirs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


MODULES = [
    ("nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)", (2, 4, 9)),
    ("nn.Conv1d(4, 6, 4, padding='same', padding_mode='circular', bias=False)", (2, 4, 9)),
    ("nn.Conv2d(3, 6, 5)", (2, 3, 12, 12)),
    ("nn.Conv2d(3, 8, 3, stride=2, padding=1, dilation=2, bias=False)", (2, 3, 9, 10)),
    ("nn.Conv2d(3, 4, (3, 2), padding=(1, 2), padding_mode='reflect')", (2, 3, 6, 7)),
    ("nn.Conv2d(3, 4, 4, padding='same', padding_mode='replicate')", (3, 6, 7)),
    ("nn.Conv2d(2, 4, 3, padding='same', dilation=2, padding_mode='zeros')", (2, 2, 7, 7)),
    ("nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=1, padding_mode='circular')",
     (1, 2, 4, 5, 4)),
    ("nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2)", (2, 4, 5)),
    ("nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1, dilation=1)",
     (2, 3, 4, 5)),
    ("nn.ConvTranspose2d(4, 2, (2, 3), stride=(2, 1), dilation=2, bias=False)", (4, 3, 3)),
    ("nn.ConvTranspose3d(2, 3, 2, stride=2, padding=(0, 1, 0))", (1, 2, 3, 3, 2)),
]


@pytest.mark.parametrize("spec,shape", MODULES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_modules_match_torch(torch, spec, shape, dtype):
    ours, theirs = _module_pair(torch, spec)
    if dtype == "float64":
        ours, theirs = ours.double(), theirs.double()
    x = _pair(torch, shape, dtype, 0)
    _check(torch, ours, theirs, [x], dtype)
    tol = TOL[dtype]
    for (_, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_same(p.grad, tp.grad, **tol)


def test_conv_transpose_output_size(torch):
    ours, theirs = _module_pair(torch, "nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)")
    x = _pair(torch, (1, 3, 4, 5), "float32", 0)
    for size in ((8, 10), (7, 9), [1, 4, 7, 9]):
        assert_same(ours(x[1], output_size=size), theirs(x[0], output_size=size),
                    **TOL["float32"])
    down = nn.Conv2d(4, 4, 3, stride=2, padding=1)
    up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1)
    inp = dynograph.randn(1, 4, 12, 12)
    assert up(down(inp), output_size=inp.size()).shape == inp.shape


@pytest.mark.parametrize("cls,args", [("Conv1d", (4, 6, 3)), ("Conv2d", (3, 16, 5)),
                                      ("Conv3d", (2, 4, 3)), ("ConvTranspose2d", (6, 4, 3)),
                                      ("Conv2d", (4, 8, 3, 1, 0, 1, 2))])
def test_default_init_bounds(cls, args):
    m = getattr(nn, cls)(*args)
    fan_in = m.weight.shape[1] * math.prod(m.weight.shape[2:])
    bound = 1 / math.sqrt(fan_in)     # kaiming_uniform_(a=sqrt(5)) and the bias share it
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(b).max() <= bound
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad


def test_modules_copy_and_pickle():
    import copy
    import pickle
    m = nn.Conv2d(3, 4, 3, padding="same", padding_mode="reflect")
    x = dynograph.randn(1, 3, 5, 5)
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(clone) == repr(m)
        np.testing.assert_allclose(clone(x).detach().numpy(), m(x).detach().numpy())


def test_module_attributes(torch):
    ours, theirs = _module_pair(torch, "nn.Conv2d(4, 8, 3, padding='same', groups=2)")
    for name in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                 "transposed", "output_padding", "groups", "padding_mode",
                 "_reversed_padding_repeated_twice"):
        assert getattr(ours, name) == getattr(theirs, name), name
    ours, theirs = _module_pair(torch, "nn.ConvTranspose1d(4, 8, 3, output_padding=0)")
    assert ours.weight.shape == tuple(theirs.weight.shape) and ours.transposed


# ---------------------------------------------------------------- unfold and fold

UNFOLD_ARGS = [(2, 1, 0, 1), (3, 1, 1, 2), ((2, 3), (2, 1), (1, 0), (1, 2))]


@pytest.mark.parametrize("kernel,dilation,padding,stride", UNFOLD_ARGS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unfold_fold_match_torch(torch, kernel, dilation, padding, stride, dtype):
    x = _pair(torch, (2, 3, 7, 8), dtype, 0)
    cols = _check(torch, lambda x: F.unfold(x, kernel, dilation, padding, stride),
                  lambda x: torch.nn.functional.unfold(x, kernel, dilation, padding, stride),
                  [x], dtype)
    assert cols.grad_fn.name() == "Im2ColBackward0"
    c = _pair(torch, tuple(cols.shape), dtype, 3)
    out = _check(torch, lambda c: F.fold(c, (7, 8), kernel, dilation, padding, stride),
                 lambda c: torch.nn.functional.fold(c, (7, 8), kernel, dilation, padding, stride),
                 [c], dtype)
    assert out.grad_fn.name() == "Col2ImBackward0"


def test_unfold_fold_unbatched_and_modules(torch):
    x = _pair(torch, (3, 6, 5), "float64", 0)
    _check(torch, lambda x: F.unfold(x, 2, stride=2), lambda x: torch.nn.functional.unfold(
        x, 2, stride=2), [x])
    c = _pair(torch, (12, 42), "float64", 1)
    _check(torch, lambda c: F.fold(c, (6, 5), 2, padding=1), lambda c: torch.nn.functional.fold(
        c, (6, 5), 2, padding=1), [c])
    for spec in ("nn.Unfold(3, padding=1)", "nn.Fold((6, 5), 2, padding=1)"):
        ours, theirs = _module_pair(torch, spec)
        shape = (2, 3, 6, 5) if "Unfold" in spec else (2, 12, 42)
        _check(torch, ours, theirs, [_pair(torch, shape, "float64", 2)])

"""Dtype/device/layout conversion compared with PyTorch: Tensor.to/type/float()..., clone,
contiguous, copy_, fill_, zero_, gradients through conversions, and the dtype queries
(result_type, promote_types, can_cast, is_tensor, is_floating_point, is_nonzero, numel).

Most cases are expressions evaluated twice, with ``T`` bound to torch and to dynograph.
"""
import math
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, assert_same_error, dtype_name, eval_expr, from_torch, to_numpy

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def _env(T):
    return {"T": T, "np": np, "math": math, "x": T.ones(2, 3), "xt": T.ones(2, 3).t(),
            "x4": T.ones(2, 3, 4, 5), "xl": T.ones(2, 3, dtype=T.int64),
            "xr": T.ones(2, 3, requires_grad=True),
            "y": T.tensor([1.7, -1.7, float("nan"), float("inf"), -0.0, 300.5]),
            # float -> integer is defined only where the truncated value fits the target (C++):
            # yi fits every signed integer type, yu every unsigned one
            "yi": T.tensor([1.7, -1.7, 0.5, -0.0, 127.9, -128.9]),
            "yu": T.tensor([1.7, 0.9, -0.9, -0.0, 254.5, 255.9])}


def check(torch, expr):
    """``expr`` gives the same result (or error type and text) with dynograph as with torch."""
    ours, theirs = eval_expr(expr, _env(dynograph)), eval_expr(expr, _env(torch))
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, expr)
    elif isinstance(theirs, torch.Tensor):
        assert not isinstance(ours, Exception), f"{expr}: raised {ours!r}"
        assert_same(ours, theirs)
        assert ours.stride() == theirs.stride() or theirs.numel() == 0, f"{expr}: strides"
        assert ours.requires_grad == theirs.requires_grad
    else:
        assert ours == theirs or str(ours) == str(theirs).replace("torch", "dynograph"), \
            f"{expr}: {ours!r} vs {theirs!r}"


EXPRESSIONS = [
    "x.to(T.float64)", "x.to(T.float32) is x", "x.to(T.float32, copy=True) is x", "x.to('cpu') is x",
    "x.to(T.device('cpu')) is x", "x.to('cpu', T.int64)", "x.to('cpu', dtype=T.int64)",
    "x.to(device='cpu', dtype=T.int64)", "x.to(dtype=T.int64)", "x.to(T.ones(2, dtype=T.float64))",
    "x.to(T.ones(2, dtype=T.float32)) is x", "x.to(T.float64, True)", "x.to(T.float64, True, True)",
    "x.to(T.float64, non_blocking=True, copy=True)", "x.to(T.float64, memory_format=T.contiguous_format)",
    "x.to() is x", "x.to(None) is x", "x.to([1])", "x.to(T.float64, T.float32)", "x.to('cpu', 'cpu')",
    "x.to(float)", "x.to(int)", "x.to(bool)", "xt.to(T.float64)",
    "xt.to(T.float64, memory_format=T.contiguous_format)", "xt.to(memory_format=T.contiguous_format)",
    "xt.to(T.float32, memory_format=T.contiguous_format).is_contiguous()", "xt.clone()",
    "x[:, ::2].clone()", "xt.clone(memory_format=T.contiguous_format)", "x.expand(2,2,3).clone()",
    "x4.clone(memory_format=T.channels_last)", "T.ones(2,3,4).clone(memory_format=T.channels_last)",
    "x.clone(T.contiguous_format)", "xt.contiguous()", "x.contiguous() is x",
    "x4.contiguous(memory_format=T.channels_last)",
    "x4.contiguous(memory_format=T.channels_last).contiguous(memory_format=T.channels_last).stride()",
    "x.contiguous(memory_format=T.preserve_format)", "xr.to(T.float64).grad_fn.name()",
    "xr.double().grad_fn.name()", "xr.to(T.int64).requires_grad", "xr.to(T.float32).grad_fn",
    "xr.to(T.float32, copy=True).grad_fn.name()", "xr.clone().grad_fn.name()",
    "xr.t().contiguous().grad_fn.name()", "x.float() is x",
    "x.float(memory_format=T.contiguous_format) is x",
    "xt.float(memory_format=T.contiguous_format).stride()", "xt.double().stride()", "yi.long()", "yi.int()",
    "yi.short()", "yi.char()", "yu.byte()", "y.bool()", "y.half()", "y.bfloat16()", "y.double()",
    "yi.bfloat16().long()", "yi.half().int()", "yu.bfloat16().byte()", "T.tensor([1e10, -1e10, 3e38]).half()",
    "T.tensor([1e10, -1e10, 3e38]).bfloat16()", "T.tensor([1.5, 2.5, -0.5, 1.0039]).bfloat16()",
    "T.tensor([2**31-1, 2**40]).int()", "T.tensor([2**31-1, 2**40]).float()",
    "T.tensor([2**53+1]).double()", "T.tensor([-1, 256]).byte()", "T.tensor([300, -129]).char()",
    "T.tensor([0, 3]).bool()", "T.tensor([True, False]).float()", "T.tensor([True, False]).bfloat16()",
    "T.tensor([1.5, 300]).bfloat16().long()", "T.tensor([1.5, -300.7], dtype=T.float16).long()",
    "T.tensor([70000, 2**60]).half()", "T.tensor([70000, 2**60]).bfloat16()",
    "T.tensor([0.1, 1/3, 2/3, 1e-5, 65519.9, 65520.], dtype=T.float64).half()",
    "T.tensor([0.1, 1/3, 2/3, 1e-40, 3.3961e38], dtype=T.float64).bfloat16()",
    "T.tensor([257, 4097, 16777217, -16777217]).bfloat16()", "T.tensor([2049, 4097, -2049]).half()",
    "x.type()", "x.long().type()", "x.bool().type()", "x.half().type()", "x.bfloat16().type()",
    "x.double().type()", "x.char().type()", "x.type(T.float64)", "x.type('torch.DoubleTensor')",
    "x.type('torch.IntTensor')", "x.type('foo')", "x.type('torch.FooTensor')", "x.type(T.DoubleTensor)",
    "x.type(T.FloatTensor) is x", "x.type(T.float32) is x", "x.type(dtype=T.int64)",
    "x.type(T.float64, non_blocking=True)", "x.type(5)", "x.type_as(T.ones(2, dtype=T.int64))",
    "x.type_as(x) is x", "x.cpu() is x", "x.cpu(memory_format=T.contiguous_format) is x",
    "T.result_type(x, 2.5)", "T.result_type(T.tensor(1), 2.5)", "T.result_type(2, 2.5)",
    "T.result_type(2, x)", "T.result_type(xl, T.tensor(1.))", "T.result_type(xl, True)",
    "T.result_type(T.tensor(1, dtype=T.int8), T.tensor([1], dtype=T.uint8))",
    "T.result_type(x.half(), T.tensor(1., dtype=T.float64))", "T.result_type(x, 'a')",
    "T.result_type(tensor=x, other=2)", "T.promote_types(T.int32, T.float16)",
    "T.promote_types(T.uint8, T.int8)", "T.promote_types(T.bfloat16, T.float16)",
    "T.promote_types(T.bool, T.int8)", "T.promote_types(1, T.int8)", "T.can_cast(T.double, T.float)",
    "T.can_cast(T.float, T.int)", "T.can_cast(T.int, T.bool)", "T.can_cast(T.bool, T.uint8)",
    "T.can_cast(from_=T.int64, to=T.int8)", "T.can_cast(T.float16, T.bfloat16)", "T.can_cast(1, T.int8)",
    "T.is_tensor(x)", "T.is_tensor([1])", "T.is_tensor(1.0)", "T.is_floating_point(x)",
    "T.is_floating_point(xl)", "T.is_floating_point(x.bfloat16())", "T.is_floating_point(1.0)",
    "T.is_nonzero(T.tensor([1.]))", "T.is_nonzero(T.tensor(0))", "T.is_nonzero(T.tensor([[False]]))",
    "T.is_nonzero(T.tensor(float('nan')))", "T.is_nonzero(T.tensor([1., 2]))",
    "T.is_nonzero(T.tensor([]))", "T.is_nonzero(1)", "T.tensor([3]).is_nonzero()", "T.numel(x)",
    "T.numel(T.ones(0, 3))", "T.numel([1])", "T.get_default_dtype()", "repr(T.contiguous_format)",
    "repr(T.channels_last)", "repr(T.preserve_format)", "x.clone().zero_()", "x.clone().fill_(2.5)",
    "x.clone().fill_(T.tensor(2.5))", "x.clone().fill_(T.ones(2))", "xl.clone().fill_(2.7)",
    "xl.clone().fill_(-2.7)", "T.ones(2,dtype=T.uint8).fill_(300)", "T.ones(2,dtype=T.uint8).fill_(-1)",
    "T.ones(2,dtype=T.bool).fill_(2)", "T.ones(2,dtype=T.int32).fill_(2**40)",
    "T.zeros(2, dtype=T.uint8).fill_(2**70)", "T.zeros(2, dtype=T.float16).fill_(1e300)",
    "T.zeros(2, dtype=T.float16).fill_(float('inf'))", "T.zeros(2, dtype=T.float32).fill_(float('nan'))",
    "T.zeros(2, dtype=T.int64).fill_(float('nan'))", "T.zeros(2, dtype=T.bfloat16).fill_(3.3)",
    "x.clone().fill_('a')", "x.clone().fill_(None)", "x.clone().fill_(True)",
    "x.clone().fill_(np.float32(1.5))", "xt.clone().fill_(3)", "x.clone().copy_(T.arange(3))",
    "x.clone().copy_(T.arange(4))", "x.clone().copy_(T.ones(2,2,3))", "x.clone().copy_(T.ones(1,2,3))",
    "x.clone().copy_(T.ones(1,1,2,3))", "x.clone().copy_(3)", "x.clone().copy_(2.5)",
    "x.clone().copy_([1,2,3])", "x.clone().copy_(np.ones(3))",
    "xl.clone().copy_(T.tensor([1.7, -1.7, 2.5]))",
    "T.ones(3, dtype=T.bool).copy_(T.tensor([0., 0.5, -1]))",
    "T.ones(3, dtype=T.uint8).copy_(T.tensor([-1, 256, 257]))", "T.ones(6, dtype=T.int8).copy_(yi)",
    "T.ones(6, dtype=T.float16).copy_(y)", "T.ones(6, dtype=T.bfloat16).copy_(y)",
    "T.ones(3).copy_(T.ones(3), non_blocking=True)", "T.zeros(3, 2).copy_(xt)",
    "T.zeros(2, 3).t().copy_(xt * 2)", "T.zeros(2, 3)[:, ::2].copy_(T.tensor([[1., 2], [3, 4]]))",
    "T.zeros(2, 3).copy_(T.tensor(5.))", "T.zeros(2, 3, dtype=T.int64).copy_(T.tensor([[1.5], [2.5]]))",
    "T.ones(3, requires_grad=True).fill_(2.)", "T.ones(3, requires_grad=True).zero_()",
    "T.ones(3, requires_grad=True).copy_(T.ones(3))",
    "(T.ones(3, requires_grad=True)*1).fill_(2).requires_grad",
    "(T.ones(3, requires_grad=True)*1).zero_().requires_grad",
    "(T.ones(3, requires_grad=True)*1).copy_(T.ones(3)).grad_fn.name()",
    "T.ones(3).copy_(T.ones(3, requires_grad=True)).grad_fn.name()",
    "T.ones(3).copy_(T.ones(3, dtype=T.float64, requires_grad=True)).grad_fn.name()",
    "T.ones(3, dtype=T.int64).copy_(T.ones(3, requires_grad=True)).requires_grad",
]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_against_torch(torch, expr):
    check(torch, expr)


# ---------------------------------------------------------------- every dtype pair

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.7, -1.7, 2.5, 127.9, -128.9, 255.5, 256.0, 300.5, -300.5,
           65504.0, 65520.0, 1e5, -1e5, 3e9, -3e9, 1e-8, 1.0039, 257.0, 4097.0, 16777217.0]
NONFINITE = [float("nan"), float("inf"), float("-inf")]


def _values(torch, src):
    """torch values of dtype ``src`` spanning the cases conversions treat specially."""
    dt = getattr(torch, src)
    if src == "bool":
        return torch.tensor([True, False, True])
    if dt.is_floating_point:
        v = torch.tensor(SPECIAL + NONFINITE, dtype=torch.float64)
        rng = np.random.RandomState(0)
        wide = torch.from_numpy(rng.randn(200) * 10.0 ** rng.randint(-3, 6, 200))
        return torch.cat([v, wide]).to(dt)
    info = torch.iinfo(dt)
    base = [0, 1, -1, 2, 127, -128, 255, 256, 300, -300, 32767, -32768, 65535, 2**31 - 1, -2**31,
            2**40 + 3, 2**53 + 1, info.max, info.min]
    return torch.tensor(base, dtype=torch.int64).to(dt)


@pytest.mark.parametrize("src", DTYPES)
def test_every_conversion(torch, src):
    theirs_src = _values(torch, src)
    ours_src = from_torch(theirs_src)
    for dst in DTYPES:
        theirs = theirs_src.to(getattr(torch, dst))
        ours = ours_src.to(getattr(dynograph, dst))
        assert dtype_name(ours.dtype) == dst
        a, b = to_numpy(ours), to_numpy(theirs)
        if src in ("float16", "bfloat16", "float32", "float64") and dst not in DTYPES[-4:] + ["bool"]:
            # out-of-range float -> integer is undefined in C++; compare where it is defined
            f = to_numpy(theirs_src).astype(np.float64)
            info = np.iinfo(np.dtype(dst))
            ok = np.isfinite(f) & (np.trunc(f) >= info.min) & (np.trunc(f) <= info.max)
            a, b = a[ok], b[ok]
        np.testing.assert_array_equal(a, b, err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["uint8", "int8", "int16", "int32", "int64"])
def test_undefined_float_to_integer_conversions_only_keep_dtype_and_shape(src, dst):
    """NaN, infinities and out-of-range values have no defined integer value (C++ leaves it
    undefined, and it changes between library releases): only the dtype, the shape and the
    absence of warnings are promised, so only those are checked."""
    x = dynograph.tensor(NONFINITE + [1e30, -1e30, 3e4, -3e4], dtype=getattr(dynograph, src))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = x.to(getattr(dynograph, dst))
        out_copy = dynograph.zeros(7, dtype=getattr(dynograph, dst)).copy_(x)
    assert out.dtype == out_copy.dtype == getattr(dynograph, dst)
    assert out.shape == out_copy.shape == (7,)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded", "permuted3d"])
@pytest.mark.parametrize("dst", ["float64", "float16", "bfloat16", "int32", "bool"])
def test_conversion_of_non_contiguous(torch, layout, dst):
    base = torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(1)) * 100

    def view(t):
        return {"transposed": lambda: t[0].t(), "sliced": lambda: t[:, ::2, 1:],
                "expanded": lambda: t[:1, :1].expand(3, 4, 5),
                "permuted3d": lambda: t.permute(2, 0, 1)}[layout]()
    theirs = view(base).to(getattr(torch, dst))
    ours = view(from_torch(base)).to(getattr(dynograph, dst))
    assert_same(ours, theirs, atol=0, rtol=0)
    assert ours.stride() == theirs.stride()


# ---------------------------------------------------------------- gradients

@pytest.mark.parametrize("src,dst", [("float32", "float64"), ("float64", "float32"), ("float32", "float16"),
                                     ("float64", "bfloat16"), ("float16", "float32")])
def test_to_gradient(torch, src, dst):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(3, 4, generator=g)
    tx = torch.randn(3, 4, generator=g).to(getattr(torch, src)).requires_grad_()
    dx = from_torch(tx, requires_grad=True)
    ty = tx.to(getattr(torch, dst))
    dy = dx.to(getattr(dynograph, dst))
    assert dy.grad_fn.name() == ty.grad_fn.name() == "ToCopyBackward0"
    (ty.float() * w).sum().backward()
    (dy.float() * from_torch(w)).sum().backward()
    assert_same(dx.grad, tx.grad, rtol=1e-2, atol=1e-2)


def test_clone_contiguous_gradients(torch):
    start = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    for case in range(3):
        grads, names = [], []
        for T in (torch, dynograph):
            x = (start.clone() if T is torch else from_torch(start)).requires_grad_()
            w = T.arange(12.0).reshape(4, 3)
            y = [lambda: x.clone() * 2, lambda: x.t().contiguous() * w,
                 lambda: x.t().clone(memory_format=T.contiguous_format) * w][case]()
            names.append(y.grad_fn.next_functions[0][0].name())
            y.sum().backward()
            grads.append(x.grad)
        assert names[0] == names[1] == "CloneBackward0"
        assert_same(grads[1], grads[0])


def test_copy_gradients(torch):
    for T in (torch, dynograph):
        a = T.zeros(2, 3, requires_grad=True)
        b = a * 2
        c = T.ones(3, requires_grad=True, dtype=T.float64)
        b.copy_(c)
        (b * T.arange(6.0).reshape(2, 3)).sum().backward()
        if T is torch:
            expect = (a.grad, c.grad)
        else:
            assert_same(a.grad, expect[0])
            assert_same(c.grad, expect[1])
            assert b.grad_fn.name() == "torch::autograd::CopyBackwards"


def test_fill_gradients(torch):
    results = []
    for T in (torch, dynograph):
        a = T.zeros(3, requires_grad=True)
        b = a * 2
        b.fill_(4.0)
        v = T.tensor(2.0, requires_grad=True)
        z = T.zeros(3).fill_(v)
        ((b + z) * T.arange(3.0)).sum().backward()
        results.append((a.grad, v.grad))
    assert_same(results[1][0], results[0][0])
    assert_same(results[1][1], results[0][1])


def test_zero_on_non_leaf_stops_gradient(torch):
    a = dynograph.ones(3, requires_grad=True)
    b = a * 3
    b.zero_()
    (b + a).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]


def test_no_grad_writes_into_leaves():
    w = dynograph.ones(3, requires_grad=True)
    with dynograph.no_grad():
        w.copy_(dynograph.tensor([1.0, 2.0, 3.0]))
        w.fill_(5)
        w.zero_()
    assert w.grad_fn is None and w.requires_grad
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.copy_(dynograph.zeros(3))


# ---------------------------------------------------------------- in-place semantics

def test_inplace_writes_bump_version_and_share_memory():
    base = dynograph.zeros(2, 3)
    view = base.t()
    v0 = base._version
    view.copy_(dynograph.ones(3, 2))
    assert base._data.sum() == 6 and base._version == v0 + 1
    base.fill_(2)
    base.zero_()
    assert base._version == v0 + 3 and view._version == base._version
    assert base.fill_(1) is base and base.copy_(base * 2) is base and base.zero_() is base


def test_copy_overlapping_source():
    a = dynograph.arange(9.0).reshape(3, 3)
    a.copy_(a.t())
    np.testing.assert_array_equal(a._data, np.arange(9.0).reshape(3, 3).T)


def test_copy_large_conversion_matches(torch):
    t = torch.randn(1000, generator=torch.Generator().manual_seed(4)) * 500
    for dst in ("int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "bool"):
        ours = dynograph.zeros(1000, dtype=getattr(dynograph, dst)).copy_(from_torch(t))
        theirs = torch.zeros(1000, dtype=getattr(torch, dst)).copy_(t)
        assert_same(ours, theirs)


def test_returns_self_without_copy():
    x = dynograph.ones(2, 3)
    assert x.to(dynograph.float32) is x and x.float() is x and x.type(dynograph.float32) is x
    assert x.contiguous() is x and x.cpu() is x and x.to("cpu") is x
    assert x.to(dynograph.float32, copy=True) is not x
    assert x.clone()._data is not x._data


def test_type_accepts_dynograph_names():
    x = dynograph.ones(2)
    assert x.type() == "dynograph.FloatTensor"
    assert x.type("dynograph.DoubleTensor").dtype is dynograph.float64
    assert x.type("torch.LongTensor").dtype is dynograph.int64
    assert x.bfloat16().type() == "dynograph.BFloat16Tensor"
    with pytest.raises(ValueError, match="invalid type: 'dynograph.Nope'"):
        x.type("dynograph.Nope")


@pytest.mark.parametrize("call", [lambda x: x.cuda(), lambda x: x.to("cuda"), lambda x: x.to("cuda:1"),
                                  lambda x: x.to(0),
                                  lambda x: x.to(dynograph.device("cuda"), dynograph.float64),
                                  lambda x: x.type("torch.cuda.FloatTensor"), lambda x: x.cuda(0)])
def test_cuda_raises_one_clear_error(call):
    with pytest.raises(RuntimeError, match="no CUDA device is available"):
        call(dynograph.ones(2))


def test_conversion_primitives():
    from dynograph.compiler.ops import REGISTRY
    assert REGISTRY["to_copy"].grad_name == "ToCopyBackward0"
    assert REGISTRY["clone"].grad_name == "CloneBackward0"
    assert REGISTRY["copy"].grad_name == "torch::autograd::CopyBackwards"


def _writes_through_views(T):
    """Writes into views of a non-leaf tensor, then a backward pass; returns what torch shows."""
    out = []
    a = T.arange(6.0).reshape(2, 3).requires_grad_()
    c = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b[0].copy_(c)
    (b * T.arange(6.0).reshape(2, 3)).sum().backward()
    out += [a.grad, c.grad, b]
    a = T.arange(6.0).reshape(2, 3).requires_grad_()
    b = a * 2
    b.t()[1].fill_(5.0)
    b[1].zero_()
    (b * b).sum().backward()
    out += [a.grad, b]
    a = T.arange(6.0).reshape(2, 3).requires_grad_()
    v = T.tensor(3.0, requires_grad=True)
    b = a * 1
    b[:, 1].fill_(v)
    (b * T.arange(6.0).reshape(2, 3)).sum().backward()
    out += [a.grad, v.grad, b]
    a = T.ones(2, 3, requires_grad=True)
    b = a * 1
    b[0].copy_(T.tensor([1, 2, 3]))
    (b * 3).sum().backward()
    out += [a.grad, b]
    return out


def test_writes_through_views_with_autograd(torch):
    for ours, theirs in zip(_writes_through_views(dynograph), _writes_through_views(torch)):
        assert_same(ours.detach(), theirs.detach())

"""Linear algebra against PyTorch: products (matmul and its 1-D/batched rules, mm, bmm, mv, dot,
the add* family), einsum, tensordot, inner/outer/kron, cross, trace, norms and decompositions.
Values, dtypes, shapes, non-contiguous inputs, gradients, grad_fn names and error texts."""
import math
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, from_torch, to_numpy


def _pair(torch, shape, dtype="float64", requires_grad=False, layout="contiguous", seed=0):
    """The same data as a torch tensor and a dynograph tensor.

    ``layout`` 'transposed' stores the data with the last two dims swapped (a non-contiguous
    view), 'sliced' takes every other element of a larger tensor along the last dim."""
    g = np.random.default_rng(seed)
    tdt = getattr(torch, dtype)
    if dtype.startswith("int"):
        base = g.integers(-4, 5, size=shape)
    else:
        base = g.standard_normal(shape)
    t = torch.tensor(base, dtype=tdt)
    d = from_torch(t)
    if layout == "transposed" and len(shape) >= 2:
        t, d = t.mT.contiguous().mT, d.mT.contiguous().mT
        assert not d.is_contiguous() or min(shape[-2:]) == 1
    elif layout == "sliced" and len(shape) >= 1:
        big = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=tdt)
        big[..., ::2] = t
        dbig = from_torch(big)
        t, d = big[..., ::2], dbig[..., ::2]
        assert not d.is_contiguous()
    if requires_grad:
        t.requires_grad_(True)
        d.requires_grad_(True)
    return t, d


def _backward_same(torch, pairs, out_t, out_d, rtol=1e-7, atol=1e-9, seed=1):
    """Backpropagate one random cotangent through both results and compare input grads."""
    g = np.random.default_rng(seed).standard_normal(tuple(out_t.shape))
    out_t.backward(torch.tensor(g, dtype=out_t.dtype))
    out_d.backward(dynograph.tensor(g).to(out_d.dtype))
    for t, d in pairs:
        if t.requires_grad:
            if t.grad is None:             # e.g. the 0-"norm" has no gradient at all
                assert d.grad is None
                continue
            assert d.grad is not None
            np.testing.assert_allclose(to_numpy(d.grad), to_numpy(t.grad), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- matmul

MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
    ((1, 2, 3), (5, 3, 4)), ((6, 1, 2, 3), (5, 3, 4)), ((5, 2, 3), (1, 3, 4)),
    ((2, 5, 2, 3), (5, 3, 4)), ((5, 2, 3), (2, 5, 3, 4)), ((4,), (2, 3, 4, 5)),
    ((2, 1, 3, 4), (4,)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 0, 3), (3, 2)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_matmul_values(torch, sa, sb, dtype):
    a, A = _pair(torch, sa, dtype, seed=1)
    b, B = _pair(torch, sb, dtype, seed=2)
    assert_same(A @ B, a @ b)
    assert_same(dynograph.matmul(A, B), torch.matmul(a, b))
    assert_same(A.matmul(B), a.matmul(b))
    assert_same(dynograph.linalg.matmul(A, B), torch.linalg.matmul(a, b))


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES[:16])
@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
def test_matmul_grad_and_grad_fn(torch, sa, sb, grads):
    a, A = _pair(torch, sa, requires_grad=grads[0], seed=1)
    b, B = _pair(torch, sb, requires_grad=grads[1], seed=2)
    r, R = a @ b, A @ B
    assert_same(R, r, rtol=1e-12)
    if not (len(sa) == 1 and len(sb) == 2):        # torch's squeeze_ is SqueezeBackward4
        assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A), (b, B)], r, R)


@pytest.mark.parametrize("sa,sb", [((4, 3), (3, 5)), ((2, 4, 3), (3, 5)), ((2, 4, 3), (2, 3, 5)),
                                   ((3, 2, 4, 3), (2, 3, 5)), ((4, 3), (2, 3, 5))])
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_matmul_non_contiguous(torch, sa, sb, layout):
    a, A = _pair(torch, sa, layout=layout, requires_grad=True, seed=3)
    b, B = _pair(torch, sb, layout=layout, requires_grad=True, seed=4)
    r, R = a @ b, A @ B
    assert_same(R, r, rtol=1e-12)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A), (b, B)], r, R)


def test_matmul_expanded_and_permuted(torch):
    a, A = _pair(torch, (3, 4), seed=5)
    b, B = _pair(torch, (2, 4, 3), seed=6)
    assert_same(A.expand(2, 3, 4) @ B, a.expand(2, 3, 4) @ b)
    assert_same(B.permute(0, 2, 1) @ A.t(), b.permute(0, 2, 1) @ a.t())
    assert_same(B.permute(2, 0, 1) @ A.t(), b.permute(2, 0, 1) @ a.t())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matmul_low_precision(torch, dtype):
    a, A = _pair(torch, (3, 16, 32), dtype, seed=1)
    b, B = _pair(torch, (32, 8), dtype, seed=2)
    # both accumulate in float32 and round once
    assert_same(A @ B, a @ b, rtol=1e-2, atol=1e-2)
    assert_same(dynograph.mm(A[0], B), torch.mm(a[0], b), rtol=1e-2, atol=1e-2)


def test_matmul_int_dtypes(torch):
    for dtype in ["int32", "int16", "uint8"]:
        a = torch.arange(12).reshape(3, 4).to(getattr(torch, dtype))
        A = from_torch(a)
        assert_same(A @ A.t(), a @ a.t())
        assert_same(dynograph.mm(A, A.t()), torch.mm(a, a.t()))


def test_matmul_out_and_rmatmul(torch):
    a, A = _pair(torch, (2, 3, 4), seed=1)
    b, B = _pair(torch, (4, 5), seed=2)
    out_t, out_d = torch.empty(0, dtype=torch.float64), dynograph.empty(0, dtype=dynograph.float64)
    torch.matmul(a, b, out=out_t)
    r = dynograph.matmul(A, B, out=out_d)
    assert r is out_d
    assert_same(out_d, out_t)
    assert_same(B.__rmatmul__(A.sum(0)), a.sum(0) @ b)
    A.requires_grad_(True)
    with pytest.raises(RuntimeError, match="functions with out=... arguments don't support"):
        dynograph.matmul(A, B, out=out_d)
    assert A.__matmul__(3) is NotImplemented


# ---------------------------------------------------------------- mm, bmm, mv, dot, vdot

@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_basic_products(torch, layout):
    cases = [("mm", (3, 4), (4, 2)), ("bmm", (2, 3, 4), (2, 4, 5)), ("mv", (3, 4), (4,)),
             ("dot", (5,), (5,)), ("vdot", (5,), (5,))]
    for name, sa, sb in cases:
        a, A = _pair(torch, sa, layout=layout, requires_grad=True, seed=1)
        b, B = _pair(torch, sb, layout=layout, requires_grad=True, seed=2)
        r = getattr(torch, name)(a, b)
        R = getattr(dynograph, name)(A, B)
        assert_same(R, r, rtol=1e-12)
        assert_same(getattr(A.detach(), name)(B.detach()), r.detach(), rtol=1e-12)
        assert R.grad_fn.name() == r.grad_fn.name()
        _backward_same(torch, [(a, A), (b, B)], r, R)


def test_products_int(torch):
    for name, sa, sb in [("mm", (3, 4), (4, 2)), ("bmm", (2, 3, 4), (2, 4, 5)),
                         ("mv", (3, 4), (4,)), ("dot", (5,), (5,)), ("vdot", (5,), (5,))]:
        a, A = _pair(torch, sa, "int64", seed=1)
        b, B = _pair(torch, sb, "int64", seed=2)
        assert_same(getattr(dynograph, name)(A, B), getattr(torch, name)(a, b))


# ---------------------------------------------------------------- the add* family

FUSED = [
    ("addmm", (2, 4), (2, 3), (3, 4)), ("addmm", (4,), (2, 3), (3, 4)),
    ("addmm", (1, 1), (2, 3), (3, 4)), ("addmm", (), (2, 3), (3, 4)),
    ("addmv", (2,), (2, 3), (3,)), ("addmv", (1,), (2, 3), (3,)), ("addmv", (), (2, 3), (3,)),
    ("addbmm", (2, 4), (5, 2, 3), (5, 3, 4)), ("addbmm", (4,), (5, 2, 3), (5, 3, 4)),
    ("baddbmm", (5, 2, 4), (5, 2, 3), (5, 3, 4)), ("baddbmm", (1, 2, 4), (5, 2, 3), (5, 3, 4)),
    ("baddbmm", (4,), (5, 2, 3), (5, 3, 4)),
    ("addr", (2, 3), (2,), (3,)), ("addr", (3,), (2,), (3,)),
]


@pytest.mark.parametrize("name,si,sa,sb", FUSED)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_fused_products(torch, name, si, sa, sb, beta, alpha):
    i, I_ = _pair(torch, si, requires_grad=True, seed=0)
    a, A = _pair(torch, sa, requires_grad=True, seed=1)
    b, B = _pair(torch, sb, requires_grad=True, seed=2)
    r = getattr(torch, name)(i, a, b, beta=beta, alpha=alpha)
    R = getattr(dynograph, name)(I_, A, B, beta=beta, alpha=alpha)
    assert_same(R, r, rtol=1e-12)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(i, I_), (a, A), (b, B)], r, R)


@pytest.mark.parametrize("name,si,sa,sb", [FUSED[0], FUSED[4], FUSED[7], FUSED[9], FUSED[12]])
def test_fused_products_int_and_inplace(torch, name, si, sa, sb):
    i, I_ = _pair(torch, si, "int64", seed=0)
    a, A = _pair(torch, sa, "int64", seed=1)
    b, B = _pair(torch, sb, "int64", seed=2)
    kw = {"beta": 2, "alpha": 3}
    assert_same(getattr(dynograph, name)(I_, A, B, **kw), getattr(torch, name)(i, a, b, **kw))
    if name != "addr":      # float scalars are truncated for integer tensors
        kw = {"beta": 2.5, "alpha": 0.5}
        assert_same(getattr(dynograph, name)(I_, A, B, **kw), getattr(torch, name)(i, a, b, **kw))
    i2, I2 = _pair(torch, si, seed=0)
    a2, A2 = _pair(torch, sa, seed=1)
    b2, B2 = _pair(torch, sb, seed=2)
    r = getattr(i2, name + "_")(a2, b2, beta=0.5)
    R = getattr(I2, name + "_")(A2, B2, beta=0.5)
    assert R is I2
    assert_same(I2, r, rtol=1e-12)


def test_fused_beta_zero_ignores_nan(torch):
    nan_t, nan_d = torch.full((2, 2), math.nan, dtype=torch.float64), dynograph.full(
        (2, 2), math.nan, dtype=dynograph.float64)
    a, A = _pair(torch, (2, 3))
    b, B = _pair(torch, (3, 2))
    assert_same(dynograph.addmm(nan_d, A, B, beta=0), torch.addmm(nan_t, a, b, beta=0))


def test_addr_promotes_and_bool(torch):
    i, I_ = _pair(torch, (2, 3), "float32")
    a, A = _pair(torch, (2,), "float64")
    b, B = _pair(torch, (3,), "int64")
    assert_same(dynograph.addr(I_, A, B), torch.addr(i, a, b))
    for di, dv1, dv2, si in [("float64", "float32", "float32", ()), ("float16", "int64", "int64", (2, 3)),
                             ("int64", "float16", "bfloat16", (2, 3))]:
        i, I_ = _pair(torch, si, di)
        a, A = _pair(torch, (2,), dv1, seed=1)
        b, B = _pair(torch, (3,), dv2, seed=2)
        assert_same(dynograph.addr(I_, A, B), torch.addr(i, a, b), rtol=1e-2, atol=1e-2)
    bi = torch.tensor([[True, False, False], [False, False, True]])
    b1, b2 = torch.tensor([True, False]), torch.tensor([True, True, False])
    for beta, alpha in [(1, 1), (0, 1), (1, 0), (True, False)]:
        assert_same(dynograph.addr(from_torch(bi), from_torch(b1), from_torch(b2), beta=beta,
                                   alpha=alpha), torch.addr(bi, b1, b2, beta=beta, alpha=alpha))


# ---------------------------------------------------------------- outer, inner, kron, tensordot

def test_outer_inner_kron(torch):
    for fn, sa, sb, da, db in [
            ("outer", (3,), (4,), "float64", "float64"), ("ger", (3,), (4,), "float64", "float64"),
            ("outer", (3,), (4,), "int64", "float64"),
            ("inner", (3,), (3,), "float64", "float64"), ("inner", (2, 3), (4, 3), "float64", "float64"),
            ("inner", (2, 5, 3), (4, 3), "float64", "float64"), ("inner", (), (4, 3), "float64", "float64"),
            ("kron", (2, 3), (2, 2), "float64", "float64"), ("kron", (2, 3), (4,), "float64", "float64"),
            ("kron", (2, 1, 3), (2, 2), "float64", "float64"), ("kron", (2, 3), (4,), "int64", "float64")]:
        grad = da == db == "float64"
        a, A = _pair(torch, sa, da, requires_grad=grad, seed=1)
        b, B = _pair(torch, sb, db, requires_grad=grad, seed=2)
        r, R = getattr(torch, fn)(a, b), getattr(dynograph, fn)(A, B)
        assert_same(R, r, rtol=1e-12)
        assert_same(getattr(A.detach(), fn)(B.detach()), r.detach(), rtol=1e-12)
        if grad:
            assert R.grad_fn.name() == r.grad_fn.name(), fn
            _backward_same(torch, [(a, A), (b, B)], r, R)


@pytest.mark.parametrize("sa,sb,dims", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3, 4), (4, 5), 1), ((2, 3), (4, 5), 0),
    ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])), ((2, 3, 4), (4, 3, 5), [[-1], [0]]),
    ((2, 1), (3, 4), ([1], [0])), ((3, 4), (4, 3), ([0, 1], [1, 0]))])
def test_tensordot(torch, sa, sb, dims):
    a, A = _pair(torch, sa, requires_grad=True, seed=1)
    b, B = _pair(torch, sb, requires_grad=True, seed=2)
    r, R = torch.tensordot(a, b, dims=dims), dynograph.tensordot(A, B, dims=dims)
    assert_same(R, r, rtol=1e-12)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A), (b, B)], r, R)
    d = torch.tensor(dims) if not isinstance(dims, int) else torch.tensor(dims)
    assert_same(dynograph.tensordot(A, B, dims=from_torch(d)).detach(), r.detach(), rtol=1e-12)


# ---------------------------------------------------------------- einsum

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ba", [(2, 3)]), ("ij->", [(2, 3)]),
    ("i,i", [(3,), (3,)]), ("i,j->ij", [(3,), (4,)]), ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (6, 3, 4)]), ("i...->...", [(5, 2, 3)]),
    ("iij->j", [(3, 3, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]), ("ij,jk->ik", [(2, 1), (3, 4)]), ("i,->i", [(3,), ()]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("iJ,Jk->ik", [(2, 3), (3, 4)]),
    ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]), ("ij->...", [(2, 3)]), ("...->...", [(2, 3)]),
    ("ij,jk", [(2, 0), (0, 4)]), ("abc,cd,bd->ad", [(2, 3, 4), (4, 5), (3, 5)]),
    ("i i j , j k -> i k", [(3, 3, 2), (2, 4)]), ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("bij,bjk->ibk", [(5, 2, 3), (5, 3, 4)]), ("ij->ij", [(2, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum(torch, eq, shapes):
    pairs = [_pair(torch, s, requires_grad=True, seed=i) for i, s in enumerate(shapes)]
    ts, ds = [p[0] for p in pairs], [p[1] for p in pairs]
    r, R = torch.einsum(eq, *ts), dynograph.einsum(eq, *ds)
    assert_same(R, r, rtol=1e-12)
    assert R.grad_fn.name() == r.grad_fn.name()
    assert_same(dynograph.einsum(eq, ds).detach(), r.detach(), rtol=1e-12)
    _backward_same(torch, pairs, r, R)


def test_einsum_sublist_and_ints(torch):
    a, A = _pair(torch, (2, 3), seed=1)
    b, B = _pair(torch, (3, 4), seed=2)
    assert_same(dynograph.einsum(A, [0, 1], B, [1, 2], [0, 2]), torch.einsum(a, [0, 1], b, [1, 2], [0, 2]))
    assert_same(dynograph.einsum(A, [Ellipsis, 1], B, [1, 2]), torch.einsum(a, [Ellipsis, 1], b, [1, 2]))
    a, A = _pair(torch, (2, 3), "int64", seed=1)
    b, B = _pair(torch, (3, 4), "int64", seed=2)
    assert_same(dynograph.einsum("ij,jk", A, B), torch.einsum("ij,jk", a, b))


# ---------------------------------------------------------------- cross, trace

@pytest.mark.parametrize("sa,sb,dim", [((4, 3), (4, 3), -1), ((3, 2), (3, 2), 0), ((1, 3), (4, 3), 1),
                                       ((2, 3, 5), (2, 3, 5), 1)])
def test_cross(torch, sa, sb, dim):
    a, A = _pair(torch, sa, requires_grad=True, seed=1)
    b, B = _pair(torch, sb, requires_grad=True, seed=2)
    r, R = torch.linalg.cross(a, b, dim=dim), dynograph.linalg.cross(A, B, dim=dim)
    assert_same(R, r, rtol=1e-12)
    assert R.grad_fn.name() == r.grad_fn.name()
    assert_same(dynograph.cross(A, B, dim=dim).detach(), r.detach(), rtol=1e-12)
    assert_same(A.cross(B, dim=dim).detach(), r.detach(), rtol=1e-12)
    _backward_same(torch, [(a, A), (b, B)], r, R)


def test_cross_default_dim_warns(torch):
    a, A = _pair(torch, (2, 3, 3), seed=1)
    b, B = _pair(torch, (2, 3, 3), seed=2)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        expected = torch.cross(a, b)
        got = dynograph.cross(A, B)
    assert_same(got, expected)
    ai, Ai = _pair(torch, (4, 3), "int64", seed=1)
    bi, Bi = _pair(torch, (4, 3), "int64", seed=2)
    assert_same(dynograph.linalg.cross(Ai, Bi), torch.linalg.cross(ai, bi))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_trace(torch, shape, dtype):
    a, A = _pair(torch, shape, dtype if dtype != "uint8" else "int64", seed=1)
    if dtype == "uint8":
        a = a.abs().to(torch.uint8)
        A = from_torch(a)
    assert_same(dynograph.trace(A), torch.trace(a))
    assert_same(A.trace(), a.trace())
    if dtype == "float64":
        a.requires_grad_(True)
        A.requires_grad_(True)
        r, R = torch.trace(a), dynograph.trace(A)
        assert R.grad_fn.name() == r.grad_fn.name()
        _backward_same(torch, [(a, A)], r, R)


# ---------------------------------------------------------------- norms

@pytest.mark.parametrize("ord", ["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2])
@pytest.mark.parametrize("shape,dim,keepdim", [((3, 4), (-2, -1), False), ((2, 3, 4), (0, 2), True),
                                               ((2, 3, 4), (2, 0), False), ((4, 3), (1, 0), True)])
def test_matrix_norm(torch, ord, shape, dim, keepdim):
    a, A = _pair(torch, shape, requires_grad=True, seed=4)
    r = torch.linalg.matrix_norm(a, ord, dim=dim, keepdim=keepdim)
    R = dynograph.linalg.matrix_norm(A, ord, dim=dim, keepdim=keepdim)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A)], r, R, rtol=1e-6)


def test_matrix_norm_dtypes(torch):
    a, A = _pair(torch, (3, 4), "float32", seed=1)
    assert_same(dynograph.linalg.matrix_norm(A, dtype=dynograph.float64),
                torch.linalg.matrix_norm(a, dtype=torch.float64))
    assert_same(dynograph.linalg.matrix_norm(A, "nuc", dtype=dynograph.float64),
                torch.linalg.matrix_norm(a, "nuc", dtype=torch.float64))
    h, H = _pair(torch, (3, 4), "float16", seed=1)
    for ord in ["fro", 1, math.inf]:
        assert_same(dynograph.linalg.matrix_norm(H, ord), torch.linalg.matrix_norm(h, ord),
                    rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("args", [
    dict(), dict(ord=2), dict(ord="fro"), dict(ord="nuc"), dict(ord=math.inf), dict(ord=1, dim=1),
    dict(dim=(0, 1)), dict(ord=-1, dim=(1, 0), keepdim=True), dict(ord=3.5, dim=0),
    dict(ord=0, dim=1), dict(dtype="float64")])
def test_linalg_norm(torch, args):
    a, A = _pair(torch, (3, 4), "float32", requires_grad=True, seed=2)
    ta, da = dict(args), dict(args)
    if "dtype" in args:
        ta["dtype"], da["dtype"] = getattr(torch, args["dtype"]), getattr(dynograph, args["dtype"])
    r, R = torch.linalg.norm(a, **ta), dynograph.linalg.norm(A, **da)
    assert_same(R, r, rtol=1e-5)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A)], r, R, rtol=1e-5, atol=1e-6)
    v, V = _pair(torch, (5,), seed=3)
    assert_same(dynograph.linalg.norm(V, args.get("ord") if not isinstance(args.get("ord"), str)
                                      else None), torch.linalg.norm(v, args.get("ord") if not
                                                                    isinstance(args.get("ord"), str)
                                                                    else None))


@pytest.mark.parametrize("ord", [2, 1, 0, math.inf, -math.inf, 3, 0.5, -1])
def test_vector_norm(torch, ord):
    a, A = _pair(torch, (3, 4), requires_grad=True, seed=2)
    r = torch.linalg.vector_norm(a, ord, dim=1, keepdim=False)
    R = dynograph.linalg.vector_norm(A, ord, dim=1, keepdim=False)
    assert_same(R, r, rtol=1e-12)
    _backward_same(torch, [(a, A)], r, R)


# ---------------------------------------------------------------- inverse, solve, determinants

def _well_conditioned(torch, shape, seed=0, requires_grad=True):
    a, _ = _pair(torch, shape, seed=seed)
    n = shape[-1]
    a = (a + n * torch.eye(n, dtype=a.dtype)).detach()
    A = from_torch(a)
    if requires_grad:
        a.requires_grad_(True)
        A.requires_grad_(True)
    return a, A


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (0, 0), (2, 1, 3, 3)])
def test_inv(torch, shape):
    a, A = _well_conditioned(torch, shape)
    for t_fn, d_fn in [(torch.linalg.inv, dynograph.linalg.inv), (torch.inverse, dynograph.inverse),
                       (torch.Tensor.inverse, dynograph.Tensor.inverse)]:
        r, R = t_fn(a), d_fn(A)
        assert_same(R, r, rtol=1e-10)
        assert R.grad_fn.name() == r.grad_fn.name()
    if a.numel():
        _backward_same(torch, [(a, A)], r, R)


def test_inv_float32_transposed(torch):
    a, A = _well_conditioned(torch, (4, 4), requires_grad=False)
    a32, A32 = a.float().mT, A.to(dynograph.float32).mT
    assert_same(dynograph.linalg.inv(A32), torch.linalg.inv(a32), rtol=1e-5)


@pytest.mark.parametrize("sa,sb,left", [
    ((3, 3), (3,), True), ((3, 3), (3, 2), True), ((4, 3, 3), (4, 3), True),
    ((4, 3, 3), (3,), True), ((3, 3), (4, 3, 1), True), ((2, 1, 3, 3), (4, 3, 2), True),
    ((3, 3), (2, 3), False), ((2, 3, 3), (4, 3), False)])
def test_solve(torch, sa, sb, left):
    a, A = _well_conditioned(torch, sa)
    b, B = _pair(torch, sb, requires_grad=True, seed=7)
    r = torch.linalg.solve(a, b, left=left)
    R = dynograph.linalg.solve(A, B, left=left)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A), (b, B)], r, R)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_det_slogdet_logdet(torch, shape):
    a, A = _pair(torch, shape, requires_grad=True, seed=3)
    r, R = torch.linalg.det(a), dynograph.linalg.det(A)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()
    assert_same(dynograph.det(A.detach()), r.detach(), rtol=1e-10)
    _backward_same(torch, [(a, A)], r, R)
    for t_fn, d_fn in [(torch.linalg.slogdet, dynograph.linalg.slogdet),
                       (torch.slogdet, dynograph.slogdet)]:
        a.grad, A.grad = None, None
        (s, l), (S, L_) = t_fn(a), d_fn(A)
        assert type(S.__class__.__name__) is str and S.__class__ is not tuple
        assert_same(S, s)
        assert_same(L_, l, rtol=1e-10)
        assert L_.grad_fn.name() == l.grad_fn.name()
        _backward_same(torch, [(a, A)], l, L_)
    r, R = torch.logdet(a), dynograph.logdet(A)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()


def test_det_singular_grad():
    # the derivative of det is the cofactor matrix, also where A is singular (PyTorch 2.x
    # returns zeros for exactly singular A, which is not the derivative)
    for m, cof in [([[1., 2, 3], [2, 4, 6], [1, 1, 1]], [[-2., 4, -2], [1, -2, 1], [0, 0, 0]]),
                   ([[0., 0, 0], [0, 0, 0], [0, 0, 0]], np.zeros((3, 3))),
                   ([[1., 0], [0, 0]], [[0., 0], [0, 1]])]:
        A = dynograph.tensor(m, dtype=dynograph.float64, requires_grad=True)
        dynograph.linalg.det(A).backward()
        np.testing.assert_allclose(to_numpy(A.grad), cof, atol=1e-10)


def test_det_double_backward(torch):
    a, A = _well_conditioned(torch, (3, 3))
    (ga,) = torch.autograd.grad(torch.linalg.det(a), a, create_graph=True)
    (gA,) = dynograph.autograd.grad(dynograph.linalg.det(A), A, create_graph=True)
    assert_same(gA, ga, rtol=1e-10)
    (gga,) = torch.autograd.grad(ga.pow(2).sum(), a)
    (ggA,) = dynograph.autograd.grad(gA.pow(2).sum(), A)
    assert_same(ggA, gga, rtol=1e-8)


def test_slogdet_values(torch):
    for m in (-torch.eye(3), torch.zeros(3, 3), torch.diag(torch.tensor([1e-200, 1e-200, 1e-200],
                                                                        dtype=torch.float64))):
        s, l = torch.linalg.slogdet(m)
        S, L_ = dynograph.linalg.slogdet(from_torch(m))
        assert_same(S, s)
        assert_same(L_, l)
        assert_same(dynograph.logdet(from_torch(m)), torch.logdet(m))


# ---------------------------------------------------------------- cholesky, qr, eigh, svd

def _spd(torch, shape, seed=0):
    a, _ = _pair(torch, shape, seed=seed)
    n = shape[-1]
    s = (a @ a.mT + n * torch.eye(n, dtype=a.dtype)).detach()
    return s, from_torch(s)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(torch, shape, upper):
    s, S = _spd(torch, shape)
    s.requires_grad_(True)
    S.requires_grad_(True)
    r, R = torch.linalg.cholesky(s, upper=upper), dynograph.linalg.cholesky(S, upper=upper)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(s, S)], r, R)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(dynograph.cholesky(S.detach(), upper=upper), r.detach(), rtol=1e-10)


def _sign_fix(torch_t, dg_t, dim):
    """Signs that make each vector (along ``dim``) of both decompositions point the same way."""
    ratio = np.sign(to_numpy(torch_t) * to_numpy(dg_t)).sum(axis=dim, keepdims=True)
    return np.where(ratio < 0, -1.0, 1.0)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(torch, shape, mode):
    a, A = _pair(torch, shape, requires_grad=True, seed=5)
    (q, r), (Q, R) = torch.linalg.qr(a, mode=mode), dynograph.linalg.qr(A, mode=mode)
    assert tuple(Q.shape) == tuple(q.shape) and tuple(R.shape) == tuple(r.shape)
    if mode == "r":
        np.testing.assert_allclose(np.abs(to_numpy(R)), np.abs(to_numpy(r)), atol=1e-10)
        return
    s = _sign_fix(q, Q, -2)                       # columns of Q (rows of R) up to sign
    np.testing.assert_allclose(to_numpy(Q) * s, to_numpy(q), atol=1e-10)
    np.testing.assert_allclose(to_numpy(R) * np.swapaxes(s, -1, -2)[..., :R.shape[-2], :],
                               to_numpy(r), atol=1e-10)
    if mode == "complete" and shape[-2] > shape[-1]:
        return
    g = np.random.default_rng(1)
    gq, gr = g.standard_normal(tuple(q.shape)), g.standard_normal(tuple(r.shape))
    sr = np.swapaxes(s, -1, -2)[..., :r.shape[-2], :]
    lt = (q * torch.tensor(gq * s)).sum() + (r * torch.tensor(gr * sr)).sum()
    ld = (Q * dynograph.tensor(gq)).sum() + (R * dynograph.tensor(gr)).sum()
    lt.backward()
    ld.backward()
    np.testing.assert_allclose(to_numpy(A.grad), to_numpy(a.grad), rtol=1e-7, atol=1e-9)
    assert Q.grad_fn.name() == q.grad_fn.name()


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(torch, shape, uplo):
    a, _ = _pair(torch, shape, seed=2)
    a = (a + a.mT).detach().requires_grad_(True)
    A = from_torch(a, requires_grad=True)
    (w, v), (W, V) = torch.linalg.eigh(a, UPLO=uplo), dynograph.linalg.eigh(A, UPLO=uplo)
    assert_same(W, w, rtol=1e-10)
    s = _sign_fix(v, V, -2)
    np.testing.assert_allclose(to_numpy(V) * s, to_numpy(v), atol=1e-10)
    assert V.grad_fn.name() == v.grad_fn.name()
    g = np.random.default_rng(1)
    gw, gv = g.standard_normal(tuple(w.shape)), g.standard_normal(tuple(v.shape))
    ((w * torch.tensor(gw)).sum() + (v * torch.tensor(gv * s)).sum()).backward()
    ((W * dynograph.tensor(gw)).sum() + (V * dynograph.tensor(gv)).sum()).backward()
    np.testing.assert_allclose(to_numpy(A.grad), to_numpy(a.grad), rtol=1e-7, atol=1e-9)
    assert_same(dynograph.linalg.eigvalsh(A.detach(), UPLO=uplo), w.detach(), rtol=1e-10)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(torch, shape, full):
    a, A = _pair(torch, shape, requires_grad=True, seed=6)
    (u, s, vh), (U, S, Vh) = (torch.linalg.svd(a, full_matrices=full),
                              dynograph.linalg.svd(A, full_matrices=full))
    assert_same(S, s, rtol=1e-10)
    k = s.shape[-1]
    sg = _sign_fix(u[..., :k], U.narrow(-1, 0, k), -2)
    np.testing.assert_allclose(to_numpy(U)[..., :k] * sg, to_numpy(u)[..., :k], atol=1e-10)
    np.testing.assert_allclose(to_numpy(Vh)[..., :k, :] * np.swapaxes(sg, -1, -2),
                               to_numpy(vh)[..., :k, :], atol=1e-10)
    assert U.grad_fn.name() == u.grad_fn.name()
    # a loss that depends on the singular vectors only through sign-invariant products
    lt = (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]
    ld = (U.narrow(-1, 0, k) * S.unsqueeze(-2)) @ Vh.narrow(-2, 0, k)
    lt2 = lt.pow(2).sum() + (u[..., :k].mT @ a).pow(4).sum()
    ld2 = ld.pow(2).sum() + (U.narrow(-1, 0, k).mT @ A).pow(4).sum()
    lt2.backward()
    ld2.backward()
    np.testing.assert_allclose(to_numpy(A.grad), to_numpy(a.grad), rtol=1e-6, atol=1e-8)


def test_svdvals_and_torch_svd(torch):
    a, A = _pair(torch, (4, 3), requires_grad=True, seed=1)
    r, R = torch.linalg.svdvals(a), dynograph.linalg.svdvals(A)
    assert_same(R, r, rtol=1e-10)
    assert R.grad_fn.name() == r.grad_fn.name()
    _backward_same(torch, [(a, A)], r, R)
    assert_same(dynograph.linalg.svdvals(A.detach()), r.detach(), rtol=1e-10)
    u, s, v = torch.svd(a.detach())
    U, S, V = dynograph.svd(A.detach())
    assert tuple(U.shape) == tuple(u.shape) and tuple(V.shape) == tuple(v.shape)
    np.testing.assert_allclose(to_numpy((U * S.unsqueeze(-2)) @ V.mT), to_numpy(a.detach()),
                               atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
def test_pinv_and_matrix_rank(torch, shape):
    a, A = _pair(torch, shape, requires_grad=True, seed=8)
    r, R = torch.linalg.pinv(a), dynograph.linalg.pinv(A)
    assert_same(R, r, rtol=1e-10)
    _backward_same(torch, [(a, A)], r, R, rtol=1e-6)
    assert_same(dynograph.pinverse(A.detach()), torch.pinverse(a.detach()), rtol=1e-10)
    low = a.detach()[..., :1] * a.detach()[..., :1, :].sum()      # rank 1
    assert_same(dynograph.linalg.matrix_rank(from_torch(low)), torch.linalg.matrix_rank(low))
    assert_same(dynograph.linalg.matrix_rank(A.detach()), torch.linalg.matrix_rank(a.detach()))
    sym = (a.detach()[..., :3, :3] + a.detach()[..., :3, :3].mT)
    assert_same(dynograph.linalg.pinv(from_torch(sym), hermitian=True),
                torch.linalg.pinv(sym, hermitian=True), rtol=1e-10)


def test_matrix_power_multi_dot_vecdot(torch):
    a, A = _well_conditioned(torch, (2, 3, 3))
    for n in (0, 1, 2, 5, -1, -3):
        a.grad, A.grad = None, None
        r, R = torch.linalg.matrix_power(a, n), dynograph.linalg.matrix_power(A, n)
        assert_same(R, r, rtol=1e-10)
        if n:
            _backward_same(torch, [(a, A)], r, R)
    x, X = _pair(torch, (3,), seed=1)
    m, M_ = _pair(torch, (3, 4), seed=2)
    y, Y = _pair(torch, (4,), seed=3)
    assert_same(dynograph.linalg.multi_dot([X, M_, Y]), torch.linalg.multi_dot([x, m, y]))
    assert_same(dynograph.linalg.multi_dot([M_.t(), M_]), torch.linalg.multi_dot([m.t(), m]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(dynograph.chain_matmul(M_.t(), M_, M_.t()), torch.chain_matmul(m.t(), m, m.t()))
    u, U = _pair(torch, (2, 4), seed=4)
    assert_same(dynograph.linalg.vecdot(U, Y), torch.linalg.vecdot(u, y))
    assert_same(dynograph.linalg.diagonal(M_, offset=1), torch.linalg.diagonal(m, offset=1))


def test_return_types_repr(torch):
    A = dynograph.tensor([[2.0, 0.0], [0.0, 3.0]])
    r = dynograph.linalg.slogdet(A)
    assert r.sign.item() == 1.0 and abs(r.logabsdet.item() - math.log(6.0)) < 1e-6
    assert repr(r).startswith("dynograph.return_types.linalg_slogdet(\nsign=")
    e = dynograph.linalg.eigh(A)
    assert e.eigenvalues.tolist() == [2.0, 3.0] and e.eigenvectors.shape == (2, 2)
    q = dynograph.linalg.qr(A)
    assert type(q).__name__ == "linalg_qr" and q.Q.shape == (2, 2)
    assert type(dynograph.slogdet(A)).__name__ == "slogdet"


def test_linalg_error_type():
    assert issubclass(dynograph.linalg.LinAlgError, RuntimeError)
    with pytest.raises(dynograph.linalg.LinAlgError, match="input matrix is singular"):
        dynograph.linalg.inv(dynograph.zeros(2, 2))


# ---------------------------------------------------------------- error texts (vs torch)

def _z(m, shape, dt="float32"):
    return m.zeros(*shape, dtype=getattr(m, dt)) if shape else m.zeros((), dtype=getattr(m, dt))


def _eye(m, n, batch=()):
    return m.ones(*batch, n).diag_embed()


ERRORS = {
    "mm dtype": lambda m: m.mm(_z(m, (2, 3)), _z(m, (3, 4), "float64")),
    "mm long/float": lambda m: m.mm(_z(m, (2, 3), "int64"), _z(m, (3, 4))),
    "mm bool": lambda m: m.mm(_z(m, (2, 3), "bool"), _z(m, (3, 4), "bool")),
    "mm 1d": lambda m: m.mm(_z(m, (3,)), _z(m, (3, 4))),
    "mm 3d": lambda m: m.mm(_z(m, (2, 3)), _z(m, (2, 3, 4))),
    "mm shape": lambda m: m.mm(_z(m, (2, 3)), _z(m, (4, 5))),
    "mm shape before dtype": lambda m: m.mm(_z(m, (2, 3)), _z(m, (4, 4), "float64")),
    "mm int arg": lambda m: m.mm(_z(m, (2, 3)), 3),
    "bmm 2d": lambda m: m.bmm(_z(m, (2, 3)), _z(m, (3, 4))),
    "bmm batch": lambda m: m.bmm(_z(m, (2, 2, 3)), _z(m, (3, 3, 4))),
    "bmm inner": lambda m: m.bmm(_z(m, (2, 2, 3)), _z(m, (2, 4, 4))),
    "bmm dtype": lambda m: m.bmm(_z(m, (2, 2, 3)), _z(m, (2, 3, 4), "float64")),
    "bmm bool": lambda m: m.bmm(_z(m, (2, 2, 3), "bool"), _z(m, (2, 3, 4), "bool")),
    "mv shape": lambda m: m.mv(_z(m, (2, 3)), _z(m, (4,))),
    "mv 1d": lambda m: m.mv(_z(m, (3,)), _z(m, (3,))),
    "mv dtype": lambda m: m.mv(_z(m, (2, 3)), _z(m, (3,), "float64")),
    "mv bool": lambda m: m.mv(_z(m, (2, 3), "bool"), _z(m, (3,), "bool")),
    "dot shape": lambda m: m.dot(_z(m, (3,)), _z(m, (4,))),
    "dot 2d": lambda m: m.dot(_z(m, (3, 1)), _z(m, (3,))),
    "dot dtype": lambda m: m.dot(_z(m, (3,)), _z(m, (3,), "float64")),
    "dot bool": lambda m: m.dot(_z(m, (3,), "bool"), _z(m, (3,), "bool")),
    "vdot dtype": lambda m: m.vdot(_z(m, (3,)), _z(m, (3,), "float64")),
    "matmul 0d": lambda m: m.matmul(_z(m, ()), _z(m, (3,))),
    "matmul dtype 2d": lambda m: m.matmul(_z(m, (2, 3)), _z(m, (3, 4), "float64")),
    "matmul dtype 1d": lambda m: m.matmul(_z(m, (3,)), _z(m, (3,), "float64")),
    "matmul dtype 3d": lambda m: m.matmul(_z(m, (2, 2, 3)), _z(m, (2, 3, 4), "float64")),
    "matmul dtype 3d2d": lambda m: m.matmul(_z(m, (2, 2, 3)), _z(m, (3, 4), "float64")),
    "matmul dtype 2d1d": lambda m: m.matmul(_z(m, (2, 3)), _z(m, (3,), "float64")),
    "matmul 3d1d": lambda m: m.matmul(_z(m, (2, 2, 3)), _z(m, (4,))),
    "matmul 1d3d": lambda m: m.matmul(_z(m, (4,)), _z(m, (2, 3, 4))),
    "matmul 4d4d": lambda m: m.matmul(_z(m, (2, 2, 2, 3)), _z(m, (2, 2, 4, 4))),
    "matmul batch": lambda m: m.matmul(_z(m, (3, 2, 2, 3)), _z(m, (2, 2, 3, 4))),
    "matmul bool": lambda m: m.matmul(_z(m, (2, 3), "bool"), _z(m, (3, 4), "bool")),
    "matmul list": lambda m: m.matmul(_z(m, (2, 3)), [1, 2, 3]),
    "@ int": lambda m: _z(m, (2, 3)) @ 3,
    "addmm expand": lambda m: m.addmm(_z(m, (3,)), _z(m, (2, 3)), _z(m, (3, 4))),
    "addmm self dtype": lambda m: m.addmm(_z(m, (2, 4), "float64"), _z(m, (2, 3)), _z(m, (3, 4))),
    "addmm mat dtype": lambda m: m.addmm(_z(m, (2, 4)), _z(m, (2, 3), "float64"), _z(m, (3, 4))),
    "addmm shape": lambda m: m.addmm(_z(m, (2, 4)), _z(m, (2, 3)), _z(m, (4, 4))),
    "addmm 1d": lambda m: m.addmm(_z(m, (2, 4)), _z(m, (3,)), _z(m, (3, 4))),
    "addmm bool": lambda m: m.addmm(_z(m, (2, 2), "bool"), _z(m, (2, 3), "bool"),
                                    _z(m, (3, 2), "bool")),
    "addmv size": lambda m: m.addmv(_z(m, (3,)), _z(m, (2, 3)), _z(m, (3,))),
    "addmv dtype": lambda m: m.addmv(_z(m, (2,), "float64"), _z(m, (2, 3)), _z(m, (3,))),
    "addmv 2d input": lambda m: m.addmv(_z(m, (2, 2)), _z(m, (2, 3)), _z(m, (3,))),
    "addmv 0d input": lambda m: m.addmv(_z(m, ()), _z(m, (2, 3)), _z(m, (4,))),
    "addbmm batches": lambda m: m.addbmm(_z(m, (2, 4)), _z(m, (5, 2, 3)), _z(m, (4, 3, 4))),
    "addbmm sizes": lambda m: m.addbmm(_z(m, (2, 4)), _z(m, (5, 2, 3)), _z(m, (5, 2, 4))),
    "addbmm 2d": lambda m: m.addbmm(_z(m, (2, 4)), _z(m, (5, 2, 3)), _z(m, (3, 4))),
    "addbmm dtype": lambda m: m.addbmm(_z(m, (2, 4), "float64"), _z(m, (5, 2, 3)),
                                       _z(m, (5, 3, 4))),
    "baddbmm expand": lambda m: m.baddbmm(_z(m, (3, 2, 4)), _z(m, (5, 2, 3)), _z(m, (5, 3, 4))),
    "baddbmm sizes": lambda m: m.baddbmm(_z(m, (5, 2, 4)), _z(m, (5, 2, 3)), _z(m, (5, 2, 4))),
    "baddbmm input dtype": lambda m: m.baddbmm(_z(m, (5, 2, 4), "int64"), _z(m, (5, 2, 3)),
                                               _z(m, (5, 3, 4))),
    "baddbmm dtype": lambda m: m.baddbmm(_z(m, (5, 2, 4)), _z(m, (5, 2, 3)),
                                         _z(m, (5, 3, 4), "float64")),
    "addr 2d": lambda m: m.addr(_z(m, (2, 3)), _z(m, (2, 1)), _z(m, (3,))),
    "addr int beta": lambda m: m.addr(_z(m, (2, 3), "int64"), _z(m, (2,), "int64"),
                                      _z(m, (3,), "int64"), beta=0.5),
    "outer 2d": lambda m: m.outer(_z(m, (2, 2)), _z(m, (3,))),
    "inner shape": lambda m: m.inner(_z(m, (2, 3)), _z(m, (4, 4))),
    "inner dtype": lambda m: m.inner(_z(m, (2, 3)), _z(m, (4, 3), "float64")),
    "trace bool": lambda m: m.trace(_z(m, (2, 3), "bool")),
    "trace 3d": lambda m: m.trace(_z(m, (2, 3, 3))),
    "cross no 3": lambda m: m.cross(_z(m, (2, 4)), _z(m, (2, 4))),
    "cross dim": lambda m: m.cross(_z(m, (3, 2)), _z(m, (3, 2)), dim=1),
    "linalg.cross dim": lambda m: m.linalg.cross(_z(m, (3, 2)), _z(m, (3, 2))),
    "linalg.cross broadcast": lambda m: m.linalg.cross(_z(m, (2, 3)), _z(m, (4, 3))),
    "linalg.cross dtype": lambda m: m.linalg.cross(_z(m, (2, 3)), _z(m, (2, 3), "float64")),
    "linalg.cross ndim": lambda m: m.linalg.cross(_z(m, (2, 3)), _z(m, (3,))),
    "inv singular": lambda m: m.linalg.inv(_z(m, (3, 3))),
    "inv singular batch": lambda m: m.linalg.inv(m.stack([_eye(m, 3), _z(m, (3, 3))])),
    "inv singular 4d": lambda m: m.linalg.inv(m.stack([_eye(m, 3)] * 3 + [_z(m, (3, 3))])
                                              .reshape(2, 2, 3, 3)),
    "inv partial pivot": lambda m: m.linalg.inv(m.tensor([[1., 2, 3], [2, 4, 6], [1, 1, 1]])),
    "inv nonsquare": lambda m: m.linalg.inv(_z(m, (2, 3))),
    "inv 1d": lambda m: m.linalg.inv(_z(m, (3,))),
    "inv long": lambda m: m.linalg.inv(_z(m, (3, 3), "int64")),
    "inv half": lambda m: m.linalg.inv(_z(m, (3, 3), "float16")),
    "solve shapes": lambda m: m.linalg.solve(_eye(m, 3), _z(m, (4, 3))),
    "solve singular": lambda m: m.linalg.solve(_z(m, (3, 3)), _z(m, (3,))),
    "solve singular batch": lambda m: m.linalg.solve(m.stack([_eye(m, 3), _z(m, (3, 3))]),
                                                     _z(m, (2, 3))),
    "solve vector": lambda m: m.linalg.solve(_eye(m, 3), _z(m, (4,))),
    "solve dtype": lambda m: m.linalg.solve(_eye(m, 3), _z(m, (3,), "float64")),
    "solve long": lambda m: m.linalg.solve(_z(m, (3, 3), "int64"), _z(m, (3,), "int64")),
    "solve right": lambda m: m.linalg.solve(_eye(m, 3), _z(m, (3, 2)), left=False),
    "solve broadcast": lambda m: m.linalg.solve(_eye(m, 3, (2,)), _z(m, (4, 3, 2))),
    "det nonsquare": lambda m: m.linalg.det(_z(m, (2, 3))),
    "det long": lambda m: m.linalg.det(_z(m, (3, 3), "int64")),
    "det half": lambda m: m.linalg.det(_z(m, (3, 3), "float16")),
    "slogdet 1d": lambda m: m.linalg.slogdet(_z(m, (3,))),
    "logdet long": lambda m: m.logdet(_z(m, (3, 3), "int64")),
    "cholesky not pd": lambda m: m.linalg.cholesky(-_eye(m, 3)),
    "cholesky not pd batch": lambda m: m.linalg.cholesky(m.stack([_eye(m, 3), -_eye(m, 3)])),
    "cholesky minor 2": lambda m: m.linalg.cholesky(m.tensor([[1., 2], [2, 1]])),
    "cholesky half": lambda m: m.linalg.cholesky(_z(m, (3, 3), "float16")),
    "qr mode": lambda m: m.linalg.qr(_z(m, (4, 3)), mode="foo"),
    "qr long": lambda m: m.linalg.qr(_z(m, (4, 3), "int64")),
    "eigh UPLO": lambda m: m.linalg.eigh(_eye(m, 3), UPLO="X"),
    "eigh long": lambda m: m.linalg.eigh(_z(m, (3, 3), "int64")),
    "eigh nonsquare": lambda m: m.linalg.eigh(_z(m, (2, 3))),
    "svd 1d": lambda m: m.linalg.svd(_z(m, (4,))),
    "svd half": lambda m: m.linalg.svd(_z(m, (4, 3), "float16")),
    "norm fro 1d": lambda m: m.linalg.norm(_z(m, (3,)), "fro"),
    "norm ord 3 matrix": lambda m: m.linalg.norm(_z(m, (2, 3)), 3),
    "norm 3 dims": lambda m: m.linalg.norm(_z(m, (2, 2, 2)), dim=(0, 1, 2)),
    "norm 3d ord": lambda m: m.linalg.norm(_z(m, (2, 2, 2)), 2),
    "matrix_norm order": lambda m: m.linalg.matrix_norm(_z(m, (2, 3)), "foo"),
    "matrix_norm long": lambda m: m.linalg.matrix_norm(_z(m, (2, 3), "int64")),
    "matrix_norm dims": lambda m: m.linalg.matrix_norm(_z(m, (2, 3, 4)), dim=(2, -1)),
    "matrix_norm half nuc": lambda m: m.linalg.matrix_norm(_z(m, (2, 3), "float16"), "nuc"),
    "matrix_norm dtype": lambda m: m.linalg.matrix_norm(_z(m, (2, 3)), dtype=m.float16),
    "einsum fewer": lambda m: m.einsum("ij,jk", _z(m, (2, 3))),
    "einsum more": lambda m: m.einsum("ij", _z(m, (2, 3)), _z(m, (3, 4))),
    "einsum ndim": lambda m: m.einsum("ijk", _z(m, (2, 3))),
    "einsum ndim ellipsis": lambda m: m.einsum("ijk...", _z(m, (2, 3))),
    "einsum size": lambda m: m.einsum("ij,jk", _z(m, (2, 3)), _z(m, (4, 4))),
    "einsum repeated size": lambda m: m.einsum("ii", _z(m, (2, 3))),
    "einsum output": lambda m: m.einsum("ij->k", _z(m, (2, 3))),
    "einsum output twice": lambda m: m.einsum("ij->ii", _z(m, (2, 3))),
    "einsum char": lambda m: m.einsum("i2", _z(m, (2, 3))),
    "einsum arrows": lambda m: m.einsum("ij->j->i", _z(m, (2, 3))),
    "einsum ellipsis twice": lambda m: m.einsum("......", _z(m, (2, 3))),
    "einsum dot": lambda m: m.einsum("i.j", _z(m, (2, 3))),
    "einsum dtype": lambda m: m.einsum("ij,jk", _z(m, (2, 3)), _z(m, (3, 4), "float64")),
    "einsum no operands": lambda m: m.einsum("i"),
    "einsum ellipsis broadcast": lambda m: m.einsum("...ij,...jk", _z(m, (5, 2, 3)),
                                                    _z(m, (4, 3, 4))),
    "tensordot negative": lambda m: m.tensordot(_z(m, (2, 3, 4)), _z(m, (4, 3, 5)), dims=-1),
    "tensordot too many": lambda m: m.tensordot(_z(m, (2, 3, 4)), _z(m, (4, 3, 5)), dims=4),
    "tensordot sizes": lambda m: m.tensordot(_z(m, (2, 3, 4)), _z(m, (4, 3, 5)), dims=([1], [0])),
    "tensordot lengths": lambda m: m.tensordot(_z(m, (2, 3, 4)), _z(m, (4, 3, 5)),
                                               dims=([1, 2], [1])),
    "tensordot dtype": lambda m: m.tensordot(_z(m, (2, 3)), _z(m, (3, 4), "float64"), dims=1),
    "tensordot ints": lambda m: m.tensordot(_z(m, (2, 3)), _z(m, (3, 4)), dims=(1, 0)),
    "tensordot duplicate": lambda m: m.tensordot(_z(m, (3, 3)), _z(m, (3, 3)),
                                                 dims=([0, 0], [0, 1])),
    "multi_dot dtype": lambda m: m.linalg.multi_dot([_z(m, (2, 3)), _z(m, (3, 3), "float64")]),
    "pinv long": lambda m: m.linalg.pinv(_z(m, (2, 3), "int64")),
}


def _outcome(fn, module):
    try:
        fn(module)
    except Exception as e:            # noqa: BLE001 - the type is part of what is compared
        kind = "LinAlgError" if "LinAlgError" in type(e).__name__ else type(e).__name__
        return kind, str(e)
    return ("no error",)


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_texts(torch, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _outcome(ERRORS[name], torch)
        got = _outcome(ERRORS[name], dynograph)
    assert expected[0] != "no error"
    assert got == expected


@pytest.mark.parametrize("sa,sb", [((3,), (2, 3, 4)), ((5, 2, 3), (3,)), ((2, 1, 2, 3), (4, 3, 2)),
                                   ((3,), (3, 4)), ((2, 3), (3,))])
def test_matmul_primitive_derivative(torch, sa, sb):
    # the one-step matmul op serves calls that record no gradient; its rule must still hold
    from dynograph._dispatch import call
    from dynograph.compiler.ops import linalg as L
    a, A = _pair(torch, sa, requires_grad=True, seed=1)
    b, B = _pair(torch, sb, requires_grad=True, seed=2)
    r, R = a @ b, call(L.matmul, A, B)
    assert_same(R, r, rtol=1e-12)
    _backward_same(torch, [(a, A), (b, B)], r, R)


def test_lapack_results_are_column_major(torch):
    # PyTorch's factorizations return each matrix stored column by column
    a, A = _well_conditioned(torch, (2, 3, 3), requires_grad=False)
    s, S = _spd(torch, (2, 3, 3))
    w, W = _pair(torch, (2, 4, 3))
    for f in (lambda m, x, s, w: m.linalg.inv(x), lambda m, x, s, w: m.linalg.cholesky(s),
              lambda m, x, s, w: m.linalg.solve(x, w.mT), lambda m, x, s, w: m.linalg.solve(x, w, left=False),
              lambda m, x, s, w: m.linalg.qr(w), lambda m, x, s, w: m.linalg.eigh(s),
              lambda m, x, s, w: m.linalg.svd(w), lambda m, x, s, w: m.linalg.pinv(w)):
        r, R = f(torch, a, s, w), f(dynograph, A, S, W)
        r, R = (r, R) if isinstance(r, tuple) else ((r,), (R,))
        assert [t.stride() for t in R] == [t.stride() for t in r]


def test_double_backward_through_products(torch):
    a, A = _pair(torch, (2, 3, 4), requires_grad=True, seed=1)
    b, B = _pair(torch, (4, 5), requires_grad=True, seed=2)
    c, C = _pair(torch, (2, 5, 3), requires_grad=True, seed=3)
    for f in (lambda m, x, y, z: (x @ y).tanh().sum(), lambda m, x, y, z: m.bmm(x @ y, z).sum(),
              lambda m, x, y, z: m.einsum("bij,jk,bkl->bil", x, y, z).pow(2).sum()):
        (ga, gb) = torch.autograd.grad(f(torch, a, b, c), (a, b), create_graph=True)
        (gA, gB) = dynograph.autograd.grad(f(dynograph, A, B, C), (A, B), create_graph=True)
        assert_same(gA, ga, rtol=1e-10)
        h = torch.autograd.grad((ga.pow(2).sum() + gb.sin().sum()), (a, b, c), allow_unused=True)
        H = dynograph.autograd.grad((gA.pow(2).sum() + gB.sin().sum()), (A, B, C), allow_unused=True)
        for x, X in zip(h, H):
            assert (x is None) == (X is None)
            if x is not None:
                assert_same(X, x, rtol=1e-9)


def test_out_arguments(torch):
    a, A = _pair(torch, (3, 3), seed=1)
    s, S = _spd(torch, (3, 3))
    out = dynograph.empty(0, dtype=dynograph.float64)
    assert dynograph.mm(A, A, out=out) is out
    assert_same(out, torch.mm(a, a))
    assert dynograph.linalg.inv(A, out=out) is out
    assert_same(out, torch.linalg.inv(a))
    assert dynograph.linalg.cholesky(S, out=out) is out
    assert_same(out, torch.linalg.cholesky(s))
    outs = (dynograph.empty(0, dtype=dynograph.float64), dynograph.empty(0, dtype=dynograph.float64))
    r = dynograph.linalg.eigh(S, out=outs)
    assert r[0] is outs[0] and r[1] is outs[1] and type(r).__name__ == "linalg_eigh"
    assert_same(outs[0], torch.linalg.eigh(s)[0])
    assert_same(dynograph.matrix_power(A, 3), torch.matrix_power(a, 3), rtol=1e-10)
    assert_same(A.matrix_power(-2), a.matrix_power(-2), rtol=1e-10)


@pytest.mark.parametrize("name", ["mm", "matmul", "addmm", "dot", "mv", "bmm", "outer", "inner", "kron",
                                  "cross", "trace", "linalg.inv", "det", "linalg.solve", "vdot", "ger",
                                  "linalg.cross", "linalg.vecdot", "baddbmm", "addr"])
@pytest.mark.parametrize("position", [0, 1])
def test_arguments_must_be_tensors(torch, name, position):
    nargs = 1 if name in ("trace", "linalg.inv", "det") else 3 if name in ("addmm", "baddbmm", "addr") else 2
    if position >= nargs:
        return

    def run(m):
        fn = m
        for part in name.split("."):
            fn = getattr(fn, part)
        args = [m.zeros(2, 2) for _ in range(nargs)]
        args[position] = [1]
        fn(*args)
    with pytest.raises(TypeError) as theirs:
        run(torch)
    with pytest.raises(TypeError, match=None) as ours:
        run(dynograph)
    assert str(ours.value) == str(theirs.value)

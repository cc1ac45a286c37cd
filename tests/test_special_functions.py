"""dynograph.special against torch.special: values over ranges that include the boundary
points (0, +-1, poles, infinities, NaN), dtypes (integer inputs promote, float16 where
torch has a kernel), size-0, batched and non-contiguous inputs, float64 gradients where
torch defines them, and torch's errors where it does not."""
import numpy as np
import pytest

import dynograph
from conftest import assert_same, assert_same_error, eval_expr, from_torch

SPECIAL_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 7.0, 30.0, -30.0, 1e-8, 1e-300,
                  float("inf"), float("-inf"), float("nan")]

UNARY = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "entr", "erfcx", "i0",
         "i0e", "i1", "i1e", "log_ndtr", "ndtr", "ndtri", "modified_bessel_i0",
         "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
         "expit", "gammaln", "psi", "sinc", "exp2", "expm1", "log1p", "erf", "erfc", "erfinv",
         "digamma", "logit"]
# inputs inside each function's domain, where gradients are finite
DOMAIN = {"ndtri": (0.02, 0.98), "logit": (0.05, 0.95), "erfinv": (-0.9, 0.9),
          "entr": (0.1, 3.0), "log1p": (-0.5, 3.0), "gammaln": (0.2, 4.0), "psi": (0.2, 4.0),
          "digamma": (0.2, 4.0)}
DIFFERENTIABLE = {"entr", "erfcx", "i0", "i0e", "i1", "i1e", "log_ndtr", "ndtr", "ndtri", "expit",
                  "gammaln", "psi", "sinc", "exp2", "expm1", "log1p", "erf", "erfc", "erfinv",
                  "digamma", "logit"}
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


def _close(ours, theirs, rtol=1e-6, atol=1e-8):
    assert_same(ours, theirs, rtol=rtol, atol=atol)


def _sample(torch, shape, lo, hi, dtype, seed=0, layout="contiguous"):
    g = np.random.default_rng(seed)
    t = torch.tensor(g.uniform(lo, hi, size=shape), dtype=getattr(torch, dtype))
    d = from_torch(t)
    if layout == "transposed":
        t, d = t.mT, d.mT
    return t, d


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_dtypes_and_layouts(torch, name):
    ft, fd = getattr(torch.special, name), getattr(dynograph.special, name)
    t = torch.tensor(SPECIAL_VALUES, dtype=torch.float64)
    _close(fd(from_torch(t)), ft(t), rtol=1e-5, atol=1e-12)
    lo, hi = DOMAIN.get(name, (-6.0, 6.0))
    for shape, layout in (((0,), "contiguous"), ((3, 0, 2), "contiguous"), ((4, 5), "transposed"),
                          ((2, 3, 4), "contiguous"), ((), "contiguous")):
        t, d = _sample(torch, shape, lo, hi, "float32", layout=layout)
        _close(fd(d), ft(t), rtol=2e-5, atol=1e-6)
    for dt in ("int64", "bool", "float16", "bfloat16"):
        t = torch.tensor([0, 1, 2, 3]).to(getattr(torch, dt))
        d = from_torch(t)
        want = eval_expr("f(x)", {"f": ft, "x": t})
        got = eval_expr("f(x)", {"f": fd, "x": d})
        if isinstance(want, Exception):
            assert_same_error(got, want, f"{name} {dt}")
        else:
            _close(got, want, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("name", UNARY)
def test_unary_gradients(torch, name):
    ft, fd = getattr(torch.special, name), getattr(dynograph.special, name)
    lo, hi = DOMAIN.get(name, (-4.0, 4.0))
    t, d = _sample(torch, (3, 4), lo, hi, "float64", seed=3)
    if name in ("i1", "i1e", "i0e", "sinc"):        # the removable singularity at 0
        t[0, 0], d[0, 0] = 0.0, 0.0
    t.requires_grad_(True)
    d.requires_grad_(True)
    rt, rd = ft(t), fd(d)
    assert rd.requires_grad == rt.requires_grad
    if name not in DIFFERENTIABLE:
        assert not rd.requires_grad
        return
    if name != "ndtr":              # a composite, as in torch
        assert rd.grad_fn.name() == rt.grad_fn.name()
    g = np.random.default_rng(1).standard_normal((3, 4))
    rt.backward(torch.tensor(g))
    rd.backward(dynograph.tensor(g))
    _close(d.grad, t.grad, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials(torch, name):
    ft, fd = getattr(torch.special, name), getattr(dynograph.special, name)
    xs = [-1.5, -1.0, -0.7, -0.2, 0.0, 0.3, 0.5, 0.99, 1.0, 1.3, 2.0, float("nan")]
    ns = [-2.0, 0.0, 1.0, 2.0, 3.0, 4.7, 7.0, 9.0, 12.0, 25.0]
    x = torch.tensor(xs, dtype=torch.float64)[:, None]
    n = torch.tensor(ns, dtype=torch.float64)
    _close(fd(from_torch(x), from_torch(n)), ft(x, n), rtol=1e-8, atol=1e-9)
    x = x[:-1]                  # torch's kernel for a Python degree mishandles NaN
    for k in (0, 3, 11):                                 # a Python degree
        _close(fd(from_torch(x), k), ft(x, k), rtol=1e-8, atol=1e-9)
    _close(fd(0.25, from_torch(n)), ft(0.25, n), rtol=1e-8, atol=1e-9)
    t = torch.tensor([[0, 1], [2, 3]])
    _close(fd(from_torch(t), from_torch(t)), ft(t, t), rtol=1e-6)    # integers promote to float
    _close(fd(from_torch(t.mT), 2), ft(t.mT, 2), rtol=1e-6)
    e = torch.empty(0, 3)
    _close(fd(from_torch(e), 2), ft(e, 2))
    h = torch.tensor([0.5]).half()
    assert_same_error(eval_expr("f(x, 2)", {"f": fd, "x": from_torch(h)}),
                      eval_expr("f(x, 2)", {"f": ft, "x": h}))
    assert_same_error(eval_expr("f(2.0, 3)", {"f": fd}), eval_expr("f(2.0, 3)", {"f": ft}))
    r = fd(dynograph.ones(3, dtype=dynograph.float64, requires_grad=True), 2)
    assert not r.requires_grad


BINARY = {"xlog1py": ([0.0, 1.0, -2.0, 3.5, float("nan")], [-1.0, 0.0, 2.0, float("nan"), -0.5, 10.0]),
          "zeta": ([1.0, 1.5, 2.0, 3.0, 0.5, 4.5], [0.5, 1.0, 2.0, -1.5, 0.0, 3.0]),
          "gammainc": ([0.5, 1.0, 2.0, 7.5, 0.0], [0.0, 0.5, 1.0, 3.0, 20.0, float("inf")]),
          "gammaincc": ([0.5, 1.0, 2.0, 7.5, 0.0], [0.0, 0.5, 1.0, 3.0, 20.0, float("inf")]),
          "xlogy": ([0.0, 1.0, -2.0, 3.5], [0.0, 2.0, float("nan"), 0.5])}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_and_gradients(torch, name):
    ft, fd = getattr(torch.special, name), getattr(dynograph.special, name)
    xs, ys = BINARY[name]
    x = torch.tensor(xs, dtype=torch.float64)[:, None]
    y = torch.tensor(ys, dtype=torch.float64)
    _close(fd(from_torch(x), from_torch(y)), ft(x, y), rtol=1e-9, atol=1e-12)
    xt = x.expand(-1, len(ys)).mT                       # non-contiguous
    _close(fd(from_torch(xt), from_torch(x[:, 0])), ft(xt, x[:, 0]), rtol=1e-9)
    e = torch.empty(2, 0)
    _close(fd(from_torch(e), from_torch(e)), ft(e, e))
    if name not in ("gammainc", "gammaincc"):
        _close(fd(from_torch(x), 2.0), ft(x, 2.0), rtol=1e-9)
        _close(fd(3.0, from_torch(y.abs() + 1)), ft(3.0, y.abs() + 1), rtol=1e-9)
    for dt in ("int64", "float16", "float32"):
        t = torch.tensor([1, 2, 3]).to(getattr(torch, dt))
        want = eval_expr("f(x, x)", {"f": ft, "x": t})
        got = eval_expr("f(x, x)", {"f": fd, "x": from_torch(t)})
        if isinstance(want, Exception):
            assert_same_error(got, want, f"{name} {dt}")
        else:
            _close(got, want, rtol=1e-3)
    # gradients (and torch's errors for the arguments it cannot differentiate)
    g = np.random.default_rng(0).uniform(1.2, 3.0, size=(2, 3))
    for needs in ((True, True), (False, True), (True, False)):
        a = torch.tensor(g, requires_grad=needs[0])
        b = torch.tensor(g[::-1].copy() + 0.5, requires_grad=needs[1])
        da, db = from_torch(a, needs[0]), from_torch(b, needs[1])
        rt, rd = ft(a, b), fd(da, db)
        assert rd.grad_fn.name() == rt.grad_fn.name()
        want = eval_expr("r.sum().backward()", {"r": rt})
        got = eval_expr("r.sum().backward()", {"r": rd})
        if isinstance(want, Exception):
            assert_same_error(got, want, name)
            continue
        for tt, dd in ((a, da), (b, db)):
            if tt.requires_grad:
                _close(dd.grad, tt.grad, rtol=1e-7, atol=1e-10)


def test_top_level_i0_igamma_and_methods(torch):
    t = torch.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=torch.float64)
    d = from_torch(t)
    _close(dynograph.i0(d), torch.i0(t))
    _close(d.i0(), t.i0())
    _close(dynograph.igamma(d, d), torch.igamma(t, t))
    _close(d.igammac(d + 1), t.igammac(t + 1))
    d2, t2 = d.clone(), t.clone()
    d2.igamma_(d)
    t2.igamma_(t)
    _close(d2, t2)
    d2.i0_()
    t2.i0_()
    _close(d2, t2)
    out_t, out_d = torch.empty(2, 2, dtype=torch.float64), dynograph.empty(2, 2, dtype=dynograph.float64)
    torch.special.i0e(t, out=out_t)
    dynograph.special.i0e(d, out=out_d)
    _close(out_d, out_t)
    assert_same_error(eval_expr("f(x, 2.0)", {"f": dynograph.igamma, "x": d}),
                      eval_expr("f(x, 2.0)", {"f": torch.igamma, "x": t}))


def test_the_aliases_and_the_reductions(torch):
    t = torch.tensor([[0.5, 1.0, 2.0], [2.0, 3.0, -1.0]], dtype=torch.float64)
    d = from_torch(t)
    _close(dynograph.special.logsumexp(d, 1), torch.special.logsumexp(t, 1))
    _close(dynograph.special.softmax(d, 0), torch.special.softmax(t, 0))
    _close(dynograph.special.log_softmax(d, 1, dtype=dynograph.float32),
           torch.special.log_softmax(t, 1, dtype=torch.float32))
    _close(dynograph.special.multigammaln(d + 2, 3), torch.special.multigammaln(t + 2, 3))
    _close(dynograph.special.polygamma(2, d), torch.special.polygamma(2, t))
    _close(dynograph.special.round(d * 1.37, decimals=1), torch.special.round(t * 1.37, decimals=1))


def test_every_torch_special_name_exists(torch):
    names = [n for n in dir(torch.special) if not n.startswith("_")
             and callable(getattr(torch.special, n)) and n not in ("Tensor",)]
    missing = [n for n in names if not hasattr(dynograph.special, n)]
    assert not missing

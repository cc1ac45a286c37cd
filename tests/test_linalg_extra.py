"""The rest of torch.linalg against torch: triangular, Cholesky and LU solves, the LU, LDL^T
and Cholesky-with-info factorizations, matrix_exp, cond, tensorinv/tensorsolve, vander,
householder_product and lstsq; values, dtypes, batched/broadcast, non-contiguous and empty
inputs, float64 gradients and the errors."""
import math

import numpy as np
import pytest

import dynograph
from conftest import assert_same_error, eval_expr


def _np(t):
    return t.detach().numpy() if isinstance(t, dynograph.Tensor) else t.detach().resolve_conj().numpy()


def _same(ours, theirs, rtol=1e-7, atol=1e-9, what=""):
    if isinstance(theirs, Exception):
        if type(theirs).__name__ == "_LinAlgError":     # torch.linalg.LinAlgError's own name
            assert type(ours).__name__ == "LinAlgError", f"{what}: {ours!r}"
            assert str(ours) == str(theirs).replace("torch.", "dynograph."), what
            return
        assert_same_error(ours, theirs, what)
        return
    assert not isinstance(ours, Exception), f"{what}: {ours!r}"
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs), what
        for a, b in zip(ours, theirs):
            _same(a, b, rtol, atol, what)
        return
    assert tuple(ours.shape) == tuple(theirs.shape), f"{what}: {tuple(ours.shape)} {tuple(theirs.shape)}"
    assert str(ours.dtype)[10:] == str(theirs.dtype)[6:], f"{what}: {ours.dtype} {theirs.dtype}"
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol, err_msg=what)


def _run(torch, expr, arrays, grad=True, rtol=1e-7, atol=1e-9, seed=5):
    """Evaluate ``expr`` (with T the module) on the same float64 inputs in both libraries,
    compare the results, then backpropagate one random cotangent and compare the gradients."""
    tin = {k: torch.tensor(v, requires_grad=grad and v.dtype.kind in "fc") for k, v in arrays.items()}
    din = {k: dynograph.tensor(v, requires_grad=grad and v.dtype.kind in "fc") for k, v in arrays.items()}
    theirs = eval_expr(expr, {"T": torch, "torch": torch, "math": math, **tin})
    ours = eval_expr(expr, {"T": dynograph, "torch": dynograph, "math": math, **din})
    _same(ours, theirs, rtol, atol, expr)
    if not grad or isinstance(theirs, Exception):
        return ours, theirs
    outs_t = list(theirs) if isinstance(theirs, (tuple, list)) else [theirs]
    outs_d = list(ours) if isinstance(ours, (tuple, list)) else [ours]
    g = np.random.default_rng(seed)
    lt, ld = 0, 0
    for t, d in zip(outs_t, outs_d):
        if t.requires_grad and t.is_complex() and t.numel():     # a real loss of both parts
            t, d = torch.view_as_real(t.resolve_conj()), dynograph.view_as_real(d)
        if t.requires_grad and t.dtype.is_floating_point and t.numel():
            w = g.standard_normal(tuple(t.shape))
            lt = lt + (t * torch.tensor(w)).sum()
            ld = ld + (d * dynograph.tensor(w)).sum()
    if isinstance(lt, int):
        return ours, theirs
    lt.backward()
    ld.backward()
    for k in arrays:
        if tin[k].requires_grad and tin[k].grad is not None:
            np.testing.assert_allclose(din[k].grad.numpy(), _np(tin[k].grad), rtol=1e-6,
                                       atol=1e-8, err_msg=f"grad {k} of {expr}")
    return ours, theirs


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _tri(n, upper, batch=(), seed=0):
    a = _rand(*batch, n, n, seed=seed)
    a = np.triu(a) if upper else np.tril(a)
    return a + 3 * np.eye(n) * np.sign(np.diagonal(a, axis1=-2, axis2=-1)[..., None] + 1e-9)


def _spd(n, batch=(), seed=0):
    a = _rand(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular(torch, upper, left):
    A = _tri(4, upper, (2,))
    B = _rand(2, 4, 3, seed=1) if left else _rand(2, 3, 4, seed=1)
    for unit in (False, True):
        _run(torch, f"T.linalg.solve_triangular(A, B, upper={upper}, left={left}, "
                    f"unitriangular={unit})", {"A": A, "B": B})
    _run(torch, f"T.linalg.solve_triangular(A[0], B, upper={upper}, left={left})",
         {"A": A, "B": B})                                                   # broadcast
    _run(torch, f"T.linalg.solve_triangular(A.mT.contiguous().mT, B[..., ::1], upper={upper}, "
                f"left={left})", {"A": A, "B": B})
    _run(torch, f"T.linalg.solve_triangular(A, B[:, :, :0] if {left} else B[:, :0], "
                f"upper={upper}, left={left})", {"A": A, "B": B})


def test_solve_triangular_errors(torch):
    A, B = _tri(3, True), _rand(3, 2)
    for expr in ("T.linalg.solve_triangular(A[0], B, upper=True)",
                 "T.linalg.solve_triangular(A, B.float(), upper=True)",
                 "T.linalg.solve_triangular(A, B.mT, upper=True)",
                 "T.linalg.solve_triangular(A[:2], B, upper=True)",
                 "T.linalg.solve_triangular(A.long(), B.long(), upper=True)"):
        _run(torch, expr, {"A": A, "B": B}, grad=False)


@pytest.mark.parametrize("upper", [True, False])
def test_triangular_and_cholesky_solves(torch, upper):
    A = _tri(4, upper, (2,))
    B = _rand(2, 4, 3, seed=1)
    for transpose in (False, True):
        for unit in (False, True):
            _run(torch, f"T.triangular_solve(B, A, upper={upper}, transpose={transpose}, "
                        f"unitriangular={unit})", {"A": A, "B": B})
    S = _spd(4, (2,))
    C = np.linalg.cholesky(S)
    C = np.swapaxes(C, -1, -2) if upper else C
    _run(torch, f"T.cholesky_solve(B, C, upper={upper})", {"C": C, "B": B})
    _run(torch, f"T.cholesky_solve(B[0], C, upper={upper})", {"C": C, "B": B})
    _run(torch, f"T.cholesky_inverse(C[1], upper={upper})", {"C": C})
    _run(torch, f"C.cholesky_inverse(upper={upper})", {"C": C})
    _run(torch, "T.cholesky_solve(B[0, 0], C)", {"C": C, "B": B}, grad=False)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (3, 5), (5, 3), (2, 4, 2), (0, 3, 3), (0, 0)])
def test_lu_family(torch, shape):
    A = _rand(*shape, seed=3)
    _run(torch, "T.linalg.lu_factor(A)", {"A": A})
    _run(torch, "T.linalg.lu_factor_ex(A)", {"A": A})
    _run(torch, "T.linalg.lu(A)", {"A": A})
    _run(torch, "T.lu_unpack(*T.linalg.lu_factor(A))", {"A": A})
    _run(torch, "T.lu_unpack(*T.linalg.lu_factor(A), unpack_pivots=False)", {"A": A})
    _run(torch, "T.lu(A)", {"A": A})
    _run(torch, "T.lu(A, get_infos=True)", {"A": A})
    _run(torch, "A.lu()", {"A": A})


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve(torch, left, adjoint):
    A = _rand(2, 4, 4, seed=4) + 4 * np.eye(4)
    B = _rand(2, 4, 3, seed=5) if left else _rand(2, 3, 4, seed=5)
    _run(torch, f"T.linalg.lu_solve(*T.linalg.lu_factor(A), B, left={left}, adjoint={adjoint})",
         {"A": A, "B": B})
    if left and not adjoint:
        _run(torch, "T.lu_solve(B, *T.linalg.lu_factor(A))", {"A": A, "B": B})
        _run(torch, "B.lu_solve(*T.linalg.lu_factor(A))", {"A": A, "B": B})


def test_lu_errors_and_singular(torch):
    S = np.array([[1.0, 2.0], [2.0, 4.0]])
    Z = np.zeros((2, 2, 2))
    for expr in ("T.linalg.lu_factor(S)", "T.linalg.lu_factor(Z)", "T.linalg.lu_factor(S[0])",
                 "T.linalg.lu_factor(S.long())", "T.linalg.lu_factor(S, pivot=False)",
                 "T.linalg.lu_factor_ex(Z, check_errors=True)",
                 "T.linalg.lu_solve(*T.linalg.lu_factor_ex(S)[:2], S[:1])",
                 "T.lu_unpack(S, T.ones(2))"):
        _run(torch, expr, {"S": S, "Z": Z}, grad=False)
    _run(torch, "T.linalg.lu_factor_ex(Z)", {"Z": Z}, grad=False)


def test_solve_inv_cholesky_with_info(torch):
    A = _rand(3, 4, 4, seed=6) + 4 * np.eye(4)
    B = _rand(3, 4, 2, seed=7)
    S = _spd(4, (3,))
    _run(torch, "T.linalg.solve_ex(A, B)", {"A": A, "B": B})
    _run(torch, "T.linalg.solve_ex(A, B[..., 0])", {"A": A, "B": B})
    _run(torch, "T.linalg.solve_ex(A, B.mT, left=False)", {"A": A, "B": B})
    _run(torch, "T.linalg.inv_ex(A)", {"A": A})
    _run(torch, "T.linalg.cholesky_ex(S)", {"S": S})
    _run(torch, "T.linalg.cholesky_ex(S, upper=True)", {"S": S})
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 1.0]]])
    notpd = np.array([[[1.0, 2.0], [2.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]]])
    for expr in ("T.linalg.inv_ex(X)[1]", "T.linalg.solve_ex(X, X)[1]", "T.linalg.cholesky_ex(Y)[1]",
                 "T.linalg.inv_ex(X)[0][1]", "T.linalg.cholesky_ex(Y)[0][1]",
                 "T.linalg.inv_ex(X, check_errors=True)", "T.linalg.cholesky_ex(Y, check_errors=True)"):
        _run(torch, expr, {"X": singular, "Y": notpd}, grad=False)


def test_matrix_exp(torch):
    for shape in ((3, 3), (2, 4, 4), (0, 2, 2), (1, 1)):
        A = _rand(*shape, seed=8) * 0.7
        _run(torch, "T.linalg.matrix_exp(A)", {"A": A})
        _run(torch, "T.matrix_exp(A)", {"A": A})
        _run(torch, "A.matrix_exp()", {"A": A})
    A = _rand(3, 3, seed=9)
    _run(torch, "T.linalg.matrix_exp(A.float())", {"A": A}, grad=False, rtol=1e-5, atol=1e-6)
    for expr in ("T.linalg.matrix_exp(A[0])", "T.linalg.matrix_exp(A[:2])",
                 "T.linalg.matrix_exp(A.long())"):
        _run(torch, expr, {"A": A}, grad=False)


def test_cond(torch):
    A = _rand(2, 3, 3, seed=10) + 2 * np.eye(3)
    W = _rand(2, 3, 5, seed=11)
    for p in (None, 2, -2, 1, -1, math.inf, -math.inf, "'fro'", "'nuc'"):
        # torch's own backward of cond through inv_ex fails for the norms other than 2
        _run(torch, f"T.linalg.cond(A, {p})", {"A": A}, rtol=1e-6, grad=p in (None, 2, -2))
    _run(torch, "T.linalg.cond(W)", {"W": W}, rtol=1e-6)
    _run(torch, "T.linalg.cond(W, -2)", {"W": W}, rtol=1e-6)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    for expr in ("T.linalg.cond(S, 1)", "T.linalg.cond(S, 'fro')", "T.linalg.cond(W, 1)",
                 "T.linalg.cond(W, 'nuc')", "T.linalg.cond(A, 3)", "T.linalg.cond(A, 'bad')",
                 "T.linalg.cond(A[0, 0])", "T.linalg.cond(E)"):
        _run(torch, expr, {"S": singular, "W": W, "A": A, "E": np.zeros((2, 0, 0))}, grad=False)


def test_ldl(torch):
    a = _rand(2, 4, 4, seed=12)
    S = a + np.swapaxes(a, -1, -2)                 # symmetric indefinite
    B = _rand(2, 4, 3, seed=13)
    _run(torch, "T.linalg.ldl_factor(S)", {"S": S}, grad=False)
    _run(torch, "T.linalg.ldl_factor_ex(S)", {"S": S}, grad=False)
    _run(torch, "T.linalg.ldl_solve(*T.linalg.ldl_factor(S), B)", {"S": S, "B": B}, grad=False)
    _run(torch, "T.linalg.ldl_factor(S[0].long())", {"S": S}, grad=False)
    for lib in (torch, dynograph):
        x = lib.tensor(S, requires_grad=True)
        LD, piv = lib.linalg.ldl_factor(x)
        err = eval_expr("LD.sum().backward()", {"LD": LD})
        assert isinstance(err, RuntimeError) and "linalg_ldl_factor_ex is not implemented" in str(err)


def test_householder_product(torch):
    for shape, k in (((4, 3), 3), ((2, 5, 3), 2), ((3, 3), 3), ((4, 2), 0)):
        A = _rand(*shape, seed=14)
        tau = np.random.default_rng(15).uniform(0.1, 1.5, size=shape[:-2] + (k,))
        _run(torch, "T.linalg.householder_product(A, tau)", {"A": A, "tau": tau}, grad=k > 0)
    A = _rand(3, 4, seed=16)
    for expr in ("T.linalg.householder_product(A, A[0, :2])",
                 "T.linalg.householder_product(A.mT, A[0])",
                 "T.linalg.householder_product(A.mT, A[:, :2])",
                 "T.linalg.householder_product(A.mT, A[0, :2].float())",
                 "T.linalg.householder_product(A[0], A[0])"):
        _run(torch, expr, {"A": A}, grad=False)


def test_tensorinv_tensorsolve(torch):
    A = _rand(4, 6, 8, 3, seed=17) + 0                      # 24 x 24
    A = (A.reshape(24, 24) + 6 * np.eye(24)).reshape(4, 6, 8, 3)
    _run(torch, "T.linalg.tensorinv(A, ind=2)", {"A": A})
    _run(torch, "T.linalg.tensorinv(A.reshape(24, 8, 3), ind=1)", {"A": A})
    B = _rand(4, 6, seed=18)
    _run(torch, "T.linalg.tensorsolve(A, B)", {"A": A, "B": B})
    _run(torch, "T.linalg.tensorsolve(A.permute(2, 0, 1, 3), B, dims=(0,))", {"A": A, "B": B})
    for expr in ("T.linalg.tensorinv(A, ind=0)", "T.linalg.tensorinv(A, ind=1)",
                 "T.linalg.tensorsolve(A, B[:3])"):
        _run(torch, expr, {"A": A, "B": B}, grad=False)


def test_vander(torch):
    x = np.array([1.0, -2.0, 0.5, 3.0])
    _run(torch, "T.linalg.vander(x)", {"x": x})
    _run(torch, "T.linalg.vander(x, N=6)", {"x": x})
    _run(torch, "T.linalg.vander(x.reshape(2, 2), N=3)", {"x": x})
    for expr in ("T.linalg.vander(x.long())", "T.linalg.vander(x.int(), N=3)",
                 "T.linalg.vander(x, N=1)", "T.linalg.vander(x.half())", "T.linalg.vander(x[0])"):
        _run(torch, expr, {"x": x}, grad=False)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq(torch, driver):
    d = "None" if driver is None else f"'{driver}'"
    for shape_a, shape_b in (((5, 3), (5, 2)), ((2, 6, 4), (2, 6, 3)), ((4, 4), (4, 1)),
                             ((6, 3), (6,)), ((2, 5, 3), (5, 2))):
        if driver == "gels" and len(shape_a) == 2 and shape_a[0] < shape_a[1]:
            continue
        A, B = _rand(*shape_a, seed=19), _rand(*shape_b, seed=20)
        if len(shape_b) == len(shape_a) - 1 and len(shape_a) == 3:
            continue
        _run(torch, f"tuple(T.linalg.lstsq(A, B, driver={d}))", {"A": A, "B": B}, rtol=1e-6, atol=1e-8)
    A = _rand(3, 5, seed=21)
    B = _rand(3, 2, seed=22)
    if driver in ("gelsy", "gelsd", "gelss"):                    # wide: the minimum-norm solution
        _run(torch, f"tuple(T.linalg.lstsq(A, B, driver={d}))", {"A": A, "B": B}, rtol=1e-6, atol=1e-8)


def test_lstsq_errors(torch):
    A, B = _rand(5, 3), _rand(5, 2)
    for expr in ("T.linalg.lstsq(A, B.float())", "T.linalg.lstsq(A, B[:4])",
                 "T.linalg.lstsq(A, B, driver='bad')", "T.linalg.lstsq(A[0], B[0])",
                 "T.linalg.lstsq(A, B[None, None])"):
        _run(torch, expr, {"A": A, "B": B}, grad=False)


def test_eig_and_complex_solves(torch):
    g = np.random.default_rng(23)
    for A in (g.standard_normal((4, 4)), g.standard_normal((2, 3, 3)),
              g.standard_normal((3, 3)) + 1j * g.standard_normal((3, 3)), np.zeros((0, 2, 2))):
        _run(torch, "T.linalg.eigvals(A)", {"A": A})
        # a loss that does not depend on each eigenvector's phase, as torch requires
        _run(torch, "(T.linalg.eig(A)[0], T.linalg.eig(A)[1].abs())", {"A": A})
    C = g.standard_normal((3, 3)) + 1j * g.standard_normal((3, 3)) + 3 * np.eye(3)
    B = g.standard_normal((3, 2)) + 1j * g.standard_normal((3, 2))
    _run(torch, "T.linalg.solve(C, B)", {"C": C, "B": B})
    _run(torch, "T.linalg.inv(C)", {"C": C})
    _run(torch, "C.mH @ C.H + C.adjoint()", {"C": C})
    for expr in ("T.linalg.eig(A[:, :2])", "T.linalg.eig(A.long())", "T.linalg.eig(A.half())"):
        _run(torch, expr, {"A": g.standard_normal((3, 3))}, grad=False)
    # the other decompositions do not take complex input (docs/complex.md)
    with pytest.raises(NotImplementedError, match="ComplexDouble"):
        dynograph.linalg.det(dynograph.tensor(C))


def test_every_torch_linalg_name_exists(torch):
    names = [n for n in dir(torch.linalg) if not n.startswith("_") and callable(getattr(torch.linalg, n))]
    assert sorted(n for n in names if not hasattr(dynograph.linalg, n)) == []


def test_top_level_vander(torch):
    x = np.array([1.0, -2.0, 0.5])
    for expr in ("T.vander(x)", "T.vander(x, N=5)", "T.vander(x, N=2, increasing=True)",
                 "T.vander(x, 1)", "T.vander(x.long())", "T.vander(x.int(), 3, True)",
                 "T.vander(x[:0], N=0)"):
        _run(torch, expr, {"x": x}, grad=False)     # torch's backward fails (in-place cumprod)
    for expr in ("T.vander(x[None])", "T.vander(x, N=-1)"):
        _run(torch, expr, {"x": x}, grad=False)

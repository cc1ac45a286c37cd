"""More LAPACK-backed primitives: triangular solves, the LU factorization (and the permutation
its pivots stand for), the matrix exponential and the LDL^T factorization with its solve.

Their companions (lu, lu_solve, lu_unpack, cholesky_solve, lstsq, cond, tensorsolve ...) are
composites in dynograph/_linalg_extra.py.  The derivative rules are PyTorch's; like PyTorch,
``ldl_factor`` and ``ldl_solve`` record a node that refuses to differentiate.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.lazy import LazyModule
from . import eager
from .core import TensorSpec, broadcast_shapes, define, type_name
from .linalg import LAPACK, check_float, check_matrix, check_square, colmajor

sla = LazyModule("scipy.linalg")
lapack = LazyModule("scipy.linalg.lapack")
NOT_IMPLEMENTED = "torch::autograd::NotImplemented"


def _no_derivative(name):
    def vjp(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return vjp


def _matrices(A):
    """(batch shape, the matrices as one (N, m, n) array)."""
    return A.shape[:-2], A.reshape((_count(A.shape[:-2]),) + A.shape[-2:])


def _count(batch):
    return int(np.prod(batch, dtype=np.int64))


def _batched(x, batch):
    """``x`` broadcast to ``batch`` and flattened to (N, ...matrix)."""
    return np.broadcast_to(x, batch + x.shape[-2:]).reshape((_count(batch),) + x.shape[-2:])


def _same_dtype(A, B, fn):
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{type_name(A.dtype)} and B of type {type_name(B.dtype)} instead")


# ---------------------------------------------------------------- solve_triangular

def _solve_triangular_meta(A, B, upper, left=True, unitriangular=False):
    fn = "linalg.solve_triangular"
    check_matrix(A, fn)
    check_matrix(B, fn, "B")
    _same_dtype(A, B, fn)
    if A.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for "
                                  f"'{type_name(A.dtype)}'")
    check_square(A, fn)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    return TensorSpec(batch + tuple(B.shape[-2:]), A.dtype)


def _solve_triangular(A, B, upper, left=True, unitriangular=False):
    if (A.ndim < 2 or B.ndim < 2 or A.dtype != B.dtype or A.dtype not in LAPACK
            or A.shape[-1] != A.shape[-2] or (B.shape[-2] if left else B.shape[-1]) != A.shape[-1]):
        raise ValueError("solve_triangular")
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    As, Bs = _batched(A, batch), _batched(B, batch)
    out = np.empty(Bs.shape, A.dtype)
    # BLAS trsm, as PyTorch: no singularity check (a zero pivot gives inf/nan, not an error)
    trsm = sla.blas.get_blas_funcs("trsm", (As,))
    for i, (a, b) in enumerate(zip(As, Bs)):
        if b.size:
            out[i] = trsm(1.0, a, b, side=0 if left else 1, lower=not upper,
                          diag=1 if unitriangular else 0)
    return out.reshape(batch + B.shape[-2:])


def _triangle(x, upper, unitriangular):
    x = x.triu() if upper else x.tril()
    return x.triu(1) + x.tril(-1) if unitriangular else x


def _solve_triangular_vjp(ctx, g):
    A, B = ctx.inputs
    a = ctx.attrs
    upper, left, unit = a["upper"], a.get("left", True), a.get("unitriangular", False)
    X = ctx.output
    gB = eager.call(linalg_solve_triangular, A.mT, g, upper=not upper, left=left,
                    unitriangular=unit)
    gA = None
    if ctx.needs(0):
        gA = _triangle(-(gB @ X.mT) if left else -(X.mT @ gB), upper, unit)
    return gA, ctx.needs(1) and gB


linalg_solve_triangular = define(
    "linalg_solve_triangular", "linalg", _solve_triangular, meta=_solve_triangular_meta,
    vjp=_solve_triangular_vjp, doc="X with A X = B (left) or X A = B for triangular A.")


# ---------------------------------------------------------------- Cholesky solve and inverse

def _cholesky_solve_meta(B, L, upper=False):
    for t, name in ((B, "b"), (L, "u")):
        if len(t.shape) < 2:
            raise RuntimeError(f"{name} should have at least 2 dimensions, but has "
                               f"{len(t.shape)} dimensions instead")
    if B.dtype is not L.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{type_name(B.dtype)} and A of type {type_name(L.dtype)} instead.")
    check_float(L.dtype, "cholesky_solve", "cholesky_solve_cpu")
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are {L.shape[-2]} by "
                           f"{L.shape[-1]} matrices")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{L.shape[-1]} by {L.shape[-1]} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    batch = broadcast_shapes(tuple(B.shape[:-2]), tuple(L.shape[:-2]))
    return TensorSpec(batch + tuple(B.shape[-2:]), B.dtype)


def _cholesky_solve(B, L, upper=False):
    if B.ndim < 2 or L.ndim < 2 or B.dtype != L.dtype or L.dtype not in LAPACK \
            or L.shape[-1] != L.shape[-2] or B.shape[-2] != L.shape[-1]:
        raise ValueError("cholesky_solve")
    batch = np.broadcast_shapes(B.shape[:-2], L.shape[:-2])
    Bs, Ls = _batched(B, batch), _batched(L, batch)
    out = np.empty(Bs.shape, B.dtype)
    potrs = lapack.get_lapack_funcs("potrs", (Ls,))
    for i in range(len(Bs)):
        if Bs[i].size:
            out[i] = potrs(Ls[i], Bs[i], lower=not upper)[0]
    return colmajor(out.reshape(batch + B.shape[-2:]))


def _cholesky_solve_vjp(ctx, g):
    # PyTorch's rule: the factor's gradient as if every entry of it were used
    B, L = ctx.inputs
    X = ctx.output
    gB = eager.call(cholesky_solve, g, L, upper=ctx.attrs.get("upper", False))
    gL = None
    if ctx.needs(1):
        common = gB @ X.mT
        common = common + common.mT
        gL = -(L @ common) if ctx.attrs.get("upper", False) else -(common @ L)
    return ctx.needs(0) and gB, gL


cholesky_solve = define("cholesky_solve", "linalg", _cholesky_solve, meta=_cholesky_solve_meta,
                        vjp=_cholesky_solve_vjp,
                        doc="X with A X = B from the Cholesky factor of A (LAPACK's potrs).")


def _cholesky_inverse_meta(L, upper=False):
    if len(L.shape) < 2:
        raise RuntimeError(f"Expected input to have at least 2 dimensions, but it has "
                           f"{len(L.shape)} dimensions instead")
    check_float(L.dtype, "cholesky_inverse", "cholesky_inverse_out_cpu")
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are {L.shape[-2]} by "
                           f"{L.shape[-1]} matrices")
    return TensorSpec(tuple(L.shape), L.dtype)


def _cholesky_inverse(L, upper=False):
    if L.ndim < 2 or L.dtype not in LAPACK or L.shape[-1] != L.shape[-2]:
        raise ValueError("cholesky_inverse")
    n = L.shape[-1]
    eye = np.broadcast_to(np.eye(n, dtype=L.dtype), L.shape)
    return _cholesky_solve(eye, L, upper)


def _cholesky_inverse_vjp(ctx, g):
    L, inverse = ctx.inputs[0], ctx.output
    common = inverse @ ((g + g.mT) @ inverse)
    return (-(L @ common) if ctx.attrs.get("upper", False) else -(common @ L),)


cholesky_inverse = define("cholesky_inverse", "linalg", _cholesky_inverse,
                          meta=_cholesky_inverse_meta, vjp=_cholesky_inverse_vjp,
                          doc="A^-1 from the Cholesky factor of A (LAPACK's potri).")


# ---------------------------------------------------------------- LU

def _lu_meta(A, pivot=True):
    if len(A.shape) < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A.shape)} instead")
    if A.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"lu_cpu\" not implemented for '{type_name(A.dtype)}'")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    *batch, m, n = A.shape
    batch = tuple(batch)
    return (TensorSpec(tuple(A.shape), A.dtype), TensorSpec(batch + (min(m, n),), D.int32),
            TensorSpec(batch, D.int32))


def _lu_factor(A, pivot=True):
    if A.ndim < 2 or A.dtype not in LAPACK or not pivot:
        raise ValueError("lu_factor")
    batch, mats = _matrices(A)
    m, n = A.shape[-2:]
    k = min(m, n)
    LU = np.empty(mats.shape, A.dtype)
    piv = np.empty((len(mats), k), np.int32)
    info = np.zeros(len(mats), np.int32)
    if k:
        getrf = lapack.get_lapack_funcs("getrf", (mats,))
        for i, a in enumerate(mats):
            lu, p, inf = getrf(a)
            LU[i], piv[i], info[i] = lu, p[:k] + 1, inf
    else:
        LU[...] = mats
    return colmajor(LU.reshape(A.shape)), piv.reshape(batch + (k,)), info.reshape(batch)


def unpack_lu(LU):
    """L (unit lower, m x k) and U (upper, k x n) from packed LU factors (tensor methods)."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    eye = LU.new_ones(k).diag_embed()
    if m > k:
        eye = eager.cat([eye, LU.new_zeros((m - k, k))], -2)
    return LU.narrow(-1, 0, k).tril(-1) + eye, LU.narrow(-2, 0, k).triu()


def _solve_tri(A, B, upper, left=True, unitriangular=False):
    return eager.call(linalg_solve_triangular, A, B, upper=upper, left=left,
                      unitriangular=unitriangular)


def _lu_vjp(ctx, gLU, gpiv=None, ginfo=None):
    """PyTorch's linalg_lu_backward for A = P L U, from the packed gradient."""
    LU, piv = ctx.output[0], ctx.output[1]
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    P = eager.call(lu_permutation, piv, m=m, dtype=LU.dtype)
    L, U = unpack_lu(LU)
    gL = gLU.narrow(-1, 0, k)
    gU = gLU.narrow(-2, 0, k)
    if m == n:
        gA = (L.mT @ gL).tril(-1) + (gU @ U.mT).triu()
        gA = _solve_tri(U.mT, gA, False, left=False)
        gA = _solve_tri(L.mT, gA, True, unitriangular=True)
    elif m < n:                                             # wide
        U1, U2g = U.narrow(-1, 0, k), gU.narrow(-1, k, n - k)
        gA = L.mT @ gL - gU.triu() @ U.mT
        gA = _solve_tri(U1.mT, gA.tril(-1), False, left=False)
        gA = eager.cat([gA + gU.narrow(-1, 0, k).triu(), U2g], -1)
        gA = _solve_tri(L.mT, gA, True, unitriangular=True)
    else:                                                   # tall
        L1, L2g = L.narrow(-2, 0, k), gL.narrow(-2, k, m - k)
        gA = gU @ U.mT - L.mT @ gL.tril(-1)
        gA = _solve_tri(L1.mT, gA.triu(), True, unitriangular=True)
        gA = eager.cat([gA + gL.narrow(-2, 0, k).tril(-1), L2g], -2)
        gA = _solve_tri(U.mT, gA, False, left=False)
    return (P @ gA,)


linalg_lu_factor_ex = define(
    "linalg_lu_factor_ex", "linalg", _lu_factor, meta=_lu_meta, vjp=_lu_vjp,
    doc="Packed LU factors of A = P L U (partial pivoting), LAPACK's 1-based pivots, info.")


def _permutation_meta(piv, m, dtype):
    return TensorSpec(tuple(piv.shape[:-1]) + (m, m), dtype)


def _permutation(piv, m, dtype):
    if piv.dtype.kind not in "iu":
        raise ValueError("lu_permutation")
    batch = piv.shape[:-1]
    pivs = piv.reshape(_count(batch), piv.shape[-1]).astype(np.int64) - 1
    P = np.zeros((len(pivs), m, m), dtype.np)
    for b, p in enumerate(pivs):
        perm = np.arange(m)
        for i, j in enumerate(p):
            if not 0 <= j < m:
                raise RuntimeError("lu_unpack: LU_pivots contain out-of-range entries")
            perm[i], perm[j] = perm[j], perm[i]
        P[b, perm, np.arange(m)] = 1
    return P.reshape(batch + (m, m))


lu_permutation = define(
    "lu_permutation", "other", _permutation, meta=_permutation_meta, differentiable=False,
    doc="The permutation matrix P of A = P L U from LAPACK's pivots (row i swapped with piv[i]).")


def _cholesky_info_meta(A, upper=False):
    check_square(A, "linalg.cholesky_ex")
    check_float(A.dtype, "linalg.cholesky_ex", "cholesky_cpu")
    return TensorSpec(tuple(A.shape), A.dtype), TensorSpec(tuple(A.shape[:-2]), D.int32)


def _cholesky_info(A, upper=False):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.dtype not in LAPACK:
        raise ValueError("cholesky_info")
    batch, mats = _matrices(A)
    out = np.zeros(mats.shape, A.dtype)
    info = np.zeros(len(mats), np.int32)
    potrf = lapack.get_lapack_funcs("potrf", (mats,))
    for i, a in enumerate(mats):
        c, info[i] = potrf(a, lower=not upper, clean=True)
        out[i] = c
    return colmajor(out.reshape(A.shape)), info.reshape(batch)


linalg_cholesky_info = define(
    "linalg_cholesky_info", "linalg", _cholesky_info, meta=_cholesky_info_meta,
    differentiable=False,
    doc="LAPACK's potrf as it stands: the (partial) Cholesky factor and info, the order of the "
        "first leading minor that is not positive-definite (0: none).")


# ---------------------------------------------------------------- matrix exponential

def _matrix_exp_meta(A):
    check_square(A, "linalg.matrix_exp")
    check_float(A.dtype, "linalg.matrix_exp", "linalg_matrix_exp_cpu")
    return TensorSpec(tuple(A.shape), A.dtype)


def _matrix_exp(A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.dtype not in LAPACK:
        raise ValueError("matrix_exp")
    if A.size == 0:
        return A.copy()
    return np.asarray(sla.expm(A), A.dtype)


def _matrix_exp_vjp(ctx, g):
    # d exp at A^T in direction g: the top-right block of exp([[A^T, g], [0, A^T]])
    A = ctx.inputs[0]
    n = A.shape[-1]
    At = A.mT
    top = eager.cat([At, g], -1)
    bottom = eager.cat([g.new_zeros(g.shape), At], -1)
    big = eager.call(linalg_matrix_exp, eager.cat([top, bottom], -2))
    return (big.narrow(-2, 0, n).narrow(-1, n, n),)


linalg_matrix_exp = define("linalg_matrix_exp", "linalg", _matrix_exp, meta=_matrix_exp_meta,
                           vjp=_matrix_exp_vjp, doc="The matrix exponential exp(A).")


# ---------------------------------------------------------------- LDL^T

def _ldl_meta(A, hermitian=False):
    check_square(A, "torch.linalg.ldl_factor_ex")
    check_float(A.dtype, "torch.linalg.ldl_factor_ex", "linalg_ldl_factor_ex_cpu")
    batch = tuple(A.shape[:-2])
    return (TensorSpec(tuple(A.shape), A.dtype), TensorSpec(batch + (A.shape[-1],), D.int32),
            TensorSpec(batch, D.int32))


def _ldl_factor(A, hermitian=False):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.dtype not in LAPACK:
        raise ValueError("ldl_factor")
    batch, mats = _matrices(A)
    n = A.shape[-1]
    LD = np.zeros(mats.shape, A.dtype)
    piv = np.zeros((len(mats), n), np.int32)
    info = np.zeros(len(mats), np.int32)
    if n:
        sytrf = lapack.get_lapack_funcs("sytrf", (mats,))
        for i, a in enumerate(mats):
            ld, p, inf = sytrf(a, lower=1)
            LD[i], piv[i], info[i] = np.tril(ld), p, inf
    return (colmajor(LD.reshape(A.shape)), piv.reshape(batch + (n,)), info.reshape(batch))


linalg_ldl_factor_ex = define(
    "linalg_ldl_factor_ex", "linalg", _ldl_factor, meta=_ldl_meta,
    vjp=_no_derivative("linalg_ldl_factor_ex"), grad_name=NOT_IMPLEMENTED,
    doc="The compact LDL^T (Bunch-Kaufman) factorization of a symmetric matrix: LD, pivots, info.")


def _ldl_solve_meta(LD, pivots, B, hermitian=False):
    fn = "torch.linalg.ldl_solve"
    check_square(LD, fn)
    check_matrix(B, fn, "B")
    _same_dtype(LD, B, fn)
    if B.shape[-2] != LD.shape[-1]:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation AX = B "
                           f"({LD.shape[-2]}x{LD.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    batch = broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    return TensorSpec(batch + tuple(B.shape[-2:]), B.dtype)


def _ldl_solve(LD, pivots, B, hermitian=False):
    if LD.ndim < 2 or B.ndim < 2 or LD.dtype != B.dtype or LD.dtype not in LAPACK \
            or B.shape[-2] != LD.shape[-1]:
        raise ValueError("ldl_solve")
    batch = np.broadcast_shapes(LD.shape[:-2], B.shape[:-2], pivots.shape[:-1])
    LDs, Bs = _batched(LD, batch), _batched(B, batch)
    Ps = np.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape((_count(batch), pivots.shape[-1]))
    out = np.empty(Bs.shape, B.dtype)
    sytrs = lapack.get_lapack_funcs("sytrs", (LDs,))
    for i in range(len(Bs)):
        if Bs[i].size:
            out[i] = sytrs(LDs[i], Ps[i], Bs[i], lower=1)[0]
    return colmajor(out.reshape(batch + B.shape[-2:]))


linalg_ldl_solve = define(
    "linalg_ldl_solve", "linalg", _ldl_solve, meta=_ldl_solve_meta,
    vjp=_no_derivative("linalg_ldl_solve"), grad_name=NOT_IMPLEMENTED,
    doc="X with A X = B from the LDL^T factors of A.")


# ---------------------------------------------------------------- eigen-decomposition

def _eig_meta(A):
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {type_name(A.dtype)}")
    check_square(A, "linalg.eig")
    check_float(A.dtype, "linalg.eig", "linalg_eig_out_cpu")
    cdt = A.dtype.to_complex()
    return TensorSpec(tuple(A.shape[:-1]), cdt), TensorSpec(tuple(A.shape), cdt)


def _eig(A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.dtype not in LAPACK:
        raise ValueError("eig")
    cdt = np.complex64 if A.dtype in (np.float32, np.complex64) else np.complex128
    if A.size == 0:
        return np.zeros(A.shape[:-1], cdt), np.zeros(A.shape, cdt)
    w, v = np.linalg.eig(A)
    return np.asarray(w, cdt), colmajor(np.asarray(v, cdt))


def _eig_vjp(ctx, gL, gV):
    """PyTorch's linalg_eig_backward: gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV)))
    / conj(E)) V^H with E_ij = L_j - L_i off the diagonal."""
    L, V = ctx.output
    Vh = V.mH
    n = L.shape[-1]
    if gV is None:
        gA = gL.diag_embed()
    else:
        VhgV = Vh @ gV
        diag = VhgV.diagonal(0, -2, -1)
        if float(diag.imag.abs().amax().item()) > 1e-2 if diag.numel() else False:
            raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are "
                               "specified up to multiplication by e^{i phi}. The specified loss "
                               "function depends on this quantity, so it is ill-defined.")
        VhgV = VhgV - Vh @ (V * diag.real.unsqueeze(-2))
        Lc = L.conj_physical()
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1)
        eye = L.new_ones(n).diag_embed().to(E.dtype) if n else E
        E = E + eye                                   # 1 on the diagonal
        gA = VhgV / E
        if gL is not None:
            gA = gA + gL.diag_embed()
    return (eager.solve(Vh, gA @ Vh),)


linalg_eig = define("linalg_eig", "linalg", _eig, meta=_eig_meta, vjp=_eig_vjp,
                    doc="Eigenvalues and eigenvectors of a general square matrix (complex).")

"""dynograph.linalg: PyTorch's ``torch.linalg`` namespace.

Decompositions (inv, solve, det, slogdet, cholesky, qr, eigh, svd) are primitives of the op
set; norms, pinv, matrix_rank, matrix_power, multi_dot and vecdot are composites of them,
written the way PyTorch writes them (so ``matrix_norm(A, 2)`` ends in an ``amax`` of
singular values, as in PyTorch).
"""
import builtins
import math

from dynograph.compiler.ops import linalg as L
from dynograph.compiler.ops.core import type_name, wrap_dim
from dynograph.runtime import dtypes as D
from ._dispatch import call
from ._linalg import finish, matmul, matmul_impl, need_tensor
from ._reduce import structseq, vector_norm
from ._tensor import Tensor
from .autograd.grad_mode import STATE

LinAlgError = L.LinAlgError

__all__ = ["LinAlgError", "matmul", "vector_norm", "matrix_norm", "norm", "inv", "solve", "det",
           "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
           "matrix_rank", "matrix_power", "multi_dot", "vecdot", "cross", "diagonal"]

_slogdet_t = structseq("linalg_slogdet", ("sign", "logabsdet"))
_qr_t = structseq("linalg_qr", ("Q", "R"))
_eigh_t = structseq("linalg_eigh", ("eigenvalues", "eigenvectors"))
_svd_t = structseq("linalg_svd", ("U", "S", "Vh"))


# ---------------------------------------------------------------- products

def cross(input, other, *, dim=-1, out=None):
    """Cross product of 3-vectors along ``dim`` (default: the last), broadcasting the others."""
    need_tensor(input, "linalg_cross", "input", 1)
    need_tensor(other, "linalg_cross", "other", 2)
    return finish(call(L.linalg_cross, input, other, dim=dim), out)


def vecdot(x, y, *, dim=-1, out=None):
    """Dot products of vectors along ``dim``, batched with broadcasting (linalg.vecdot)."""
    need_tensor(x, "linalg_vecdot", "x", 1)
    need_tensor(y, "linalg_vecdot", "y", 2)
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {type_name(x.dtype)} and y of type {type_name(y.dtype)} "
                           "instead")
    return finish((x * y).sum(dim), out)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices; the first and last may be vectors (linalg.multi_dot)."""
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        nd = t._data.ndim
        if i in (0, n - 1) and nd not in (1, 2):
            which = "first" if i == 0 else "last"
            raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {nd}D")
        if 0 < i < n - 1 and nd != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {nd}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {L.cpp_name(tensors[0].dtype)} and tensor {i} "
                               f"{L.cpp_name(t.dtype)}")
    result = tensors[0]
    for t in tensors[1:]:
        result = matmul_impl(result, t)
    return finish(result, out)


def matrix_power(A, n, *, out=None):
    """A @ A @ ... (n times) by repeated squaring; n < 0 uses inv(A); n = 0 the identity."""
    _check_square(A, "linalg.matrix_power")
    if n == 0:
        eye = A.new_ones(A._data.shape[-1]).diag_embed()
        return finish(eye.expand(tuple(A._data.shape)).clone(), out)
    if n < 0:
        A, n = inv(A), -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else matmul_impl(result, base)
        n >>= 1
        if n:
            base = matmul_impl(base, base)
    return finish(result, out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of (batches of) matrices (linalg.diagonal)."""
    return A.diagonal(offset, dim1, dim2)


# ---------------------------------------------------------------- norms

def _check_norm_dtype(A, dtype, fn):
    if dtype is None:
        return
    if not dtype.is_floating_point:
        raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got "
                           f"{type_name(dtype)}")
    if D.promote_types(A.dtype, dtype) is not dtype:
        raise RuntimeError(f"{fn}: the dtype of the input ({type_name(A.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({type_name(dtype)})")


def _matrix_norm_dims(A, dim, dtype, low_precision):
    fn = "linalg.matrix_norm"
    _check_matrix(A, fn)
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                           f"Got {type_name(A.dtype)}")
    if not low_precision and A.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {type_name(A.dtype)}")
    dim = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    if len(dim) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    dim = [wrap_dim(d, A._data.ndim) for d in dim]
    if dim[0] == dim[1]:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    _check_norm_dtype(A, dtype, fn)
    return dim


def _svdvals_last(A, dim, dtype):
    """Singular values of the matrices spanned by ``dim`` (moved to the end), and the order."""
    A_ = A if dtype is None else A.to(dtype)
    nd = A._data.ndim
    perm = [d for d in range(nd) if d not in dim] + dim
    return svdvals(A_.permute(perm)), perm


def _restore(result, perm, keepdim):
    if not keepdim:
        return result
    inv_perm = [0] * len(perm)
    for i, d in enumerate(perm):
        inv_perm[d] = i
    return result.unsqueeze(-1).permute(inv_perm)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """Matrix norms over ``dim``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2 (linalg.matrix_norm)."""
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
        dim = _matrix_norm_dims(A, dim, dtype, ord != "nuc")
        if ord == "fro":
            return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
        s, perm = _svdvals_last(A, dim, dtype)
        return finish(_restore(s.sum(-1, keepdim=keepdim), perm, keepdim), out)
    ord = builtins.float(ord)
    if abs(ord) not in (1.0, 2.0, math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {_num(ord)} not supported.")
    dim = _matrix_norm_dims(A, dim, dtype, abs(ord) != 2.0)

    def max_min(x, d, kd):
        if ord > 0 and x.shape[d] == 0:      # the largest of no values is 0 here, as in PyTorch
            return x.sum(d, keepdim=kd)
        return x.amax(d, keepdim=kd) if ord > 0 else x.amin(d, keepdim=kd)
    if abs(ord) == 2.0:
        s, perm = _svdvals_last(A, dim, dtype)
        return finish(_restore(max_min(s, -1, keepdim), perm, keepdim), out)
    d0, d1 = dim if abs(ord) == 1.0 else dim[::-1]
    if not keepdim and d0 < d1:
        d1 -= 1
    return finish(max_min(vector_norm(A, 1.0, d0, keepdim, dtype=dtype), d1, keepdim), out)


def _num(x):
    return str(int(x)) if builtins.float(x).is_integer() else str(x)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """Vector or matrix norm, chosen from ``ord`` and ``dim`` as PyTorch does (linalg.norm)."""
    nd = A._data.ndim
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        if len(dims) not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {dims}")
    elif ord is not None and nd not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {nd}D.")
    if isinstance(ord, str):
        if dim is not None and len(dims) not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is specified, it mut be of length 1 or 2. "
                               f"Got {dims}")
        return matrix_norm(A, ord, (0, 1) if dim is None else dims, keepdim, dtype=dtype, out=out)
    if ord is not None and ((dim is not None and len(dims) == 2) or (dim is None and nd == 2)):
        return matrix_norm(A, ord, (0, 1) if dim is None else dims, keepdim, dtype=dtype, out=out)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


# ---------------------------------------------------------------- decompositions

def _check_matrix(A, fn):
    if A._data.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")


def _check_square(A, fn):
    _check_matrix(A, fn)
    m, n = A._data.shape[-2:]
    if m != n:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are {m} by {n} "
                           "matrices")


def inv(A, *, out=None):
    """Inverse of (batches of) square matrices; LinAlgError names a singular one."""
    need_tensor(A, "linalg_inv", "A", 1)
    return finish(call(L.linalg_inv, A), out)


def solve(A, B, *, left=True, out=None):
    """X with A X = B (``left``) or X A = B, for (batches of) square A; B may be a vector."""
    need_tensor(A, "linalg_solve", "A", 1)
    need_tensor(B, "linalg_solve", "B", 2)
    if left:
        return finish(call(L.linalg_solve, A, B), out)
    return finish(call(L.linalg_solve, A, B, left=False), out)


def det(A, *, out=None):
    """Determinant of (batches of) square matrices."""
    need_tensor(A, "linalg_det", "A", 1)
    return finish(call(L.linalg_det, A), out)


def slogdet(A, *, out=None):
    """(sign, log|det|) of (batches of) square matrices: stable where det under/overflows."""
    return finish(_slogdet_t(call(L.linalg_slogdet, A)), out)


def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T (or U with A = U^T U when ``upper``) for positive-definite A."""
    if upper:
        return finish(call(L.linalg_cholesky, A, upper=True), out)
    return finish(call(L.linalg_cholesky, A), out)


def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = QR: mode 'reduced' (Q m x k), 'complete' (Q m x m) or 'r' (R only)."""
    return finish(_qr_t(call(L.linalg_qr, A, mode=mode)), out)


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors) of symmetric matrices, read from the UPLO triangle."""
    return finish(_eigh_t(call(L.linalg_eigh, A, UPLO=UPLO)), out)


def eigvalsh(A, UPLO="L", *, out=None):
    """Eigenvalues (ascending) of symmetric matrices."""
    return finish(call(L.linalg_eigh, A, UPLO=UPLO)[0], out)


def _needs_grad(A):
    return A.requires_grad and STATE.grad_enabled


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending."""
    return finish(_svd_t(call(L.linalg_svd, A, full_matrices=full_matrices)), out)


def svdvals(A, *, driver=None, out=None):
    """Singular values, descending (the vectors are computed only when a gradient needs them)."""
    if _needs_grad(A):
        return finish(call(L.linalg_svd, A, full_matrices=False)[1], out)
    return finish(call(L.linalg_svd, A, full_matrices=False, compute_uv=False)[1], out)


def _tolerances(A, atol, rtol, rcond=None):
    """PyTorch's pinv/matrix_rank tolerances: rtol defaults to eps * max(m, n) unless atol > 0."""
    if rcond is not None:
        rtol = rcond
    if rtol is None:
        positive_atol = atol is not None and (
            (atol > 0).all().item() if isinstance(atol, Tensor) else atol > 0)
        rtol = 0.0 if positive_atol else D.finfo(A.dtype).eps * builtins.max(A._data.shape[-2:])
    return (0.0 if atol is None else atol), rtol


def _as_tol(t):
    """A tolerance given per matrix (a tensor) broadcasts against the singular values."""
    return t.unsqueeze(-1) if isinstance(t, Tensor) else t


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None, rcond=None):
    """Moore-Penrose pseudo-inverse, discarding singular values below max(atol, rtol * s_max)."""
    if not (A.dtype in (D.float32, D.float64) and A._data.ndim >= 2):
        raise RuntimeError(f"linalg.pinv({type_name(A.dtype)}{{{list(A._data.shape)}}}): expected "
                           "a tensor with 2 or more dimensions of float, double, cfloat or cdouble "
                           "types")
    atol, rtol = _tolerances(A, atol, rtol, rcond)
    P = _pinv_value(A.detach(), atol, rtol, hermitian)
    if A.requires_grad and STATE.grad_enabled:
        # differentiate the pseudo-inverse itself, not the decomposition: the SVD's rule is
        # singular where singular values repeat or vanish, pinv's is not (PyTorch's pinv_backward)
        tangent = _pinv_tangent(A, P)
        P = P + (tangent - tangent.detach())
    return finish(P, out)


def _pinv_value(A, atol, rtol, hermitian):
    if A.numel() == 0:
        return A.new_zeros(tuple(A.shape[:-2]) + (A.shape[-1], A.shape[-2]))
    if hermitian:
        S, U = eigh(A)
        S_abs = S.abs()
        s_max = S_abs.amax(-1, keepdim=True) if S_abs.numel() else S_abs.sum(-1, keepdim=True)
        keep = S_abs > _maximum(_as_tol(atol), _as_tol(rtol) * s_max)
        return matmul(U * (1 / S).masked_fill(~keep, 0).unsqueeze(-2), U.mT)
    U, S, Vh = svd(A, full_matrices=False)
    tol = _maximum(_as_tol(atol), _as_tol(rtol) * S.narrow(-1, 0, 1))
    return matmul(Vh.mT * (1 / S).masked_fill(~(S > tol), 0).unsqueeze(-2), U.mT)


def _pinv_tangent(A, P):
    """dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P at A (P and A constant),
    applied to A: linear in A, so its vector-Jacobian product is pinv's."""
    A0, Pt = A.detach(), P.mT
    left = -matmul(A0, P)
    left.diagonal(0, -2, -1).add_(1)
    right = -matmul(P, A0)
    right.diagonal(0, -2, -1).add_(1)
    At = A.mT
    return (-matmul(matmul(P, A), P) + matmul(matmul(matmul(P, Pt), At), left)
            + matmul(matmul(right, At), matmul(Pt, P)))


def _maximum(a, b):
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        from ._math import maximum
        if not isinstance(a, Tensor):
            return b.clamp(min=a)
        if not isinstance(b, Tensor):
            return a.clamp(min=b)
        return maximum(a, b)
    return builtins.max(a, b)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None, tol=None):
    """Number of singular values above max(atol, rtol * s_max) (linalg.matrix_rank)."""
    if tol is not None:
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances(A, atol, rtol)
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    smax = S.amax(-1, keepdim=True) if S.numel() else S.sum(-1, keepdim=True)
    tol_t = _maximum(_as_tol(atol), _as_tol(rtol) * smax)
    return finish((S > tol_t).sum(-1), out)


# the factorizations, solves and matrix functions of dynograph/_linalg_extra.py
from ._linalg_extra import *  # noqa: F401,F403,E402
from ._linalg_extra import __all__ as _extra  # noqa: E402
__all__ += _extra

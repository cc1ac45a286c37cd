"""The rest of ``torch.linalg`` and its top-level relatives: triangular and LU solves, the LU,
Cholesky-with-info and LDL^T factorizations, matrix exponential, condition numbers, tensor
inverses and solves, Householder products, least squares and Vandermonde matrices.

The factorizations, triangular solve and matrix exponential are primitives
(compiler/ops/decompositions.py); everything else is written with them and the existing
functions, so gradients come from those (the values and gradients are PyTorch's; the
``grad_fn`` names of composites are those of their last op).
"""
import math

from dynograph.compiler.ops import decompositions as X
from dynograph.compiler.ops.core import type_name, wrap_dim
from dynograph.compiler.ops.linalg import LinAlgError
from dynograph.runtime import dtypes as D
from ._dispatch import call
from ._linalg import finish, need_tensor
from ._reduce import structseq
from ._shape import cat, movedim
from ._tensor import tensor_method

__all__ = ["eig", "eigvals", "solve_triangular", "lu_factor", "lu_factor_ex", "lu", "lu_solve",
           "solve_ex", "inv_ex",
          "cholesky_ex", "cond", "ldl_factor", "ldl_factor_ex", "ldl_solve", "householder_product",
          "tensorinv", "tensorsolve", "vander", "lstsq", "matrix_exp"]

_lu_factor_t = structseq("linalg_lu_factor", ("LU", "pivots"))
_lu_factor_ex_t = structseq("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_lu_t = structseq("linalg_lu", ("P", "L", "U"))
_lu_unpack_t = structseq("lu_unpack", ("P", "L", "U"))
_solve_ex_t = structseq("linalg_solve_ex", ("result", "info"))
_inv_ex_t = structseq("linalg_inv_ex", ("inverse", "info"))
_cholesky_ex_t = structseq("linalg_cholesky_ex", ("L", "info"))
_ldl_factor_t = structseq("linalg_ldl_factor", ("LD", "pivots"))
_ldl_factor_ex_t = structseq("linalg_ldl_factor_ex", ("LD", "pivots", "info"))
_triangular_solve_t = structseq("triangular_solve", ("solution", "cloned_coefficient"))
_lstsq_t = structseq("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_eig_t = structseq("linalg_eig", ("eigenvalues", "eigenvectors"))


def _la():
    from . import linalg
    return linalg


def _tensor(x, fn, name="A", pos=1):
    need_tensor(x, fn, name, pos)


def _at_least_2d(x, fn, name="A"):
    if x.dim() < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")


# ---------------------------------------------------------------- triangular solves

def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (``left``) or X A = B, A upper or lower triangular."""
    _tensor(A, "linalg_solve_triangular", "input", 1)
    _tensor(B, "linalg_solve_triangular", "B", 2)
    if A.dtype is not B.dtype:               # PyTorch promotes the two
        dt = D.promote_types(A.dtype, B.dtype)
        A, B = A.to(dt), B.to(dt)
    return finish(call(X.linalg_solve_triangular, A, B, upper=upper, left=left,
                       unitriangular=unitriangular), out)


def _solve_tri(A, B, upper, left=True, unitriangular=False):
    return call(X.linalg_solve_triangular, A, B, upper=upper, left=left, unitriangular=unitriangular)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """(X, A) with A X = b (A^T X = b when ``transpose``) for triangular A (legacy API); the
    keyword names are those of torch's binding (input, A)."""
    b = input
    _tensor(b, "triangular_solve", "input", 1)
    _tensor(A, "triangular_solve", "A", 2)
    for t, name in ((b, "b"), (A, "A")):
        if t.dim() < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {name} to have at least 2 "
                               f"dimensions, but it has {t.dim()} dimensions instead")
    coef = A.mT if transpose else A
    x = _solve_tri(coef, b, upper != transpose, unitriangular=unitriangular)
    batch = tuple(x.shape[:-2])
    r = _triangular_solve_t((x, A.expand(batch + tuple(A.shape[-2:])).clone()))
    return r if out is None else _triangular_solve_t(tuple(finish(v, o) for v, o in zip(r, out)))


def cholesky_solve(input, input2, upper=False, *, out=None):
    """X with A X = B, given the Cholesky factor of A (lower L, or upper U with A = U^T U);
    B is ``input`` and the factor ``input2``, as torch's binding names them."""
    B, L = input, input2
    _tensor(B, "cholesky_solve", "input", 1)
    _tensor(L, "cholesky_solve", "input2", 2)
    return finish(call(X.cholesky_solve, B, L, upper=upper), out)


def cholesky_inverse(input, upper=False, *, out=None):
    """The inverse of A from its Cholesky factor ``input``."""
    L = input
    _tensor(L, "cholesky_inverse", "input", 1)
    return finish(call(X.cholesky_inverse, L, upper=upper), out)


# ---------------------------------------------------------------- LU

def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """(LU, pivots, info): the packed LU factorization, info > 0 where U is singular."""
    _tensor(A, "linalg_lu_factor_ex")
    r = _lu_factor_ex_t(call(X.linalg_lu_factor_ex, A, pivot=pivot))
    if check_errors:
        _check_lu_info(r.info, "torch.linalg.lu_factor_ex")
    return r if out is None else _lu_factor_ex_t(tuple(finish(v, o) for v, o in zip(r, out)))


def _check_lu_info(info, fn):
    bad = (info > 0).nonzero()
    if bad.shape[0]:
        where = tuple(bad[0].tolist())
        n = int(info[where].item()) if info.dim() else int(info.item())
        batch = f"(Batch element {_flat_index(where, info.shape)}): " if info.dim() else ""
        raise RuntimeError(f"{fn}: {batch}U[{n},{n}] is zero and using it on lu_solve would result "
                          "in a division by zero. If you still want to perform the factorization, "
                          "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _flat_index(index, shape):
    flat = 0
    for i, n in zip(index, shape):
        flat = flat * n + i
    return flat


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of A = P L U; raises where U is singular."""
    _tensor(A, "linalg_lu_factor")
    LU, piv, info = call(X.linalg_lu_factor_ex, A, pivot=pivot)
    _check_lu_info(info, "torch.linalg.lu_factor")
    r = _lu_factor_t((LU, piv))
    return r if out is None else _lu_factor_t(tuple(finish(v, o) for v, o in zip(r, out)))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from packed LU factors and pivots (empty tensors for the parts not asked)."""
    _tensor(LU_data, "lu_unpack", "LU_data", 1)
    _tensor(LU_pivots, "lu_unpack", "LU_pivots", 2)
    if LU_pivots.dtype is not D.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "torch.int32 dtype.\nNote: this function is intended to be used with "
                           "the output produced by torch.linalg.lu_factor")
    m = LU_data.shape[-2]
    if unpack_pivots:
        P = call(X.lu_permutation, LU_pivots, m=m, dtype=LU_data.dtype)
    else:
        P = LU_data.new_empty((0,))
    if unpack_data:
        L, U = X.unpack_lu(LU_data)
    else:
        L, U = LU_data.new_empty((0,)), LU_data.new_empty((0,))
    r = _lu_unpack_t((P, L, U))
    return r if out is None else _lu_unpack_t(tuple(finish(v, o) for v, o in zip(r, out)))


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U."""
    _tensor(A, "linalg_lu")
    LU, piv, _ = call(X.linalg_lu_factor_ex, A, pivot=pivot)
    r = _lu_t(lu_unpack(LU, piv))
    return r if out is None else _lu_t(tuple(finish(v, o) for v, o in zip(r, out)))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (or X A = B, or with A^H) from the LU factors of A."""
    _tensor(LU, "linalg_lu_solve", "LU", 1)
    _tensor(pivots, "linalg_lu_solve", "pivots", 2)
    _tensor(B, "linalg_lu_solve", "B", 3)
    fn = "linalg.lu_solve"
    _at_least_2d(LU, fn, "LU")
    _at_least_2d(B, fn, "B")
    if LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are "
                           f"{LU.shape[-2]} by {LU.shape[-1]} matrices")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    P, L, U = lu_unpack(LU, pivots)
    if left and not adjoint:        # U^-1 L^-1 P^T B
        x = _solve_tri(U, _solve_tri(L, P.mT @ B, False, unitriangular=True), True)
    elif left:                      # P L^-T U^-T B
        x = P @ _solve_tri(L.mT, _solve_tri(U.mT, B, False), True, unitriangular=True)
    elif not adjoint:               # B U^-1 L^-1 P^T
        x = _solve_tri(L, _solve_tri(U, B, True, left=False), False, left=False,
                       unitriangular=True) @ P.mT
    else:                           # B P L^-T U^-T
        x = _solve_tri(U.mT, _solve_tri(L.mT, B @ P, True, left=False, unitriangular=True),
                       False, left=False)
    return finish(x, out)


def lu_legacy(A, pivot=True, get_infos=False, out=None):
    """torch.lu: (LU, pivots) or (LU, pivots, infos)."""
    r = lu_factor_ex(A, pivot=pivot)
    result = tuple(r) if get_infos else (r.LU, r.pivots)
    return result if out is None else tuple(finish(v, o) for v, o in zip(result, out))


def lu_solve_legacy(input, LU_data, LU_pivots, *, out=None):
    """torch.lu_solve(input, LU_data, LU_pivots): X with A X = input."""
    return lu_solve(LU_data, LU_pivots, input, out=out)


# ---------------------------------------------------------------- solve/inv/cholesky with info

def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """(X, info): ``linalg.solve`` that reports a singular A in ``info`` instead of raising."""
    _tensor(A, "linalg_solve_ex", "A", 1)
    _tensor(B, "linalg_solve_ex", "B", 2)
    la = _la()
    LU, piv, info = call(X.linalg_lu_factor_ex, A) if A.dim() >= 2 and \
        A.shape[-1] == A.shape[-2] else (None, None, None)
    if info is None or check_errors or not bool((info > 0).any()):
        result = la.solve(A, B, left=left)
    else:                       # the values LAPACK leaves for a singular A (inf/nan)
        vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
        Bm = B.unsqueeze(-1) if vector else B
        result = lu_solve(LU, piv, Bm, left=left)
        result = result.squeeze(-1) if vector else result
    r = _solve_ex_t((result, info))
    return r if out is None else _solve_ex_t(tuple(finish(v, o) for v, o in zip(r, out)))


def inv_ex(A, *, check_errors=False, out=None):
    """(A^-1, info): ``linalg.inv`` that reports a singular A in ``info`` instead of raising."""
    _tensor(A, "linalg_inv_ex")
    la = _la()
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        la.inv(A)               # the shape errors
    LU, piv, info = call(X.linalg_lu_factor_ex, A)
    if check_errors or not bool((info > 0).any()):
        inverse = _renamed(la.inv, "linalg.inv", "linalg.inv_ex", A)
    else:
        n = A.shape[-1]
        inverse = lu_solve(LU, piv, A.new_ones(n).diag_embed().expand(tuple(A.shape)))
    r = _inv_ex_t((inverse, info))
    return r if out is None else _inv_ex_t(tuple(finish(v, o) for v, o in zip(r, out)))


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): ``linalg.cholesky`` that reports a non-positive-definite A in ``info``."""
    _tensor(A, "linalg_cholesky_ex")
    la = _la()
    if A.dim() < 2 or A.shape[-1] != A.shape[-2] or A.numel() == 0:
        L = la.cholesky(A, upper=upper)
        r = _cholesky_ex_t((L, A.new_zeros(tuple(A.shape[:-2]), dtype=D.int32)))
    else:
        raw, info = call(X.linalg_cholesky_info, A, upper=upper)
        if check_errors or not bool((info > 0).any()):
            raw = _renamed(la.cholesky, "linalg.cholesky", "linalg.cholesky_ex", A, upper=upper)
        r = _cholesky_ex_t((raw, info))
    return r if out is None else _cholesky_ex_t(tuple(finish(v, o) for v, o in zip(r, out)))


def _renamed(fn, name, new_name, *args, **kwargs):
    """``fn(*args)``, its LinAlgError naming ``new_name`` (the _ex function called)."""
    try:
        return fn(*args, **kwargs)
    except LinAlgError as e:
        raise LinAlgError(str(e).replace(name + ":", new_name + ":", 1)) from None


# ---------------------------------------------------------------- LDL^T

def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """(LD, pivots, info): the compact Bunch-Kaufman LDL^T factorization."""
    _tensor(A, "linalg_ldl_factor_ex")
    r = _ldl_factor_ex_t(call(X.linalg_ldl_factor_ex, A, hermitian=hermitian))
    if check_errors:
        _check_ldl_info(r.info)
    return r if out is None else _ldl_factor_ex_t(tuple(finish(v, o) for v, o in zip(r, out)))


def _check_ldl_info(info):
    if bool((info > 0).any()):
        raise LinAlgError("torch.linalg.ldl_factor: The factorization could not be completed "
                          "because the input is not invertible.")


def ldl_factor(A, *, hermitian=False, out=None):
    """(LD, pivots) of the LDL^T factorization."""
    _tensor(A, "linalg_ldl_factor")
    LD, piv, info = call(X.linalg_ldl_factor_ex, A, hermitian=hermitian)
    _check_ldl_info(info)
    r = _ldl_factor_t((LD, piv))
    return r if out is None else _ldl_factor_t(tuple(finish(v, o) for v, o in zip(r, out)))


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """X with A X = B from the LDL^T factors of A."""
    _tensor(LD, "linalg_ldl_solve", "LD", 1)
    _tensor(pivots, "linalg_ldl_solve", "pivots", 2)
    _tensor(B, "linalg_ldl_solve", "B", 3)
    return finish(call(X.linalg_ldl_solve, LD, pivots, B, hermitian=hermitian), out)


# ---------------------------------------------------------------- eigen-decomposition

def eig(A, *, out=None):
    """(eigenvalues, eigenvectors) of a square matrix, both complex (eigenvectors of unit norm,
    as LAPACK's geev gives them)."""
    _tensor(A, "linalg_eig")
    r = _eig_t(call(X.linalg_eig, A))
    return r if out is None else _eig_t(tuple(finish(v, o) for v, o in zip(r, out)))


def eigvals(A, *, out=None):
    """The eigenvalues of a square matrix (complex)."""
    _tensor(A, "linalg_eigvals")
    return finish(call(X.linalg_eig, A)[0], out)


# ---------------------------------------------------------------- matrix functions

def matrix_exp(input, *, out=None):
    """The matrix exponential exp(A) = sum_k A^k / k! (torch.matrix_exp and
    torch.linalg.matrix_exp both name the matrix ``input``)."""
    _tensor(input, "linalg_matrix_exp", "input", 1)
    return finish(call(X.linalg_matrix_exp, input), out)


def cond(A, p=None, *, out=None):
    """The condition number of A in the norm ``p`` (2-norm by default: s_max / s_min)."""
    _tensor(A, "linalg_cond")
    la = _la()
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if isinstance(p, str):
        if p not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    elif p is not None and p not in (2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    dt = A.dtype.to_real()
    if A.numel() == 0:
        return finish(A.new_zeros(tuple(A.shape[:-2]), dtype=dt), out)
    if p is None or p in (2, -2):
        s = la.svdvals(A)
        hi, lo = s.narrow(-1, 0, 1), s.narrow(-1, s.shape[-1] - 1, 1)
        return finish((lo / hi if p == -2 else hi / lo).squeeze(-1), out)
    if isinstance(p, str):
        name = p
    elif math.isinf(p):
        name = "inf" if p > 0 else "-inf"
    else:
        name = str(int(p))
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={name}): A must be batches of square matrices, but "
                           f"they are {A.shape[-2]} by {A.shape[-1]} matrices")
    inverse, info = inv_ex(A)
    inverse = inverse.masked_fill((info > 0).unsqueeze(-1).unsqueeze(-1), math.inf)
    return finish(la.matrix_norm(A, p) * la.matrix_norm(inverse, p), out)


def tensorinv(A, ind=2, *, out=None):
    """The inverse of A seen as a linear map from its first ``ind`` dims to the others."""
    _tensor(A, "linalg_tensorinv")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    head, tail = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    n_head, n_tail = math.prod(head), math.prod(tail)
    if n_head != n_tail:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {n_tail} != {n_head}")
    return finish(_la().inv(A.reshape(n_tail, n_tail)).reshape(tail + head), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B."""
    _tensor(A, "linalg_tensorsolve", "A", 1)
    _tensor(B, "linalg_tensorsolve", "B", 2)
    if dims is not None:
        dims = [wrap_dim(d, A.dim()) for d in dims]
        A = movedim(A, dims, list(range(A.dim() - len(dims), A.dim())))
    result_shape = tuple(A.shape[B.dim():])
    n_result, n_b = math.prod(result_shape), math.prod(tuple(B.shape))
    if n_result != n_b:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) "
                           f"== prod(self.shape[:other.ndim]), but got {n_result} != {n_b}")
    x = _la().solve(A.reshape(n_result, n_result), B.flatten())
    return finish(x.reshape(result_shape), out)


def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T (LAPACK's orgqr)."""
    fn = "torch.linalg.householder_product"
    _tensor(A, "linalg_householder_product", "input", 1)
    _tensor(tau, "linalg_householder_product", "tau", 2)
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < tau.shape[-1] if tau.dim() else False:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if A.dim() - tau.dim() != 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got "
                           f"tau.ndim equal to {tau.dim()} and input.ndim is equal to {A.dim()}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{fn}: tau dtype {type_name(tau.dtype)} does not match input dtype "
                           f"{type_name(A.dtype)}")
    batch = tuple(A.shape[:-2])
    q = A.new_ones(m).diag_embed().narrow(-1, 0, n).expand(batch + (m, n))
    for i in reversed(range(tau.shape[-1])):
        v = cat([A.new_zeros(batch + (i,)), A.new_ones(batch + (1,)),
                 A[..., i + 1:, i]], -1).unsqueeze(-1)                     # (..., m, 1)
        q = q - tau[..., i, None, None] * (v @ (v.mT @ q))
    return finish(q, out)


def vander(x, *, N=None, out=None):
    """The Vandermonde matrix [1, x, x^2, ..., x^(N-1)] along a new last dim."""
    _tensor(x, "linalg_vander", "x", 1)
    if x.dtype in (D.float16, D.bfloat16, D.bool):
        raise RuntimeError("linalg.vander supports floating point, complex, and integer tensors, "
                           f"but got {type_name(x.dtype)}")
    x = x.unsqueeze(-1) if x.dim() == 0 else x
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    shape = tuple(x.shape) + (n - 1,)
    powers = x.unsqueeze(-1).expand(shape).cumprod(-1)
    return finish(cat([powers.new_ones(shape[:-1] + (1,)), powers], -1), out)


def vander_top_level(x, N=None, increasing=False):
    """torch.vander: the powers x^(N-1) ... x^0 of a 1-D tensor (ascending with ``increasing``),
    integers as int64."""
    _tensor(x, "vander", "x", 1)
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dt = D.promote_types(x.dtype, D.int64)
    x = x.to(dt)
    if n == 0:
        return x.new_empty((x.shape[0], 0))
    ones = x.new_ones((x.shape[0], 1))
    r = ones if n == 1 else cat([ones, x.unsqueeze(1).expand((x.shape[0], n - 1)).cumprod(1)], 1)
    return r if increasing else r.flip(1)


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values): the least-squares (minimum-norm) solution
    of A X = B, as PyTorch's drivers report it ('gelsy' by default on the CPU)."""
    fn = "torch.linalg.lstsq"
    _tensor(A, "linalg_lstsq", "self", 1)
    _tensor(B, "linalg_lstsq", "b", 2)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {type_name(A.dtype)} and other's dtype "
                           f"{type_name(B.dtype)}")
    if A.dim() < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    diff = A.dim() - B.dim()
    if not 0 <= diff <= 1:
        raise RuntimeError(f"{fn}: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    B2 = B.unsqueeze(-1) if diff else B
    if A.shape[-2] != B2.shape[-2]:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-{1 if diff else 2})")
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError(f"{fn}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if not A.dtype.is_floating_point or A.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{type_name(A.dtype)}")
    la = _la()
    m, n = A.shape[-2], A.shape[-1]
    if rcond is None:
        rcond = D.finfo(A.dtype).eps * max(m, n)
    batch = tuple(A.shape[:-2])
    x = la.pinv(A, rtol=rcond) @ B2
    x = x.squeeze(-1) if diff else x
    empty = A.new_empty((0,))
    if driver == "gels":
        rank = A.new_empty((0,), dtype=D.int64)
    else:
        rank = la.matrix_rank(A.detach(), rtol=rcond) if A.numel() else \
            A.new_zeros(batch, dtype=D.int64)
    svals = la.svdvals(A.detach()) if driver in ("gelsd", "gelss") else empty
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        r = A @ (x.unsqueeze(-1) if diff else x) - B2
        residuals = (r * r).sum(-2)
    return _lstsq_t((x, residuals, rank, svals))


# ---------------------------------------------------------------- top-level names and methods

for _name, _fn in (("cholesky_solve", cholesky_solve), ("cholesky_inverse", cholesky_inverse),
                   ("triangular_solve", triangular_solve), ("matrix_exp", matrix_exp),
                   ("lu", lu_legacy), ("lu_solve", lu_solve_legacy)):
    tensor_method(_fn, name=_name)

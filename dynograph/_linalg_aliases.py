"""torch's top-level forms of ``torch.linalg`` functions: ``svd`` (V, not Vh), ``qr``,
``slogdet``, ``matrix_power``, ``pinverse``, ``chain_matmul`` and ``norm`` (whose 'nuc' is a
matrix norm), with their Tensor methods.

They build on ``dynograph.linalg`` (linalg.py), which builds on the matrix products of
_linalg.py and the reductions of _reduce.py, so they live above all three.
"""

from dynograph.compiler.ops import linalg as L
from . import linalg
from ._dispatch import call
from ._linalg import finish
from ._reduce import numpy_names, structseq, vector_norm
from ._tensor import exporters

__all__ = []
_public, _function = exporters(__all__)


# the tuple types of the top-level aliases torch.slogdet, torch.qr, torch.svd
_slogdet_t = structseq("slogdet", ("sign", "logabsdet"))
_qr_t = structseq("qr", ("Q", "R"))
_svd_t = structseq("svd", ("U", "S", "V"))


@_function
def chain_matmul(*matrices, out=None):
    """Product of 2-D matrices left to right (deprecated in torch for linalg.multi_dot)."""
    if len(matrices) == 1:
        return finish(matrices[0].clone(), out)
    return finish(linalg.multi_dot(list(matrices)), out)


@_public
def slogdet(input):
    """(sign, log|det|) of (batches of) square matrices (torch.slogdet)."""
    return _slogdet_t(call(L.linalg_slogdet, input))


@_public
def qr(input, some=True, *, out=None):
    """(Q, R) of the QR decomposition, reduced unless ``some=False`` (torch.qr)."""
    QR = call(L.linalg_qr, input, mode="reduced" if some else "complete")
    return finish(_qr_t(QR), out)


@_public
def svd(input, some=True, compute_uv=True, *, out=None):
    """(U, S, V) with input = U diag(S) V^T (torch.svd; note V, not linalg.svd's Vh)."""
    if not compute_uv:
        S = linalg.svdvals(input)
        m, n = input._data.shape[-2:]
        batch = tuple(input._data.shape[:-2])
        U = input.new_zeros(batch + (m, m))
        V = input.new_zeros(batch + (n, n))
        return finish(_svd_t((U, S, V)), out)
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    return finish(_svd_t((U, S, Vh.mH)), out)


@_public
def matrix_power(input, n):
    """input @ input @ ... (n times; n < 0 inverts, n = 0 gives identities) (torch.matrix_power)."""
    return linalg.matrix_power(input, n)


@_public
def pinverse(input, rcond=1e-15):
    """Pseudo-inverse, singular values below rcond * max discarded (torch.pinverse)."""
    return linalg.pinv(input, rtol=rcond)


@_public
@numpy_names
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: vector p-norms (``p`` a number, 'fro' = 2-norm), or 'nuc' for matrices."""
    if isinstance(p, str):
        if p == "fro":
            p = 2
        elif p == "nuc":
            return finish(_nuclear_norm(input, dim, keepdim, dtype), out)
        else:
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    if p is None:
        p = 2
    return vector_norm(input, p, dim, keepdim, dtype=dtype, out=out)


def _nuclear_norm(input, dim, keepdim, dtype):
    """Sum of singular values over the two dims ``dim`` (the last two by default)."""
    x = input if dtype is None else input.to(dtype)
    dims = (-2, -1) if dim is None else tuple(dim)
    return linalg.matrix_norm(x, "nuc", dim=dims, keepdim=keepdim)

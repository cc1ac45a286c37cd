"""Linear-algebra primitives: the matrix products (dot, vdot, mv, mm, bmm and the fused
``add*`` forms), trace, cross and the LAPACK-backed decompositions (inv, solve, det, slogdet,
cholesky, qr, eigh, svd).  (The vector norm is a reduction: see reduction.py.)

``matmul``, ``einsum``, ``tensordot``, ``inner``, ``outer``, ``kron``, matrix norms, ``pinv`` ...
are composites of these (dynograph/_linalg.py), decomposed the way PyTorch decomposes them so
that ``grad_fn`` names match.

Conventions shared by the products:

* both operands must have one dtype (PyTorch does not promote in mm/bmm/mv/dot); ``impl``
  checks that, and the shapes, cheaply and raises ValueError, after which the dispatcher asks
  the meta rule for PyTorch's exact message;
* float16/bfloat16 accumulate in float32 and round once, as PyTorch's CPU kernels do;
* the decompositions accept float32/float64 only, like PyTorch's CPU LAPACK paths.
"""
import math

import numpy as np

from dynograph.runtime import dtypes as D, host_kernels
from . import eager
from ..lowering.direct import addmm_into, matmul_into
from .core import TensorSpec, broadcast_shapes, check_broadcast, define, type_name, wrap_dim
from .movement import expand_shape, prod

LAPACK = (np.dtype(np.float32), np.dtype(np.float64),      # complex: solve and inv only
           np.dtype(np.complex64), np.dtype(np.complex128))    # (compiler/ops/complex_numbers.py)
_BOOL = np.dtype(np.bool_)
_PRODUCTS = (np.dtype(np.float32), np.dtype(np.float64))   # what host_kernels.matmul takes
_INF = math.inf


class LinAlgError(RuntimeError):
    """A matrix that the factorization cannot handle (singular, not positive-definite)."""


LinAlgError.__module__ = "dynograph.linalg"


# ---------------------------------------------------------------- shared helpers

def cpp_name(dt):
    """The C++ scalar type name PyTorch prints in some kernel errors ('float', 'long int')."""
    return dt.type_meta_name


def _not_bool(dt, kernel):
    if dt is D.bool:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _lowp(fn, *xs):
    """``fn(*xs)``, computed in float32 for float16/bfloat16 inputs and rounded back."""
    dt = xs[0].dtype
    if D.is_half(dt):
        return np.asarray(fn(*[x.astype(np.float32) for x in xs])).astype(dt)
    return fn(*xs)


def _scalar_for(dt, v):
    """alpha/beta as the add* kernels use them: truncated to an integer for integer dtypes."""
    if dt.kind in "iu":
        return int(v)
    return v


def add_scaled(prod, inp, beta, alpha):
    """``beta * inp + alpha * prod`` into ``prod`` (fresh), ignoring ``inp`` when beta is 0."""
    dt = prod.dtype
    alpha = _scalar_for(dt, alpha)
    beta = _scalar_for(dt, beta)
    if alpha != 1:
        prod *= alpha
    if beta != 0:
        prod += inp if beta == 1 else inp * beta
    return prod


def _fused(fn, inp, *mats, beta=1, alpha=1):
    """An ``add*`` product: ``beta * inp + alpha * fn(*mats)``, low precision in float32."""
    dt = mats[0].dtype
    if D.is_half(dt):
        mats = [m.astype(np.float32) for m in mats]
        inp = inp.astype(np.float32)
        return add_scaled(np.asarray(fn(*mats)), inp, beta, alpha).astype(dt)
    out = np.asarray(fn(*mats))
    if not out.flags.writeable or out.base is not None:
        out = out.copy()
    return add_scaled(out, inp, beta, alpha)


def _fits(shape, target):
    """Whether ``shape`` broadcasts to ``target`` (a cheap np.broadcast_shapes check)."""
    if shape == target:
        return True
    if len(shape) > len(target):
        return False
    return all(n == 1 or n == m for n, m in zip(shape[::-1], target[::-1]))


def _mshape(shape):
    return "x".join(str(n) for n in shape)


def _check_expand(inp, shape):
    """addmm & co. broadcast their input to the product's shape with expand's errors."""
    if expand_shape(tuple(inp.shape), shape) is None:
        raise RuntimeError(
            f"expand(dynograph.{inp.dtype.tensor_type}{{{list(inp.shape)}}}, size={list(shape)}): the "
            f"number of sizes provided ({len(shape)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(inp.shape)})")


def _size(shape, dim):
    """``tensor.size(dim)`` with PyTorch's IndexError."""
    return shape[wrap_dim(dim, len(shape))]


# ---------------------------------------------------------------- dot, vdot

def _dot_meta(a, b):
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {len(a.shape)}D and {len(b.shape)}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError("dot : expected both vectors to have same dtype, but found "
                           f"{type_name(a.dtype)} and {type_name(b.dtype)}")
    if a.shape[0] != b.shape[0]:
        n, m = a.shape[0], b.shape[0]
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
            f"number of elements, but got {n} and {m} elements respectively")
    _not_bool(a.dtype, "dot")
    return TensorSpec((), a.dtype)


def _dot(a, b):
    if a.ndim != 1 or a.shape != b.shape or a.dtype != b.dtype or a.dtype == _BOOL:
        raise ValueError("dot")
    return np.asarray(_lowp(np.dot, a, b))


def _dot_vjp(ctx, g):
    a, b = ctx.inputs
    return (ctx.needs(0) and g * b, ctx.needs(1) and g * a)


dot = define("dot", "linalg", _dot, meta=_dot_meta, vjp=_dot_vjp,
             doc="Inner product of two 1-D tensors of one dtype.")
vdot = define("vdot", "linalg", _dot, meta=_dot_meta, vjp=_dot_vjp,
              doc="dot with the first argument conjugated (the same as dot for real tensors).")


# ---------------------------------------------------------------- mv, addmv

def _mv_meta(a, v):
    if len(a.shape) != 2 or len(v.shape) != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {len(a.shape)}, {len(v.shape)}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({_mshape(a.shape)}), "
                           f"vec ({v.shape[0]})")
    if a.dtype is not v.dtype:
        raise RuntimeError("addmv input tensors must have the same dtype, but got "
                           f"{type_name(v.dtype)}, {type_name(a.dtype)}, and {type_name(v.dtype)}")
    _not_bool(a.dtype, "addmv_impl_cpu")
    return TensorSpec((a.shape[0],), a.dtype)


def _mv(a, v):
    if a.ndim != 2 or v.ndim != 1 or a.shape[1] != v.shape[0] or a.dtype != v.dtype \
            or a.dtype == _BOOL:
        raise ValueError("mv")
    return _lowp(np.matmul, a, v)


def _mv_vjp(ctx, g):
    a, v = ctx.inputs
    return (ctx.needs(0) and g.unsqueeze(1) * v,
            ctx.needs(1) and a.t().mv(g))


mv = define("mv", "linalg", _mv, meta=_mv_meta, vjp=_mv_vjp, doc="Matrix @ vector.")


def _addmv_meta(inp, a, v, beta=1, alpha=1):
    if len(a.shape) != 2 or len(v.shape) != 1 or len(inp.shape) > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {len(inp.shape)}, "
                           f"{len(a.shape)}, {len(v.shape)}")
    n = inp.shape[0] if inp.shape else None
    if a.shape[1] != v.shape[0] or (n is not None and n not in (1, a.shape[0])):
        if n is None:
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({_mshape(a.shape)}), "
                           f"vec ({v.shape[0]})")
    if not inp.dtype is a.dtype is v.dtype:
        raise RuntimeError("addmv input tensors must have the same dtype, but got "
                           f"{type_name(inp.dtype)}, {type_name(a.dtype)}, and {type_name(v.dtype)}")
    _not_bool(a.dtype, "addmv_impl_cpu")
    return TensorSpec((a.shape[0],), a.dtype)


def _addmv(inp, a, v, beta=1, alpha=1):
    if inp.ndim > 1 or inp.dtype != a.dtype or inp.shape not in ((), (1,), (a.shape[0],)):
        raise ValueError("addmv")
    if a.ndim != 2 or v.ndim != 1 or a.shape[1] != v.shape[0] or a.dtype != v.dtype \
            or a.dtype == _BOOL:
        raise ValueError("addmv")
    return _fused(np.matmul, inp, a, v, beta=beta, alpha=alpha)


def _scaled(t, s):
    return t if s == 1 else t * s


def _addmv_vjp(ctx, g):
    _, a, v = ctx.inputs
    beta, alpha = ctx.attrs.get("beta", 1), ctx.attrs.get("alpha", 1)
    return (ctx.needs(0) and _scaled(g, beta),
            ctx.needs(1) and _scaled(g.unsqueeze(1) * v, alpha),
            ctx.needs(2) and _scaled(a.t().mv(g), alpha))


addmv = define("addmv", "linalg", _addmv, meta=_addmv_meta, vjp=_addmv_vjp,
               doc="beta * input + alpha * (mat @ vec).")


# ---------------------------------------------------------------- mm, addmm

def _mm_meta(a, b):
    if len(a.shape) != 2:
        raise RuntimeError("self must be a matrix")
    if len(b.shape) != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_mshape(a.shape)} and "
                           f"{_mshape(b.shape)})")
    if a.dtype is not b.dtype:
        raise RuntimeError("expected m1 and m2 to have the same dtype, but got: "
                           f"{cpp_name(a.dtype)} != {cpp_name(b.dtype)}")
    _not_bool(a.dtype, "addmm_impl_cpu_")
    return TensorSpec((a.shape[0], b.shape[1]), a.dtype)


def _mm(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype \
            or a.dtype == _BOOL:
        raise ValueError("mm")
    if a.dtype in _PRODUCTS:      # large products on the backend's threads (host_kernels)
        out = host_kernels.matmul(a, b)
        if out is not None:
            return out
    return _lowp(np.dot, a, b)         # np.dot: see conv._gemm on np.matmul's slow layouts


def _mm_vjp(ctx, g):
    a, b = ctx.inputs
    return (ctx.needs(0) and g.mm(b.t()), ctx.needs(1) and mat2_grad(a, b, g))


def mat2_grad(a, b, g):
    """The gradient of ``b`` in ``a @ b``: ``a.t() @ g``, laid out as ``b`` when ``b`` is
    column-major (nn.Linear's transposed weight), as PyTorch's mm_mat2_backward computes it,
    so that the weight's own gradient (through the transpose) is contiguous."""
    n, m = b.shape
    if b.stride() == (1, n) and n > 1 and m > 1:
        return g.t().mm(a).t()
    return a.t().mm(g)


mm = define("mm", "linalg", _mm, meta=_mm_meta, vjp=_mm_vjp, doc="Matrix @ matrix.",
            kernel=matmul_into)


def _addmm_meta(inp, a, b, beta=1, alpha=1):
    for name, m in (("mat1", a), ("mat2", b)):
        if len(m.shape) != 2:
            raise RuntimeError(f"{name} must be a matrix, got {len(m.shape)}-D tensor")
    if inp.dtype is not b.dtype:
        raise RuntimeError("self and mat2 must have the same dtype, but got "
                           f"{type_name(inp.dtype)} and {type_name(b.dtype)}")
    if a.dtype is not b.dtype:
        raise RuntimeError("mat1 and mat2 must have the same dtype, but got "
                           f"{type_name(a.dtype)} and {type_name(b.dtype)}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_mshape(a.shape)} and "
                           f"{_mshape(b.shape)})")
    shape = (a.shape[0], b.shape[1])
    _check_expand(inp, shape)
    _not_bool(a.dtype, "addmm_impl_cpu_")
    return TensorSpec(shape, a.dtype)


def _addmm(inp, a, b, beta=1, alpha=1):
    shape = (a.shape[0], b.shape[1]) if a.ndim == 2 and b.ndim == 2 else None
    if shape is None or a.shape[1] != b.shape[0] or not inp.dtype == a.dtype == b.dtype \
            or a.dtype == _BOOL or not _fits(inp.shape, shape):
        raise ValueError("addmm")
    if a.dtype in _PRODUCTS and type(alpha) in (int, float) and type(beta) in (int, float):
        out = host_kernels.matmul(a, b, inp, alpha, beta)
        if out is not None:
            return out
    return _fused(np.matmul, inp, a, b, beta=beta, alpha=alpha)


def _addmm_vjp(ctx, g):
    _, a, b = ctx.inputs
    beta, alpha = ctx.attrs.get("beta", 1), ctx.attrs.get("alpha", 1)
    return (ctx.needs(0) and _scaled(g, beta),
            ctx.needs(1) and _scaled(g.mm(b.t()), alpha),
            ctx.needs(2) and _scaled(mat2_grad(a, b, g), alpha))


addmm = define("addmm", "linalg", _addmm, meta=_addmm_meta, vjp=_addmm_vjp,
               doc="beta * input + alpha * (mat1 @ mat2): nn.Linear's kernel.", kernel=addmm_into)


# ---------------------------------------------------------------- bmm, baddbmm, addbmm

def _bmm_shapes(a, b):
    if len(a.shape) != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if len(b.shape) != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, "
            f"{a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")


def _bmm_dtypes(a, b, kernel):
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"expected scalar type {type_name(a.dtype)} but found {type_name(b.dtype)}")
    _not_bool(a.dtype, kernel)


def _bmm_meta(a, b):
    _bmm_shapes(a, b)
    _bmm_dtypes(a, b, "bmm")
    return TensorSpec((a.shape[0], a.shape[1], b.shape[2]), a.dtype)


def _bmm(a, b):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] \
            or a.dtype != b.dtype or a.dtype == _BOOL:
        raise ValueError("bmm")
    if a.dtype in _PRODUCTS:      # large batches on the backend's threads (host_kernels)
        out = host_kernels.matmul(a, b)
        if out is not None:
            return out
    return _lowp(np.matmul, a, b)


def _bmm_vjp(ctx, g):
    a, b = ctx.inputs
    return (ctx.needs(0) and g.bmm(b.transpose(1, 2)),
            ctx.needs(1) and a.transpose(1, 2).bmm(g))


bmm = define("bmm", "linalg", _bmm, meta=_bmm_meta, vjp=_bmm_vjp,
             doc="Batched matrix @ matrix over 3-D tensors (no broadcasting).")


def _baddbmm_meta(inp, a, b, beta=1, alpha=1):
    shape = (_size(a.shape, 0), _size(a.shape, 1), _size(b.shape, 2))
    _check_expand(inp, shape)
    if len(a.shape) != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if len(b.shape) != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if inp.dtype is not a.dtype:
        raise RuntimeError(
            f"Input dtypes must be the same, got: input {cpp_name(inp.dtype)}, batch1: "
            f"{cpp_name(a.dtype)}, batch2: {cpp_name(b.dtype)}")
    _bmm_shapes(a, b)
    _bmm_dtypes(a, b, "baddbmm")
    return TensorSpec(shape, a.dtype)


def _baddbmm(inp, a, b, beta=1, alpha=1):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] \
            or a.dtype != b.dtype or a.dtype == _BOOL:
        raise ValueError("baddbmm")
    shape = (a.shape[0], a.shape[1], b.shape[2])
    if inp.dtype != a.dtype or not _fits(inp.shape, shape):
        raise ValueError("baddbmm")
    return _fused(np.matmul, inp, a, b, beta=beta, alpha=alpha)


def _baddbmm_vjp(ctx, g):
    _, a, b = ctx.inputs
    beta, alpha = ctx.attrs.get("beta", 1), ctx.attrs.get("alpha", 1)
    return (ctx.needs(0) and _scaled(g, beta),
            ctx.needs(1) and _scaled(g.bmm(b.transpose(1, 2)), alpha),
            ctx.needs(2) and _scaled(a.transpose(1, 2).bmm(g), alpha))


baddbmm = define("baddbmm", "linalg", _baddbmm, meta=_baddbmm_meta, vjp=_baddbmm_vjp,
                 doc="beta * input + alpha * bmm(batch1, batch2).")


def _addbmm_meta(inp, a, b, beta=1, alpha=1):
    shape = (_size(a.shape, 1), _size(b.shape, 2))
    _check_expand(inp, shape)
    if len(a.shape) != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if len(b.shape) != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} "
                           f"and {b.shape[0]}")
    if a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({_mshape(a.shape[1:])} and "
                           f"{_mshape(b.shape[1:])})")
    if a.shape[0]:
        if inp.dtype is not b.dtype:
            raise RuntimeError("self and mat2 must have the same dtype, but got "
                               f"{type_name(inp.dtype)} and {type_name(b.dtype)}")
        if a.dtype is not b.dtype:
            raise RuntimeError("mat1 and mat2 must have the same dtype, but got "
                               f"{type_name(a.dtype)} and {type_name(b.dtype)}")
        _not_bool(a.dtype, "addmm_impl_cpu_")
    return TensorSpec(shape, inp.dtype)


def _batch_sum_mm(a, b):
    """sum_i a[i] @ b[i] as one matrix product of the batches laid side by side."""
    bk = a.shape[0] * a.shape[2]
    return np.matmul(a.transpose(1, 0, 2).reshape(a.shape[1], bk), b.reshape(bk, b.shape[2]))


def _addbmm(inp, a, b, beta=1, alpha=1):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] \
            or not inp.dtype == a.dtype == b.dtype or a.dtype == _BOOL or inp.ndim > 2:
        raise ValueError("addbmm")
    if not _fits(inp.shape, (a.shape[1], b.shape[2])):
        raise ValueError("addbmm")
    return _fused(_batch_sum_mm, inp, a, b, beta=beta, alpha=alpha)


def _addbmm_vjp(ctx, g):
    _, a, b = ctx.inputs
    beta, alpha = ctx.attrs.get("beta", 1), ctx.attrs.get("alpha", 1)
    return (ctx.needs(0) and _scaled(g, beta),
            ctx.needs(1) and _scaled(g.matmul(b.transpose(1, 2)), alpha),
            ctx.needs(2) and _scaled(a.transpose(1, 2).matmul(g), alpha))


addbmm = define("addbmm", "linalg", _addbmm, meta=_addbmm_meta, vjp=_addbmm_vjp,
                doc="beta * input + alpha * sum over the batch of batch1[i] @ batch2[i].")


# ---------------------------------------------------------------- matmul (no-grad fast path)

def _matmul_meta(a, b):
    """torch.matmul's result spec; errors are those of the product PyTorch dispatches to."""
    da, db = len(a.shape), len(b.shape)
    if da == 0 or db == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{da}D and {db}D")
    if da == 1 and db == 1:
        return _dot_meta(a, b)
    if da == 2 and db == 1:
        return _mv_meta(a, b)
    if da <= 2 and db <= 2:
        spec = _mm_meta(TensorSpec((1,) * (2 - da) + tuple(a.shape), a.dtype), b)
        return TensorSpec(spec.shape[2 - da:], spec.dtype)
    n, k = (a.shape[-2] if da > 1 else 1), a.shape[-1]
    k2, p = (b.shape[-2], b.shape[-1]) if db > 1 else (b.shape[0], 1)
    batch = check_broadcast(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if db <= 2:                        # folded into one mm/mv
        rows = TensorSpec((n * prod(batch), k), a.dtype)
        (_mm_meta if db == 2 else _mv_meta)(rows, b)
    else:
        nb = prod(batch)
        _bmm_meta(TensorSpec((nb, n, k), a.dtype), TensorSpec((nb, k2, p), b.dtype))
    shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    return TensorSpec(shape, a.dtype)


def _matmul(a, b):
    if a.ndim == 0 or b.ndim == 0 or a.dtype != b.dtype or a.dtype == _BOOL:
        raise ValueError("matmul")
    return np.asarray(_lowp(np.matmul, a, b))


def _matmul_vjp(ctx, g):
    a, b = ctx.inputs
    # 1-D operands are matrices with a unit dim (removed from the result); the engine sums
    # the gradients over broadcast batch dims
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g.unsqueeze(-1) if b.ndim == 1 else g
    g2 = g2.unsqueeze(-2) if a.ndim == 1 else g2
    ga = gb = None
    if ctx.needs(0):
        ga = g2.matmul(b2.mT)
        ga = ga.squeeze(-2) if a.ndim == 1 else ga
    if ctx.needs(1):
        gb = a2.mT.matmul(g2)
        gb = gb.squeeze(-1) if b.ndim == 1 else gb
    return ga, gb


matmul = define("matmul", "linalg", _matmul, meta=_matmul_meta, vjp=_matmul_vjp,
                doc="torch.matmul in one step, for eager calls that record no gradient (with a "
                    "gradient, matmul decomposes into mm/mv/dot/bmm as in PyTorch).")


# ---------------------------------------------------------------- addr

def _addr_meta(inp, v1, v2, beta=1, alpha=1):
    for name, v in (("vec1", v1), ("vec2", v2)):
        if len(v.shape) != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {len(v.shape)}-D")
    shape = (v1.shape[0], v2.shape[0])
    _check_expand(inp, shape)
    dt = D.promote_types(D.promote_types(inp.dtype, v1.dtype), v2.dtype)
    if not dt.is_floating_point:
        for name, s in (("beta", beta), ("alpha", alpha)):
            if isinstance(s, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                                   "floating point number.")
    return TensorSpec(shape, dt)


def _addr(inp, v1, v2, beta=1, alpha=1):
    if v1.ndim != 1 or v2.ndim != 1 or inp.ndim > 2:
        raise ValueError("addr")
    shape = (v1.shape[0], v2.shape[0])
    if not _fits(inp.shape, shape):
        raise ValueError("addr")
    f = D.FROM_NUMPY
    dt = D.promote_types(D.promote_types(f[inp.dtype], f[v1.dtype]), f[v2.dtype]).np
    if dt.kind in "biu" and (isinstance(beta, float) or isinstance(alpha, float)):
        raise ValueError("addr")
    if dt == _BOOL:                     # PyTorch's logical form: (beta and input) or (alpha and v1 v2^T)
        out = np.zeros(shape, _BOOL)
        if alpha:
            out |= np.logical_and.outer(v1, v2)
        if beta:
            out |= inp
        return out
    v1, v2, inp = v1.astype(dt, copy=False), v2.astype(dt, copy=False), inp.astype(dt, copy=False)
    return _fused(np.multiply.outer, inp, v1, v2, beta=beta, alpha=alpha)


def _addr_vjp(ctx, g):
    _, v1, v2 = ctx.inputs
    beta, alpha = ctx.attrs.get("beta", 1), ctx.attrs.get("alpha", 1)
    return (ctx.needs(0) and _scaled(g, beta),
            ctx.needs(1) and _scaled(g.mv(v2.to(g.dtype)), alpha),
            ctx.needs(2) and _scaled(g.t().mv(v1.to(g.dtype)), alpha))


addr = define("addr", "linalg", _addr, meta=_addr_meta, vjp=_addr_vjp,
              doc="beta * input + alpha * outer(vec1, vec2), with type promotion.")


# ---------------------------------------------------------------- trace

def _trace_dtype(dt):
    return dt if dt.is_floating_point else D.int64


def _trace_meta(x):
    if len(x.shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    _not_bool(x.dtype, "trace")
    return TensorSpec((), _trace_dtype(x.dtype))


def _trace(x):
    if x.ndim != 2 or x.dtype == _BOOL:
        raise ValueError("trace")
    if x.dtype.kind in "iu":
        return np.asarray(np.trace(x, dtype=np.int64))
    return np.asarray(_lowp(np.trace, x))


def _trace_vjp(ctx, g):
    x = ctx.inputs[0]
    # g on the main diagonal: tril & triu of ones keep exactly the (rectangular) identity
    eye = x.new_ones(tuple(x.shape)).tril().triu()
    return (eye * g,)


trace = define("trace", "linalg", _trace, meta=_trace_meta, vjp=_trace_vjp,
               doc="Sum of the main diagonal of a matrix (integers sum to int64).")


# ---------------------------------------------------------------- cross

def _cross_meta(a, b, dim=-1):
    if len(a.shape) != len(b.shape):
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = wrap_dim(dim, len(a.shape))
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {a.shape[d]} and {b.shape[d]}")
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"expected scalar type {type_name(a.dtype)} but found {type_name(b.dtype)}")
    _not_bool(a.dtype, "cross")
    return TensorSpec(shape, a.dtype)


def _cross(a, b, dim=-1):
    if a.ndim != b.ndim or a.dtype != b.dtype or a.dtype == _BOOL or a.ndim == 0 \
            or not -a.ndim <= dim < a.ndim or a.shape[dim] != 3 or b.shape[dim] != 3:
        raise ValueError("cross")
    return _lowp(lambda x, y: np.cross(x, y, axis=dim), a, b)


def _cross_vjp(ctx, g):
    a, b = ctx.inputs
    dim = ctx.attrs.get("dim", -1)
    return (ctx.needs(0) and b.cross(g, dim=dim), ctx.needs(1) and g.cross(a, dim=dim))


linalg_cross = define("linalg_cross", "linalg", _cross, meta=_cross_meta, vjp=_cross_vjp,
                      doc="Cross product of 3-vectors along ``dim``, with broadcasting.")


# ---------------------------------------------------------------- decompositions: checks

def check_matrix(A, fn, name="A"):
    if len(A.shape) < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")


def check_square(A, fn):
    check_matrix(A, fn)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def check_float(dt, fn, kernel=None):
    """LAPACK-backed ops take float32/float64; ``kernel`` names the one that rejects float16."""
    if not (dt.is_floating_point or dt.is_complex) and (kernel is None
                                                        or not kernel.startswith("linalg_eigh")):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                           f"Got {type_name(dt)}")
    if dt.np not in LAPACK:
        if kernel is None:
            raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {type_name(dt)}")
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dt)}'")


def _lapack_ok(A, square=True):
    return A.ndim >= 2 and A.dtype in LAPACK and (not square or A.shape[-1] == A.shape[-2])


def _lapack_error(A, fn, routine, text, **kw):
    """The LinAlgError PyTorch raises for the first matrix of ``A`` LAPACK's ``routine`` rejects.

    ``text`` is formatted with ``info``, LAPACK's 1-based index of the failing pivot/minor."""
    from scipy.linalg import lapack
    mats = A.reshape((-1,) + A.shape[-2:])
    factor = lapack.get_lapack_funcs(routine, (mats,))
    index, info = 0, 0
    for index, m in enumerate(mats):
        info = factor(m, **kw)[-1]
        if info > 0:
            break
    where = f"(Batch element {index}): " if A.ndim > 2 else ""
    return LinAlgError(f"{fn}: {where}{text.format(info=info)}")


def colmajor(x):
    """``x`` with each matrix stored column by column, the layout PyTorch's LAPACK results have."""
    return np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)


def _eye_like(x):
    """The identity matching the last dim of ``x`` (broadcastable against its matrices)."""
    return x.new_ones(x.shape[-1]).diag_embed()


def _solve(A, B, left=True):
    return eager.solve(A, B, left=left)


# ---------------------------------------------------------------- inv

def _inv_meta(A):
    check_square(A, "linalg.inv")
    check_float(A.dtype, "linalg.inv")
    return TensorSpec(tuple(A.shape), A.dtype)


def _inv(A):
    if not _lapack_ok(A):
        raise ValueError("inv")
    try:
        return colmajor(np.linalg.inv(A))
    except np.linalg.LinAlgError:
        raise _lapack_error(A, "linalg.inv", "getrf",
                            "The diagonal element {info} is zero, the inversion could not be "
                            "completed because the input matrix is singular.") from None


def _inv_vjp(ctx, g):
    t = ctx.output.mT
    return (-(t @ (g @ t)),)


linalg_inv = define("linalg_inv", "linalg", _inv, meta=_inv_meta, vjp=_inv_vjp,
                    grad_name="LinalgInvExBackward0", doc="Inverse of (batches of) square matrices.")


# ---------------------------------------------------------------- solve

def solve_is_vector(a_shape, b_shape):
    """PyTorch's rule: B is a (batch of) vector(s) when 1-D or shaped like A without its last dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1
                                 and tuple(b_shape) == tuple(a_shape[:-1]))


def _solve_meta(A, B, left=True):
    fn = "linalg.solve"
    check_float(A.dtype, fn, "lu_cpu")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{type_name(A.dtype)} and B of type {type_name(B.dtype)} instead")
    check_square(A, fn)
    vector = solve_is_vector(A.shape, B.shape)
    bm = tuple(B.shape) + (1,) if vector else tuple(B.shape)
    check_matrix(TensorSpec(bm, B.dtype), fn, "B")
    n = A.shape[-1]
    if (bm[-2] if left else bm[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {bm[-2]}x{bm[-1]})")
    batch = broadcast_shapes(bm[:-2], tuple(A.shape[:-2]))
    return TensorSpec(batch + (bm[-2:-1] if vector else bm[-2:]), A.dtype)


def _solve_impl(A, B, left=True):
    if not _lapack_ok(A) or B.dtype != A.dtype or B.ndim == 0:
        raise ValueError("solve")
    vector = solve_is_vector(A.shape, B.shape)
    if vector:
        B = B[..., None]
    if not left:
        A, B = A.swapaxes(-1, -2), B.swapaxes(-1, -2)
    if B.shape[-2] != A.shape[-1]:
        raise ValueError("solve")
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, batch + A.shape[-2:])
    B = np.broadcast_to(B, batch + B.shape[-2:])
    try:
        X = np.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        raise _lapack_error(A, "torch.linalg.solve", "getrf",
                            "The solver failed because the input matrix is singular.") from None
    if not left:                            # X^T of A^T X^T = B^T, stored row by row
        return np.ascontiguousarray(X.swapaxes(-1, -2))
    return X[..., 0] if vector else colmajor(X)


def _solve_vjp(ctx, g):
    A, B = ctx.inputs
    X = ctx.output
    left = ctx.attrs.get("left", True)
    gB = _solve(A.mT, g, left=left)          # A^T gB = g  (left) or gB A^T = g (right)
    gA = None
    if ctx.needs(0):
        if solve_is_vector(A.shape, B.shape):
            gA = -(gB.unsqueeze(-1) * X.unsqueeze(-2))
        else:
            gA = -(gB @ X.mT) if left else -(X.mT @ gB)
    return gA, ctx.needs(1) and gB


linalg_solve = define("linalg_solve", "linalg", _solve_impl, meta=_solve_meta, vjp=_solve_vjp,
                      grad_name="LinalgSolveExBackward0",
                      doc="X with A X = B (left) or X A = B, batched with broadcasting.")


# ---------------------------------------------------------------- det, slogdet

def _det_meta(A):
    check_square(A, "linalg.det")
    check_float(A.dtype, "linalg.det", "lu_cpu")
    return TensorSpec(tuple(A.shape[:-2]), A.dtype)


def _det(A):
    if not _lapack_ok(A):
        raise ValueError("det")
    return np.asarray(np.linalg.det(A))


def _cofactor(A):
    """The cofactor matrix det(A) A^-T, computed through the SVD so that singular A work:
    A = U S V^T gives cof(A) = det(U) det(V) U diag(prod_{j != i} s_j) V^T."""
    U, S, Vh = eager.svd(A, full_matrices=False)
    eye = _eye_like(S)
    others = (S.unsqueeze(-2) * (1 - eye) + eye).prod(-1)
    sign = eager.det(U) * eager.det(Vh)
    return (U * (others * sign.unsqueeze(-1)).unsqueeze(-2)) @ Vh


def _det_vjp(ctx, g):
    A, det = ctx.inputs[0], ctx.output
    if (det == 0).any().item():
        # det(A) A^-T needs an inverse; the SVD form gives the cofactors of singular A too
        # (PyTorch 2.x returns zeros there, which is not the derivative)
        return (g.unsqueeze(-1).unsqueeze(-1) * _cofactor(A),)
    return ((g * det).unsqueeze(-1).unsqueeze(-1) * A.inverse().mT,)


linalg_det = define("linalg_det", "linalg", _det, meta=_det_meta, vjp=_det_vjp,
                    doc="Determinant of (batches of) square matrices.")


def _slogdet_meta(A):
    check_square(A, "linalg.slogdet")
    check_float(A.dtype, "linalg.slogdet")
    spec = TensorSpec(tuple(A.shape[:-2]), A.dtype)
    return spec, spec


def _slogdet(A):
    if not _lapack_ok(A):
        raise ValueError("slogdet")
    sign, logabs = np.linalg.slogdet(A)
    return np.asarray(sign, A.dtype), np.asarray(logabs, A.dtype)


def _slogdet_vjp(ctx, gsign, glogabs):
    if glogabs is None:
        return (None,)
    A = ctx.inputs[0]
    return (glogabs.unsqueeze(-1).unsqueeze(-1) * A.inverse().mT,)


linalg_slogdet = define("linalg_slogdet", "linalg", _slogdet, meta=_slogdet_meta,
                        vjp=_slogdet_vjp, doc="(sign, log|det|) of (batches of) square matrices.")


# ---------------------------------------------------------------- cholesky

def _cholesky_meta(A, upper=False):
    check_square(A, "linalg.cholesky")
    check_float(A.dtype, "linalg.cholesky", "cholesky_cpu")
    return TensorSpec(tuple(A.shape), A.dtype)


def _cholesky(A, upper=False):
    if not _lapack_ok(A):
        raise ValueError("cholesky")
    try:
        L = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        raise _lapack_error(A, "linalg.cholesky", "potrf",
                            "The factorization could not be completed because the input is not "
                            "positive-definite (the leading minor of order {info} is not "
                            "positive-definite).", lower=1) from None
    return colmajor(L.swapaxes(-1, -2) if upper else L)


def _cholesky_vjp(ctx, g):
    L = ctx.output
    if ctx.attrs.get("upper", False):
        L, g = L.mT, g.mT
    # A = L L^T: gA = L^-T Phi(L^T gL) L^-1, symmetrized, Phi = lower triangle, halved diagonal
    gA = (L.mT @ g).tril()
    gA = (gA + gA.tril(-1).mT) * 0.5
    gA = _solve(L.mT, gA)
    return (_solve(L, gA, left=False),)


linalg_cholesky = define("linalg_cholesky", "linalg", _cholesky, meta=_cholesky_meta,
                         vjp=_cholesky_vjp, grad_name="LinalgCholeskyExBackward0",
                         doc="Cholesky factor L (A = L L^T) of symmetric positive-definite A.")


# ---------------------------------------------------------------- qr

_QR_MODES = ("reduced", "complete", "r")


def _qr_meta(A, mode="reduced"):
    check_matrix(A, "linalg.qr")
    check_float(A.dtype, "linalg.qr", "geqrf_cpu")
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    *batch, m, n = A.shape
    batch, k = tuple(batch), min(m, n)
    if mode == "r":
        return TensorSpec((0,), A.dtype), TensorSpec(batch + (k, n), A.dtype)
    q = m if mode == "complete" else k
    return TensorSpec(batch + (m, q), A.dtype), TensorSpec(batch + (q, n), A.dtype)


def _qr(A, mode="reduced"):
    if mode not in _QR_MODES or not _lapack_ok(A, square=False):
        raise ValueError("qr")
    if mode == "r":
        return np.empty((0,), A.dtype), colmajor(np.linalg.qr(A, mode="r"))
    Q, R = np.linalg.qr(A, mode=mode)
    return colmajor(Q), colmajor(R)


def _qr_square_vjp(gQ, gR, Q, R):
    """A = QR with Q m x n (m >= n): gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    M = R @ gR.mT - gQ.mT @ Q
    low = M.tril(-1)
    sym = low + low.mT + M.diagonal(0, -2, -1).diag_embed()
    B = gQ + Q @ sym
    return _solve(R, B.mT).mT                  # B R^-T


def _qr_vjp(ctx, gQ, gR):
    Q, R = ctx.output
    mode = ctx.attrs.get("mode", "reduced")
    m, n = Q.shape[-2], R.shape[-1]
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
            "linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    gQ = Q * 0 if gQ is None else gQ
    gR = R * 0 if gR is None else gR
    if m >= n:
        return (_qr_square_vjp(gQ, gR, Q, R),)
    # wide A = Q [X | Y]: X's part is a square QR, Y = Q^T A_Y feeds back into gQ
    X, Y = R.narrow(-1, 0, m), R.narrow(-1, m, n - m)
    gX, gY = gR.narrow(-1, 0, m), gR.narrow(-1, m, n - m)
    gA_x = _qr_square_vjp(gQ + (Q @ Y) @ gY.mT, gX, Q, X)
    return (eager.cat([gA_x, Q @ gY], -1),)


linalg_qr = define("linalg_qr", "linalg", _qr, meta=_qr_meta, vjp=_qr_vjp,
                   doc="QR decomposition (Householder, LAPACK geqrf) in mode reduced/complete/r.")


# ---------------------------------------------------------------- eigh

def _eigh_meta(A, UPLO="L"):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    check_square(A, "linalg.eigh")
    check_float(A.dtype, "linalg.eigh", "linalg_eigh_cpu")
    return TensorSpec(tuple(A.shape[:-1]), A.dtype), TensorSpec(tuple(A.shape), A.dtype)


def _eigh(A, UPLO="L"):
    if UPLO not in ("L", "U") or not _lapack_ok(A):
        raise ValueError("eigh")
    w, v = np.linalg.eigh(A, UPLO=UPLO)
    return w, colmajor(v)


def _eigh_vjp(ctx, gL, gV):
    L, V = ctx.output
    eye = _eye_like(V)
    if gV is None:
        inner = gL.diag_embed()
    else:
        # off the diagonal: (V^T gV)_ij / (L_j - L_i)
        E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye
        inner = (V.mT @ gV) / E * (1 - eye)
        if gL is not None:
            inner = inner + gL.diag_embed()
        # A is symmetric: PyTorch returns the gradient's symmetric part
        inner = (inner + inner.mT) * 0.5
    return (V @ (inner @ V.mT),)


linalg_eigh = define("linalg_eigh", "linalg", _eigh, meta=_eigh_meta, vjp=_eigh_vjp,
                     doc="Eigenvalues (ascending) and eigenvectors of symmetric matrices.")


# ---------------------------------------------------------------- svd

def _svd_meta(A, full_matrices=True, compute_uv=True):
    check_matrix(A, "linalg.svd")
    check_float(A.dtype, "linalg.svd", "linalg_svd_cpu")
    *batch, m, n = A.shape
    batch, k = tuple(batch), min(m, n)
    s = TensorSpec(batch + (k,), A.dtype)
    if not compute_uv:
        return TensorSpec((0,), A.dtype), s, TensorSpec((0,), A.dtype)
    u, v = (m, n) if full_matrices else (k, k)
    return TensorSpec(batch + (m, u), A.dtype), s, TensorSpec(batch + (v, n), A.dtype)


def _svd(A, full_matrices=True, compute_uv=True):
    if not _lapack_ok(A, square=False):
        raise ValueError("svd")
    if not compute_uv:
        empty = np.empty((0,), A.dtype)
        return empty, np.linalg.svd(A, compute_uv=False), empty.copy()
    U, S, Vh = np.linalg.svd(A, full_matrices=full_matrices)
    return colmajor(U), S, colmajor(Vh)


def _svd_vjp(ctx, gU, gS, gVh):
    U, S, Vh = ctx.output
    m, n = U.shape[-2], Vh.shape[-1]
    k = S.shape[-1]
    if U.shape[-1] != k:                          # full_matrices: only the first k vectors count
        U = U.narrow(-1, 0, k)
        gU = gU if gU is None else gU.narrow(-1, 0, k)
    if Vh.shape[-2] != k:
        Vh = Vh.narrow(-2, 0, k)
        gVh = gVh if gVh is None else gVh.narrow(-2, 0, k)
    if gU is None and gVh is None:
        return ((U * gS.unsqueeze(-2)) @ Vh,)
    eye = _eye_like(S)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye
    gA = 0
    if gU is not None:
        UhgU = U.mT @ gU
        gA = (UhgU - UhgU.mT) * S.unsqueeze(-2)
    if gVh is not None:
        VhgV = Vh @ gVh.mT
        gA = gA + S.unsqueeze(-1) * (VhgV - VhgV.mT)
    gA = gA / E * (1 - eye)
    if gS is not None:
        gA = gA + gS.diag_embed()
    if m > n and gU is not None:
        gUSinv = gU / S.unsqueeze(-2)
        gA = U @ gA + gUSinv - U @ (U.mT @ gUSinv)
        return (gA @ Vh,)
    if m < n and gVh is not None:
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA @ Vh + SinvgVh - (SinvgVh @ Vh.mT) @ Vh
        return (U @ gA,)
    return (U @ (gA @ Vh),)


linalg_svd = define("linalg_svd", "linalg", _svd, meta=_svd_meta, vjp=_svd_vjp,
                    doc="Singular value decomposition U diag(S) Vh (LAPACK gesdd).")

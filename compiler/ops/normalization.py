"""Primitives of the normalization and embedding layers.

* ``affine_normalize(x, mean, var, weight, bias, eps)``: the elementwise last step of every
  normalization, (x - mean) / sqrt(var + eps) * weight + bias, with all operands broadcast.
  The statistics are computed by ordinary reductions (mean, var) in
  dynograph/nn/_functional/normalization.py, so the derivative through them is theirs; this
  op exists so that the result carries torch's ``grad_fn`` name (NativeLayerNormBackward0,
  NativeBatchNormBackward0, NativeGroupNormBackward0, chosen by the ``kind`` attribute), and
  it lowers like any elementwise op.  A missing weight or bias is the Python scalar 1 or 0.
* ``prelu(x, weight)``: x where positive, weight * x elsewhere (weight already broadcastable);
  a primitive for torch's ``PreluKernelBackward0`` name.
* ``embedding``: its derivative (a scatter-add of the output gradient into the rows, with
  ``padding_idx`` and ``scale_grad_by_freq``) is what torch's ``EmbeddingBackward0``
  computes, and it never reads the weight's values, which ``max_norm`` rewrites in place.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from .core import TensorSpec, define, type_name
from .elementwise import define_elementwise, promote, promote_float
from .eager import call as _call
from .indexing import IndexOutOfRange, dtype_of, index_add, index_select

_INDEX_DTYPES = (D.int64, D.int32)


def _embedding_meta(weight, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    if dtype_of(indices) not in _INDEX_DTYPES:
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got dynograph.{type_name(dtype_of(indices))}Tensor "
                           "instead (while checking arguments for embedding)")
    if len(weight.shape) != 2:
        raise RuntimeError("'weight' must be 2-D")
    if weight.shape[0] != num_weights:
        raise RuntimeError(f"embedding: num_weights={num_weights} but weight has {weight.shape[0]} rows")
    return TensorSpec(tuple(indices.shape) + (weight.shape[1],), dtype_of(weight))


def _embedding(weight, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    _embedding_meta(weight, indices, num_weights, padding_idx, scale_grad_by_freq)
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexOutOfRange("index out of range in self")
    return np.take(weight, indices, axis=0)


def _embedding_vjp(ctx, g):
    """Rows of the output gradient added into a zero weight gradient; padding rows get none,
    and ``scale_grad_by_freq`` divides each contribution by its index's count in the batch."""
    a = ctx.attrs
    idx = ctx.inputs[1].reshape(-1)
    rows = g.reshape((idx.shape[0], g.shape[-1]))
    if a.get("padding_idx", -1) >= 0:
        rows = rows.masked_fill((idx == a["padding_idx"]).unsqueeze(1), 0)
    if a.get("scale_grad_by_freq", False):
        counts = idx.bincount(minlength=a["num_weights"]).to(g.dtype)
        rows = rows / _call(index_select, counts, idx, dim=0).unsqueeze(1)
    zeros = g.new_zeros((a["num_weights"], g.shape[-1]))
    return _call(index_add, zeros, idx, rows, dim=0), None


embedding = define("embedding", "index", _embedding, meta=_embedding_meta, vjp=_embedding_vjp,
                   doc="Rows indices of a 2-D weight: out[..., :] = weight[indices[...], :].")


# ---------------------------------------------------------------- affine_normalize

_NORM_GRAD_NAMES = {"layer": "NativeLayerNormBackward0", "batch": "NativeBatchNormBackward0",
                    "group": "NativeGroupNormBackward0"}


def _affine_normalize(x, mean, var, weight, bias, eps, kind):
    out = (x - mean) * (1.0 / np.sqrt(var + eps))
    if not (isinstance(weight, (int, float)) and weight == 1):
        out = out * weight
    if not (isinstance(bias, (int, float)) and bias == 0):
        out = out + bias
    return out


def _affine_normalize_rule(x, mean, var, weight, bias, eps, kind):
    return promote_float(x, mean, var, weight, bias)


def _affine_normalize_vjp(ctx, g):
    """Partials of (x - mean) * rstd * weight + bias; the engine sums each down to its operand's
    shape (the statistics' and the affine parameters' broadcast dims)."""
    x, mean, var, weight, bias = ctx.inputs
    rstd = (var + ctx.attrs["eps"]).rsqrt()
    centered = x - mean
    gw = g * weight
    gx = gw * rstd
    return (ctx.needs(0) and gx, ctx.needs(1) and -gx,
            ctx.needs(2) and gw * centered * (rstd * rstd * rstd) * -0.5,
            ctx.needs(3) and g * centered * rstd, ctx.needs(4) and g)


def _is_literal(b, h, value):
    """Whether the operand is absent (None) or the Python scalar ``value``: the reference then
    skips its multiply or add, and so does the kernel (a tensor of ones is still multiplied)."""
    return h is None or b.literal(h) == value


def _lower_affine_normalize(b, x, mean, var, weight, bias, eps, kind):
    # the reference's order of operations, (x - mean) * (1 / sqrt(var + eps)) * weight + bias;
    # ``kind`` only names the grad_fn
    rstd = b.div(b.const(1.0, x.dtype), b.sqrt(b.add(var, b.const(eps, x.dtype))))
    out = b.mul(b.sub(x, mean), rstd)
    if not _is_literal(b, weight, 1):
        out = b.mul(out, weight)
    if not _is_literal(b, bias, 0):
        out = b.add(out, bias)
    return out


affine_normalize = define_elementwise(
    "affine_normalize", _affine_normalize, _affine_normalize_rule, _affine_normalize_vjp,
    lowering=_lower_affine_normalize,
    grad_name=lambda is_tensor, attrs: _NORM_GRAD_NAMES[attrs["kind"]],
    doc="(x - mean) / sqrt(var + eps) * weight + bias, broadcast elementwise.")


# ---------------------------------------------------------------- prelu

def _prelu_vjp(ctx, g):
    x, weight = ctx.inputs
    positive = x > 0
    return (ctx.needs(0) and g.where(positive, g * weight),
            ctx.needs(1) and (g * x).masked_fill(positive, 0))


def _lower_prelu(b, x, weight):
    positive = b.cmp("gt", x, b.const(0, x.dtype))         # false for NaN: weight * NaN is NaN
    return b.select(positive, x, b.mul(weight, x))


prelu = define_elementwise("prelu", lambda x, w: np.where(x > 0, x, w * x), promote, _prelu_vjp,
                     grad_name="PreluKernelBackward0", lowering=_lower_prelu,
                     doc="x where x > 0, weight * x elsewhere (broadcast).")

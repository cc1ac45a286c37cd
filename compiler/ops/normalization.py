"""Primitives of the normalization and embedding layers.

Only the embedding lookup is a primitive: its derivative (a scatter-add of the output gradient
into the rows, with ``padding_idx`` and ``scale_grad_by_freq``) is what torch's
``EmbeddingBackward0`` computes, and it must never read the weight's values, which
``max_norm`` rewrites in place.  The normalizations are compositions in
dynograph/nn/_functional/normalization.py.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from .core import TensorSpec, define, type_name
from .indexing import IndexOutOfRange, index_add, index_select

_INDEX_DTYPES = (D.int64, D.int32)


def _call(op, *args, **attrs):
    from dynograph._dispatch import call
    return call(op, *args, **attrs)


def _dt(x):
    dt = x.dtype
    return dt if isinstance(dt, D.dtype) else D.from_numpy_dtype(dt)


def _embedding_meta(weight, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    if _dt(indices) not in _INDEX_DTYPES:
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got dynograph.{type_name(_dt(indices))}Tensor "
                           "instead (while checking arguments for embedding)")
    if len(weight.shape) != 2:
        raise RuntimeError("'weight' must be 2-D")
    if weight.shape[0] != num_weights:
        raise RuntimeError(f"embedding: num_weights={num_weights} but weight has {weight.shape[0]} rows")
    return TensorSpec(tuple(indices.shape) + (weight.shape[1],), _dt(weight))


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

"""Scaled dot-product and multi-head attention.

Both are compositions of dynograph ops (matmul, softmax, masked_fill ...), so autograd and the
tracer see every step. The arithmetic follows PyTorch's reference ("math") implementation.
"""
import math
import warnings

import dynograph as _d
from dynograph.compiler.ops.core import type_name as _type_name

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward", "canonical_mask",
           "none_or_dtype"]

# ----------------------------------------------------------------------------- scaled dot product

def _check_sdpa_inputs(query, key, value, attn_mask):
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, but "
                           f"got query.dim: {query.dim()} key.dim: {key.dim()} and value.dim: "
                           f"{value.dim()} instead.")
    if not (query.dtype == key.dtype == value.dtype):
        names = [t.dtype.type_meta_name for t in (query, key, value)]
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {names[0]} key.dtype: {names[1]} and value.dtype: "
                           f"{names[2]} instead.")
    if not query.is_floating_point():
        raise RuntimeError(f"expected scalar type Float but found {_type_name(query.dtype)}")
    if attn_mask is not None and attn_mask.dtype not in (_d.bool, _d.float32, query.dtype):
        mask_name = attn_mask.dtype.type_meta_name
        query_name = query.dtype.type_meta_name
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, "
                           f"but got attn_mask.dtype: {mask_name} and  query.dtype: "
                           f"{query_name} instead.")


def _repeat_kv_heads(query, key, value):
    """Grouped-query attention: each key/value head serves a group of query heads."""
    heads = query.size(-3)
    if heads % key.size(-3) or heads % value.size(-3):
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
    key = key.repeat_interleave(heads // key.size(-3), -3)
    value = value.repeat_interleave(heads // value.size(-3), -3)
    return key, value


def _attention_bias(attn_mask, is_causal, q_len, k_len, dtype, device):
    """The additive mask: -inf where attention is not allowed, None when nothing is masked."""
    if is_causal:
        # upper-left aligned causal mask, as torch's CausalBias for non-square shapes
        allowed = _d.ones((q_len, k_len), dtype=_d.bool, device=device).tril()
        return _d.zeros((q_len, k_len), dtype=dtype, device=device).masked_fill(
            allowed.logical_not(), float("-inf"))
    if attn_mask is None:
        return None
    if attn_mask.dtype == _d.bool:
        return _d.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device).masked_fill(
            attn_mask.logical_not(), float("-inf"))
    return attn_mask


def _safe_softmax(scores):
    """softmax over the last dim; a row masked out entirely gives zeros, not nan (as torch's SDPA)."""
    peak = scores.amax(-1, keepdim=True).detach()
    peak = peak.masked_fill(peak.isneginf(), 0.0)
    e = (scores - peak).exp()
    total = e.sum(-1, keepdim=True)
    return e / total.masked_fill(total == 0, 1.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 *, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value over the last two dims.

    ``attn_mask`` is boolean (True = may attend) or additive (float), broadcast over the leading
    dims; ``is_causal`` applies a lower-triangular mask; ``enable_gqa`` lets key/value have fewer
    heads (dim -3) than query. Dropout is applied whenever ``dropout_p > 0``.
    """
    _check_sdpa_inputs(query, key, value, attn_mask)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    out_dtype = query.dtype
    if out_dtype in (_d.float16, _d.bfloat16):
        # half precision: intermediates in float32, as torch's math kernel
        query, key, value = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype != _d.bool:
            attn_mask = attn_mask.float()
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key, value)
    scale_factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = _d.matmul(query, key.transpose(-2, -1)) * scale_factor
    bias = _attention_bias(attn_mask, is_causal, query.size(-2), key.size(-2), scores.dtype,
                           scores.device)
    if bias is not None:
        scores = _add_mask(scores, bias)
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = _d.nn.functional.dropout(weights, dropout_p, training=True)
    out = _d.matmul(weights, value)
    return out if out.dtype == out_dtype else out.to(out_dtype)


def _add_mask(scores, bias):
    # the mask broadcasts onto the scores, never the other way (torch adds it in place)
    out = scores + bias
    if tuple(out.shape) != tuple(scores.shape):
        raise RuntimeError(f"output with shape {list(scores.shape)} doesn't match the broadcast "
                           f"shape {list(out.shape)}")
    return out


# ----------------------------------------------------------------------------- multi-head attention

def none_or_dtype(input):
    """The dtype of a tensor, None for None."""
    if input is None:
        return None
    if isinstance(input, _d.Tensor):
        return input.dtype
    raise RuntimeError("input to none_or_dtype() must be None or torch.Tensor")


def canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A boolean mask (True = masked out) as an additive float mask; float masks pass through."""
    if mask is None:
        return None
    is_float = mask.is_floating_point()
    if mask.dtype != _d.bool and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use "
                      "same type for both instead.", stacklevel=2)
    if not is_float:
        mask = _d.zeros(mask.shape, dtype=target_type, device=mask.device).masked_fill(mask, float("-inf"))
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """True for batched (3-D) input, False for unbatched (2-D); torch's errors otherwise."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D but "
                                 f"found {key.dim()}-D and {value.dim()}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be `None` "
                                 f"or 2-D but found {key_padding_mask.dim()}-D tensor instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D "
                                 f"or 3-D but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be 2-D "
                                 f"but found {key.dim()}-D and {value.dim()}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 1-D but found {key_padding_mask.dim()}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be `None`, "
                                     f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                     f"{attn_mask.shape}")
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _linear(input, weight, bias):
    return _d.nn.functional.linear(input, weight, bias)


def _in_projection_packed(q, k, v, w, b=None):
    """q, k, v projected by the packed (3E, E) weight (one matmul for self-attention)."""
    E = q.size(-1)
    if k is v:
        if q is k:
            return _linear(q, w, b).chunk(3, -1)
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        return (_linear(q, w_q, b_q),) + tuple(_linear(k, w_kv, b_kv).chunk(2, -1))
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    """q, k, v projected by separate weights (key/value may have their own embedding sizes)."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    for name, w, shape in (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)),
                           ("value", w_v, (Eq, Ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got {w.shape}")
    for name, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got {b.shape}")
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _check_key_padding_mask(key_padding_mask, src_len, bsz):
    if key_padding_mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                             f"{key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                             f"{key_padding_mask.shape[1]}")


def _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads):
    """The attention mask as (1 or bsz * num_heads, tgt_len, src_len)."""
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                               f"{(bsz * num_heads, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def _static_kv(static, name, bsz, num_heads, head_dim):
    if static.size(0) != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got "
                             f"{static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.size(2)}")
    return static


def _pad_last(mask):
    # one more key position that nothing masks (for bias_k/bias_v or the zero attention row)
    return None if mask is None else _d.nn.functional.pad(mask, (0, 1))


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                                 out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """The forward pass of nn.MultiheadAttention (sequence-first layout: (L, N, E) or (L, E)).

    Returns ``(attn_output, attn_weights)``; the weights are averaged over heads when
    ``average_attn_weights``, and None unless ``need_weights``. Boolean masks mark positions that
    may NOT be attended (the opposite of scaled_dot_product_attention's boolean mask).
    """
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        # run as a batch of one, squeezed again at the end
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]

    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask",
                                       none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to create "
                           "this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # the hint alone drives scaled_dot_product_attention's causal mask
        attn_mask = None
    else:
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            # the merged mask is no longer causal
            is_causal = False

    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got "
                             f"{embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    q, k, v = _project(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                       q_proj_weight, k_proj_weight, v_proj_weight)

    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads)

    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _d.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _d.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    # heads folded into the batch: (bsz * num_heads, seq, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        k = _static_kv(static_k, "static_k", bsz, num_heads, head_dim)
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        v = _static_kv(static_v, "static_v", bsz, num_heads, head_dim)

    if add_zero_attn:
        zeros = (bsz * num_heads, 1, head_dim)
        k = _d.cat([k, _d.zeros(zeros, dtype=k.dtype, device=k.device)], dim=1)
        v = _d.cat([v, _d.zeros(zeros, dtype=v.dtype, device=v.device)], dim=1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)

    src_len = k.size(1)
    if key_padding_mask is not None:
        _check_key_padding_mask(key_padding_mask, src_len, bsz)
        key_padding_mask = (key_padding_mask.reshape(bsz, 1, 1, src_len)
                            .expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len))
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0
    shape = (tgt_len, bsz, num_heads, head_dim, embed_dim, src_len)
    if need_weights:
        out, weights = _attention_with_weights(q, k, v, attn_mask, is_causal, dropout_p, shape)
        out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    out = _attention_sdpa(q, k, v, attn_mask, is_causal, dropout_p, shape)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    return (out if is_batched else out.squeeze(1)), None


def _project(query, key, value, in_proj_weight, in_proj_bias, separate, q_proj_weight,
             k_proj_weight, v_proj_weight):
    if not separate:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        return _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
        if w is None:
            raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
    b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    return _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight,
                          b_q, b_k, b_v)


def _attention_with_weights(q, k, v, attn_mask, is_causal, dropout_p, shape):
    """Explicit softmax attention that also returns the (bsz * heads, L, S) weights."""
    tgt_len, bsz, _, _, embed_dim, _ = shape
    if is_causal and attn_mask is None:
        raise AssertionError("FIXME: is_causal not implemented for need_weights")
    q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
    if attn_mask is not None:
        weights = _d.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
    else:
        weights = _d.bmm(q_scaled, k.transpose(-2, -1))
    weights = _d.nn.functional.softmax(weights, dim=-1)
    if dropout_p > 0.0:
        weights = _d.nn.functional.dropout(weights, p=dropout_p)
    out = _d.bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    return out, weights


def _attention_sdpa(q, k, v, attn_mask, is_causal, dropout_p, shape):
    """Attention through scaled_dot_product_attention when the weights are not wanted."""
    tgt_len, bsz, num_heads, head_dim, embed_dim, src_len = shape
    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    return out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)

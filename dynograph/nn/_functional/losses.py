"""Losses beyond the basic ones in functional.py: Poisson and Gaussian NLL, the margin and
embedding losses, triplet losses, and CTC.

All are compositions of dynograph ops, so autograd gives their gradients and the tracer sees them.
Where PyTorch's kernels would overflow (soft margin on logits of +-1000) these forms stay finite.
"""
import math

import dynograph as _d
from dynograph.autograd.graph import shown_as
from dynograph.compiler.ops.core import type_name as _type_name

from .. import functional as _F
from .normalization import size_text
from .reduction import reduce_loss, reduction_from_flags, stable_softplus

__all__ = [
    "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss", "soft_margin_loss",
    "ctc_loss",
]

_COSINE_EPS = 1e-12   # what ATen adds to the squared norms in cosine_embedding_loss


# ----------------------------------------------------------------------------- helpers

def _legacy_reduction(size_average, reduce, reduction):
    """The reduction string (legacy flags honoured), rejected early when unknown like torch's enum.

    With both legacy flags None it only checks ``reduction``."""
    red = reduction_from_flags(size_average, reduce, reduction)
    if red not in ("none", "mean", "sum"):
        raise ValueError(f"{red} is not a valid value for reduction")
    return red


def _safe_logsumexp(x, dim):
    """logsumexp over dim where rows that are all -inf give -inf with zero (not nan) gradient."""
    dead = x.amax(dim) == -math.inf
    lse = _d.where(dead.unsqueeze(dim), 0.0, x).logsumexp(dim)
    return _d.where(dead, -math.inf, lse)


def _check_long(t):
    if t.dtype != _d.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(t.dtype)}")


# ----------------------------------------------------------------------------- likelihood losses

def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of target under Poisson(input).

    log_input=True: exp(input) - target * input; else input - target * log(input + eps). full adds
    Stirling's approximation of log(target!) where target > 1.
    """
    red = _legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        # evaluate Stirling's term on a safe target: masked entries get no nan gradient
        big = target > 1
        t = _d.where(big, target, 2.0)
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + _d.where(big, stirling, 0.0)
    return reduce_loss(loss, red)


def _gaussian_var(input, var):
    """var reshaped for broadcasting against input, with torch's validity rules and errors."""
    if not isinstance(var, _d.Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return _d.ones_like(input) * var
    if bool((var < 0).any().item()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) == tuple(input.shape):
        return var
    if tuple(input.shape[:-1]) == tuple(var.shape):
        return var.unsqueeze(-1)        # homoscedastic over the last dim
    if input.dim() == var.dim() and \
            sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
        return var                      # one dim of size 1: broadcast
    raise ValueError("var is of incorrect size")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Negative log likelihood of target under N(input, var): 0.5 * (log var + (input-target)^2/var).

    var is clamped below by eps for the value only: as in PyTorch its gradient passes through the
    clamp unchanged.
    """
    var = _gaussian_var(input, var)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # (var - var.detach()) is exactly 0 with gradient 1: the clamped value keeps var's gradient
    var = _d.where(var < eps, (var - var.detach()) + eps, var)
    loss = (var.log() + (input - target).square() / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


# ----------------------------------------------------------------------------- margin losses

def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin); target holds 1 or -1."""
    red = _legacy_reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} ")
    loss = (-target * (input1 - input2) + margin).clamp_min(0)
    return reduce_loss(loss, red)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where target is -1."""
    red = _legacy_reduction(size_average, reduce, reduction)
    margin_part = _d.where(target != 1, (margin - input).clamp_min(0), 0.0)
    self_part = _d.where(target != -1, input, 0.0)
    return reduce_loss(margin_part + self_part, red)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), finite for any input."""
    red = _legacy_reduction(size_average, reduce, reduction)
    return shown_as(reduce_loss(stable_softplus(-input * target), red), "SoftMarginLossBackward0")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class logistic loss averaged over the last (class) dim; target holds 0/1 per class."""
    red = reduction_from_flags(size_average, reduce, reduction)
    # -(t log sigmoid(x) + (1 - t) log sigmoid(-x)), each log sigmoid as a stable softplus
    loss = target * stable_softplus(-input) + (1 - target) * stable_softplus(input)
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.size(class_dim)
    if red not in ("none", "mean", "sum"):
        raise ValueError(red + " is not valid")
    return reduce_loss(loss, red)


def _margin_shapes(input):
    """(nframe, dim) of a (C,), (N, C) or 0-dim input, with ATen's error for anything else."""
    nd = input.dim()
    if not ((nd == 2 and input.shape[1] != 0) or (nd == 1 and input.shape[0] != 0) or nd == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {size_text(input.shape)}")
    if nd == 2:
        return input.shape[0], input.shape[1]
    return 1, (input.shape[0] if nd == 1 else 1)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss: sum over j != y of max(0, margin - x[y] + x[j])^p * weight[y] / C."""
    red = _legacy_reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    nframe, dim = _margin_shapes(input)
    if target.dim() > 1 or target.numel() != nframe:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
            f"samples (batch size). Expected target size [{nframe}], but got "
            f"{size_text(target.shape)}. Input has shape {size_text(input.shape)}.")
    if weight is not None and weight.numel() != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got "
                           f"{size_text(weight.shape)}")
    _check_long(target)
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found "
                           f"{_type_name(weight.dtype)}")
    y = target.reshape(nframe)
    if nframe and bool(((y < 0) | (y >= dim)).any().item()):
        raise RuntimeError("target out of range")
    x = input.reshape(nframe, dim)
    z = x - x.gather(1, y.unsqueeze(1)) + margin
    # strictly positive hinge only, as ATen: no gradient at z == 0
    h = _d.where(z > 0, z, 0.0)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * weight[y].unsqueeze(1)
    h = _d.where(_d.arange(dim, device=y.device) != y.unsqueeze(1), h, 0.0)
    loss = h.sum(1) / dim
    if red == "none":
        loss = loss if target.dim() > 0 else loss.reshape(())
    else:
        loss = reduce_loss(loss, red)
    return shown_as(loss, "MultiMarginLossBackward0")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Hinge loss between every target class and every non-target class, averaged over classes.

    Each row of target lists class indices and ends at the first -1.
    """
    red = _legacy_reduction(size_average, reduce, reduction)
    nframe, dim = _margin_shapes(input)
    if input.dim() <= 1:
        ok = target.dim() <= 1 and target.numel() == dim
    else:
        ok = target.dim() == 2 and tuple(target.shape) == (nframe, dim)
    if not ok:
        raise RuntimeError(f"inconsistent target size: {size_text(target.shape)} for input of "
                           f"size: {size_text(input.shape)}")
    if nframe and bool(((target < -1) | (target >= dim)).any().item()):
        raise RuntimeError("argument #2 'target' is out of range")
    _check_long(target)
    x = input.reshape(nframe, dim)
    t = target.reshape(nframe, dim)
    valid = (t < 0).long().cumsum(1) == 0                  # positions before the first -1
    safe = _d.where(valid, t, 0)
    classes = _d.arange(dim, device=target.device)
    is_target = ((safe.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)     # (N, C)
    # z[n, j, k] = 1 - x[n, target j] + x[n, k] for target j and non-target class k
    z = 1 - x.gather(1, safe).unsqueeze(2) + x.unsqueeze(1)
    pairs = valid.unsqueeze(2) & ~is_target.unsqueeze(1) & (z > 0)
    loss = _d.where(pairs, z, 0.0).sum((1, 2)) / dim
    if red == "none":
        return loss if target.dim() > 1 else loss.reshape(())
    return reduce_loss(loss, red)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where target is -1."""
    red = _legacy_reduction(size_average, reduce, reduction)
    tdim = target.dim()
    if tdim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if tdim == 1 and input1.dim() != 2:
        raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {size_text(input1.shape)} and {size_text(input2.shape)}.")
    if tdim == 0 and input1.dim() != 1:
        raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {size_text(input1.shape)} and {size_text(input2.shape)}.")
    prod = (input1 * input2).sum(tdim)
    mag1 = (input1 * input1).sum(tdim) + _COSINE_EPS
    mag2 = (input2 * input2).sum(tdim) + _COSINE_EPS
    cos = prod / (mag1 * mag2).sqrt()
    pos = _d.where(target == 1, 1 - cos, 0.0)
    neg = _d.where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return reduce_loss(pos + neg, red)


# ----------------------------------------------------------------------------- triplet losses

def _check_triplet(anchor, positive, negative, margin):
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, p, n = anchor.dim(), positive.dim(), negative.dim()
    if not (a == p and p == n):
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the same "
                           f"number of dimensions, but got: anchor {a}D, positive {p}D, and "
                           f"negative {n}D inputs")


def _triplet(dist, anchor, positive, negative, margin, swap, red):
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        # Balntas et al.: use the positive as anchor when it is closer to the negative
        d_neg = _d.minimum(d_neg, dist(positive, negative))
    return reduce_loss((d_pos - d_neg + margin).clamp_min(0), red)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin) with d the p-norm pairwise distance."""
    red = _legacy_reduction(size_average, reduce, reduction)
    _check_triplet(anchor, positive, negative, margin)

    def dist(x1, x2):
        return _F.pairwise_distance(x1, x2, p, eps)
    return _triplet(dist, anchor, positive, negative, margin, swap, red)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance_function(x1, x2) (default: pairwise_distance)."""
    _legacy_reduction(None, None, reduction)
    _check_triplet(anchor, positive, negative, margin)
    dist = _F.pairwise_distance if distance_function is None else distance_function
    return _triplet(dist, anchor, positive, negative, margin, swap, reduction)


# ----------------------------------------------------------------------------- CTC

_CTC_WHERE = " (while checking arguments for ctc_loss_allocate_outputs)"


def _lengths(lengths, name):
    """Python ints from a tensor or a sequence of lengths."""
    if isinstance(lengths, _d.Tensor):
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == _d.bool:
            raise RuntimeError(f"{name} must be integral")
        return [int(v) for v in lengths.reshape(-1).tolist()]
    if isinstance(lengths, int):
        return [lengths]
    return [int(v) for v in lengths]


def _check_ctc(log_probs, targets, in_lens, tg_lens, blank):
    """ATen's argument checks of ctc_loss, same order and text."""
    if log_probs.dim() != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.dim()}-dimensional "
                           f"tensor for argument #1 'log_probs'{_CTC_WHERE}")
    if targets.dim() not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.dim()}-dimensional "
                           f"tensor for argument #2 'targets'{_CTC_WHERE}")
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if len(in_lens) != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tg_lens) != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    for n in tg_lens:
        if n < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value "
                               f"{n}{_CTC_WHERE}")
    expect = sum(tg_lens) if targets.dim() == 1 else N
    if targets.shape[0] != expect:
        raise RuntimeError(f"Expected tensor to have size {expect} at dimension 0, but got size "
                           f"{targets.shape[0]} for argument #2 'targets'{_CTC_WHERE}")
    longest = max(tg_lens, default=0)
    if targets.dim() == 2 and targets.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but "
                           f"got size {targets.shape[1]} for argument #2 'targets'{_CTC_WHERE}")
    for n in in_lens:
        if n < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{n}{_CTC_WHERE}")
        if n > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value "
                               f"{n}{_CTC_WHERE}")
    if T == 0:
        raise RuntimeError("log_probs tensor must not be empty")


def _padded_targets(targets, tg_lens, blank, n_classes):
    """(N, S) int64 targets, S the longest target, with blank past each target's end."""
    N, S = len(tg_lens), max(tg_lens, default=0)
    targets = targets.long()
    if targets.dim() == 2:
        padded = targets[:, :S]
    else:
        # gather each sample's slice out of the concatenated targets
        # (entries past a target's end are replaced by blank below; any valid index will do)
        last = max(targets.numel() - 1, 0)
        offsets = [sum(tg_lens[:n]) for n in range(N)]
        idx = [[min(offsets[n] + s, last) for s in range(S)] for n in range(N)]
        flat = targets if targets.numel() else targets.new_zeros(1)
        padded = flat[_d.tensor(idx, dtype=_d.int64).reshape(N, S)]
    inside = _d.arange(S) < _d.tensor(tg_lens, dtype=_d.int64).unsqueeze(1)
    padded = _d.where(inside, padded, blank)
    bad = (padded < 0) | (padded >= n_classes)
    if bool(bad.any().item()):
        raise RuntimeError(f"ctc_loss: target label {int(padded[bad][0].item())} is out of range "
                           f"for {n_classes} classes")
    return padded


def _ctc_nll(log_probs, padded, in_lens, tg_lens, blank):
    """-log p(target | log_probs) per sample, by the CTC forward (alpha) recursion in log space.

    The loop runs over time only; batch and the 2S+1 extended-label positions are vectorized.
    Samples past their input length keep their alpha, so the last alpha is at t = length - 1.
    """
    T, N, _ = log_probs.shape
    S = padded.shape[1]
    L = 2 * S + 1
    # extended labels: blank, l1, blank, l2, ..., blank
    blanks = _d.full((N, S), blank, dtype=_d.int64)
    ext = _d.cat([_d.stack([blanks, padded], 2).reshape(N, 2 * S),
                  _d.full((N, 1), blank, dtype=_d.int64)], 1)
    pos = _d.arange(L)
    # a label may follow the label two steps back (skipping a blank) unless both are equal
    prev2 = _d.cat([_d.full((N, 2), -1, dtype=_d.int64), ext], 1)[:, :L]
    can_skip = (pos % 2 == 1) & (pos >= 3) & (ext != prev2)
    lp_ext = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, L))          # (T, N, L)
    active = _d.arange(T).unsqueeze(1) < _d.tensor(in_lens, dtype=_d.int64)  # (T, N)
    ninf = log_probs.new_full((N, 2), -math.inf)
    # alpha before the first frame: all mass on position 0, so t = 0 may start at 0 or 1
    alpha = _d.cat([log_probs.new_zeros((N, 1)), log_probs.new_full((N, L - 1), -math.inf)], 1)
    for t in range(T):
        shifted = _d.cat([ninf, alpha], 1)
        stay, step = alpha, shifted[:, 1:L + 1]
        skip = _d.where(can_skip, shifted[:, :L], -math.inf)
        new = _safe_logsumexp(_d.stack([stay, step, skip], 2), 2) + lp_ext[t]
        alpha = _d.where(active[t].unsqueeze(1), new, alpha)
    # a path ends on the last label or on the blank after it
    tl = _d.tensor(tg_lens, dtype=_d.int64).unsqueeze(1)
    ends = _d.cat([tl * 2, (tl * 2 - 1).clamp_min(0)], 1)
    final = _d.where(_d.cat([tl >= 0, tl > 0], 1), alpha.gather(1, ends), -math.inf)
    nll = -_safe_logsumexp(final, 1)
    # PyTorch's CTC gradient is exp(log_probs) - posterior (the gradient through a log_softmax that
    # produced log_probs); this term adds exp(log_probs) to the gradient and exactly 0 to the value
    e = _d.where(active.unsqueeze(2), log_probs, -math.inf).exp()
    return nll + (e - e.detach()).sum((0, 2))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist Temporal Classification loss.

    log_probs: (T, N, C) or unbatched (T, C) log-probabilities; targets: (N, S) padded or the
    concatenation of all targets; lengths: tensors or sequences of ints. 'mean' divides each
    loss by its target length before averaging over the batch.
    """
    _legacy_reduction(None, None, reduction)
    in_lens = _lengths(input_lengths, "input_lengths")
    tg_lens = _lengths(target_lengths, "target_lengths")
    batched = log_probs.dim() == 3
    if not batched:
        log_probs = log_probs.unsqueeze(1)
    _check_ctc(log_probs, targets, in_lens, tg_lens, blank)
    padded = _padded_targets(targets, tg_lens, blank, log_probs.shape[2])
    nll = _ctc_nll(log_probs, padded, in_lens, tg_lens, blank)
    if zero_infinity:
        nll = _d.where(nll == math.inf, 0.0, nll)
    if reduction == "mean":
        lens = _d.tensor(tg_lens, dtype=nll.dtype).clamp_min(1)
        return (nll / lens).mean()
    if reduction == "sum":
        return nll.sum()
    return nll if batched else nll.squeeze(0)

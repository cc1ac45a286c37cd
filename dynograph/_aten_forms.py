"""torch's top-level forms of nn.functional operations (``torch.layer_norm``,
``torch.batch_norm``, ``torch.kl_div`` ...): their own argument orders (``batch_norm`` takes the
weight before the running statistics, ``embedding`` the weight before the indices) and the
integer ``reduction`` of torch's kernels (0 none, 1 mean, 2 sum; called from Python without
it, torch's bindings reduce nothing).  Each calls the nn.functional implementation."""
from .nn import functional as F

__all__ = ["layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "embedding",
           "kl_div", "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss",
           "poisson_nll_loss", "triplet_margin_loss", "binary_cross_entropy_with_logits",
           "constant_pad_nd", "dropout_", "alpha_dropout_", "feature_alpha_dropout_"]

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def _reduced(loss, reduction):
    """An unreduced loss reduced as torch's kernels do (no warning about 'mean' meanings)."""
    r = _reduction(reduction)
    return loss if r == "none" else loss.mean() if r == "mean" else loss.sum()


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """``F.layer_norm`` (cudnn_enable is ignored)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """``F.group_norm`` (cudnn_enabled is ignored)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """``F.batch_norm`` with torch's kernel argument order."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled):
    """``F.instance_norm`` with torch's kernel argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``F.rms_norm``."""
    return F.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``F.embedding(indices, weight)``; a negative padding_idx means none, as in the kernel."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def kl_div(input, target, reduction=0, *, log_target=False):
    """``F.kl_div`` with an integer reduction ('mean' averages every element)."""
    return _reduced(F.kl_div(input, target, reduction="none", log_target=log_target), reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``F.hinge_embedding_loss`` with an integer reduction."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``F.margin_ranking_loss`` with an integer reduction."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``F.cosine_embedding_loss`` with an integer reduction."""
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``F.poisson_nll_loss`` with an integer reduction."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        reduction=0):
    """``F.triplet_margin_loss`` with an integer reduction."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """``F.binary_cross_entropy_with_logits`` with an integer reduction."""
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                              pos_weight=pos_weight)


def constant_pad_nd(input, pad, value=0):
    """``F.pad(input, pad, value=value)``."""
    return F.pad(input, pad, value=value)


def dropout_(input, p, train):
    """In-place ``F.dropout``."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout_(input, p, train):
    """In-place ``F.alpha_dropout``."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout_(input, p, train):
    """In-place ``F.feature_alpha_dropout``."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)

"""What the loss functions share: the reduction a loss asks for and applying it, and a softplus
whose gradient is exact where the log-sigmoid losses need it."""
from dynograph._math import where

__all__ = []    # helpers of the loss functions, not functions of nn.functional


def reduction_from_flags(size_average, reduce, reduction):
    """The reduction string, honouring the legacy size_average/reduce flags."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def reduce_loss(loss, reduction):
    """``loss`` reduced as ``reduction`` ('none', 'mean' or 'sum') says."""
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def stable_softplus(z):
    """log(1 + exp(z)) without overflow, with the exact gradient sigmoid(z) (0.5 at z = 0).

    Each branch only ever exponentiates a non-positive number, so the discarded branch is finite
    and its zero gradient never meets an infinity.
    """
    pos = z + (-z.clamp_min(0)).exp().log1p()
    neg = z.clamp_max(0).exp().log1p()
    return where(z > 0, pos, neg)

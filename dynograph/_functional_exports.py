"""Functions torch exposes at the top level (``torch.softmax``, ``torch.conv2d``...) and as
tensor methods (``x.softmax(1)``), taken from ``nn.functional``: one implementation each.

Only names whose torch top-level signature reads its positional arguments in the same order as
the functional form are exported as they are; ``softmax``/``log_softmax`` take ``dim``
positionally, as ``torch.softmax(input, dim, dtype=None)`` does."""
from ._tensor import Tensor
from .nn import functional as F
from .nn.functional import (  # noqa: F401
    adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, bilinear, celu, celu_,
    channel_shuffle, conv1d, pdist, rrelu, rrelu_, selu_, threshold,
    threshold_,
    conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, cosine_similarity, hardshrink,
    max_pool1d, max_pool2d, max_pool3d, pairwise_distance, pixel_shuffle, pixel_unshuffle, prelu,
    selu)

__all__ = ["softmax", "log_softmax", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "prelu", "selu", "celu", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "cosine_similarity", "pairwise_distance",
           "bilinear", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
           "adaptive_avg_pool1d", "adaptive_max_pool1d", "hardshrink", "alpha_dropout", "celu_",
           "dropout", "feature_alpha_dropout", "pdist", "rrelu", "rrelu_", "selu_", "threshold",
           "threshold_"]


def dropout(input, p, train):
    """``nn.functional.dropout`` under torch's top-level signature (``train``, no default)."""
    return F.dropout(input, p, train)


def alpha_dropout(input, p, train):
    """``nn.functional.alpha_dropout`` under torch's top-level signature."""
    return F.alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    """``nn.functional.feature_alpha_dropout`` under torch's top-level signature."""
    return F.feature_alpha_dropout(input, p, train)


def softmax(input, dim, dtype=None):
    return F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return F.log_softmax(input, dim, dtype=dtype)


Tensor.softmax = softmax
Tensor.log_softmax = log_softmax
Tensor.hardshrink = hardshrink
Tensor.prelu = prelu

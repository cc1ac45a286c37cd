"""Batch normalization layers: BatchNorm1d, BatchNorm2d, BatchNorm3d (and the shared _NormBase)."""
import dynograph as _d
from .. import functional as F
from .module import Module
from .normalization import affine_parameters, reset_affine

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _NormBase(Module):
    """Per-channel affine parameters and running statistics, as torch's batch and instance norms
    hold them: buffers ``running_mean`` (zeros), ``running_var`` (ones) and the int64 scalar
    ``num_batches_tracked``."""

    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        affine_parameters(self, affine, num_features, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _d.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _d.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", _d.tensor(0, dtype=_d.long))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        """running_mean to zeros, running_var to ones, num_batches_tracked to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """Running statistics reset; weight to ones, bias to zeros."""
        self.reset_running_stats()
        reset_affine(self, self.affine)

    def _check_input_dim(self, input):
        raise NotImplementedError      # each concrete layer states its dims

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # checkpoints older than version 2 have no num_batches_tracked
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else _d.tensor(0, dtype=_d.long))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: a cumulative moving average over the batches seen so far
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        # batch statistics in training, and in eval mode when there are no running statistics
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if tracked else None,
                            self.running_var if tracked else None, self.weight, self.bias, use_batch,
                            factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input."""

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")

"""Embedding tables: Embedding and EmbeddingBag."""
import dynograph as _d
from .. import functional as F
from .. import init
from .._functional.normalization import padding_index
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding", "EmbeddingBag"]


def _table(num_embeddings, embedding_dim, _weight, dtype, requires_grad):
    """The weight Parameter: a new (uninitialized) table, or ``_weight`` itself."""
    if _weight is None:
        return Parameter(_d.empty((num_embeddings, embedding_dim), dtype=dtype), requires_grad)
    if list(_weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
    return Parameter(_weight, requires_grad)


class _Table(Module):
    def reset_parameters(self):
        """weight from N(0, 1), the padding row zeroed."""
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with _d.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def _optional_repr(self, fmt):
        parts = []
        if self.max_norm is not None:
            parts.append(f", max_norm={fmt(self.max_norm)}")
        if self.norm_type != 2:
            parts.append(f", norm_type={fmt(self.norm_type)}")
        if self.scale_grad_by_freq is not False:
            parts.append(f", scale_grad_by_freq={fmt(self.scale_grad_by_freq)}")
        return "".join(parts)


def _check_pretrained(embeddings):
    if embeddings.dim() != 2:
        raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
    return embeddings.shape


class Embedding(_Table):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``.

    dynograph has no sparse tensors: ``sparse=True`` is kept (and shown) but gradients are dense.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None,
                 dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_index(padding_idx, num_embeddings, "Padding_idx", none=None)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.weight = _table(num_embeddings, embedding_dim, _weight, dtype, not _freeze)
        if _weight is None:
            self.reset_parameters()
        self.sparse = sparse

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        s += self._optional_repr(str)
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is ``embeddings`` (shared, frozen unless freeze=False)."""
        rows, cols = _check_pretrained(embeddings)
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(_Table):
    """Sums, means or maxima of bags of embeddings (see ``functional.embedding_bag``)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = padding_index(padding_idx, num_embeddings, "padding_idx", none=None)
        self.weight = _table(num_embeddings, embedding_dim, _weight, dtype, True)
        if _weight is None:
            self.reset_parameters()
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}" + self._optional_repr(repr)
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False, include_last_offset=False,
                        padding_idx=None):
        """An EmbeddingBag whose weight is ``embeddings`` (shared, frozen unless freeze=False)."""
        rows, cols = _check_pretrained(embeddings)
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
                  norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

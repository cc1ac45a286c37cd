"""Variable-length sequences for recurrent layers (torch.nn.utils.rnn).

A PackedSequence stores the steps of a batch of sequences, sorted by decreasing length, time
step after time step: ``data[offset_t : offset_t + batch_sizes[t]]`` are the rows of the
sequences still running at step t. Packing and padding are each one gather (``index_select``)
over the data, with indices computed from the lengths, so autograd and the tracer see one op.
Lengths are host metadata (as in torch, where they live on the CPU): a traced program is
specialized on them.
"""
from collections import namedtuple
from collections.abc import Iterable

import dynograph as _d

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]

_SORT_ERROR = ("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
               "to sidestep this requirement if you do not need ONNX exportability.")


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(namedtuple("PackedSequence_",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """The packed steps of a batch of sequences (made by pack_padded_sequence or
    pack_sequence): data, batch_sizes (int64, one per step), and the permutation that sorted
    the batch by length (sorted_indices) with its inverse (unsorted_indices), or None."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # the legacy form PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The same sequences with data converted by ``Tensor.to(*args, **kwargs)``; the
        indices follow it to its device, batch_sizes stay on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return t.to(data.device)
        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                          _bind(self.unsorted_indices, move))

    def cuda(self, device=None, non_blocking=False):
        """A copy with data on a CUDA device."""
        return self.to(device="cuda" if device is None else device, non_blocking=non_blocking)

    def cpu(self):
        """A copy with data in CPU memory (self when it already is)."""
        return self.to(device="cpu")

    def double(self):
        return self.to(dtype=_d.float64)

    def float(self):
        return self.to(dtype=_d.float32)

    def half(self):
        return self.to(dtype=_d.float16)

    def long(self):
        return self.to(dtype=_d.int64)

    def int(self):
        return self.to(dtype=_d.int32)

    def short(self):
        return self.to(dtype=_d.int16)

    def char(self):
        return self.to(dtype=_d.int8)

    def byte(self):
        return self.to(dtype=_d.uint8)

    @property
    def is_cuda(self):
        """Whether data is on a CUDA device."""
        return self.data.is_cuda


def invert_permutation(permutation):
    """The inverse of an index permutation (None for None)."""
    if permutation is None:
        return None
    output = _d.empty_like(permutation)
    return output.scatter_(0, permutation, _d.arange(permutation.numel()))


# ----------------------------------------------------------------------------- packing

def _lengths_list(lengths):
    if not isinstance(lengths, _d.Tensor):
        lengths = _d.as_tensor(lengths, dtype=_d.int64)
    else:
        lengths = lengths.to(dtype=_d.int64)
    if lengths.dim() != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.dim()}D cpu Long tensor")
    return lengths.tolist()


def _batch_sizes(sorted_lengths):
    """How many sequences run at each step, for lengths in decreasing order."""
    sizes, b = [], len(sorted_lengths)
    for t in range(sorted_lengths[0] if sorted_lengths else 0):
        while sorted_lengths[b - 1] <= t:
            b -= 1
        sizes.append(b)
    return sizes


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (batch_first: (B, T, *)) of sequences of the given
    lengths. With enforce_sorted=True the lengths must be in decreasing order; otherwise the
    batch is sorted here and the permutation recorded in the result."""
    lengths = _lengths_list(lengths)
    if enforce_sorted:
        sorted_indices, order = None, list(range(len(lengths)))
    else:
        sorted_indices = _d.sort(_d.tensor(lengths, dtype=_d.int64), descending=True)[1]
        order = sorted_indices.tolist()
        lengths = [lengths[i] for i in order]
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError(_SORT_ERROR)
    if lengths[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a sequence of length {lengths[0]} does not "
                           f"fit the padded input of {steps} steps (input shape "
                           f"{list(input.shape)})")
    batch_sizes = _batch_sizes(lengths)
    # row of step t of sorted sequence b in the input flattened over its first two dims
    if batch_first:
        rows = [order[b] * steps + t for t, bs in enumerate(batch_sizes) for b in range(bs)]
    else:
        rows = [t * batch + order[b] for t, bs in enumerate(batch_sizes) for b in range(bs)]
    flat = input.reshape((steps * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _d.tensor(rows, dtype=_d.int64))
    if sorted_indices is not None:
        sorted_indices = sorted_indices.to(input.device)
    return PackedSequence(data, _d.tensor(batch_sizes, dtype=_d.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths), in the
    batch order before packing; T = total_length if given."""
    batch_sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    max_seq_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_seq_length}")
        max_seq_length = total_length
    data = sequence.data
    batch = batch_sizes[0] if batch_sizes else 0
    offsets = [0]
    for bs in batch_sizes:
        offsets.append(offsets[-1] + bs)
    sorted_lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(batch)]
    order = list(range(batch)) if sequence.unsorted_indices is None else \
        sequence.unsorted_indices.tolist()
    pad_row = offsets[-1]   # the padding value, appended after the data

    def row(t, b):
        s = order[b]
        return offsets[t] + s if t < len(batch_sizes) and s < batch_sizes[t] else pad_row

    if batch_first:
        rows = [row(t, b) for b in range(batch) for t in range(max_seq_length)]
        shape = (batch, max_seq_length)
    else:
        rows = [row(t, b) for t in range(max_seq_length) for b in range(batch)]
        shape = (max_seq_length, batch)
    padded = _d.cat([data, data.new_full((1,) + tuple(data.shape[1:]), padding_value)], 0)
    padded = padded.index_select(0, _d.tensor(rows, dtype=_d.int64))
    lengths = _d.tensor([sorted_lengths[s] for s in order], dtype=_d.int64)
    return padded.reshape(shape + tuple(data.shape[1:])), lengths


def _check_broadcast(dest, src):
    """torch's copy_ error when ``src`` does not broadcast to ``dest``."""
    n = max(len(dest), len(src))
    for k in range(1, n + 1):
        a = dest[-k] if k <= len(dest) else 1
        b = src[-k] if k <= len(src) else 1
        if a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b "
                               f"({b}) at non-singleton dimension {n - k}")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shapes (L_i, *) into (max L, B, *) (batch_first: (B, max L, *)),
    filling with padding_value on the right (or left) of each; dtype and trailing shape are
    those of the first sequence."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of "
                           f"type: {type(sequences)}")
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    first = sequences[0]
    if any(s.dim() == 0 for s in sequences):
        raise RuntimeError("pad_sequence: every sequence needs at least one dimension (its "
                           f"length), but got shapes {[list(s.shape) for s in sequences]}")
    trailing = tuple(first.shape[1:])
    lens = [s.shape[0] for s in sequences]
    parts = []
    for s, n in zip(sequences, lens):
        _check_broadcast((n,) + trailing, tuple(s.shape))
        s = s.to(first.dtype)
        parts.append(s if tuple(s.shape) == (n,) + trailing else s.expand((n,) + trailing))
    parts.append(first.new_full((1,) + trailing, padding_value))
    stacked = _d.cat(parts, 0)
    max_len, batch = max(lens), len(sequences)
    starts, pad_row = [0], sum(lens)
    for n in lens:
        starts.append(starts[-1] + n)

    def row(t, b):
        skip = 0 if padding_side == "right" else max_len - lens[b]
        return starts[b] + t - skip if 0 <= t - skip < lens[b] else pad_row

    if batch_first:
        rows = [row(t, b) for b in range(batch) for t in range(max_len)]
        shape = (batch, max_len)
    else:
        rows = [row(t, b) for t in range(max_len) for b in range(batch)]
        shape = (max_len, batch)
    out = stacked.index_select(0, _d.tensor(rows, dtype=_d.int64))
    return out.reshape(shape + trailing)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length (unlike torch, the
    input is left as it was, not transposed in place)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    # lengths as host ints (slices a tracer can follow), each piece a copy like torch's mask
    lengths = lengths.tolist() if isinstance(lengths, _d.Tensor) else [int(n) for n in lengths]
    return [seq[:n].clone() for seq, n in zip(padded_sequences.unbind(0), lengths, strict=True)]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of sequences (L_i, *) (decreasing lengths unless enforce_sorted=False)."""
    lengths = _d.as_tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

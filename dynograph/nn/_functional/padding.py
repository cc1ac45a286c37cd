"""F.pad: constant, reflect, replicate and circular padding, with PyTorch's checks.

Non-constant modes gather the source index of every output position along each padded dim
(``index_select``), so their gradient is index_select's.  Negative widths crop.
"""
import operator

import dynograph as _d

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad) // 2 dims: pad = (last_lo, last_hi, prev_lo, prev_hi, ...)."""
    pad = _pad_widths(pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           "dimension but got padding length "
                           f"{len(pad)} and input of dimension {input.dim()}")
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    _check_dims(input, len(pad))
    if mode == "circular":
        index = _circular_index
        _check_circular(input, pad)
    else:
        index = _reflect_index if mode == "reflect" else _replicate_index
        _check_reflect_replicate(input, pad, mode)
        if input.dtype is _d.bool:
            kernel = ("reflection" if mode == "reflect" else "replication") + f"_pad{len(pad) // 2}d"
            raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    out = input
    for k in range(len(pad) // 2):
        dim = input.dim() - 1 - k
        idx = index(out.shape[dim], pad[2 * k], pad[2 * k + 1])
        out = out.index_select(dim, _d.tensor(idx, dtype=_d.int64, device=out.device))
    return out


def _pad_widths(pad):
    """``pad`` as a tuple of ints, with PyTorch's argument errors."""
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, not "
                        f"{type(pad).__name__}")
    out = []
    for i, p in enumerate(pad):
        try:
            out.append(operator.index(p))
        except TypeError:
            raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but found "
                            f"element of type {type(p).__name__} at pos {i}") from None
    return tuple(out)


def _pad_constant(x, pad, value):
    for k in range(len(pad) // 2):
        dim = x.dim() - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if lo < 0:                  # negative widths crop (narrow raises PyTorch's error)
            x = x.narrow(dim, -lo, x.shape[dim] + lo)
        if hi < 0:
            x = x.narrow(dim, 0, x.shape[dim] + hi)
        if lo > 0 or hi > 0:
            parts = []
            for n in (max(lo, 0), max(hi, 0)):
                shape = list(x.shape)
                shape[dim] = n
                parts.append(x.new_full(shape, value))
            x = _d.cat([parts[0], x, parts[1]], dim)
    return x


def _check_dims(input, npad):
    """Non-constant modes pad the last 1, 2 or 3 dims of a (batch,) channel, spatial... input."""
    k = npad // 2
    if input.dim() not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {npad} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _padded(input, pad):
    """(dim, size, lo, hi, output size) of each padded dim, last dim first (pad's order)."""
    out = []
    for k in range(len(pad) // 2):
        dim = input.dim() - 1 - k
        size, lo, hi = input.shape[dim], pad[2 * k], pad[2 * k + 1]
        out.append((dim, size, lo, hi, size + lo + hi))
    return out


def _check_circular(input, pad):
    dims = _padded(input, pad)
    for _, size, lo, hi, n in reversed(dims):       # leading dim first
        if lo > size or hi > size:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n < 0:
            raise RuntimeError("Negative padding value is resulting in an empty dimension")
    # PyTorch checks no more than that; past it its kernel reads memory it never wrote, or
    # fails with an internal error.  Here: crops may not overlap, and a wrap must come from
    # the kept (cropped) part, else it wraps more than once (moot when the output is empty).
    kept = [size - max(-lo, 0) - max(-hi, 0) for _, size, lo, hi, _ in dims]
    if min(kept) < 0:
        raise RuntimeError("Negative padding value is resulting in an empty dimension")
    if all(d[4] > 0 for d in dims) and any(max(d[2], d[3]) > k for d, k in zip(dims, kept)):
        raise RuntimeError("Padding value causes wrapping around more than once.")


def _check_reflect_replicate(input, pad, mode):
    dims = _padded(input, pad)
    k = len(dims)
    batched = input.dim() == k + 2
    if any(n == 0 for n in input.shape[int(batched):]):
        raise RuntimeError(
            f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and "
            f"other non-zero dimensions for input, but got: {list(input.shape)}")
    if mode == "reflect":
        for i, (dim, size, lo, hi, _) in enumerate(dims):
            if lo >= size or hi >= size:
                raise RuntimeError(
                    f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding "
                    f"input dimension, but got: padding ({lo}, {hi}) at dimension {dim} of input "
                    f"{list(input.shape)}")
    sizes = [d[1] for d in reversed(dims)]          # leading dim first, as the message says
    outs = [d[4] for d in reversed(dims)]
    if all(n < 1 for n in outs):
        raise RuntimeError(_too_small(sizes, outs, mode))
    shape = list(input.shape[:input.dim() - k]) + outs
    for n in outs:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {shape}")


def _too_small(sizes, outs, mode):
    """PyTorch's message for an output with no element left, spelled per kernel."""
    if len(sizes) == 1:
        return f"input (W: {sizes[0]}) is too small. Calculated output W: {outs[0]}"
    if len(sizes) == 2:
        gap = " " if mode == "replicate" else ""
        return (f"input (H: {sizes[0]}, W: {sizes[1]}{gap}) is too small. Calculated output "
                f"H: {outs[0]} W: {outs[1]}")
    return (f"input (D: {sizes[0]} H: {sizes[1]}, W: {sizes[2]}) is too small. Calculated output "
            f"D: {outs[0]} H: {outs[1]} W: {outs[2]}")


def _reflect_index(size, lo, hi):
    """Reflection about the input's edges (the edge itself not repeated)."""
    period = 2 * (size - 1)
    out = []
    for i in range(-lo, size + hi):
        j = i % period if period else 0
        out.append(period - j if j >= size else j)
    return out


def _replicate_index(size, lo, hi):
    return [min(max(i, 0), size - 1) for i in range(-lo, size + hi)]


def _circular_index(size, lo, hi):
    """Negative widths crop first; positive ones then wrap around the kept part."""
    start = max(-lo, 0)
    kept = size - start - max(-hi, 0)
    n = kept + max(lo, 0) + max(hi, 0)
    if kept == 0:               # the whole output is empty (checked): any valid index will do
        return [min(start, size - 1)] * n
    return [start + (i - max(lo, 0)) % kept for i in range(n)]

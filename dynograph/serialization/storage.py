"""Which memory a tensor views: tensors that share a numpy buffer are saved as one storage."""
import numpy as np


def _address(a):
    return a.__array_interface__["data"][0]


def flat_bytes(root):
    """The bytes of a contiguous array in memory order, as a uint8 view (no copy)."""
    return (root if root.flags.c_contiguous else root.T).reshape(-1).view(np.uint8)


def locate(a):
    """``(root, byte_offset, byte_strides)``: the contiguous array ``a`` is a view of, where ``a``
    starts in it and its strides.  A view the formats cannot express (negative or
    misaligned strides, a non-contiguous root) becomes its own contiguous copy."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    item = a.itemsize
    if a.size and (root.flags.c_contiguous or root.flags.f_contiguous):
        offset = _address(a) - _address(root)
        strides = a.strides
        if offset >= 0 and offset % item == 0 and all(s >= 0 and s % item == 0 for s in strides):
            end = offset + sum((n - 1) * s for n, s in zip(a.shape, strides)) + item
            if end <= root.nbytes:
                return root, offset, strides
    own = a.copy(order="C")                 # (ascontiguousarray would make 0-d arrays 1-d)
    return own, 0, own.strides if own.size else (0,) * a.ndim

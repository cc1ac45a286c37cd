"""Assembling tensors from tensors and index arithmetic: ``block_diag``, ``cartesian_prod``,
``combinations``, ``diagflat``, ``tril_indices``, ``triu_indices``, ``isin``,
``unravel_index``.  Composites: the values move through cat, indexing and comparisons, so
gradients flow where PyTorch's do."""
import itertools
import math

import numpy as np

from dynograph.compiler.ops.core import result_type, type_name
from dynograph.runtime import dtypes as D
from . import _creation
from ._tensor import Tensor, tensor_method

__all__ = []


def _function(fn):
    __all__.append(fn.__name__)
    return fn


def _public(fn):
    __all__.append(fn.__name__)
    tensor_method(fn)
    return fn


@_function
def block_diag(*tensors):
    """The tensors (0-, 1- or 2-D) placed along the diagonal of one 2-D tensor."""
    from ._shape import cat
    mats = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): argument 'tensors' (position 1) must be tuple of "
                            f"Tensors, not {type(t).__name__}")
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, -1) if t.dim() == 1 else t.reshape(1, 1) if t.dim() == 0 else t)
    dtype = result_type(*mats) if mats else D.get_default_dtype()
    cols = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        row = [_creation.zeros(r, left, dtype=dtype), m.to(dtype),
               _creation.zeros(r, cols - left - c, dtype=dtype)]
        rows.append(cat(row, 1))
        left += c
    if not rows:
        return _creation.zeros(1, 0, dtype=dtype)
    return cat(rows, 0)


def _need_1d(tensors, fn):
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                            f"not {type(t).__name__}")
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


@_function
def cartesian_prod(*tensors):
    """Every combination of one element of each 1-D tensor, one per row (a single tensor is
    returned as it is)."""
    if not tensors:
        raise RuntimeError("cartesian_prod expects at least one tensor")
    _need_1d(tensors, "cartesian_prod")
    if len(tensors) == 1:
        return tensors[0]
    from ._shape import meshgrid, stack
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


@_public
def combinations(input, r=2, with_replacement=False):
    """The length-``r`` subsequences of a 1-D tensor, one per row (itertools' order)."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return input[_creation.tensor(idx)]


@_public
def diagflat(input, offset=0):
    """A 2-D tensor with the flattened input on diagonal ``offset``."""
    from ._shape import diag
    return diag(input.reshape(-1), offset)


def _triangle_indices(fn, row, col, offset, dtype, lower):
    if dtype is None:
        dtype = D.int64
    if dtype not in (D.int32, D.int64):
        raise RuntimeError(f"\"{fn}\" not implemented for '{type_name(dtype)}'")
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    pick = np.tril_indices if lower else np.triu_indices
    idx = np.stack(pick(row, offset, col)) if row and col else np.zeros((2, 0), np.int64)
    return _creation.tensor(idx.astype(dtype.np))


@_function
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the lower triangle of a row x col matrix, as a 2 x N tensor."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, True)


@_function
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the upper triangle of a row x col matrix, as a 2 x N tensor."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, False)


@_function
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments - got (" +
                        f"{type(elements).__name__}, {type(test_elements).__name__}), but "
                        "expected one of:\n * (Tensor elements, Tensor test_elements)\n"
                        " * (Number element, Tensor test_elements)\n"
                        " * (Tensor elements, Number test_element)")
    dtype = result_type(elements, test_elements)
    e = elements.to(dtype) if isinstance(elements, Tensor) else _creation.tensor(elements, dtype=dtype)
    t = test_elements.to(dtype) if isinstance(test_elements, Tensor) else \
        _creation.tensor([test_elements], dtype=dtype)
    if dtype is D.bool:
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    t = t.reshape(-1)
    if dtype.is_floating_point:
        t = t[~t.isnan()]       # NaN is in nothing; left in, it would break the binary search
    t = t.sort()[0]
    if t.numel() == 0:
        found = _creation.zeros(e.shape, dtype=D.bool)
    else:
        from ._indexing import searchsorted
        pos = searchsorted(t, e.contiguous()).clamp(max=t.numel() - 1)
        found = t[pos] == e
    return found.logical_not() if invert else found


@_function
def unravel_index(indices, shape):
    """The coordinates in ``shape`` of flat ``indices``: a tuple of tensors, one per dimension."""
    if not isinstance(indices, Tensor):
        indices = _creation.tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype is D.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(tuple(shape)))
    n = math.prod(shape)
    flat = indices.to(D.int64) % max(n, 1)
    out = []
    for s in reversed(shape):
        out.append(flat % s if s else flat)
        flat = flat // s if s else flat
    return tuple(reversed(out))

"""Copies and fills under their functional names, and storage-level resizing:
``dynograph.clone``/``fill``/``fill_``/``zero_``, the ``*_copy`` forms of the view ops
(``permute_copy``, ``transpose_copy`` ... : the view's values in new memory),
``as_strided_scatter``, ``empty_permuted``, ``Tensor.sum_to_size``, ``resize_``/``resize_as_``
and ``Tensor.__rdiv__``."""
import math

import numpy as np

from . import _creation
from ._convert import contiguous_format, preserve_format
from ._tensor import Tensor, tensor_method

__all__ = []


def _function(fn):
    __all__.append(fn.__name__)
    return fn


@_function
def clone(input, *, memory_format=preserve_format):
    """A copy of ``input`` with its own memory (torch.clone)."""
    return input.clone(memory_format=memory_format)


@_function
def fill(input, value):
    """A copy of ``input`` with every element ``value`` (the functional form of ``fill_``)."""
    return input.clone().fill_(value)


@_function
def fill_(input, value):
    """``input.fill_(value)``."""
    return input.fill_(value)


@_function
def zero_(input):
    """``input.zero_()``."""
    return input.zero_()


# ---------------------------------------------------------------- copies of views

def _copy_of(view_name, name=None, returns_sequence=False):
    """``<view>_copy``: the view op's result, copied into new contiguous memory."""
    def fn(input, *args, out=None, **kwargs):
        r = getattr(input, view_name)(*args, **kwargs) if not callable(view_name) else \
            view_name(input, *args, **kwargs)
        if returns_sequence:
            return tuple(t.clone(memory_format=contiguous_format) for t in r)
        r = r.clone(memory_format=contiguous_format)
        return r if out is None else out.resize_(r.shape).copy_(r)
    fn.__name__ = name or f"{view_name}_copy"
    fn.__doc__ = f"The values of ``Tensor.{view_name}`` in new memory (torch.{fn.__name__})."
    __all__.append(fn.__name__)
    globals()[fn.__name__] = fn
    return fn


for _view in ("permute", "transpose", "t", "squeeze", "unsqueeze", "expand", "select",
              "unfold", "view", "as_strided", "detach", "alias"):      # diagonal_copy: a primitive
    _copy_of(_view)
for _view in ("split", "split_with_sizes", "unbind"):
    _copy_of(_view, returns_sequence=True)


def _slice(x, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


_copy_of(_slice, "slice_copy")


if not hasattr(Tensor, "alias"):
    @tensor_method
    def alias(self):
        """A view of all of ``self`` (torch.alias)."""
        return self.view(self.shape)


def _addresses(shape, strides, offset):
    """The storage address of every element of a strided layout, in row-major order."""
    grid = np.indices(shape).reshape(len(shape), -1)
    return offset + sum((grid[k] * strides[k] for k in range(len(shape))),
                        np.zeros(grid.shape[1], np.int64))


@_function
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` with the elements of ``input.as_strided(size, stride, storage_offset)``
    replaced by ``src``: addresses are positions in input's storage, so the elements of input
    stored there take src's values (addresses input does not show change nothing visible)."""
    size, stride = tuple(size), tuple(stride)
    if size != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(size)}")
    shape = tuple(input.shape)
    mine = _addresses(shape, input.stride(), input.storage_offset())
    view = _addresses(size, stride, input.storage_offset() if storage_offset is None else storage_offset)
    storage = (int(mine.max()) + 1) if mine.size else 0
    if view.size and (view.min() < 0 or view.max() >= max(storage, input._data.base.size
                                                           if input._data.base is not None else 0)):
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                           f"{storage_offset or 0} are out of bounds for the input's storage")
    order = np.argsort(view, kind="stable")
    ranked = view[order]
    at = np.searchsorted(ranked, mine).clip(max=max(ranked.size - 1, 0))
    hit = ranked.size > 0
    hit = (ranked[at] == mine) if hit else np.zeros(mine.size, bool)
    elements = _creation.tensor(np.flatnonzero(hit))
    values = src.reshape(-1)[_creation.tensor(order[at[hit]])].to(input.dtype)
    return input.reshape(-1).scatter(0, elements, values).reshape(shape)


tensor_method(as_strided_scatter)


@_function
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialized tensor of logical ``size`` whose memory holds its dimensions in the order
    ``physical_layout`` (outermost first)."""
    size, perm = tuple(size), tuple(physical_layout)
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(perm)}")
    physical = _creation.empty(tuple(size[p] for p in perm), dtype=dtype, device=device)
    inverse = tuple(perm.index(i) for i in range(len(perm)))
    out = physical.permute(inverse)
    return out.requires_grad_() if requires_grad else out


# ---------------------------------------------------------------- Tensor methods

@tensor_method
def sum_to_size(self, *sizes, size=None):
    """``self`` summed over the dimensions broadcasting would have expanded to reach its shape
    from ``size``."""
    size = sizes if size is None else size
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    size = tuple(size)
    shape = tuple(self.shape)
    if not shape and not size:
        return self.sum()           # PyTorch sums a 0-d tensor (integers become int64)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != n and s != 1 for s, n in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, (s, n) in enumerate(zip(size, shape[lead:]))
                                      if s == 1 and n != 1)
    r = self.sum(dims, keepdim=True) if dims else self
    return r.reshape(size) if lead else r


@tensor_method
def resize_(self, *sizes, size=None, memory_format=None):
    """Change ``self``'s shape in place, keeping the leading elements in memory order (new
    elements are uninitialized; here zeros)."""
    sizes = sizes if size is None else size
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: "
                           f"{list(sizes)}")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if tuple(self.shape) == sizes:
        return self
    old = np.ascontiguousarray(self._data).reshape(-1)
    n = math.prod(sizes)
    new = np.zeros(n, dtype=old.dtype)
    keep = min(n, old.size)
    new[:keep] = old[:keep]
    self._data = new.reshape(sizes)
    self._base = None
    self._bump_version()
    return self


@tensor_method
def resize_as_(input, the_template, memory_format=None):
    """``input.resize_(the_template.shape)``."""
    return resize_(input, the_template.shape)


@tensor_method
def __rdiv__(self, other):
    """``other / self`` (Python 2's name, which PyTorch keeps)."""
    return self.__rtruediv__(other)


__all__ += ["resize_as_"]

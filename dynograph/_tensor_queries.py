"""Small Tensor queries and helpers PyTorch code calls: the layout and backend flags (every
dynograph tensor is a dense CPU tensor, so ``is_sparse``, ``is_quantized`` ... are False),
``is_same_size``, ``is_signed``, ``is_inference``, ``dim_order``, ``fill_diagonal_``, the
``unsafe_`` split forms, pinning and sharing (no-ops on the CPU), ``apply_``/``map_``/``map2_``."""
import numpy as np

from dynograph.runtime import dtypes as D
from ._tensor import Tensor, tensor_method

__all__ = ["is_same_size", "is_signed", "is_inference", "unsafe_chunk", "unsafe_split",
           "unsafe_split_with_sizes"]

# layout and backend flags: a dense, unquantized CPU tensor
for _flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_nested", "is_mkldnn", "is_xpu",
              "is_xla", "is_mps", "is_ipu", "is_maia", "is_mtia", "is_vulkan"):
    setattr(Tensor, _flag, property(lambda self: False, doc="False: dynograph tensors are dense CPU "
                                                            "tensors."))


@tensor_method
def is_same_size(input, other):
    """Whether both tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


@tensor_method
def is_signed(input):
    """Whether the dtype holds negative values (every dtype but bool and uint8)."""
    return input.dtype not in (D.bool, D.uint8)


@tensor_method
def is_inference(input):
    """Whether the tensor was made under ``inference_mode`` (dynograph records no such tensors)."""
    return False


@tensor_method
def is_pinned(self, device=None):
    """Whether this cpu tensor's memory is page-locked (``pin_memory``)."""
    from dynograph.runtime import cuda_memory
    return type(self._data) is np.ndarray and cuda_memory.is_pinned(self._data)


@tensor_method
def pin_memory(self, device=None):
    """A copy in page-locked host memory, from which ``.to('cuda', non_blocking=True)`` copies
    asynchronously (``self`` where it is pinned already, or where no CUDA device exists)."""
    if self.is_cuda:
        raise RuntimeError(f"cannot pin '{self.type().replace('dynograph.', 'torch.cuda.')}' "
                           "only dense CPU tensors can be pinned")
    from dynograph import cuda
    if self.is_pinned() or not cuda.is_available():
        return self
    from dynograph.runtime import cuda_memory
    out = cuda_memory.pinned(self._data.shape, self._data.dtype)
    out[...] = self._data
    return Tensor._wrap(out)


@tensor_method
def is_shared(self):
    """False: tensors live in process memory (``share_memory_`` is a no-op)."""
    return False


@tensor_method
def share_memory_(self):
    """``self`` (worker processes receive copies)."""
    return self


@tensor_method
def dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (by decreasing stride)."""
    strides = self.stride()
    return tuple(sorted(range(self.dim()), key=lambda d: (-strides[d], d)))


@tensor_method
def fill_diagonal_(self, fill_value, wrap=False):
    """Write ``fill_value`` on the main diagonal (of a 2-D tensor, or of an all-equal-sizes
    tensor); ``wrap`` restarts the diagonal of a tall matrix below every N + 1 rows."""
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = min(shape)
    if len(shape) == 2:
        rows, cols = shape
        step = cols + 1
        stop = rows * cols if wrap else min(rows, cols) * cols
        flat = np.arange(0, stop, step)
        index = tuple(np.unravel_index(flat, shape))
    else:
        index = (np.arange(n),) * len(shape)
    from ._creation import tensor
    mask = np.zeros(shape, dtype=bool)
    mask[index] = True
    return self.masked_fill_(tensor(mask), fill_value)


@tensor_method
def unsafe_chunk(input, chunks, dim=0):
    """``chunk``, returning copies (PyTorch's variant skips view tracking)."""
    return tuple(t.clone() for t in input.chunk(chunks, dim))


@tensor_method
def unsafe_split(input, split_size, dim=0):
    """``split``, returning copies."""
    return tuple(t.clone() for t in input.split(split_size, dim))


@tensor_method
def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """``split_with_sizes``, returning copies."""
    return tuple(t.clone() for t in input.split_with_sizes(split_sizes, dim))


@tensor_method
def apply_(self, callable):  # noqa: A002
    """Replace every element by ``callable(element)`` (a Python loop, as in PyTorch)."""
    return self.copy_(Tensor._wrap(np.vectorize(callable, otypes=[self._data.dtype])(self._data)))


@tensor_method
def map_(self, tensor, callable):  # noqa: A002
    """``self[i] = callable(self[i], tensor[i])`` with ``tensor`` broadcast to self's shape."""
    other = np.broadcast_to(tensor._data, self._data.shape)
    fn = np.vectorize(callable, otypes=[self._data.dtype])
    return self.copy_(Tensor._wrap(fn(self._data, other)))


@tensor_method
def map2_(self, x, y, callable):  # noqa: A002
    """``self[i] = callable(self[i], x[i], y[i])`` with x and y broadcast to self's shape."""
    a = np.broadcast_to(x._data, self._data.shape)
    b = np.broadcast_to(y._data, self._data.shape)
    fn = np.vectorize(callable, otypes=[self._data.dtype])
    return self.copy_(Tensor._wrap(fn(self._data, a, b)))

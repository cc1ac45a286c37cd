"""Arrays in CUDA device memory: a block of a device's caching allocator with a shape, strides and
a numpy dtype (what a cuda tensor's ``_data`` is, as a numpy array is a cpu tensor's).

A ``DeviceArray`` made with a shape owns a new contiguous block, returned to the allocator when
the last array using it is dropped; ``view(shape, strides, offset)`` makes another array over the
same block (a tensor view).  Arrays answer numpy's questions about their layout (``shape``,
``strides`` in bytes, ``ndim``, ``size``, ``itemsize``, ``nbytes``, ``flags.c_contiguous``,
``base``) so that code reading a tensor's geometry works on both.  Copies to and from host arrays
move the bytes a view spans, so strided views copy too.
"""
import math
import weakref

import numpy as np

from .device import device


def _driver():
    """runtime/cuda_driver.py, imported on first use (``import dynograph`` does not load it)."""
    from . import cuda_driver
    return cuda_driver


_pinned = weakref.WeakValueDictionary()      # id(host array) -> the array, in pinned memory


def pinned(shape, dtype):
    """A new host array in page-locked (pinned) memory."""
    a = _driver().pinned_empty(tuple(shape), np.dtype(dtype))
    _pinned[id(a)] = a
    return a


def is_pinned(array):
    """Whether host array ``array`` lies in pinned memory made by ``pinned``."""
    root = array
    while isinstance(root.base, np.ndarray) and id(root) not in _pinned:
        root = root.base
    return _pinned.get(id(root)) is root


class _Flags:
    __slots__ = ("c_contiguous", "writeable")

    def __init__(self, c_contiguous):
        self.c_contiguous = c_contiguous
        self.writeable = True


def contiguous_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class _Block:
    """A block of device memory, freed when no array uses it."""
    __slots__ = ("index", "address", "nbytes", "__weakref__")

    def __init__(self, nbytes, index):
        alloc = _driver().allocator(index)
        self.index = _driver().current_device() if index is None else index
        self.nbytes = nbytes
        self.address = alloc.malloc(nbytes)
        weakref.finalize(self, alloc.free, self.address)


class DeviceArray:
    """``shape`` and ``dtype`` with byte ``strides`` over device ``index``'s memory; ``address``
    is the first element's."""

    __slots__ = ("shape", "dtype", "strides", "address", "block", "base", "__weakref__")

    def __init__(self, shape, dtype, index=None):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.strides = contiguous_strides(self.shape, self.dtype.itemsize)
        self.block = _Block(math.prod(self.shape) * self.dtype.itemsize, index)
        self.address = self.block.address
        self.base = None

    # -- numpy's questions ---------------------------------------------------------------------
    @property
    def index(self):
        return self.block.index

    @property
    def device(self):
        return device("cuda", self.block.index)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def flags(self):
        return _Flags(self.is_contiguous())

    def is_contiguous(self):
        if self.size <= 1:
            return True
        want = contiguous_strides(self.shape, self.itemsize)
        return all(n == 1 or s == w for n, s, w in zip(self.shape, self.strides, want))

    @property
    def offset(self):
        """Bytes from the start of the block to the first element."""
        return self.address - self.block.address

    # -- views ---------------------------------------------------------------------------------
    def view(self, shape, strides, offset, dtype=None):
        """An array over this one's block: ``shape``, byte ``strides``, ``offset`` bytes from
        the block's start (of ``dtype``, this array's by default)."""
        out = object.__new__(DeviceArray)
        out.shape = tuple(int(n) for n in shape)
        out.dtype = self.dtype if dtype is None else np.dtype(dtype)
        out.strides = tuple(int(s) for s in strides)
        out.block = self.block
        out.address = self.block.address + int(offset)
        out.base = self if self.base is None else self.base
        return out

    def span(self):
        """(first byte, end byte) of the elements, relative to ``address``."""
        if self.size == 0:
            return 0, 0
        low = sum(s * (n - 1) for n, s in zip(self.shape, self.strides) if s < 0)
        high = sum(s * (n - 1) for n, s in zip(self.shape, self.strides) if s > 0)
        return low, high + self.itemsize

    def shadow(self):
        """(a numpy array with this array's shape, strides, dtype and offset over no memory, the
        shadow of its whole block): numpy's own view and layout code runs on it, touching no
        element, and a result's address minus the block shadow's is its offset in the block."""
        nbytes = self.block.nbytes
        root = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=(max(nbytes, 1),),
                                               strides=(1,))
        array = np.ndarray(self.shape, self.dtype, buffer=root, offset=self.offset,
                           strides=self.strides)
        return array, root

    def view_by(self, fn, args):
        """The views of this array's block that ``fn(*args)`` returns when it runs on this array's
        shadow in place of the array (one, or a tuple): numpy's own view code, e.g. a view op's
        implementation.  Raises ValueError where ``fn`` returned something that is not a view."""
        shadow, root = self.shadow()
        result = fn(*[shadow if a is self else a for a in args])
        start = root.ctypes.data

        def back(r):
            offset = r.ctypes.data - start if isinstance(r, np.ndarray) else -1
            if not 0 <= offset <= self.block.nbytes:
                raise ValueError("not a view")
            return self.view(r.shape, r.strides, offset, r.dtype)
        if type(result) in (tuple, list):
            return tuple(back(r) for r in result)
        return back(result)

    # -- copies --------------------------------------------------------------------------------
    @classmethod
    def from_host(cls, array, index=None, non_blocking=False):
        """A contiguous device copy of a host array; with ``non_blocking`` and an array in pinned
        memory (``pinned``), a copy queued on the default stream, which the caller returns
        before it ends."""
        host = np.asarray(array, order="C")        # (ascontiguousarray makes 0-d arrays 1-d)
        out = cls(host.shape, host.dtype, index)
        if non_blocking and out.nbytes and host is array and is_pinned(host):
            _driver().activate(out.index)
            _driver().copy_to_device_async(out.address, host)
        else:
            out.copy_from_host(host)
        return out

    def copy_from_host(self, array):
        """Write a host array (broadcast to this shape, cast to this dtype) into these elements."""
        host = np.asarray(array)
        if self.size == 0:
            return
        try:
            host = np.broadcast_to(host, self.shape)
        except ValueError:
            raise ValueError(f"cannot copy a host array of shape {host.shape} into a device array "
                             f"of shape {self.shape}") from None
        _driver().activate(self.index)
        if self.is_contiguous():
            _driver().copy_to_device(self.address, np.asarray(host, dtype=self.dtype, order="C"))
            return
        # a strided view: read the bytes it spans, replace its elements, write them back
        low, _ = self.span()
        raw, view = self._window_of_span()
        view[...] = host
        _driver().copy_to_device(self.address + low, raw)

    def _window_of_span(self):
        low, high = self.span()
        raw = np.empty(high - low, np.uint8)
        if raw.size:
            _driver().copy_to_host(raw, self.address + low)
        view = np.ndarray(self.shape, self.dtype, buffer=raw, offset=-low, strides=self.strides)
        return raw, view

    def to_host(self):
        """A new contiguous host array with this array's elements (waits for the work queued
        before)."""
        host = np.empty(self.shape, self.dtype)
        if self.size == 0:
            return host
        _driver().activate(self.index)
        if self.is_contiguous():
            _driver().copy_to_host(host, self.address)
            return host
        _, view = self._window_of_span()
        host[...] = view
        return host

    def copy(self):
        """A new contiguous device array with this one's elements."""
        out = DeviceArray(self.shape, self.dtype, self.index)
        if self.is_contiguous():
            out.copy_from_device(self)
        else:
            out.copy_from_host(self.to_host())
        return out

    def copy_from_device(self, src):
        """Copy the contiguous device array ``src`` (same shape and dtype) into this contiguous
        one."""
        if self.nbytes:
            _driver().activate(self.index)
            _driver().copy_on_device(self.address, src.address, self.nbytes)

    def __repr__(self):
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, "
                f"device='cuda:{self.index}')")

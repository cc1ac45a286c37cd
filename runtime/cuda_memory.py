"""Arrays in CUDA device memory: a block of a device's caching allocator with a shape and a numpy
dtype, returned to the allocator when the array is dropped; copies to and from host arrays.

Device arrays are contiguous (C order): the memory plans a backend allocates for are.
"""
import math
import weakref

import numpy as np

from . import cuda_driver


class DeviceArray:
    """``shape`` and ``dtype`` over ``nbytes`` of device ``index``'s memory at ``address``."""

    __slots__ = ("shape", "dtype", "index", "address", "nbytes", "__weakref__")

    def __init__(self, shape, dtype, index=None):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        alloc = cuda_driver.allocator(index)
        self.index = cuda_driver.current_device() if index is None else index
        self.address = alloc.malloc(self.nbytes)
        weakref.finalize(self, alloc.free, self.address)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def strides(self):
        strides, step = [], self.dtype.itemsize
        for n in reversed(self.shape):
            strides.append(step)
            step *= max(n, 1)
        return tuple(reversed(strides))

    @classmethod
    def from_host(cls, array, index=None):
        """A device copy of a host array."""
        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype, index)
        out.copy_from_host(host)
        return out

    def copy_from_host(self, array):
        host = np.ascontiguousarray(array, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"cannot copy a host array of shape {host.shape} into a device array "
                             f"of shape {self.shape}")
        if self.nbytes:
            cuda_driver.activate(self.index)
            cuda_driver.copy_to_device(self.address, host)

    def to_host(self):
        """A new host array with this array's contents (waits for the work queued before)."""
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            cuda_driver.activate(self.index)
            cuda_driver.copy_to_host(host, self.address)
        return host

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='cuda:{self.index}')"

"""How tensors cross process boundaries (multiprocessing's ForkingPickler).

A tensor travels as its numpy array.  While a worker process is being started (the
dataset is pickled for it), large arrays go through shared memory instead: the parent
copies each one once into an anonymous memory file (memfd) and the child maps that file,
so starting workers costs one memcpy per tensor instead of pickling, piping and
unpickling the whole dataset into every worker.  Inside ``sharing_session()`` all workers
of one DataLoader iterator map the same copy.

When nothing else can see a tensor's array (no view, no other reference, no autograd),
its data moves into that memory file for good, as torch's ``share_memory_`` does: later
epochs then start workers without copying, and in-place changes in the parent stay
visible to the workers.
"""
import contextlib
import mmap
import os
import sys
import weakref
from multiprocessing import context
from multiprocessing.reduction import ForkingPickler

import numpy as np

import dynograph

SHARE_MIN_BYTES = 1 << 20        # smaller arrays are cheaper to pickle

_session = None                  # id(array) -> (array, memfd) while a session is open


@contextlib.contextmanager
def sharing_session():
    """Within the block, each array is copied to shared memory at most once; the parent's
    descriptors close at the end (the started children hold their own)."""
    global _session
    outer, _session = _session, {}
    try:
        yield
    finally:
        for _, fd in _session.values():
            os.close(fd)
        _session = outer


def _memfd_copy(arr):
    """A memory file holding ``arr``'s bytes (C order).  pwrite fills it without faulting
    in the pages one by one through a mapping (twice as fast)."""
    fd = os.memfd_create("dynograph-tensor", getattr(os, "MFD_CLOEXEC", 0))
    os.ftruncate(fd, arr.nbytes)
    data = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:done + (1 << 24)], done)
    return fd


def _shared_fd(arr, popen):
    if _session is not None:
        entry = _session.get(id(arr))
        if entry is None or entry[0] is not arr:
            entry = _session[id(arr)] = (arr, _memfd_copy(arr))
        return entry[1]
    fd = _memfd_copy(arr)
    weakref.finalize(popen, os.close, fd)       # once the child has it, ours can go
    return fd


def _movable(t):
    """True when replacing ``t._data`` is invisible to everyone but ``t``."""
    if t.requires_grad or t.grad_fn is not None or t._base is not None:
        return False
    arr = t.__dict__.get("_data")
    if arr is None or arr.base is not None or not arr.flags.c_contiguous or not arr.flags.writeable:
        return False
    del arr
    return sys.getrefcount(t._data) <= 2        # t's own reference and getrefcount's argument


def _move_to_shared(t):
    """Move ``t``'s data into a new memory file; returns the file's descriptor."""
    arr = t._data
    fd = _memfd_copy(arr)
    shared = np.ndarray(arr.shape, arr.dtype, buffer=mmap.mmap(fd, arr.nbytes))
    t._data = shared
    t._shm = (shared, fd)
    weakref.finalize(shared, os.close, fd)      # the mapping lives on in views; the fd with it
    return fd


def _tensor_fd(t, popen):
    """A memory file holding ``t``'s values: the one its data lives in, else a new copy."""
    held = t.__dict__.get("_shm")
    if held is not None and held[0] is t._data:
        return held[1]
    if _movable(t):
        return _move_to_shared(t)
    return _shared_fd(t._data, popen)


def _rebuild_tensor(array, requires_grad):
    t = dynograph.Tensor._wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_shared(dupfd, dtype, shape, requires_grad):
    fd = dupfd.detach()
    try:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        mm = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    return _rebuild_tensor(np.ndarray(shape, dtype, buffer=mm), requires_grad)


def _reduce_tensor(t):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
            "not support crossing process boundaries.  If you just want to transfer the data, call "
            "detach() on the tensor before serializing (e.g., putting it on the queue).")
    popen = context.get_spawning_popen()
    if popen is not None and t._data.nbytes >= SHARE_MIN_BYTES and hasattr(os, "memfd_create"):
        dupfd = popen.DupFd(popen.duplicate_for_child(_tensor_fd(t, popen)))
        return _rebuild_shared, (dupfd, t._data.dtype, t._data.shape, t.requires_grad)
    arr = t._data
    # contiguous, so no base buffer rides along with a view
    return _rebuild_tensor, (np.ascontiguousarray(arr), t.requires_grad)


ForkingPickler.register(dynograph.Tensor, _reduce_tensor)

"""Writing a result into an existing tensor: in-place methods (``add_``) and ``out=``."""
import numpy as np

from dynograph.runtime.cuda_memory import DeviceArray

from dynograph.compiler.ops.core import can_cast, type_name
from dynograph._trace_hook import TRACE
from . import _device
from .autograd.grad_mode import STATE
from .autograd.graph import drop_retained, retain_at_grad_fn


def check_inplace_leaf(self):
    if self.requires_grad and STATE.grad_enabled:
        base = self._base
        if self.grad_fn is None and base is None:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation.")
        if self.grad_fn is None or (base is not None and base.requires_grad
                                    and base.grad_fn is None):
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                               "in-place operation.")


def check_no_internal_overlap(self):
    """PyTorch refuses in-place writes (other than fill_) into a tensor whose elements share
    memory, such as an expanded one: the result would depend on the order of the writes."""
    a = self._data
    # numpy gives some dims of an empty array stride 0: no elements, nothing shared
    if a.size and any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation.")


def assign(self, result):
    """Make ``self`` hold ``result`` (same shape after broadcasting), keeping its storage."""
    check_inplace_leaf(self)
    check_no_internal_overlap(self)
    if not can_cast(result.dtype, self.dtype):
        raise RuntimeError(
            f"result type {type_name(result.dtype)} can't be cast to the desired output type "
            f"{type_name(self.dtype)}")
    if result._data.shape != self._data.shape:
        if np.broadcast_shapes(result._data.shape, self._data.shape) != self._data.shape:
            raise RuntimeError(
                f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(result._data.shape, self._data.shape))}")
    commit(self, result)
    return self


def commit(self, src):
    """Write ``src`` into ``self``'s memory (broadcast and cast as ``copy_`` does), bump the
    version, and record the write for autograd.

    A tensor that is a view of a base records the write on the base (``CopySlices``: the
    base's new value is its old one with the view's elements replaced), and the view's own
    history is re-derived from the base's, as PyTorch does."""
    record = (STATE.grad_enabled and (src.requires_grad or self.requires_grad)
              and self.is_floating_point())     # integer results carry no gradient
    if record and src.grad_fn is not None:
        _preserve_inputs(src.grad_fn, self)
    if TRACE.tracer is not None:
        TRACE.tracer.write(self, src)
    write(self._data, src._data)
    self._bump_version()
    if record:
        _rebase(self, src)
    return self


def _preserve_inputs(node, self):
    """``node`` (which computed the new value) may have read ``self``: give it a copy of the
    values about to be overwritten, so its derivative still sees them."""
    inputs = getattr(node, "_inputs", None)
    vc = self._vc

    def overwritten(x, v):              # v is None: an input whose values the node never reads
        return v is not None and (x is self or (vc is not None and getattr(x, "_vc", None) is vc))

    if not inputs or not any(overwritten(x, v) for x, v in zip(inputs, node._versions)):
        return
    new = []
    versions = []
    for x, v in zip(inputs, node._versions):
        if overwritten(x, v):
            snap = alias_of(x)
            snap._data = x._data.copy()
            if TRACE.tracer is not None:         # the snapshot holds x's value before the write
                TRACE.tracer.alias(snap, x)
            x, v = snap, 0
        new.append(x)
        versions.append(v)
    node.inputs = tuple(new)
    node._versions = tuple(versions)


def _rebase(self, src):
    base = self._base
    if base is not None and (self.requires_grad or not base.requires_grad):
        _rebase_view(self, base, src)
    elif (src.grad_fn is not None and src._data.shape == self._data.shape
          and src._data.dtype == self._data.dtype):
        _rebase_history(self, src)
    elif base is None:                      # broadcast, cast or constant source: a copy
        from dynograph.compiler.ops import REGISTRY
        op = REGISTRY.get("copy")
        if op is None:
            _rebase_view(self, self, src)
            return
        from ._dispatch import call
        r = call(op, alias_of(self), alias_of(src))
        set_history(self, r.grad_fn, 0)


def _rebase_view(view, root, src):
    from dynograph.compiler.ops import indexing
    from ._dispatch import call
    from ._tensor import Tensor
    ids = view_positions(view._data, root._data)
    if ids is None:                         # a view with another element type: no gradient
        return
    new = call(indexing.copy_slices, alias_of(root), src, Tensor._wrap(ids))
    set_history(root, new.grad_fn, 0)
    if view is not root:
        refresh_view(view, root, ids)


def refresh_view(view, root, ids=None):
    """Re-derive the history of ``view`` from its base ``root`` (after the base's changed)."""
    from dynograph.compiler.ops import REGISTRY, indexing
    from ._dispatch import call
    from ._tensor import Tensor
    op = REGISTRY.get("as_strided")
    if op is not None:
        v = call(op, alias_of(root), size=tuple(view._data.shape), stride=view.stride(),
                 storage_offset=view.storage_offset())
    else:
        if ids is None:
            ids = view_positions(view._data, root._data)
        v = call(indexing.take, alias_of(root), Tensor._wrap(ids))
    if v.grad_fn is not None:           # a base without history (an integer tensor) has none to give
        set_history(view, v.grad_fn, 0)


def alias_of(t):
    """A tensor sharing ``t``'s memory and autograd identity but with its own version counter:
    what an autograd node keeps of an input whose values its derivative does not read."""
    from ._tensor import Tensor
    a = Tensor._wrap(t._data)
    if t.requires_grad:
        a.requires_grad = True
        if t.grad_fn is None:
            from .autograd.graph import accumulator
            a._accumulator = accumulator(t)     # gradients still reach t's .grad
        else:
            a.grad_fn = t.grad_fn
            a._output_nr = t._output_nr
    return a


def view_positions(view, base):
    """The C-order positions in array ``base`` of every element of ``view`` (an array over
    base's memory), shaped like ``view``; None when the element sizes differ."""
    item = base.itemsize
    if view.itemsize != item:
        return None
    off = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    addr = _addresses(view.shape, view.strides, off)
    if base.flags.c_contiguous:
        return addr // item
    baddr = _addresses(base.shape, base.strides, 0).ravel()
    order = np.argsort(baddr, kind="stable")
    pos = np.searchsorted(baddr[order], addr).clip(0, max(baddr.size - 1, 0))
    return order[pos]


def _addresses(shape, strides, offset):
    addr = np.full((), offset, np.int64)
    for n, s in zip(shape, strides):
        addr = addr[..., None] + np.arange(n, dtype=np.int64) * s
    return addr


def write(dst, src):
    """``dst[...] = src`` for numpy arrays, also into read-only views of writable memory
    (an expanded tensor's elements share memory: PyTorch writes them anyway)."""
    if type(dst) is DeviceArray or type(src) is DeviceArray:
        _device.write(dst, src)         # a cuda tensor's memory on either side
        return
    if not dst.flags.writeable:
        dst = writable(dst)
    dst[...] = src


def writable(a):
    """A writable array over ``a``'s memory (``a`` itself when it already is writable)."""
    if type(a) is DeviceArray or a.flags.writeable:
        return a
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.writeable:
        return a
    off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, root, off, a.strides)


def _rebase_history(self, result):
    """After ``self`` was overwritten by ``result``, gradients flow through result's node."""
    set_history(self, result.grad_fn, result._output_nr)


def set_history(t, grad_fn, output_nr):
    """``t`` (overwritten in place) now gets its gradient from output ``output_nr`` of
    ``grad_fn``.  A retained ``.grad`` follows it: it is the gradient of the new value, as
    in PyTorch."""
    if t._retains_grad:
        drop_retained(t)
    t.requires_grad = True
    t.grad_fn = grad_fn
    t._output_nr = output_nr
    if t._retains_grad:
        retain_at_grad_fn(t)


def write_out(out, result):
    """Implements ``out=``: resize ``out`` if needed and copy ``result`` into it."""
    if out.dtype is not result.dtype and not can_cast(result.dtype, out.dtype):
        raise RuntimeError(
            f"result type {type_name(result.dtype)} can't be cast to the desired output type "
            f"{type_name(out.dtype)}")
    if out._data.shape != result._data.shape:
        out._data = (np.empty(result._data.shape, out._data.dtype) if type(out._data) is not DeviceArray
                     else type(out._data)(result._data.shape, out._data.dtype, out._data.index))
    if TRACE.tracer is not None:
        TRACE.tracer.write(out, result)
    write(out._data, result._data)
    out._bump_version()
    return out

"""Eager ops on the compiled direct kernels of the op set (the ``kernel`` facet: convolution, its
weight gradient, max pooling and its backward), the same kernels compiled programs run, where
they pay.

The compiler lends them through runtime/host_kernels.py (the eager core cannot import a
backend).  A direct rule keeps its compiled plans per *owner* (a graph node in a program);
eager ops have no node, so each distinct call (op, operand layouts, attributes) gets an owner
here, in a bounded table: the least recently used call's plans go first.  The choice between
kernel and numpy is made once per call layout, so repeating a call gives the same values.
Inside a trace (a compiled function's first call, and its look-ahead) only kernels that are
ready (loaded, or on disk) run, else numpy: the trace runs each op once, and the program's own
kernels compile on helper threads meanwhile.

A kernel is used when the op's rule below says it pays: a compilation costs tens of
milliseconds, so small calls (gradchecks, tests) keep the numpy implementation, and a direct
convolution beats im2col + BLAS only on the few channels of typical small CNN layers, where
BLAS products have few rows and the im2col copy dominates (the CIFAR tutorial's layers run 1.2
to 4 times faster; 32 channels or more run 10 to 50 % slower than BLAS).
"""
import math
from collections import OrderedDict

import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.compiler.ops.core import TensorSpec
from dynograph.runtime import dtypes as D, host_kernels
from dynograph.runtime.backend import ready as backend_ready

__all__ = ["run"]

# work below which a call keeps numpy: a kernel's compilation (30-100 ms) would not pay back
# over the calls a program makes.  Multiply-adds of a convolution; window reads of a max
# pooling (3 times faster than numpy's, which makes a pass over the output per window tap).
MIN_WORK = 1 << 20
MIN_POOL_READS = 1 << 16
# products of the per-group input and output channels above which im2col + BLAS wins
MAX_CHANNELS = 128
# distinct call layouts whose owners (and compiled plans) are kept
MAX_OWNERS = 128

_owners = OrderedDict()         # call key -> _Owner, or None where numpy runs
_ndarray = np.ndarray


class _Owner:
    """What bounds the lifetime of a rule's compiled plans for one call layout."""
    __slots__ = ("__weakref__",)


def _conv_pays(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    channels = (w.shape[0] // groups) * w.shape[1]
    outputs = x.shape[0] * math.prod(x.shape[2:]) * (1 if transposed else 1 / math.prod(stride))
    return channels <= MAX_CHANNELS and outputs * w.size >= MIN_WORK


def _weight_grad_pays(x, gy, kernel_size, stride, padding, dilation, groups):
    channels = (x.shape[1] // groups) * (gy.shape[1] // groups)
    return channels <= MAX_CHANNELS and gy.size * (x.shape[1] // groups) * math.prod(kernel_size) >= MIN_WORK


def _pool_pays(x, kernel_size, stride, padding, dilation, ceil_mode):
    return x.size * math.prod(kernel_size) / math.prod(stride) >= MIN_POOL_READS


def _pool_backward_pays(g, indices, input_shape, nd, disjoint=False, **window):
    # the gather reads each window's gradient and index once per element it may hold
    return math.prod(input_shape) >= MIN_POOL_READS


_PAYS = {"convolution": _conv_pays, "convolution_weight_grad": _weight_grad_pays,
         "max_pool2d_with_indices": _pool_pays, "max_pool3d_with_indices": _pool_pays,
         "max_pool_backward": _pool_backward_pays}


def run(op, args, attrs):
    """``op`` (which has a direct rule) on the tensors' arrays by its compiled kernel, or None
    where numpy should run it (no kernel lent, not worth one, a case the rule does not cover).

    Inside a trace, which runs its ops once, only kernels that are ready (loaded, or in the
    disk cache) run: none is compiled for it (30-100 ms each, on the calling thread, while the
    program's own kernels compile on helper threads).  Its plans are kept by an owner of that
    call only, so the eager calls' choices stay as they are."""
    pays = _PAYS.get(op.name)
    if pays is None:
        return None
    compile_kernel = host_kernels.compiler()
    if compile_kernel is None:
        return None
    arrays = [a if a is None or type(a) is _ndarray else getattr(a, "_data", a) for a in args]
    if not all(a is None or type(a) is _ndarray for a in arrays):
        return None
    tracing = TRACE.tracer is not None
    if tracing:
        owner = _Owner() if _checked_pays(op, arrays, attrs, pays) else None
        compile_kernel = _ready_only(compile_kernel)
    else:
        key = (op.name, tuple(None if a is None else (a.shape, a.strides, a.dtype) for a in arrays),
               tuple(attrs.items()))
        owner = _owner(key, op, arrays, attrs, pays)
    if owner is None:
        return None
    result = op.kernel(owner, arrays, attrs, None, compile_kernel)
    if result is None:
        if not tracing:
            _owners[key] = None         # not covered: numpy from now on, without asking again
        return None
    return tuple(result) if type(result) is list else result


def _checked_pays(op, arrays, attrs, pays):
    # the rules trust their operands: PyTorch's checks (and errors) first
    op.meta(*[a if a is None else TensorSpec(a.shape, D.from_numpy_dtype(a.dtype))
              for a in arrays], **attrs)
    return pays(*arrays, **attrs)


def _owner(key, op, arrays, attrs, pays):
    """The owner of the plans of the eager calls of layout ``key`` (made on its first call),
    or None where numpy runs them."""
    owner = _owners.get(key, False)
    if owner is False:
        try:
            hash(key)
        except TypeError:               # an attribute given as a list
            return None
        owner = _Owner() if _checked_pays(op, arrays, attrs, pays) else None
        _owners[key] = owner
        if len(_owners) > MAX_OWNERS:
            _owners.popitem(last=False)
    else:
        try:
            _owners.move_to_end(key)
        except KeyError:                # another thread dropped it meanwhile: its owner still works
            pass
    return owner


def _ready_only(compile_kernel):
    """``compile_kernel`` that answers None for a kernel it would have to compile now."""
    backend = compile_kernel.backend

    def ready_only(kernel):
        return compile_kernel(kernel) if backend_ready(backend, kernel) else None
    ready_only.matmul, ready_only.backend = compile_kernel.matmul, backend
    return ready_only

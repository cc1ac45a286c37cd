"""The dispatcher: every op call goes through ``call``.

Eager mode runs the op's numpy implementation now and, when an input requires grad
and grad mode is on, records an ``OpNode`` in the dynamic graph.  (The tracer adds a
second mode that appends IR nodes instead.)
"""
import warnings

import numpy as np

from dynograph.compiler.ops.core import TensorSpec
from dynograph.compiler.ops.evaluate import (broadcasts as _broadcasts, elementwise,
                                             quiet as _np_quiet, restore as _np_restore)
from dynograph.runtime import config, dtypes as D
from dynograph.runtime.cuda_memory import DeviceArray
from . import _device
from ._direct_kernels import run as _direct
from ._tensor import Tensor
from ._trace_hook import TRACE, SizeInt, plain
from .autograd.grad_mode import STATE
from .autograd.anomaly_mode import ANOMALY, forward_trace
from .autograd.graph import OpNode
from .autograd.profiler import RECORDER

_ndarray = np.ndarray
_on_device = _device.on_device
_wrap = Tensor._wrap
_new = object.__new__

# DYNOGRAPH_CHECK_META=1 (always on in the test suite) checks every op's meta rule against
# what eager execution produced, so shape/dtype rules used by the tracer cannot drift.
CHECK_META = config.get("CHECK_META")

# the warnings numpy's Python code issues itself ("Mean of empty slice"): filtered by module
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"dynograph\.")
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"numpy\.")


def call(op, *args, **attrs):
    """Run ``op`` on ``args`` (tensors, Python scalars, other attributes) eagerly."""
    if not attrs and op.kind == "elementwise" and TRACE.tracer is None and RECORDER.active is None:
        out = _simple(op, args)
        if out is not None:
            return out
    return _general(op, args, attrs)


def _general(op, args, attrs):
    """``call`` past the fast path for simple operands."""
    if RECORDER.active is not None:
        return RECORDER.active.run(op.name, _call_profiled, op, args, attrs)
    if TRACE.tracer is not None:
        return TRACE.tracer.run_op(_dispatched, op, args, attrs)
    return _dispatched(op, args, attrs)


def _dispatched(op, args, attrs):
    """Run ``op`` (and, while tracing, record it)."""
    if TRACE.tracer is not None:            # sizes the user's code handed over become ints
        for a in args:
            if type(a) is SizeInt:          # an operand (x / n), not a size: its value counts
                TRACE.tracer.size_consumed(int.__int__(a), f"an operand of {op.name}")
        args = tuple(plain(a) for a in args)
        attrs = {k: plain(v) for k, v in attrs.items()}
    if _on_device(args):
        result = _device.run(op, args, attrs, _compute)
    else:
        result = _compute(op, args, attrs)
    if CHECK_META:
        check_meta(op, args, attrs, result)
    if TRACE.tracer is not None:
        return _traced(op, args, attrs, result)
    return _result(op, args, attrs, result)


def _compute(op, args, attrs):
    """The result arrays of ``op`` on host operands."""
    if op.kind == "elementwise":
        # the operands' numpy values (two operands, the common case, without a loop: ~0.1 us less)
        if len(args) == 2:
            a, b = args
            values = [a._data if type(a) is Tensor or isinstance(a, Tensor) else a,
                      b._data if type(b) is Tensor or isinstance(b, Tensor) else b]
        else:
            values = []
            for a in args:
                values.append(a._data if type(a) is Tensor or isinstance(a, Tensor) else a)
        result = elementwise(op, args, values, attrs)
    elif op.kernel is not None:         # the compiled direct kernel where it pays, else numpy
        result = _direct(op, args, attrs)
        if result is None:
            result = _run(op, args, attrs)
    else:
        result = _run(op, args, attrs)
    return result


# (op, numpy dtype[, scalar type, scalar position]) -> (impl, numpy result dtype), or None: the
# dtype rule's answer for simple operands (see _simple) where it computes in the tensors' dtype.
# For these operands the rule depends on the dtype and the scalar's type alone; only
# float32/float64/complex tensors take this path (integer results may take the default dtype
# and Python ints may wrap; half types' rules check a scalar's value).  A rule that raises is
# asked again each time, so it raises again.
_SIMPLE = {}
_KEPT = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
         np.dtype(np.complex128))
_SMALL_INT = 1 << 31


def _number(v):
    return type(v) is float or (type(v) is int and -_SMALL_INT < v < _SMALL_INT)


def _expanded_pair(x, y):
    """Whether one array is row-major and the other of its shape broadcast from one element
    (all strides 0: a gradient a sum expanded), without size-1 dims: numpy lays the result out
    row-major, as PyTorch's TensorIterator does (evaluate._row_major_result)."""
    return x.shape == y.shape and 1 not in x.shape and (
        (x.flags.c_contiguous and not any(y.strides)) or
        (y.flags.c_contiguous and not any(x.strides)))


def binary(op, a, b):
    """``call(op, a, b)`` for an elementwise op without attributes: the operators."""
    if TRACE.tracer is None and RECORDER.active is None:
        out = _simple(op, (a, b))
        if out is not None:
            return out
    return _general(op, (a, b), {})


def _simple(op, args):
    """An elementwise ``op`` without attributes on simple operands: one tensor, two row-major
    tensors of one dtype (whose shapes broadcast), or a tensor and a Python float (or small
    int).  What ``elementwise`` computes, without the casts and broadcast checks that cannot
    apply; None where the general path must run."""
    n = len(args)
    if n == 1:
        a = args[0]
        if not isinstance(a, Tensor):
            return None
        x = a._data
        key = (op, x.dtype)
        values = (x,)
        grad = a._rg
    elif n == 2:
        a, b = args
        if isinstance(a, Tensor):
            x = a._data
            if isinstance(b, Tensor):
                y = b._data
                if x.dtype is not y.dtype or type(y) is DeviceArray:
                    return None
                if not (x.flags.c_contiguous and y.flags.c_contiguous) and \
                        not _expanded_pair(x, y):
                    return None         # the general path lays the result out as PyTorch
                # shapes that broadcast: numpy lays the result of row-major operands out as
                # PyTorch does (``elementwise`` keeps it too); a mismatch raises on the general
                # path, and an empty result takes PyTorch's strides there
                if x.shape != y.shape and (not y.size or not _broadcasts(x.shape, y.shape)):
                    return None
                key = (op, x.dtype, None)
                values = (x, y)
                grad = a._rg or b._rg
            elif _number(b):
                key = (op, x.dtype, type(b), 1)
                values = (x, b)
                grad = a._rg
            else:
                return None
        elif isinstance(b, Tensor) and _number(a):
            x = b._data
            key = (op, x.dtype, type(a), 0)
            values = (a, x)
            grad = b._rg
        else:
            return None
    else:
        return None
    if type(x) is DeviceArray or not x.size:    # a device array; empty: PyTorch's strides
        return None
    entry = _SIMPLE.get(key, False)
    if entry is False:
        if x.dtype not in _KEPT:
            return None
        ct, odt = op.dtype_rule(*args)
        impl = getattr(op.impl, "floats", op.impl)      # elementwise.py: no half-type care
        entry = _SIMPLE[key] = (impl, odt.np) if ct.np == x.dtype and not op.view else None
    if entry is None:
        return None
    impl, odtn = entry
    token = _np_quiet()
    try:
        r = impl(*values)
        if type(r) is not _ndarray:
            r = np.asarray(r)
        if r.dtype is not odtn and r.dtype != odtn:
            r = r.astype(odtn)
    finally:
        _np_restore(token)
    if CHECK_META:
        check_meta(op, args, {}, r)
    if grad and STATE.grad_enabled and op.differentiable:
        return _record(op, args, {}, r)
    out = _new(Tensor)                  # Tensor._wrap, inline
    out._data = r
    return out


def _result(op, args, attrs, result):
    """Wrap an op's result as tensors, recording the autograd node when an input needs it."""
    if STATE.grad_enabled and op.differentiable:
        for a in args:
            if type(a) is Tensor or isinstance(a, Tensor):
                if a._rg:
                    return _record(op, args, attrs, result)
    if type(result) is tuple:
        outs = tuple(_wrap(r) for r in result)
        if op.view:
            for o in outs:
                mark_view(o, args[0])
        return outs
    out = _wrap(result)
    if op.view:
        mark_view(out, args[0])
    return out


def _traced(op, args, attrs, result):
    """Tracing: the op ran eagerly; its result is wrapped as usual, and its graph node added."""
    out = _result(op, args, attrs, result)
    tracer = TRACE.tracer
    if op.data_dependent:
        tracer.graph_break(f"{op.name} has an output shape that depends on the data")
    tracer.record(op, args, attrs, result, out if type(out) is tuple else (out,))
    return out


def _call_profiled(op, args, attrs):
    """``call`` with the profiler switched off for the op's own body (an op's impl is numpy
    and runs no nested ops, so nothing is missed) and back on afterwards."""
    prof, RECORDER.active = RECORDER.active, None
    try:
        return call(op, *args, **attrs)
    finally:
        RECORDER.active = prof


def _arrays(args, ct):
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if ct is not None and d.dtype != ct:
                d = d.astype(ct)
            out.append(d)
        else:
            out.append(a)
    return out


def _run(op, args, attrs):
    arrays = _arrays(args, None)
    token = _np_quiet()
    try:
        return op.impl(*arrays, **attrs)
    except (ValueError, IndexError, TypeError) as e:
        failure = e
    finally:
        _np_restore(token)
    # outside the except block, so the user-facing error does not chain the internal one
    if op.meta is not None:
        op.meta(*[_spec(a) for a in args], **attrs)
    err = RuntimeError(f"{op.name}: {failure}")
    err.__context__, err.__suppress_context__ = failure, True     # kept for callers, not shown
    raise err


def _spec(a):
    if isinstance(a, Tensor):
        return TensorSpec(a._data.shape, a.dtype)
    return a


def _record(op, args, attrs, result):
    node = OpNode(op, args, attrs, result)
    if ANOMALY.enabled:
        node._forward_trace = forward_trace()
    if type(result) is tuple:
        outs = []
        for i, r in enumerate(result):
            t = _wrap(r)
            if r.dtype.kind in "fc" or D.is_bfloat16(r.dtype):    # floating or complex
                t._rg = True
                t.grad_fn = node
                t._output_nr = i
            if op.view:
                mark_view(t, args[0])
            outs.append(t)
        # derivative rules may read the outputs: record their versions to detect overwrites
        node._saved_out = tuple((t._version_box(), t._version) for t in outs)
        return tuple(outs)
    out = _wrap(result)
    if result.dtype.kind in "fc" or D.is_bfloat16(result.dtype):
        out._rg = True
        out.grad_fn = node
    if op.view:
        mark_view(out, args[0])
        node._saved_out = ((out._vc, out._vc[0]),)
    else:
        out._vc = box = [0]
        node._saved_out = ((box, 0),)
    return out


def mark_view(out, src):
    """``out`` shares memory with ``src``: share its base and version counter."""
    base = src._base if src._base is not None else src
    out._base = base
    out._vc = base._version_box()


def check_meta(op, args, attrs, result):
    """Assert that ``op.meta`` predicts the shape and dtype eager execution produced."""
    spec = op.meta(*[_spec(a) for a in args], **attrs)
    results = result if type(result) is tuple else (result,)
    specs = spec if isinstance(spec, (tuple, list)) else (spec,)
    got = [(tuple(r.shape), D.from_numpy_dtype(r.dtype)) for r in results]
    want = [(tuple(s.shape), s.dtype) for s in specs]
    if got != want:
        raise AssertionError(f"meta rule of op '{op.name}' disagrees with eager execution: "
                             f"meta says {want}, eager produced {got}")

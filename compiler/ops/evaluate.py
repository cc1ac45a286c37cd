"""Applying a primitive to numpy values: the one evaluation path of elementwise ops.

Eager execution (``dynograph/_dispatch.py``) and the IR interpreter (``compiler/interpreter.py``)
both call ``elementwise``, so an op computes the same values, in the same dtypes, with the same
errors whether it runs now or from a graph.  Values are numpy arrays and Python scalars; the
dtype rule sees each operand as the caller describes it (a tensor, or a ``TensorSpec``).
"""
import functools

import numpy as np

from .core import TensorSpec, broadcast_shapes
from .creation import (contiguous_strides, is_dense, iterator_strides, preserved_strides,
                       relaid)

__all__ = ["broadcasts", "elementwise", "quiet", "restore"]

_ndarray = np.ndarray

# numpy reports float overflow, x / 0 and log(-1) as warnings; torch returns inf/nan quietly.
# Ops' impls run with numpy's floating-point errors ignored.  numpy >= 2 keeps that state in
# a context variable: setting it to a prebuilt state costs ~0.25 us a call, where np.errstate
# costs ~1.4 us (half again the cost of a small op).
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _np_errstate
    with np.errstate(all="ignore"):
        quiet = functools.partial(_np_errstate.set, _np_errstate.get())
    restore = _np_errstate.reset
except ImportError:     # numpy 1.x
    quiet = functools.partial(np.seterr, all="ignore")

    def restore(old):
        np.seterr(**old)


# Array shapes known to broadcast together.  Every elementwise op's meta rule is the dtype rule
# (already asked) plus broadcast_shapes, so shapes that passed once need no meta call again
# (~8 us).  A small table, emptied when full.
_BROADCASTS = set()
_BROADCASTS_MAX = 1024


def _known(shapes):
    if len(_BROADCASTS) >= _BROADCASTS_MAX:
        _BROADCASTS.clear()
    _BROADCASTS.add(shapes)


def broadcasts(a, b):
    """Whether shapes ``a`` and ``b`` broadcast together (PyTorch's rule, numpy's too)."""
    shapes = (a, b)
    if shapes in _BROADCASTS:
        return True
    try:
        broadcast_shapes(a, b)
    except RuntimeError:
        return False
    _known(shapes)
    return True


def elementwise(op, operands, values, attrs):
    """``op`` (an elementwise primitive) applied to ``values``, numpy arrays and Python scalars.

    ``operands`` are the same operands as the dtype rule reads them: for each array, anything
    with a ``shape`` and a ``dtypes.dtype`` ``dtype`` (an eager tensor, a ``TensorSpec``); the
    scalars themselves.  Inputs are cast to the rule's compute dtype, the impl runs with numpy's
    floating-point errors ignored, and the result is an array of the rule's result dtype.
    Shapes that do not broadcast raise PyTorch's error (from the meta rule)."""
    ct, odt = op.dtype_rule(*operands, **attrs)
    ctn = ct.np
    # one pass over the operands: note whether an array needs casting to the compute dtype,
    # and whether array shapes differ (then the meta rule checks they broadcast)
    cast = False
    shape = None
    broadcast = False
    strided = False
    for a in values:
        if type(a) is _ndarray:
            # ``is`` first: numpy's builtin dtypes are singletons, and ``!=`` costs more
            if a.dtype is not ctn and a.dtype != ctn:
                cast = True
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                broadcast = True
            if not a.flags.c_contiguous:
                strided = True
    if broadcast:
        shapes = tuple([v.shape for v in values if type(v) is _ndarray])
        if shapes not in _BROADCASTS:
            op.meta(*[TensorSpec(v.shape, o.dtype) if type(v) is _ndarray else o
                      for o, v in zip(operands, values)], **attrs)     # PyTorch's broadcast error
            _known(shapes)
    arrays = values
    if cast and op.cast_inputs:
        arrays = [a.astype(ctn) if type(a) is _ndarray and a.dtype != ctn else a for a in values]
    token = quiet()
    try:
        try:
            r = op.impl(*arrays, **attrs)
        except OverflowError:
            # a Python int that does not fit the dtype wraps around, as in torch
            arrays = [np.array(a).astype(ctn) if isinstance(a, int) else a for a in arrays]
            r = op.impl(*arrays, **attrs)
        if type(r) is not _ndarray:
            r = np.asarray(r)
        odtn = odt.np
        if r.dtype is not odtn and r.dtype != odtn:
            r = r.astype(odtn)      # a float64 result past float32's range is inf, quietly
    finally:
        restore(token)
    # numpy lays out a result by its own rule (and an empty one with zero strides): where an
    # operand is not row-major, or the result is empty, take PyTorch's
    if (strided or not r.size) and r.ndim and not _row_major_result(r, values):
        return with_iterator_strides(op, r, values)
    return r


def _row_major_result(r, values):
    """Whether PyTorch's TensorIterator lays ``r`` out row-major as numpy did, checked cheaply
    for the common strided case (a gradient expanded from one element times a row-major
    tensor): every array operand is row-major or all zero strides, and no dim has size 1
    (whose strides the two libraries could set apart)."""
    if not r.size or 1 in r.shape or not r.flags.c_contiguous:
        return False
    for v in values:
        if type(v) is _ndarray and not ((v.flags.c_contiguous and 1 not in v.shape) or
                                        not any(v.strides)):
            return False
    return True


# ops whose PyTorch kernels take a number after the first operand as a parameter (clamp's
# bounds, pow's exponent, lerp's weight), where others wrap it as a 0-dim operand
_NUMBER_PARAMETERS = frozenset({"clamp", "pow", "lerp"})


def with_iterator_strides(op, r, values):
    """``r`` with the strides PyTorch's TensorIterator gives the result (a view where only
    size-1 dimensions' strides differ, else a copy)."""
    if op.name == "masked_fill" or (op.name == "pow" and type(values[0]) is not _ndarray):
        # PyTorch fills a contiguous copy; its number ** tensor kernel allocates contiguous
        # (as elementwise.py's pow does itself, where no operand is strided)
        want = contiguous_strides(r.shape)
    elif op.name == "nan_to_num":   # PyTorch fills an empty_like result
        want = preserved_strides(values[0])
    else:
        operands = []
        for i, v in enumerate(values):
            if type(v) is _ndarray:
                operands.append((v.shape, tuple(s // v.itemsize for s in v.strides), is_dense(v)))
            elif v is not None and not (i and op.name in _NUMBER_PARAMETERS):
                operands.append(((), (), True))
        want = iterator_strides(r.shape, operands)
    return relaid(r, want)

"""Convolutions in the ``llvm`` executor as generated direct kernels (compiler/lowering/conv.py).

A direct kernel beats im2col + BLAS on the small channel counts of typical CNN layers: im2col
copies every input element K*K times and BLAS is slow on products with a few rows.  Covered:
convolutions of float32/float64 with any stride, dilation, padding and groups, and stride-1
transposed convolutions (the input gradient of a stride-1 convolution), and the weight gradient
of stride-1 convolutions (long contiguous sums over flat lines, a row of kernel offsets per
pass).  Other cases (strides in the transposed or weight-gradient forms, half types) return
None and run on the interpreter's im2col.
"""
import math
import weakref

import numpy as np

from ..lowering.conv import Weights, direct_convolution, flat_weight_grad
from ..lowering.scalar import Unsupported
from ..ops.pooling import _padded as pad_spatial
from dynograph.runtime import dtypes as D

# node -> {shapes and strides of the operands: (compiled plan or None, what running it needs)}
_PLANS = weakref.WeakKeyDictionary()


def run_convolution(node, args, attrs, out, compile_kernel):
    """``convolution(*args, **attrs)`` by a direct kernel, written into ``out`` when it is given
    (a planned buffer); None when the case is not covered."""
    x, w, bias = args
    if not all(isinstance(a, np.ndarray) for a in (x, w)) or x.dtype != w.dtype or \
            x.dtype not in (np.float32, np.float64) or \
            (bias is not None and (not isinstance(bias, np.ndarray) or bias.dtype != x.dtype)):
        return None
    stride, dilation, groups = attrs["stride"], attrs["dilation"], attrs["groups"]
    ksize = w.shape[2:]
    if attrs["transposed"]:
        if any(s != 1 for s in stride):
            return None
        # the equivalent convolution reads x padded by dilation * (K - 1) - padding
        lead = tuple(d * (k - 1) - p for d, k, p in zip(dilation, ksize, attrs["padding"]))
        if min(lead) < 0:
            return None
        pads = [(a, a + extra) for a, extra in zip(lead, attrs["output_padding"])]
        out_channels = w.shape[1] * groups
    else:
        pads = [(p, p) for p in attrs["padding"]]
        out_channels = w.shape[0]
    xp = _padded(x, pads)
    key = (xp.shape, xp.strides, w.shape, w.strides, None if bias is None else bias.strides)
    plans = _PLANS.setdefault(node, {})
    if key not in plans:
        plans[key] = _plan(xp, w, bias, attrs, out_channels, compile_kernel)
    plan, sizes = plans[key]
    if plan is None:
        return None
    shape = (x.shape[0], out_channels) + sizes
    if out is None or out.shape != shape:
        out = np.empty(shape, x.dtype)
    pointers = [xp.ctypes.data, w.ctypes.data] + ([] if bias is None else [bias.ctypes.data])
    plan(pointers + [out.ctypes.data])
    return out


def _plan(xp, w, bias, attrs, out_channels, compile_kernel):
    item = xp.itemsize
    if any(s % item for a in (xp, w) for s in a.strides):
        return None, None
    elements = [tuple(s // item for s in a.strides) for a in (xp, w)]
    groups = attrs["groups"]
    if attrs["transposed"]:
        weights = Weights.transposed(elements[1], w.shape, groups)
    else:
        weights = Weights.forward(elements[1], groups, out_channels // groups)
    bias_stride = None
    if bias is not None:
        if bias.strides[0] % item:
            return None, None
        bias_stride = bias.strides[0] // item
    try:
        kernel = direct_convolution(xp.shape, elements[0], weights, bias_stride, groups,
                                    out_channels, tuple(w.shape[2:]), attrs["stride"],
                                    attrs["dilation"], D.from_numpy_dtype(xp.dtype))
    except Unsupported:
        return None, None
    # the domain is (n, g, o, q0 .. q[d-2], c, k0 .. k[d-1], q[d-1])
    nd = (len(kernel.domain) - 4) // 2
    return compile_kernel(kernel), tuple(kernel.domain[3:3 + nd - 1]) + (kernel.domain[-1],)


def _padded(x, pads):
    """x (N, C, *S) with zeros around its spatial dims, ``pads`` (before, after) per dim (x
    itself when no padding)."""
    return pad_spatial(x, len(pads), [a for a, _ in pads], [b for _, b in pads], 0)


def run_weight_grad(node, args, attrs, out, compile_kernel):
    """``convolution_weight_grad(x, gy, **attrs)`` by a flat direct kernel (stride 1), written
    into ``out`` when given; None when the case is not covered."""
    x, gy = args
    ksize = tuple(attrs["kernel_size"])
    if not all(isinstance(a, np.ndarray) for a in (x, gy)) or x.dtype != gy.dtype or \
            x.dtype not in (np.float32, np.float64) or any(s != 1 for s in attrs["stride"]):
        return None
    plans = _PLANS.setdefault(node, {})
    key = (x.shape, gy.shape)
    if key not in plans:
        plans[key] = _weight_grad_plan(x, gy, attrs, compile_kernel)
    plan, (pads, lines) = plans[key]
    if plan is None:
        return None
    xp = np.ascontiguousarray(_padded(x, pads))
    gl = _padded(gy, [(0, p - n) for n, p in zip(gy.shape[2:], lines)]) if \
        lines != gy.shape[2:] else np.ascontiguousarray(gy)
    o, c = gy.shape[1], x.shape[1]
    shape = (o, c // attrs["groups"]) + ksize
    if out is None or out.shape != shape:
        out = np.empty(shape, x.dtype)
    plan([xp.ctypes.data, gl.ctypes.data, out.ctypes.data])
    return out


def _weight_grad_plan(x, gy, attrs, compile_kernel):
    """(plan, (x's padding, gy's padded spatial sizes)): x padded by ``padding`` and by rows at
    the end of its first spatial dim for the reads that run past a plane; gy's rows as long as
    x's (zeros beyond the outputs)."""
    ksize, dilation = tuple(attrs["kernel_size"]), attrs["dilation"]
    padded = [n + 2 * p for n, p in zip(x.shape[2:], attrs["padding"])]
    lines = (gy.shape[2],) + tuple(padded[1:])
    if any(q > p for q, p in zip(gy.shape[3:], padded[1:])):
        return None, (None, None)
    extra = _overrun_rows(padded, lines, ksize, dilation)
    pads = [(p, p) for p in attrs["padding"]]
    pads[0] = (pads[0][0], pads[0][1] + extra)
    x_shape = x.shape[:2] + (padded[0] + extra,) + tuple(padded[1:])
    try:
        kernel = flat_weight_grad(x_shape, gy.shape[:2] + lines, ksize, dilation, attrs["groups"],
                                  D.from_numpy_dtype(x.dtype))
    except Unsupported:
        return None, (None, None)
    return compile_kernel(kernel), (pads, lines)


def _overrun_rows(padded, lines, ksize, dilation):
    """Rows of zeros to add after x's first spatial dim so that reading flat lines of sizes
    ``lines`` at every kernel offset stays inside x's plane."""
    row = [math.prod(padded[1 + i:]) for i in range(len(padded))]
    last = sum((q - 1) * r for q, r in zip(lines, row)) + \
        sum((k - 1) * d * r for k, d, r in zip(ksize, dilation, row))
    return max(0, -(-(last + 1 - padded[0] * row[0]) // row[0]))

"""Direct convolution as a loop-level Kernel (kernel.py's description, rendered by any backend).

    out[n, g*Og + o, *q] = bias[g*Og + o] + sum over c < Cg and kernel offsets k of
                           x[n, g*Cg + c, *(q * stride + k * dilation)] * W(g, o, c, k)

``x`` is already padded (by a copy kernel, padding.py, when the convolution has padding), so
every load is in bounds and a load is a sum of index * stride.  ``W`` is read through strides
and an offset: the weight itself for a convolution, or, for a stride-1 transposed convolution
(the input gradient of a convolution), the weight with its channel axes swapped and its kernel
offsets reversed (negative strides), read over the gradient padded by ``dilation * (K - 1)``.

The domain is (N, G, Og, *q[:-1], Cg, *K, q[-1]), the reduced axes Cg and K: the innermost
axis, the last output position, is kept, so the renderer accumulates a row of outputs side by
side (vectorized along it) while it walks the channels and kernel offsets.  (Flat lines, the
rows joined into one long axis with the positions past each row's last output computed and
dropped, measured no faster: rows up to 64 long are whole constant-width tiles.)
``flat_weight_grad`` is the weight gradient of a stride-1 convolution over flat lines.
"""
import math
import weakref

import numpy as np

from dynograph.runtime import dtypes as D
from .description import Kernel, Load, Recorder, ReductionStep, Store
from . import launch
from .padding import Padding, padding_of, usable
from .scalar import Unsupported


class Weights:
    """Strides (in elements) of W's axes g, o, c, and each kernel offset, and an offset."""

    def __init__(self, g, o, c, k, offset=0):
        self.g, self.o, self.c, self.k, self.offset = g, o, c, tuple(k), offset

    @classmethod
    def forward(cls, strides, groups, out_per_group):
        """A convolution's weight (O, C/G, *K)."""
        return cls(out_per_group * strides[0], strides[0], strides[1], strides[2:])

    @classmethod
    def transposed(cls, strides, shape, groups):
        """A transposed convolution's weight (Cin, Cout/G, *K), read as the weight of the
        equivalent convolution: W(g, o, c, k) = w[g*Cin/G + c, o, K-1-k]."""
        cin_per_group = shape[0] // groups
        offset = sum((n - 1) * s for n, s in zip(shape[2:], strides[2:]))
        return cls(cin_per_group * strides[0], strides[1], strides[0],
                   tuple(-s for s in strides[2:]), offset)


def direct_convolution(x_shape, x_strides, weights, bias_stride, groups, out_channels, ksize,
                       stride, dilation, dtype, tiles=False):
    """The Kernel of a direct convolution over a padded ``x`` (shape and element strides);
    buffers: in0 x, in1 the weight, in2 the bias (when ``bias_stride`` is not None), out0 the
    contiguous (N, out_channels, *q)."""
    if dtype not in (D.float32, D.float64):
        raise Unsupported(f"direct convolution of {dtype}")
    n, c = x_shape[:2]
    nd = len(ksize)
    q = tuple((p - d * (k - 1) - 1) // s + 1
              for p, k, s, d in zip(x_shape[2:], ksize, stride, dilation))
    if min(q, default=1) <= 0 or c % groups or out_channels % groups:
        raise Unsupported("empty or ungrouped convolution")
    cg, og = c // groups, out_channels // groups
    tile = channel_tile(og, q[-1]) if tiles else 1
    # domain axes, by name, in loop order; each step of "o" computes ``tile`` output channels
    names = ["n", "g", "o"] + [f"q{i}" for i in range(nd - 1)] + ["c"] + \
        [f"k{i}" for i in range(nd)] + [f"q{nd - 1}"]
    sizes = {"n": n, "g": groups, "o": og // tile, "c": cg}
    sizes.update({f"q{i}": q[i] for i in range(nd)})
    sizes.update({f"k{i}": ksize[i] for i in range(nd)})
    xs = {"n": x_strides[0], "g": cg * x_strides[1], "c": x_strides[1]}
    xs.update({f"q{i}": stride[i] * x_strides[2 + i] for i in range(nd)})
    xs.update({f"k{i}": dilation[i] * x_strides[2 + i] for i in range(nd)})
    ws = {"g": weights.g, "o": tile * weights.o, "c": weights.c}
    ws.update({f"k{i}": weights.k[i] for i in range(nd)})
    spatial = math.prod(q)
    out = {"n": out_channels * spatial, "g": og * spatial, "o": tile * spatial}
    for i in range(nd):
        out[f"q{i}"] = math.prod(q[i + 1:])

    def strides(table):
        return tuple(table.get(a, 0) for a in names)

    b = Recorder()
    loads = [Load(0, strides(xs), 0)]
    x = b.load(0, dtype, 1)
    reductions = []
    for t in range(tile):           # one sum per channel of the tile, all sharing x's loads
        loads.append(Load(1, strides(ws), weights.offset + t * weights.o))
        product = b.mul(x, b.load(len(loads) - 1, dtype, 1))
        reductions.append(ReductionStep("add", 0.0, dtype, product.index))
    buffers = [("in0", dtype, "in"), ("in1", dtype, "in")]
    if bias_stride is not None:
        buffers.append(("in2", dtype, "in"))
    buffers.append(("out0", dtype, "out"))
    stores = []
    for t in range(tile):
        total = b.acc(t, dtype)
        if bias_stride is not None:
            loads.append(Load(2, strides({"g": og * bias_stride, "o": tile * bias_stride}),
                              t * bias_stride))
            total = b.add(total, b.load(len(loads) - 1, dtype, 0))
        stores.append(Store(len(buffers) - 1, total.index, strides(out), t * spatial))
    domain = tuple(sizes[a] for a in names)
    reduce_axes = tuple(i for i, a in enumerate(names) if a[0] in "ck")
    return Kernel("conv", domain, reduce_axes, buffers, b.exprs, loads, reductions, stores,
                  contract=True, unroll=True)


TILE_CHAINS = 8


def channel_tile(channels, width):
    """How many output channels one step of a convolution kernel computes: each keeps a row of
    ``width`` outputs (in pieces of up to 32, vectors of 8 float32) accumulating, and a few rows
    side by side keep the vector units busy while each addition waits for the last (one row is
    a chain of dependent additions) and share each load of the input."""
    vectors = -(-min(width, 32) // 8)
    return max([t for t in (4, 3, 2) if channels % t == 0 and t * vectors <= TILE_CHAINS] + [1])


def flat_weight_grad(x_shape, gy_shape, ksize, dilation, groups, dtype, tiles=False):
    """The Kernel of a stride-1 convolution's weight gradient over flat lines:

        gw[g*Og + o, c, *k] = sum over n and j of gy[n, g*Og + o, j] * x[n, g*Cg + c, j + off(k)]

    where ``x`` (N, C, *P) is padded (with rows of zeros after the last one for the reads that
    run past a plane), ``gy`` (N, O, *L) is laid out with x's row lengths (zeros beyond each
    output row), j runs over gy's flattened positions and off(k) is the offset of kernel
    position k in x's flat plane.  The sum over j is one long contiguous run: vectorized with
    blocked partial sums.  The last kernel dim is not a loop: one reduction per position
    along it, all in one pass, share each load of gy; and one step computes a few output
    channels, which share each load of x.  Both inputs contiguous; buffers in0 x,
    in1 gy, out0 the contiguous (O, C/G, *K)."""
    if dtype not in (D.float32, D.float64):
        raise Unsupported(f"direct weight gradient of {dtype}")
    n, c = x_shape[:2]
    o = gy_shape[1]
    if c % groups or o % groups:
        raise Unsupported("ungrouped channels")
    cg, og, nd = c // groups, o // groups, len(ksize)
    plane = math.prod(x_shape[2:])
    row = [math.prod(x_shape[3 + i:]) for i in range(nd)]        # x's flat stride per dim
    lines = math.prod(gy_shape[2:])
    tile = max([t for t in (4, 3, 2) if og % t == 0 and t * ksize[-1] <= 12] + [1]) if tiles \
        else 1
    # each step of "o" computes ``tile`` output channels: each load of x feeds all of them
    names = ["g", "o", "c"] + [f"k{i}" for i in range(nd - 1)] + ["n", "j"]
    sizes = {"g": groups, "o": og // tile, "c": cg, "n": n, "j": lines}
    sizes.update({f"k{i}": ksize[i] for i in range(nd - 1)})
    xs = {"g": cg * plane, "c": plane, "n": c * plane, "j": 1}
    xs.update({f"k{i}": dilation[i] * row[i] for i in range(nd - 1)})
    gs = {"g": og * lines, "o": tile * lines, "n": o * lines, "j": 1}
    kk = math.prod(ksize)
    out = {"g": og * cg * kk, "o": tile * cg * kk, "c": kk}
    out.update({f"k{i}": math.prod(ksize[i + 1:]) for i in range(nd - 1)})

    def strides(table):
        return tuple(table.get(a, 0) for a in names)

    b = Recorder()
    loads = []
    for t in range(tile):
        loads.append(Load(1, strides(gs), t * lines))
    grads = [b.load(t, dtype, 1) for t in range(tile)]
    reductions, stores = [], []
    for k in range(ksize[-1]):          # kernel offset k along the last dim: x shifted by k*d
        loads.append(Load(0, strides(xs), k * dilation[-1]))
        x = b.load(len(loads) - 1, dtype, 1)
        for t, grad in enumerate(grads):
            product = b.mul(x, grad)
            stores.append(Store(2, b.acc(len(reductions), dtype).index, strides(out),
                                 t * cg * kk + k))
            reductions.append(ReductionStep("add", 0.0, dtype, product.index))
    return Kernel("conv_weight_grad", tuple(sizes[a] for a in names),
                  (len(names) - 2, len(names) - 1),
                  [("in0", dtype, "in"), ("in1", dtype, "in"), ("out0", dtype, "out")], b.exprs,
                  loads, reductions, stores, contract=True, unroll=True)


# ---------------------------------------------------------------- the direct rules
# Convolutions of float32/float64 with any stride, dilation, padding and groups, stride-1
# transposed convolutions (the input gradient of a stride-1 convolution) and the weight
# gradient of stride-1 convolutions; other cases (strides in the transposed or weight-gradient
# forms, half types) return None and run the op's im2col impl.  A direct kernel beats im2col +
# BLAS on the small channel counts of typical CNN layers: im2col copies every input element
# K*K times and BLAS is slow on products with a few rows.

# node -> {shapes and strides of the operands: (compiled plan or None, what running it needs)}
_PLANS = weakref.WeakKeyDictionary()


@launch.rule
def run_convolution(node, args, attrs, out, compile_kernel, bound):  # a direct rule (direct.py)
    """``convolution(*args, **attrs)`` by a direct kernel, written into ``out`` when it is given
    (a planned buffer); None when the case is not covered."""
    planned = _convolution_plans(args, attrs, compile_kernel, node)
    if planned is None:
        return None
    plan, sizes, padding, out_channels = planned
    x, w, bias = args
    shape = (x.shape[0], out_channels) + sizes
    if out is None or out.shape != shape:
        out = np.empty(shape, x.dtype)
    reads = [(x, padding), (w, None)] + ([] if bias is None else [(bias, None)])
    return launch.Launch(plan, reads, [out], out)


def _convolution_plans(args, attrs, compile_kernel, node=None):
    """(plan, output spatial sizes, x's Padding, output channels) of a convolution of ``args``,
    kept per layout for ``node`` (None: kept nowhere); None when the case is not covered."""
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
    key = (x.shape, x.strides, w.shape, w.strides, None if bias is None else bias.strides)
    plans = {} if node is None else _PLANS.setdefault(node, {})
    if key not in plans:
        plans[key] = _plan(x, pads, w, bias, attrs, out_channels, compile_kernel)
    plan, sizes, padding = plans[key]
    return None if plan is None else (plan, sizes, padding, out_channels)


def _plan(x, pads, w, bias, attrs, out_channels, compile_kernel):
    """(plan, output spatial sizes, the Padding of x or None), or (None, None, None)."""
    item = x.itemsize
    if any(s % item for a in (x, w) for s in a.strides):
        return None, None, None
    padding = None
    x_shape, x_strides = x.shape, tuple(s // item for s in x.strides)
    if any(a or b for a, b in pads):
        if not usable(x):
            return None, None, None
        padding = Padding(x, [a for a, _ in pads], [b for _, b in pads], 0, compile_kernel)
        x_shape = padding.shape
        x_strides = tuple(math.prod(x_shape[i + 1:]) for i in range(len(x_shape)))
    w_strides = tuple(s // item for s in w.strides)
    groups = attrs["groups"]
    if attrs["transposed"]:
        weights = Weights.transposed(w_strides, w.shape, groups)
    else:
        weights = Weights.forward(w_strides, groups, out_channels // groups)
    bias_stride = None
    if bias is not None:
        if bias.strides[0] % item:
            return None, None, None
        bias_stride = bias.strides[0] // item
    try:
        kernel = direct_convolution(x_shape, x_strides, weights, bias_stride, groups,
                                    out_channels, tuple(w.shape[2:]), attrs["stride"],
                                    attrs["dilation"], D.from_numpy_dtype(x.dtype),
                                    _tiles(compile_kernel))
    except Unsupported:
        return None, None, None
    # the domain is (n, g, o, q0 .. q[d-2], c, k0 .. k[d-1], q[d-1])
    nd = (len(kernel.domain) - 4) // 2
    return compile_kernel(kernel), tuple(kernel.domain[3:3 + nd - 1]) + (kernel.domain[-1],), \
        padding


def _tiles(compile_kernel):
    """Whether the backend behind a direct rule's ``compile_kernel`` (program.Host) wants
    several output channels per step (runtime.backend.Backend.tiles_channels)."""
    return getattr(getattr(compile_kernel, "backend", None), "tiles_channels", False)


@launch.rule
def run_weight_grad(node, args, attrs, out, compile_kernel, bound):  # a direct rule (direct.py)
    """``convolution_weight_grad(x, gy, **attrs)`` by a flat direct kernel (stride 1), written
    into ``out`` when given; None when the case is not covered."""
    planned = _weight_grad_plans(args, attrs, compile_kernel, node)
    if planned is None:
        return None
    plan, x_padding, gy_padding = planned
    x, gy = args
    ksize = tuple(attrs["kernel_size"])
    o, c = gy.shape[1], x.shape[1]
    shape = (o, c // attrs["groups"]) + ksize
    if out is None or out.shape != shape:
        out = np.empty(shape, x.dtype)
    return launch.Launch(plan, [(x, x_padding), (gy, gy_padding)], [out], out)


def _weight_grad_plans(args, attrs, compile_kernel, node=None):
    """(plan, x's Padding, gy's Padding) of a weight gradient of ``args``, kept in ``plans``
    per layout; None when the case is not covered."""
    x, gy = args
    if not all(isinstance(a, np.ndarray) for a in (x, gy)) or x.dtype != gy.dtype or \
            x.dtype not in (np.float32, np.float64) or any(s != 1 for s in attrs["stride"]):
        return None
    key = (x.shape, x.strides, gy.shape, gy.strides)
    plans = {} if node is None else _PLANS.setdefault(node, {})
    if key not in plans:
        plans[key] = _weight_grad_plan(x, gy, attrs, compile_kernel)
    return None if plans[key][0] is None else plans[key]


# a direct rule's ``plans(args, attrs, compile_kernel)``: its plans for ``args``, kept nowhere
# (lowering/ahead.py describes the kernels a program will need before its first run)
run_convolution.plans = _convolution_plans
run_weight_grad.plans = _weight_grad_plans


def _weight_grad_plan(x, gy, attrs, compile_kernel):
    """(plan, x's Padding, gy's Padding), a Padding None where the array is used as it is: x
    padded by ``padding`` and by rows at the end of its first spatial dim for the reads that
    run past a plane; gy's rows as long as x's (zeros beyond the outputs)."""
    ksize, dilation = tuple(attrs["kernel_size"]), attrs["dilation"]
    padded = [n + 2 * p for n, p in zip(x.shape[2:], attrs["padding"])]
    lines = (gy.shape[2],) + tuple(padded[1:])
    if any(q > p for q, p in zip(gy.shape[3:], padded[1:])) or not (usable(x) and usable(gy)):
        return None, None, None
    extra = overrun_rows(padded, lines, ksize, dilation)
    lo = tuple(attrs["padding"])
    hi = (lo[0] + extra,) + lo[1:]
    x_shape = x.shape[:2] + (padded[0] + extra,) + tuple(padded[1:])
    try:
        kernel = flat_weight_grad(x_shape, gy.shape[:2] + lines, ksize, dilation, attrs["groups"],
                                  D.from_numpy_dtype(x.dtype), _tiles(compile_kernel))
    except Unsupported:
        return None, None, None
    gy_hi = tuple(p - n for n, p in zip(gy.shape[2:], lines))
    return compile_kernel(kernel), padding_of(x, lo, hi, 0, compile_kernel), \
        padding_of(gy, (0,) * len(lines), gy_hi, 0, compile_kernel)


def overrun_rows(padded, lines, ksize, dilation):
    """Rows of zeros to add after x's first spatial dim so that reading flat lines of sizes
    ``lines`` at every kernel offset stays inside x's plane."""
    row = [math.prod(padded[1 + i:]) for i in range(len(padded))]
    last = sum((q - 1) * r for q, r in zip(lines, row)) + \
        sum((k - 1) * d * r for k, d, r in zip(ksize, dilation, row))
    return max(0, -(-(last + 1 - padded[0] * row[0]) // row[0]))

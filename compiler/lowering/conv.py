"""Direct convolution as a loop-level Kernel (kernel.py's description, rendered by any backend).

    out[n, g*Og + o, *q] = bias[g*Og + o] + sum over c < Cg and kernel offsets k of
                           x[n, g*Cg + c, *(q * stride + k * dilation)] * W(g, o, c, k)

``x`` is already padded (the executor pads with numpy when the convolution has padding), so
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

from dynograph.runtime import dtypes as D
from .kernel import Kernel, Load, Recorder, ReductionStep, Store
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
                       stride, dilation, dtype):
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
    # domain axes, by name, in loop order
    names = ["n", "g", "o"] + [f"q{i}" for i in range(nd - 1)] + ["c"] + \
        [f"k{i}" for i in range(nd)] + [f"q{nd - 1}"]
    sizes = {"n": n, "g": groups, "o": og, "c": cg}
    sizes.update({f"q{i}": q[i] for i in range(nd)})
    sizes.update({f"k{i}": ksize[i] for i in range(nd)})
    xs = {"n": x_strides[0], "g": cg * x_strides[1], "c": x_strides[1]}
    xs.update({f"q{i}": stride[i] * x_strides[2 + i] for i in range(nd)})
    xs.update({f"k{i}": dilation[i] * x_strides[2 + i] for i in range(nd)})
    ws = {"g": weights.g, "o": weights.o, "c": weights.c}
    ws.update({f"k{i}": weights.k[i] for i in range(nd)})
    spatial = math.prod(q)
    out = {"n": out_channels * spatial, "g": og * spatial, "o": spatial}
    for i in range(nd):
        out[f"q{i}"] = math.prod(q[i + 1:])
    return _sum_of_products("conv", names, sizes, xs, ws, weights.offset, bias_stride, og, out,
                            dtype)


def _sum_of_products(name, names, sizes, xs, ws, w_offset, bias_stride, og, out, dtype):
    """The Kernel out = sum over the c and k axes of x * w (+ bias), each operand read through
    its strides per named domain axis."""
    def strides(table):
        return tuple(table.get(a, 0) for a in names)

    b = Recorder()
    loads = [Load(0, strides(xs), 0), Load(1, strides(ws), w_offset)]
    product = b.mul(b.load(0, dtype, 1), b.load(1, dtype, 1))
    reductions = [ReductionStep("add", 0.0, dtype, product.index)]
    total = b.acc(0, dtype)
    buffers = [("in0", dtype, "in"), ("in1", dtype, "in")]
    if bias_stride is not None:
        loads.append(Load(2, strides({"g": og * bias_stride, "o": bias_stride}), 0))
        total = b.add(total, b.load(2, dtype, 0))
        buffers.append(("in2", dtype, "in"))
    buffers.append(("out0", dtype, "out"))
    stores = [Store(len(buffers) - 1, total.index, strides(out))]
    domain = tuple(sizes[a] for a in names)
    reduce_axes = tuple(i for i, a in enumerate(names) if a[0] in "ck")
    return Kernel(name, domain, reduce_axes, buffers, b.exprs, loads, reductions, stores)


def flat_weight_grad(x_shape, gy_shape, ksize, dilation, groups, dtype):
    """The Kernel of a stride-1 convolution's weight gradient over flat lines:

        gw[g*Og + o, c, *k] = sum over n and j of gy[n, g*Og + o, j] * x[n, g*Cg + c, j + off(k)]

    where ``x`` (N, C, *P) is padded (with rows of zeros after the last one for the reads that
    run past a plane), ``gy`` (N, O, *L) is laid out with x's row lengths (zeros beyond each
    output row), j runs over gy's flattened positions and off(k) is the offset of kernel
    position k in x's flat plane.  The sum over j is one long contiguous run: vectorized with
    blocked partial sums.  The last kernel dim is not a loop: one reduction per position
    along it, all in one pass, share each load of gy.  Both inputs contiguous; buffers in0 x,
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
    names = ["g", "o", "c"] + [f"k{i}" for i in range(nd - 1)] + ["n", "j"]
    sizes = {"g": groups, "o": og, "c": cg, "n": n, "j": lines}
    sizes.update({f"k{i}": ksize[i] for i in range(nd - 1)})
    xs = {"g": cg * plane, "c": plane, "n": c * plane, "j": 1}
    xs.update({f"k{i}": dilation[i] * row[i] for i in range(nd - 1)})
    gs = {"g": og * lines, "o": lines, "n": o * lines, "j": 1}
    kk = math.prod(ksize)
    out = {"g": og * cg * kk, "o": cg * kk, "c": kk}
    out.update({f"k{i}": math.prod(ksize[i + 1:]) for i in range(nd - 1)})

    def strides(table):
        return tuple(table.get(a, 0) for a in names)

    b = Recorder()
    loads = [Load(1, strides(gs), 0)]
    grad = b.load(0, dtype, 1)
    reductions, stores = [], []
    for k in range(ksize[-1]):          # kernel offset k along the last dim: x shifted by k*d
        loads.append(Load(0, strides(xs), k * dilation[-1]))
        product = b.mul(b.load(len(loads) - 1, dtype, 1), grad)
        reductions.append(ReductionStep("add", 0.0, dtype, product.index))
        stores.append(Store(2, b.acc(k, dtype).index, strides(out), k))
    return Kernel("conv_weight_grad", tuple(sizes[a] for a in names),
                  (len(names) - 2, len(names) - 1),
                  [("in0", dtype, "in"), ("in1", dtype, "in"), ("out0", dtype, "out")], b.exprs,
                  loads, reductions, stores)

"""Single-op kernels for eager ops on CUDA tensors, lent to the eager core through
runtime/device_kernels.py.

An op call on device arrays becomes a one-node graph node (its operands' types, its literal
scalars and attributes), cached per call signature; the node runs as compiled programs run their
nodes (compiler/lowering/program.py): a kernel description for the operands' layouts, rendered
as CUDA C and compiled once (``Plan``), launched on the device arrays; ops with a direct rule
(the matrix products) run their rule with the backend's GEMM.  ``run`` answers None for ops
without a lowering or a covered direct rule: the eager core then runs them on the host.
"""
import itertools
import math
import threading
from collections import OrderedDict

import numpy as np

from dynograph.compiler.ops.core import TensorSpec
from dynograph.runtime import dtypes as D
from dynograph.runtime.cuda_memory import DeviceArray
from ..interpreter import evaluate
from ..ir import Node, TensorType, Value
from ..ops import REGISTRY
from ..ops.pooling import avg_divisor, window_ok, overhang, pool_output_size
from ..lowering.conv import Weights, direct_convolution, flat_weight_grad, overrun_rows
from ..lowering.description import Kernel, Load, Recorder, ReductionStep, Store
from ..lowering.pool import pooling_backward_kernel, pooling_kernel
from ..lowering.kernel import lowerable
from ..lowering.program import Plan, kernel_inputs, kernel_plan
from ..lowering.scalar import Unsupported
from .backend import backend
from .philox import RandomKernel, RandomSource

# the distinct call signatures whose nodes (and compiled plans) are kept
MAX_CALLS = 4096
# the Python floats whose 0-d device arrays are kept for reuse
MAX_NUMBERS = 256
# the matrix products, run by the backend's GEMM (the other direct rules prepare their operands
# with numpy on the host)
DEVICE_RULES = ("mm", "addmm", "bmm")
# joins run as copy kernels into slices of their result
JOINS = ("cat", "stack")
# gathers and scatters run as compare-and-sum reductions (pick_kernel), up to this much work
PICKS = ("gather", "scatter_add", "index_select", "index_add", "embedding", "index")
# copies of reversed, rotated, sliced or broadcast views
MOVES = ("flip", "rot90", "roll", "repeat")
TRIANGLES = ("tril", "triu")
CONVS = ("convolution", "convolution_weight_grad")
POOLS = ("max_pool2d_with_indices", "max_pool3d_with_indices", "max_pool_backward")
AVG_POOLS = ("avg_pool2d", "avg_pool3d", "avg_pool_backward")
SPECIAL = JOINS + PICKS + MOVES + TRIANGLES + CONVS + POOLS + AVG_POOLS
MAX_PICK_WORK = 1 << 26
_GEMM_TYPES = ("float32", "float64", "float16", "bfloat16")


class _Call:
    """A call signature's node, the Values its kernel reads (``positions``: the operands they
    come from), its results' types, and the operands that are Python floats (``scalars``: their
    positions and the dtype the kernel reads them in)."""
    __slots__ = ("node", "values", "positions", "types", "scalars", "attr_scalars", "__weakref__")


class DeviceOps:
    def __init__(self):
        self.calls = OrderedDict()
        self.lock = threading.Lock()
        self.numbers = OrderedDict()    # (value, dtype, device) -> a 0-d device array holding it
        self.plans = OrderedDict()      # (backend, call signature) -> Plan (see _cached)
        self.random_kernels = {}        # (backend, RandomKernel key) -> (module, function, launch)

    def run(self, op, arrays, attrs, index):
        if op.name in SPECIAL:
            return self.special(backend(index), op, arrays, attrs)
        if not (lowerable_op(op) or op.name in DEVICE_RULES):
            return None
        call = self._call(op, arrays, attrs)
        if call is None:
            return None
        be = backend(index)
        if op.name in DEVICE_RULES:
            return product(be, op.name, arrays, attrs)
        if call.scalars:
            arrays = list(arrays)
            for p, dt in call.scalars:
                arrays[p] = self._number(arrays[p], dt, index)
        inputs = [arrays[p] for p in call.positions] + \
            [self._number(attrs[k], D.float64, index) for k in call.attr_scalars]
        plan = kernel_plan(call.node, inputs, call.values, None, be)
        if plan is None:
            return None
        outs = [be.allocate(shape, dt) for (shape, _), dt in zip(call.types, plan.outputs)]
        plan([be.address(a) for a in inputs] + [be.address(o) for o in outs])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def random(self, kind, shape, dtype, params, index, state):
        """A device array of ``shape`` drawn by the Philox kernel ``kind`` (philox.py) with
        ``params``; ``state(counters)`` gives the generator's (seed, offset) for the draw."""
        from dynograph.runtime import cuda_driver
        be = backend(index)
        n = math.prod(shape)
        out = be.allocate(shape, dtype.np)
        if n == 0:
            return out
        kernel = RandomKernel(kind, n, dtype, tuple(float(p) for p in params))
        key = (be.name, kernel.key)
        loaded = self.random_kernels.get(key)
        if loaded is None:
            source = RandomSource(kernel)
            module = cuda_driver.load_module(be.cache.image(source.text, source.name), index)
            fn = cuda_driver.function(module, source.name, len(kernel.buffers) + 1)
            loaded = self.random_kernels[key] = (module, fn, source.launch_shape())
        _, fn, (grid, block) = loaded
        seed, offset = state(kernel.counters())
        words = DeviceArray.from_host(np.array([seed % (1 << 64), offset], np.uint64), index)
        cuda_driver.activate(index)
        cuda_driver.launch(fn, grid, block, [out.address, words.address])
        return out

    def copy(self, dst, src):
        """``dst[...] = src`` for device arrays of one device: ``src`` broadcast to ``dst``'s
        shape and cast to its dtype, ``dst`` of any strides (a view), by one copy kernel.  A
        source sharing ``dst``'s memory is first copied out, so no element is read after it
        was written."""
        be = backend(dst.index)
        if src.block is dst.block:
            src = self.copy(be.allocate(src.shape, src.dtype), src)
        plan = self._cached(be, ("copy", _geometry(dst), _geometry(src)),
                            lambda: Plan(be, copy_kernel(dst, src)))
        plan([be.address(src), be.address(dst)])
        return dst

    def _cached(self, be, key, build):
        """``build()`` (a Plan, or what a call needs besides: its kernel is described, hashed
        and compiled once) for the call signature ``key`` on ``be``, kept with the most recent
        signatures' plans."""
        key = (be.name,) + key
        found = self.plans.get(key)
        if found is None:
            found = build()
            with self.lock:
                self.plans[key] = found
                if len(self.plans) > MAX_CALLS:
                    self.plans.popitem(last=False)
        return found

    def special(self, be, op, arrays, attrs):
        """An op of SPECIAL (joins, picks, moves) on device arrays; None: the host runs it."""
        if not all(type(a) is DeviceArray for a in arrays if not (a is None and op.name in CONVS)):
            return None
        kind = self.join if op.name in JOINS else self.pick if op.name in PICKS else \
            self.triangle if op.name in TRIANGLES else self.move if op.name in MOVES else \
            self.weight_grad if op.name == "convolution_weight_grad" else \
            self.max_pool_backward if op.name == "max_pool_backward" else \
            self.avg_pool_backward if op.name == "avg_pool_backward" else \
            self.avg_pool if op.name in AVG_POOLS else \
            self.max_pool if op.name in POOLS else self.convolve
        return kind(be, op, arrays, attrs)

    def convolve(self, be, op, arrays, attrs):
        """A convolution (a transposed one of stride 1 too: an input gradient) by the direct
        kernel of compiler/lowering/conv.py over x padded on the device; None (the host) for
        the other cases (dtypes other than float32/float64, transposed with stride > 1)."""
        x, w, bias = arrays
        if x.dtype != w.dtype or x.dtype.name not in ("float32", "float64") or \
                (bias is not None and bias.dtype != x.dtype) or x.ndim != w.ndim:
            return None
        stride, dilation, groups = attrs["stride"], attrs["dilation"], attrs["groups"]
        ksize, item = w.shape[2:], x.itemsize
        w_strides = tuple(s // item for s in w.strides)
        if attrs["transposed"]:
            lead = tuple(d * (k - 1) - p for d, k, p in zip(dilation, ksize, attrs["padding"]))
            if any(s != 1 for s in stride) or min(lead) < 0:
                return None
            pads = [(a, a + extra) for a, extra in zip(lead, attrs["output_padding"])]
            out_channels = w.shape[1] * groups
            weights = Weights.transposed(w_strides, w.shape, groups)
        else:
            pads = [(p, p) for p in attrs["padding"]]
            out_channels = w.shape[0]
            weights = Weights.forward(w_strides, groups, out_channels // groups)
        if any(a or b for a, b in pads):
            x = self._padded(be, x, [a for a, _ in pads], [b for _, b in pads])

        def build():
            try:
                kernel = direct_convolution(
                    x.shape, tuple(s // item for s in x.strides), weights,
                    None if bias is None else bias.strides[0] // item, groups, out_channels,
                    tuple(ksize), stride, dilation, D.from_numpy_dtype(x.dtype))
            except Unsupported:
                return False, None
            nd = len(ksize)     # the domain is (n, g, o, q0 .. q[d-2], c, k0 .. k[d-1], q[d-1])
            return Plan(be, kernel), tuple(kernel.domain[3:3 + nd - 1]) + (kernel.domain[-1],)
        plan, sizes = self._cached(be, ("convolution", _geometry(x), _geometry(w), repr(attrs),
                                        None if bias is None else bias.strides), build)
        if plan is False:
            return None
        out = be.allocate((x.shape[0], out_channels) + sizes, x.dtype)
        plan([be.address(a) for a in (x, w, bias, out) if a is not None])
        return out

    def weight_grad(self, be, op, arrays, attrs):
        """A convolution's weight gradient (stride 1) by the flat direct kernel of
        compiler/lowering/conv.py, x and gy laid out on the device as it reads them (x padded,
        with rows of zeros after its planes; gy with x's row lengths)."""
        x, gy = arrays
        ksize, dilation = tuple(attrs["kernel_size"]), attrs["dilation"]
        if x.dtype != gy.dtype or x.dtype.name not in ("float32", "float64") or \
                any(s != 1 for s in attrs["stride"]) or x.ndim != gy.ndim:
            return None
        padded = [n + 2 * p for n, p in zip(x.shape[2:], attrs["padding"])]
        lines = (gy.shape[2],) + tuple(padded[1:])
        if any(q > p for q, p in zip(gy.shape[3:], padded[1:])):
            return None
        extra = overrun_rows(padded, lines, ksize, dilation)
        lo = tuple(attrs["padding"])
        xp = self._padded(be, x, lo, (lo[0] + extra,) + lo[1:])
        gl = self._padded(be, gy, (0,) * len(lines), tuple(p - n for n, p in zip(gy.shape[2:], lines)))
        def build():
            try:
                return Plan(be, flat_weight_grad(xp.shape, gl.shape, ksize, dilation,
                                                 attrs["groups"], D.from_numpy_dtype(x.dtype)))
            except Unsupported:
                return False
        plan = self._cached(be, ("weight_grad", _geometry(xp), _geometry(gl), repr(attrs)), build)
        if plan is False:
            return None
        out = be.allocate((gy.shape[1], x.shape[1] // attrs["groups"]) + ksize, x.dtype)
        plan([be.address(xp), be.address(gl), be.address(out)])
        return out

    def max_pool(self, be, op, arrays, attrs):
        """Max pooling (values and indices) by the direct kernel of compiler/lowering/pool.py
        over a contiguous device copy of x."""
        x, = arrays
        nd = len(attrs["kernel_size"])
        if x.dtype.name not in ("float32", "float64") or x.ndim not in (nd + 1, nd + 2) or \
                0 in x.shape:
            return None
        def build():
            recipe = pooling_kernel(x.shape, attrs, nd, D.from_numpy_dtype(x.dtype))
            if recipe is None:
                return False
            kernel, sizes, starts = recipe
            return Plan(be, kernel), sizes, DeviceArray.from_host(starts, be.index)
        found = self._cached(be, ("max_pool", x.shape, x.dtype, repr(attrs)), build)
        if found is False:
            return None
        plan, sizes, starts = found
        x = self._padded(be, x, (0,) * nd, (0,) * nd)
        shape = x.shape[:-nd] + sizes
        values, indices = be.allocate(shape, x.dtype), be.allocate(shape, np.int64)
        plan([be.address(a) for a in (x, starts, values, indices)])
        return values, indices

    def max_pool_backward(self, be, op, arrays, attrs):
        """Max pooling's input gradient by the gather kernel of compiler/lowering/pool.py over
        the gradient and indices padded on the device."""
        g, indices = arrays
        shape = tuple(attrs["input_shape"])
        if attrs.get("stride") is None or g.dtype.name not in ("float32", "float64") or \
                indices.dtype != np.int64 or g.shape != indices.shape or g.ndim != len(shape) or \
                0 in shape:
            return None
        def build():
            recipe = pooling_backward_kernel(g.shape, shape, attrs, D.from_numpy_dtype(g.dtype))
            if recipe is None:
                return False
            kernel, positions, tail, lo, hi = recipe
            return Plan(be, kernel), DeviceArray.from_host(positions, be.index), tail, lo, hi
        found = self._cached(be, ("max_pool_backward", g.shape, g.dtype, repr(attrs)), build)
        if found is False:
            return None
        plan, positions, tail, lo, hi = found
        gp, ip = self._padded(be, g, lo, hi), self._padded(be, indices, lo, hi, fill=-1)
        out = be.allocate(shape, g.dtype)
        plan([be.address(gp), be.address(ip), be.address(positions), be.address(out)])
        zero = self._number(0.0, D.from_numpy_dtype(g.dtype), be.index)
        for part in tail:           # positions past the last whole stride: in no window
            self.copy(out.view_by(lambda a: a[part], [out]), zero)
        return out

    def avg_pool(self, be, op, arrays, attrs):
        """Average pooling as the impl computes it: x padded on the device and seen as its
        windows (a strided view whose last dims are a window's taps), summed by a reduction
        kernel in the taps' order and divided by the windows' divisors (the impl's, made on the
        host once per signature)."""
        x, = arrays
        nd, grid = _avg_pool_grid(x, attrs)
        if grid is None:
            return None
        out, hi, div = self._cached(be, ("avg_pool", x.shape, repr(attrs)), lambda: grid)
        xp = self._padded(be, x, attrs["padding"], hi)
        lead, taps = xp.strides[:-nd], xp.strides[-nd:]
        windows = xp.view(xp.shape[:-nd] + out + tuple(attrs["kernel_size"]),
                          lead + tuple(t * s for t, s in zip(taps, attrs["stride"])) + taps,
                          xp.address - xp.block.address)
        total = self.run(REGISTRY["sum"], [windows], {"dim": tuple(range(-nd, 0))}, be.index)
        return self._divided(be, total, div)

    def avg_pool_backward(self, be, op, arrays, attrs):
        """The input gradient of an average pool as the impl computes it: each window's share
        (g over its divisor) added to its taps, one strided view of the padded gradient per
        tap in the taps' order, then the padding cropped."""
        g, = arrays
        shape = tuple(attrs["input_shape"])
        pool = {k: v for k, v in attrs.items() if k != "input_shape"}
        nd, grid = _avg_pool_grid(_Shape(shape, g.dtype), pool)
        if grid is None or tuple(g.shape) != shape[:-nd] + grid[0]:
            return None
        out, hi, div = self._cached(be, ("avg_pool", shape, repr(pool)), lambda: grid)
        share = self._divided(be, g, div)
        lo = tuple(attrs["padding"])
        gp = be.allocate(shape[:-nd] + tuple(n + a + b for n, a, b in zip(shape[-nd:], lo, hi)),
                         g.dtype)
        self.copy(gp, self._number(0, D.from_numpy_dtype(g.dtype), be.index))
        lead, taps, start = gp.strides[:-nd], gp.strides[-nd:], gp.address - gp.block.address
        steps = lead + tuple(t * s for t, s in zip(taps, attrs["stride"]))
        for tap in itertools.product(*(range(k) for k in attrs["kernel_size"])):
            view = gp.view(share.shape, steps, start + sum(o * t for o, t in zip(tap, taps)))
            self.copy(view, self.run(REGISTRY["add"], [view, share], {}, be.index))
        inside = gp.view(shape, gp.strides, start + sum(p * t for p, t in zip(lo, taps)))
        return self.copy(be.allocate(shape, g.dtype), inside)

    def _divided(self, be, total, div):
        """``total`` over the divisors ``div`` (a number, or a host array broadcasting over the
        output's last dims), in total's dtype."""
        if isinstance(div, np.ndarray):
            divisor = self._cached(be, ("avg_divisor", div.tobytes(), div.shape, total.dtype),
                                   lambda: DeviceArray.from_host(div.astype(total.dtype), be.index))
        else:
            divisor = self._number(div, D.from_numpy_dtype(total.dtype), be.index)
        return self.run(REGISTRY["div"], [total, divisor], {}, be.index)

    def _padded(self, be, x, lo, hi, fill=0):
        """A contiguous device copy of ``x`` inside a border of ``fill``: ``lo``/``hi`` more
        elements before/after each of its last dims."""
        lead = x.ndim - len(lo)
        lo, hi = (0,) * lead + tuple(lo), (0,) * lead + tuple(hi)
        out = be.allocate(tuple(n + a + b for n, a, b in zip(x.shape, lo, hi)), x.dtype)
        if any(lo) or any(hi):
            self.copy(out, self._number(fill, D.from_numpy_dtype(x.dtype), be.index))
        inside = out.view(x.shape, out.strides, sum(a * s for a, s in zip(lo, out.strides)))
        self.copy(inside, x)
        return out

    def triangle(self, be, op, arrays, attrs):
        """tril or triu: each element kept or zeroed by comparing its column minus its row with
        the diagonal (two device aranges read along the last two axes)."""
        x, = arrays
        if x.ndim < 2:
            return None
        out = be.allocate(x.shape, x.dtype)
        if out.size:
            rows, cols = self._iota(x.shape[-2], be.index), self._iota(x.shape[-1], be.index)
            lower, diagonal = op.name == "tril", attrs.get("diagonal", 0)
            plan = self._cached(be, ("triangle", _geometry(x), lower, diagonal),
                                lambda: Plan(be, triangle_kernel(x, lower, diagonal, out)))
            plan([be.address(x), be.address(rows), be.address(cols), be.address(out)])
        return out

    def join(self, be, op, arrays, attrs):
        """cat or stack of device arrays: each operand copied (cast to the result's dtype) into
        its slice of the result by a copy kernel."""
        specs = [TensorSpec(a.shape, D.from_numpy_dtype(a.dtype)) for a in arrays]
        spec = op.meta(*specs, **attrs)
        out = be.allocate(spec.shape, spec.dtype.np)
        if not out.size:
            return out
        dim = attrs["dim"] % (len(spec.shape))
        start = 0
        for a in arrays:
            if op.name == "stack":
                shape = out.shape[:dim] + out.shape[dim + 1:]
                strides = out.strides[:dim] + out.strides[dim + 1:]
                part, start = out.view(shape, strides, start * out.strides[dim]), start + 1
            elif a.size or a.shape != (0,):     # cat skips 1-d empty operands
                n = a.shape[dim]
                part = out.view(out.shape[:dim] + (n,) + out.shape[dim + 1:], out.strides,
                                start * out.strides[dim])
                start += n
            else:
                continue
            if part.size:
                self.copy(part, a)
        return out

    def move(self, be, op, arrays, attrs):
        """flip, rot90, roll and repeat of a device array: copy kernels from views of the operand
        (reversed, rotated, sliced or broadcast) into the result or views of it."""
        x, = arrays
        shape = tuple(op.meta(TensorSpec(x.shape, D.from_numpy_dtype(x.dtype)), **attrs).shape)
        out = be.allocate(shape, x.dtype)
        if not out.size:
            return out
        if op.name == "flip":
            dims = attrs["dims"]
            view = x.view_by(lambda a: a[tuple(slice(None, None, -1) if d in dims else slice(None)
                                               for d in range(a.ndim))], [x])
        elif op.name == "rot90":
            view = x.view_by(lambda a: np.rot90(a, attrs["k"], attrs["dims"]), [x])
        elif op.name == "repeat":
            # out laid out as (r0, s0, r1, s1, ...) takes x laid out as (1, s0, 1, s1, ...)
            reps = attrs["repeats"]
            sizes = (1,) * (len(reps) - x.ndim) + x.shape
            strides = (0,) * (len(reps) - x.ndim) + x.strides
            out_view = out.view(_pairs(reps, sizes), _pairs(
                [n * s for n, s in zip(sizes, out.strides)], out.strides), 0)
            self.copy(out_view, x.view(_pairs([1] * len(reps), sizes),
                                       _pairs([0] * len(reps), strides), x.offset))
            return out
        else:                                   # roll: two slice copies per rolled dimension
            return self._roll(be, x, out, attrs["shifts"], attrs["dims"])
        return self.copy(out, view)

    def _roll(self, be, x, out, shifts, dims):
        if not dims:                            # the flattened tensor, rolled
            flat = self.copy(be.allocate(x.shape, x.dtype), x) if not x.is_contiguous() else x
            flat = flat.view((flat.size,), (flat.itemsize,), flat.offset)
            self._roll(be, flat, out.view((out.size,), (out.itemsize,), 0), shifts, (0,))
            return out
        src = x
        for k, (shift, dim) in enumerate(zip(shifts, dims)):
            dst = out if k == len(dims) - 1 else be.allocate(x.shape, x.dtype)
            n = x.shape[dim]
            s = shift % n if n else 0
            for start, stop, at in ((0, n - s, s), (n - s, n, 0)):
                if stop > start:
                    self.copy(_along(dst, dim, at, stop - start), _along(src, dim, start, stop - start))
            src = dst
        return out

    def pick(self, be, op, arrays, attrs):
        """gather, scatter_add and the ops made of them (index_select, index_add, embedding, a
        leading index tensor) of device arrays; None (the host runs it, with torch's errors) for
        operands they do not cover, indices out of range, or too much work."""
        name = op.name
        if name in ("index_select", "embedding", "index"):
            if name == "index_select":
                (x, index), dim = arrays, attrs["dim"]
            elif name == "embedding":
                (x, index), dim = arrays, 0
            elif len(arrays) == 2:
                (x, index), dim = arrays, 0
            else:
                return None             # several index tensors: the host
            if x.ndim == 0 or not -x.ndim <= dim < x.ndim or (name == "index_select" and index.ndim != 1):
                return None
            dim %= x.ndim
            flat = index if index.ndim == 1 and name == "index_select" else _flat(be, self, index)
            out_shape = x.shape[:dim] + (flat.shape[0],) + x.shape[dim + 1:]
            out = self._pick(be, x, _spread(flat, out_shape, dim), None, dim)
            if out is None or name == "index_select":
                return out
            return out.view(index.shape + x.shape[1:], _contiguous(index.shape + x.shape[1:], out), 0)
        if name == "index_add":
            x, index, src = arrays
            dim = attrs["dim"]
            if attrs.get("alpha", 1) != 1 or index.ndim != 1 or src.ndim != x.ndim or x.ndim == 0:
                return None
            return self._pick(be, x, _spread(index, src.shape, dim % x.ndim), src, dim % x.ndim)
        if name == "gather":
            (x, index), src = arrays, None
        else:
            x, index, src = arrays
        return self._pick(be, x, index, src, attrs["dim"])

    def _pick(self, be, x, index, src, dim):
        nd = x.ndim
        if nd == 0 or index.ndim != nd or not -nd <= dim < nd or index.dtype != np.int64:
            return None
        dim %= nd
        others = [d for d in range(nd) if d != dim]
        if any(index.shape[d] > x.shape[d] for d in others) or (src is not None and (
                src.ndim != nd or src.dtype != x.dtype
                or any(index.shape[d] > src.shape[d] for d in range(nd)))):
            return None
        n = x.shape[dim]
        extent = index.shape[dim] if src is not None else n
        if not index.size or index.size * extent > MAX_PICK_WORK or not self._in_range(be, index, n):
            return None
        iota = self._iota(n, be.index)
        if src is None:
            out = be.allocate(index.shape, x.dtype)
            plan = self._cached(be, ("gather", _geometry(x), _geometry(index), dim),
                                lambda: Plan(be, pick_kernel(x, index, None, dim, iota, out)))
            plan([be.address(index), be.address(iota), be.address(x), be.address(out)])
            return out
        out = self.copy(be.allocate(x.shape, x.dtype), x)
        region = out.view(index.shape[:dim] + (n,) + index.shape[dim + 1:], out.strides, 0)
        plan = self._cached(be, ("scatter_add", _geometry(x), _geometry(index), _geometry(src), dim),
                            lambda: Plan(be, pick_kernel(x, index, src, dim, iota, region)))
        plan([be.address(index), be.address(iota), be.address(x), be.address(src),
              be.address(region)])
        return out

    def _in_range(self, be, index, n):
        """Whether every value of device array ``index`` lies in [0, n): its minimum and maximum
        by one reduction kernel, read back."""
        both = be.allocate((2,), np.int64)
        plan = self._cached(be, ("index_bounds", _geometry(index)),
                            lambda: Plan(be, _bounds_kernel(index)))
        plan([be.address(index), be.address(both)])
        low, high = both.to_host().tolist()
        return 0 <= low and high < n

    def _iota(self, n, index):
        key = ("iota", n, index)
        a = self.numbers.get(key)
        if a is None:
            a = DeviceArray.from_host(np.arange(n, dtype=np.int64), index)
            with self.lock:
                self.numbers[key] = a
        return a

    def _number(self, value, dtype, index):
        """A 0-d device array holding ``value`` as ``dtype``: a kernel reads a Python float from
        memory, so a new value (a learning rate's bias correction) needs no new kernel; the most
        recent values' arrays are kept."""
        key = (np.array(value, dtype.np).tobytes(), dtype, index)   # -0.0 is not 0.0
        a = self.numbers.get(key)
        if a is None:
            a = DeviceArray.from_host(np.array(value, dtype.np), index)
            with self.lock:
                self.numbers[key] = a
                if len(self.numbers) > MAX_NUMBERS:
                    self.numbers.popitem(last=False)
        return a

    def _call(self, op, arrays, attrs):
        key = (op.name, tuple(_signature(a) for a in arrays),
               tuple(sorted((k, float) if _runtime_attr(op, k, a) else (k, a) for k, a in attrs.items())))
        try:
            call = self.calls.get(key)
        except TypeError:               # an unhashable attribute (a list): no kernel
            return None
        if call is not None:
            self.calls.move_to_end(key, last=True)
            return call
        try:
            call = _make_call(op, arrays, attrs)
        except Unsupported:
            call = None
        with self.lock:
            self.calls[key] = call
            if len(self.calls) > MAX_CALLS:
                self.calls.popitem(last=False)
        return call


def product(be, name, arrays, attrs):
    """mm, addmm or bmm of device arrays by ``be``'s GEMM kernel; None where the dtypes are not
    floating (the host runs it)."""
    if name == "addmm":
        bias, a, b = arrays
        alpha, beta = attrs.get("alpha", 1), attrs.get("beta", 1)
        if not all(type(v) in (int, float) for v in (alpha, beta)):
            return None
    else:
        (a, b), bias, alpha, beta = arrays, None, 1, 1
    if not _floats(a, b, *([] if bias is None else [bias])):
        return None
    out = be.allocate(a.shape[:-1] + b.shape[-1:], a.dtype)
    return be.matmul(a, b, out, bias, alpha, beta)


def extern(be, op, args, attrs):
    """An op of a program on device arrays that has no kernel step (runtime/backend.py's
    ``extern``): a view of its operand, a matrix product by the GEMM kernel, else its numpy
    implementation on host copies of the operands, its results copied back."""
    source = next((a for a in args if type(a) is DeviceArray), None)
    if op.view and source is not None:
        return source.view_by(lambda *a: op.impl(*a, **attrs), args)
    if op.name in DEVICE_RULES:
        result = product(be, op.name, args, attrs)
        if result is not None:
            return result
    if op.name in SPECIAL:
        result = _OPS.special(be, op, args, attrs)
        if result is not None:
            return result

    def host(a):
        if type(a) is DeviceArray:
            return a.to_host()
        if type(a) in (list, tuple):
            return type(a)(host(b) for b in a)
        return a
    result = evaluate(op, [host(a) for a in args], attrs)

    def back(r):
        return DeviceArray.from_host(r, be.index) if isinstance(r, (np.ndarray, np.generic)) else r
    return tuple(back(r) for r in result) if type(result) in (tuple, list) else back(result)


def copy_kernel(dst, src):
    """The Kernel storing ``src`` (broadcast, cast) into ``dst``, both read through their
    strides: the domain is ``dst``'s shape, a load and a store per element."""
    shape = dst.shape
    pad = len(shape) - len(src.shape)

    def elements(a, dims):
        return tuple(0 if n == 1 else s // a.itemsize for n, s in zip(dims, a.strides))
    src_strides = (0,) * pad + tuple(0 if n == 1 and m != 1 else s for s, n, m in
                                     zip(elements(src, src.shape), src.shape, shape[pad:]))
    sdt, ddt = D.from_numpy_dtype(src.dtype), D.from_numpy_dtype(dst.dtype)
    rec = Recorder()
    value = rec.cast(rec.load(0, sdt, 0), ddt)
    return Kernel("copy", shape, (), [("in0", sdt, "in"), ("out0", ddt, "out")], rec.exprs,
                  [Load(0, src_strides, 0)], [], [Store(1, value.index, elements(dst, shape))])


def _spread(index, shape, dim):
    """1-D device array ``index`` as a view of ``shape``, varying along ``dim`` only."""
    strides = tuple(index.strides[0] if d == dim else 0 for d in range(len(shape)))
    return index.view(shape, strides, index.offset)


def _flat(be, ops, a):
    """Device array ``a`` as a 1-D view (a contiguous copy first where it is strided)."""
    if not a.is_contiguous():
        a = ops.copy(be.allocate(a.shape, a.dtype), a)
    return a.view((a.size,), (a.itemsize,), a.offset)


def _contiguous(shape, like):
    from dynograph.runtime.cuda_memory import contiguous_strides
    return contiguous_strides(shape, like.itemsize)


def _pairs(a, b):
    """(a0, b0, a1, b1, ...)."""
    return tuple(v for pair in zip(a, b) for v in pair)


def _along(a, dim, start, n):
    """The view of device array ``a`` holding elements ``start .. start + n`` along ``dim``."""
    return a.view(a.shape[:dim] + (n,) + a.shape[dim + 1:], a.strides,
                  a.offset + start * a.strides[dim])


def triangle_kernel(x, lower, diagonal, out):
    """The Kernel of tril (``lower``) or triu: x where column - row <= diagonal (>= for triu),
    else 0.  Buffers: x, rows (arange), columns (arange), out."""
    nd = x.ndim
    xdt = D.from_numpy_dtype(x.dtype)
    rec = Recorder()
    v = rec.load(0, xdt, 0)
    row, col = rec.load(1, D.int64, 0), rec.load(2, D.int64, 0)
    keep = rec.cmp("le" if lower else "ge", rec.sub(col, row), rec.const(diagonal, D.int64))
    value = rec.select(keep, v, rec.const(0, xdt))
    loads = [Load(0, _elements(x), 0), Load(1, (0,) * (nd - 2) + (1, 0), 0),
             Load(2, (0,) * (nd - 1) + (1,), 0)]
    return Kernel("tril" if lower else "triu", x.shape, (),
                  [("in0", xdt, "in"), ("in1", D.int64, "in"), ("in2", D.int64, "in"),
                   ("out0", xdt, "out")], rec.exprs, loads, [],
                  [Store(3, value.index, _elements(out))])


def _geometry(a):
    """What a kernel of ``a`` depends on: its shape, strides and dtype (not its address)."""
    return a.shape, a.strides, a.dtype


def _elements(a, dims=None):
    return tuple(0 if n == 1 else s // a.itemsize for n, s in zip(dims or a.shape, a.strides))


def pick_kernel(x, index, src, dim, iota, out):
    """The Kernel of ``gather`` (``src`` None: out = x[... index ...] along ``dim``) or of
    ``scatter_add`` over ``out``, the region of its result that ``index`` spans (out = x + the
    src elements whose index names each position), written with loads, comparisons and a sum
    only: a reduction over a position axis compares every index with ``iota`` (0, 1, ...
    along ``dim``) and sums the selected elements.  Exactly one element is selected per
    gathered value; scatter_add sums each position's elements in index order, then adds x.
    Buffers: index, iota, x[, src], out."""
    nd = x.ndim
    xdt = D.from_numpy_dtype(x.dtype)
    acc = D.float32 if xdt in (D.float16, D.bfloat16) else D.float64 if xdt is D.float64 else \
        D.float32 if xdt is D.float32 else D.int64
    rec = Recorder()
    zero = rec.const(0, acc)
    if src is None:             # domain: index's shape, then the positions along dim (reduced)
        domain = index.shape + (x.shape[dim],)
        si = _elements(index) + (0,)
        sx = tuple(0 if d == dim else s for d, s in enumerate(_elements(x, index.shape))) + \
            (x.strides[dim] // x.itemsize,)
        loads = [Load(0, si, 0), Load(1, (0,) * nd + (1,), 0), Load(2, sx, 0)]
        i, t, v = rec.load(0, D.int64, 0), rec.load(1, D.int64, 1), rec.load(2, xdt, 1)
        picked = rec.select(rec.cmp("eq", i, t), rec.cast(v, acc), zero)
        value = rec.round_to(rec.acc(0, acc), xdt) if acc is not xdt else rec.acc(0, acc)
        buffers = [("in0", D.int64, "in"), ("in1", D.int64, "in"), ("in2", xdt, "in"),
                   ("out0", xdt, "out")]
    else:                       # domain: the region of out, then index's extent along dim
        region = out.shape
        k = index.shape[dim]
        along = [s for s in _elements(index)]
        si = tuple(0 if d == dim else s for d, s in enumerate(along)) + (along[dim],)
        src_el = _elements(src, index.shape)
        ss = tuple(0 if d == dim else s for d, s in enumerate(src_el)) + \
            (src.strides[dim] // src.itemsize,)
        domain = region + (k,)
        loads = [Load(0, si, 0), Load(1, tuple(1 if d == dim else 0 for d in range(nd)) + (0,), 0),
                 Load(2, _elements(x, region) + (0,), 0), Load(3, ss, 0)]
        i, t = rec.load(0, D.int64, 1), rec.load(1, D.int64, 0)
        base, v = rec.load(2, xdt, 0), rec.load(3, xdt, 1)
        picked = rec.select(rec.cmp("eq", i, t), rec.cast(v, acc), zero)
        total = rec.add(rec.cast(base, acc), rec.acc(0, acc))
        value = rec.round_to(total, xdt) if acc is not xdt else total
        buffers = [("in0", D.int64, "in"), ("in1", D.int64, "in"), ("in2", xdt, "in"),
                   ("in3", xdt, "in"), ("out0", xdt, "out")]
    if xdt is D.bool:
        value = rec.cast(value, D.bool)
    reductions = [ReductionStep("add", 0, acc, picked.index)]
    stores = [Store(len(buffers) - 1, value.index, _elements(out) + (0,))]
    return Kernel("gather" if src is None else "scatter_add", domain, (nd,), buffers, rec.exprs,
                  loads, reductions, stores)


def _bounds_kernel(index):
    """The Kernel storing the minimum and maximum of int64 ``index`` into a 2-element array."""
    rec = Recorder()
    v = rec.load(0, D.int64, 1)
    reductions = [ReductionStep("min", np.iinfo(np.int64).max, D.int64, v.index),
                  ReductionStep("max", np.iinfo(np.int64).min, D.int64, v.index)]
    low, high = rec.acc(0, D.int64), rec.acc(1, D.int64)
    nd = index.ndim
    return Kernel("index_bounds", index.shape, tuple(range(nd)),
                  [("in0", D.int64, "in"), ("out0", D.int64, "out")], rec.exprs,
                  [Load(0, _elements(index), 0)], reductions,
                  [Store(1, low.index, (0,) * nd, 0), Store(1, high.index, (0,) * nd, 1)])


class _Shape:
    """What _avg_pool_grid reads of an array: its shape, dims and dtype."""

    def __init__(self, shape, dtype):
        self.shape, self.ndim, self.dtype = shape, len(shape), dtype


def _avg_pool_grid(x, attrs):
    """(nd, (output sizes, right padding, divisors)) of an average pool of ``x`` (float32 or
    float64), or (nd, None) where the host runs it (other dtypes, windows the impl refuses)."""
    nd = len(attrs["kernel_size"])
    k, s, p = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    if x.dtype.name not in ("float32", "float64") or attrs.get("divisor_override") == 0 or \
            not window_ok(x, nd, k, s, p, (1,) * nd, attrs["ceil_mode"]):
        return nd, None
    spatial = tuple(x.shape[-nd:])
    out = tuple(pool_output_size(n, *w, 1, attrs["ceil_mode"]) for n, w in zip(spatial, zip(k, p, s)))
    hi = tuple(a + b for a, b in zip(p, overhang(spatial, out, k, s, p, (1,) * nd)))
    div = avg_divisor(spatial, out, k, s, p, attrs["count_include_pad"],
                       attrs.get("divisor_override"))
    return nd, (out, hi, div)


def _floats(*arrays):
    return arrays[0].dtype.name in _GEMM_TYPES and all(a.dtype == arrays[0].dtype for a in arrays)


def lowerable_op(op):
    return op.lowering is not None and op.reindex is None


def _signature(a):
    if isinstance(a, DeviceArray):
        return ("array", a.shape, a.dtype)
    if type(a) is float:                # a kernel parameter: its value is read at run time
        return float
    return (type(a), a)


def _runtime_attr(op, name, value):
    """Whether attribute ``name`` of ``op`` is read from a 0-d operand (like a float operand)."""
    return type(value) is float and name in op.scalar_attrs and op.kind == "elementwise"


def _make_call(op, arrays, attrs):
    specs = [TensorSpec(a.shape, D.from_numpy_dtype(a.dtype)) if isinstance(a, DeviceArray) else a
             for a in arrays]
    args, values, positions, scalars = [], [], [], []
    # a float operand of an elementwise op becomes a 0-d operand of the op's computation dtype,
    # which gives the result the same dtype (a 0-d tensor of the computation's category)
    compute = op.dtype_rule(*specs, **attrs)[0] if op.kind == "elementwise" else None
    if compute is not None and any(type(a) is float for a in arrays):
        as_operands = [TensorSpec((), compute) if type(a) is float else a for a in specs]
        if op.meta(*as_operands, **attrs).dtype is not op.meta(*specs, **attrs).dtype:
            compute = None              # the float's own promotion rule: a constant it stays
    for i, a in enumerate(arrays):
        if isinstance(a, DeviceArray) or (compute is not None and type(a) is float):
            if isinstance(a, DeviceArray):
                v = Value(TensorType(a.shape, D.from_numpy_dtype(a.dtype), "cuda"))
            else:
                v = Value(TensorType((), compute, "cuda"))
                scalars.append((i, compute))
            args.append(v)
            values.append(v)
            positions.append(i)
        elif isinstance(a, (list, tuple)):
            raise Unsupported(f"{op.name}: a list operand")
        else:
            args.append(a)
    node_attrs, attr_scalars = dict(attrs), []
    for k, a in attrs.items():
        if _runtime_attr(op, k, a):
            node_attrs[k] = v = Value(TensorType((), D.float64, "cuda"))
            values.append(v)
            attr_scalars.append(k)
    result = op.meta(*specs, **attrs)
    results = result if isinstance(result, (tuple, list)) else (result,)
    call = _Call()
    call.attr_scalars = attr_scalars
    call.types = [(tuple(s.shape), s.dtype) for s in results]
    call.node = Node(op.name, tuple(args), node_attrs,
                     tuple(Value(TensorType(shape, dt, "cuda")) for shape, dt in call.types))
    if op.name not in DEVICE_RULES:
        if not lowerable(call.node) or kernel_inputs(call.node) != values:
            raise Unsupported(f"{op.name}: operands a kernel cannot read")
    call.values, call.positions, call.scalars = values, positions, scalars
    return call


def device_ops():
    """The executor the eager core gets (runtime/device_kernels.py)."""
    return _OPS


_OPS = DeviceOps()

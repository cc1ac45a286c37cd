"""Tiled shared-memory GEMM (mapping.py's ``gemm`` kind) for every contraction: a kernel whose
one reduction sums ``a * b`` of two loads over its reduce axes, then stores an epilogue of the
total (scaled, a bias added, rounded to a half type).  Matrix products (``matmul_kernel``: mm,
addmm, bmm, transposed operands through strides) and the direct convolution's own description
(compiler/lowering/conv.py: an implicit GEMM, the rows the batch and output positions, the
columns the output channels, the padded input read through its strides, never copied into
columns) render the same way.

The kept axes split into batch, m (walked by ``a`` only) and n (``b`` only) axes, the reduce
axes are k; each is flattened row-major and indexed back through the description's strides.
A block of 256 threads computes a 64 x 64 tile of the output for one batch index, the tiles in
a grid-stride loop (any grid covers them): per step of 16 along k, the block loads a 64 x 16
slice of ``a`` and a 16 x 64 slice of ``b`` into shared memory in the reduction's dtype
(float16/bfloat16 converted to float32, which accumulates), zeros past the edges, then each
thread adds the products of its 4 x 4 outputs (rows ``ty + 16 i``, columns ``tx + 16 j``, so a
warp reads shared memory without bank conflicts).  The epilogue runs the description's stores
for each output in range.  The sum over k runs in order, one accumulator per output: the
per-thread path's terms in the same order, only its partial sums per BLOCK differ (within
float reassociation); nvcc's FMA contraction changes the last bits on a GPU.
"""
from dynograph.runtime import dtypes as D
from dynograph.runtime.backend import kernel_function
from ..lowering.description import Kernel, Load, Recorder, ReductionStep, Store
from .mapping import THREADS, mapping_of
from .render import Renderer, const, reg_type

TILE = 64           # output rows and columns per block
STEP = 16           # the k slice staged in shared memory
PER_THREAD = 4      # outputs per thread along rows and along columns (TILE / 16)
_SIDE = TILE // PER_THREAD


class GemmRenderer(Renderer):
    # no __launch_bounds__: ptxas then spilled the bfloat16 kernel's registers to fit a
    # register budget it chose (48); unbounded it uses 64, which 256 threads can have
    kind = f"; gemm {TILE}x{TILE} tiles"

    def __init__(self, kernel, name):
        super().__init__(kernel, name)
        self.c = mapping_of(kernel).contraction

    def size(self, axes):
        return self.c.size(self.domain, axes)

    def kernel_body(self):
        c, k = self.c, self.k
        acc_t = reg_type(k.reductions[0].dtype)
        zero = const(0, k.reductions[0].dtype)
        m, n, kk = self.size(c.m), self.size(c.n), self.size(c.k)
        m_tiles, n_tiles = -(-m // TILE), -(-n // TILE)
        tiles = self.size(c.batch) * m_tiles * n_tiles
        # +1 column: the slices are written along the axis their memory is contiguous in
        self.emit(f"__shared__ {acc_t} sa[{STEP}][{TILE + 1}];")
        self.emit(f"__shared__ {acc_t} sb[{STEP}][{TILE + 1}];")
        self.emit(f"const int tx = threadIdx.x % {_SIDE}, ty = threadIdx.x / {_SIDE};")
        self.open(f"for (long long tile = blockIdx.x; tile < {tiles}LL; tile += gridDim.x)")
        self.emit(f"const long long n0 = tile % {n_tiles}LL * {TILE};")
        self.emit(f"const long long m0 = tile / {n_tiles}LL % {m_tiles}LL * {TILE};")
        if c.batch:
            self.emit(f"const long long batch = tile / {n_tiles * m_tiles}LL;")
            self.split_index("batch", c.batch)
        self.emit(f"{acc_t} acc[{PER_THREAD}][{PER_THREAD}];")
        self.emit("#pragma unroll")
        self.emit(f"for (int u = 0; u < {PER_THREAD * PER_THREAD}; ++u) "
                  f"acc[u / {PER_THREAD}][u % {PER_THREAD}] = {zero};")
        self.open(f"for (long long k0 = 0; k0 < {kk}LL; k0 += {STEP})")
        self.stage("sa", c.a, c.a_load, c.m, "m0", m, acc_t, zero)
        self.stage("sb", c.b, c.b_load, c.n, "n0", n, acc_t, zero)
        self.emit("__syncthreads();")
        self.emit("#pragma unroll")
        self.open(f"for (int s = 0; s < {STEP}; ++s)")
        self.emit(f"{acc_t} x[{PER_THREAD}], y[{PER_THREAD}];")
        self.emit("#pragma unroll")
        self.emit(f"for (int u = 0; u < {PER_THREAD}; ++u) "
                  f"x[u] = sa[s][ty + {_SIDE} * u], y[u] = sb[s][tx + {_SIDE} * u];")
        self.emit("#pragma unroll")
        self.open(f"for (int u = 0; u < {PER_THREAD * PER_THREAD}; ++u)")
        a, b = f"x[u / {PER_THREAD}]", f"y[u % {PER_THREAD}]"
        dt = k.reductions[0].dtype
        product = self.op_mul(a, b, dt)
        self.emit(f"acc[u / {PER_THREAD}][u % {PER_THREAD}] = "
                  f"{self.combine('add', f'acc[u / {PER_THREAD}][u % {PER_THREAD}]', f'({product})', dt)};")
        self.close()
        self.close()
        self.emit("__syncthreads();     // the slices are rewritten for the next step")
        self.close()
        self.epilogue(m, n)
        for a in c.batch:
            self.scope.discard(a)
        self.close()

    def stage(self, slot, expr, load, axes, origin, extent, acc_t, zero):
        """Every thread copies its elements of a TILE x STEP slice of one operand into shared
        memory (zero past the edges), neighbouring threads along the operand's contiguous
        axis."""
        strides = self.s.load_strides[load]
        k_fast = abs(strides[self.c.k[-1]]) == 1 if self.c.k else False
        e = self.var("e")
        self.open(f"for (int {e} = threadIdx.x; {e} < {TILE * STEP}; {e} += {THREADS})")
        if k_fast:
            along, step = f"{e} / {STEP}", f"{e} % {STEP}"
        else:
            along, step = f"{e} % {TILE}", f"{e} / {TILE}"
        row, col = self.var("row"), self.var("col")
        self.emit(f"const long long {row} = {origin} + {along}, {col} = k0 + {step};")
        value = self.var("val")
        self.emit(f"{acc_t} {value} = {zero};")
        self.open(f"if ({row} < {extent}LL && {col} < {self.size(self.c.k)}LL)")
        self.split_index(row, axes)
        self.split_index(col, self.c.k)
        self.emit(f"{value} = {self.gen(expr, {})};")
        for a in axes + self.c.k:
            self.scope.discard(a)
        self.close()
        self.emit(f"{slot}[{step}][{along}] = {value};")
        self.close()

    def epilogue(self, m, n):
        """The stores of each of the thread's outputs inside the output, written out for each
        (constant indices keep the accumulators in registers)."""
        for u in range(PER_THREAD * PER_THREAD):
            i, j = divmod(u, PER_THREAD)
            row, col = self.var("row"), self.var("col")
            self.emit(f"const long long {row} = m0 + ty + {_SIDE * i}, "
                      f"{col} = n0 + tx + {_SIDE * j};")
            self.open(f"if ({row} < {m}LL && {col} < {n}LL)")
            self.split_index(row, self.c.m)
            self.split_index(col, self.c.n)
            self.acc_values[0] = f"acc[{i}][{j}]"
            for s, strides in self.s.outer_stores:
                self.store(s, strides, {})
            for a in self.c.m + self.c.n:
                self.scope.discard(a)
            self.close()


def matmul_kernel(a, b, out, bias=None, alpha=1, beta=1):
    """The contraction Kernel of ``out = a @ b`` (``beta * bias + alpha * (a @ b)`` with
    ``bias``, broadcast to the output; beta 0 ignores it, as torch's addmm) over
    numpy-like arrays: 2-D, or 3-D for a batched product (bmm), read through their strides
    (transposed operands need no copy); ``out`` contiguous.  float32, float64, and float16 /
    bfloat16 accumulating in float32.  Buffers: a, b[, bias], out."""
    dt = D.from_numpy_dtype(out.dtype)
    acc_dt = D.float32 if dt in (D.float16, D.bfloat16) else dt
    batched = a.ndim == 3
    if not batched:
        a, b, out = a[None], b[None], out[None]
    (nb, m, kk), n = a.shape, b.shape[2]
    if b.shape[:2] != (nb, kk) or out.shape != (nb, m, n):
        raise ValueError(f"matmul_kernel: shapes {a.shape} @ {b.shape} -> {out.shape}")
    item = out.itemsize

    def elements(x):
        return [0 if size == 1 else s // item for size, s in zip(x.shape, x.strides)]
    sa, sb, so = elements(a), elements(b), elements(out)
    rec = Recorder()
    # domain (batch, m, n, k), k reduced
    loads = [Load(0, (sa[0], sa[1], 0, sa[2]), 0), Load(1, (sb[0], 0, sb[2], sb[1]), 0)]
    x = rec.cast(rec.load(0, dt, 1), acc_dt)
    y = rec.cast(rec.load(1, dt, 1), acc_dt)
    reductions = [ReductionStep("add", 0.0, acc_dt, rec.mul(x, y).index)]
    total = rec.acc(0, acc_dt)
    if alpha != 1:
        total = rec.mul(total, rec.const(alpha, acc_dt))
    buffers = [("in0", dt, "in"), ("in1", dt, "in")]
    if bias is not None and beta != 0:
        view = bias.reshape((1,) * (3 - bias.ndim) + bias.shape) if bias.ndim < 3 else bias
        sbias = [0 if size == 1 else s // item for size, s in zip(view.shape, view.strides)]
        loads.append(Load(2, (sbias[0], sbias[1], sbias[2], 0), 0))
        shift = rec.cast(rec.load(2, dt, 0), acc_dt)
        if beta != 1:
            shift = rec.mul(shift, rec.const(beta, acc_dt))
        total = rec.add(shift, total)
        buffers.append(("in2", dt, "in"))
    buffers.append(("out0", dt, "out"))
    stores = [Store(len(buffers) - 1, rec.round_to(total, dt).index if dt is not acc_dt
                    else total.index, (so[0], so[1], so[2], 0))]
    return Kernel("bmm" if batched else "mm", (nb, m, n, kk), (3,), buffers, rec.exprs, loads,
                  reductions, stores)


def run_matmul(backend, arrays, layouts, alpha, beta):
    """Run ``matmul_kernel`` on ``backend``: ``arrays`` a, b[, bias], out in its memory,
    ``layouts`` numpy arrays laid out as them (the bias broadcast to the output).  Returns out,
    or None where the layouts are not whole elements of out's dtype or out is not contiguous."""
    out = layouts[-1]
    if not out.flags.c_contiguous or any(x.dtype != out.dtype or any(s % x.itemsize for s in x.strides)
                                         for x in layouts):
        return None
    bias = layouts[2] if len(layouts) == 4 else None
    kernel = matmul_kernel(layouts[0], layouts[1], out, bias, alpha, beta)
    fn = kernel_function(backend, kernel)
    backend.launch(fn, kernel, [backend.address(x) for x in arrays])
    return arrays[-1]

"""Random numbers on the GPU from Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC 2011): a counter-based generator, so element ``i`` of a random tensor is a
function of the seed, the generator's offset and ``i`` alone, and the same seed gives the same
numbers on every launch configuration (grid, block, GPU).

Element ``i`` of a kernel drawing ``per`` elements per counter uses the four 32-bit words of
``philox(counter = offset + i // per, key = seed)``, ``4 // per`` of them each: one word per
float32/float16/bfloat16 uniform or bernoulli draw, two per float64 uniform (53 bits), a pair
of uniforms per pair of normals (Box-Muller: ``sqrt(-2 log u1) * (cos, sin)(2 pi u2)``, u1 in
(0, 1]).  A kernel uses ``counters(n)`` counters; the caller advances the offset by that many.
The seed and offset are read from a two-word device buffer (``state``), so a kernel is compiled
once per op, shape and parameters, whatever the seed.

``RandomKernel`` describes one random op (uniform, normal, bernoulli with a tensor or a scalar
probability, dropout's fused mask and scaling) and ``RandomSource`` renders it; ``philox`` and
``reference`` are the same in numpy, which the emulated kernels are checked against (the
known-answer vectors of Random123 for the generator itself).
"""
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from dynograph.runtime import dtypes as D
from .mapping import MAX_BLOCKS, THREADS
from .render import PRELUDE, float_literal, mem_type

M0, M1 = 0xD2511F53, 0xCD9E8D57         # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85         # the key schedule's increments (golden ratio, sqrt 3 - 1)
ROUNDS = 10

PHILOX = r"""#ifndef DG_PHILOX
#define DG_PHILOX
struct dg_words { unsigned int w[4]; };
/* Philox4x32-10 of the counter (c0..c3) under the key (k0, k1) */
__device__ __forceinline__ dg_words dg_philox4x32_10(unsigned int c0, unsigned int c1,
    unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1) {
  #pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  dg_words out = {{c0, c1, c2, c3}};
  return out;
}
/* the words of counter number `counter` of the stream `seed` */
__device__ __forceinline__ dg_words dg_philox(unsigned long long counter, unsigned long long seed) {
  return dg_philox4x32_10((unsigned int)counter, (unsigned int)(counter >> 32), 0u, 0u,
                          (unsigned int)seed, (unsigned int)(seed >> 32));
}
#endif
"""

# mantissa bits of a uniform draw, as the CPU's random ops use (compiler/ops/creation.py)
_DIGITS = {D.float32: 24, D.float16: 11, D.bfloat16: 8}
OPS = ("uniform", "normal", "bernoulli", "bernoulli_scalar", "dropout")


@dataclass(frozen=True)
class RandomKernel:
    """One random op over ``n`` contiguous elements of ``dtype``:

    * ``uniform``: out = u * (high - low) + low, u uniform in [0, 1)  (params low, high);
    * ``normal``: out = z * std + mean, z standard normal  (params mean, std);
    * ``bernoulli``: out = 1 where u < p[i], else 0  (buffers p, out; p of ``dtype``);
    * ``bernoulli_scalar``: out = 1 where u < p  (param p; out of any dtype);
    * ``dropout``: mask = u >= p (bool), out = x * mask * (1 / (1 - p))  (buffers x, out, mask).
    """
    op: str
    n: int
    dtype: object
    params: tuple = ()

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"no random kernel {self.op!r}")
        if self.op != "bernoulli_scalar" and self.dtype not in (D.float32, D.float64, D.float16,
                                                                D.bfloat16):
            raise ValueError(f"{self.op} of {self.dtype}: a floating point dtype is needed")

    @property
    def per_counter(self):
        """Elements drawn from one counter's four words."""
        return 2 if self.dtype is D.float64 and self.op in ("uniform", "normal") else 4

    def counters(self):
        """Counters the kernel uses: what the generator's offset advances by."""
        return -(-self.n // self.per_counter)

    @property
    def buffers(self):
        """(name, dtype, role) of the arguments before the state buffer."""
        if self.op == "bernoulli":
            return [("p", self.dtype, "in"), ("out0", self.dtype, "out")]
        if self.op == "dropout":
            return [("x", self.dtype, "in"), ("out0", self.dtype, "out"), ("mask", D.bool, "out")]
        return [("out0", self.dtype, "out")]

    @property
    def key(self):
        text = f"{self.op} {self.n} {self.dtype.name} {self.params!r}"
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compute(dt):
    return "double" if dt is D.float64 else "float"


class RandomSource:
    """``kernel`` (a RandomKernel) as the ``__global__`` function ``name``: one thread per
    counter in a grid-stride loop, the state buffer (seed, offset) last."""
    cooperative = False
    divides_integers = False

    def __init__(self, kernel, name=None):
        self.kernel = kernel
        self.name = name or f"dg_{kernel.key}"
        self.text = self.render()

    def launch_shape(self, threads=THREADS, max_blocks=MAX_BLOCKS):
        n = self.kernel.counters()
        threads = max(1, min(threads, n))
        return max(1, min(max_blocks, -(-n // threads))), threads

    def render(self):
        k = self.kernel
        params = [f"{'const ' if role == 'in' else ''}{mem_type(dt)}* __restrict__ b{i}"
                  for i, (_, dt, role) in enumerate(k.buffers)]
        params.append("const unsigned long long* __restrict__ state")
        lines = [f"// {k.op} of {k.n} {k.dtype.name} {k.params}: Philox4x32-10, "
                 f"{k.per_counter} per counter"]
        if k.dtype in (D.float16, D.bfloat16):
            lines.append(PRELUDE.rstrip("\n"))
        lines += [PHILOX.rstrip("\n"),
                  f'extern "C" __global__ void {self.name}({", ".join(params)})', "{",
                  "  const unsigned long long seed = state[0], offset = state[1];",
                  f"  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                  f"t < {k.counters()}LL; t += (long long)blockDim.x * gridDim.x) {{",
                  "    const dg_words r = dg_philox(offset + (unsigned long long)t, seed);"]
        per = k.per_counter
        lines.append("    #pragma unroll")
        lines.append(f"    for (int j = 0; j < {per}; ++j) {{")
        lines.append(f"      const long long i = t * {per} + j;")
        lines.append(f"      if (i >= {k.n}LL) break;")
        lines += ["      " + line for line in self.element()]
        lines += ["    }", "  }", "}", ""]
        return "\n".join(lines)

    def element(self):
        """The body computing and storing element ``i`` from the words ``r.w``."""
        k = self.kernel
        dt = k.dtype
        c = _compute(dt)
        wide = dt is D.float64          # two words per uniform draw

        def num(value):                 # constants in the compute type, as the CPU's ops
            return float_literal(value, D.float64 if wide else D.float32)
        if k.op == "uniform":
            low, high = k.params
            out = [f"const {c} u = {self.uniform('2 * j' if wide else 'j')};"]
            value = "u"
            if low != 0 or high != 1:
                value = f"u * {num(high - low)} + {num(low)}"
            return out + [self.store(0, value, dt)]
        if k.op == "normal":
            mean, std = k.params
            second = "2" if wide else "first + 1"
            return [f"const int first = {'0' if wide else '(j / 2) * 2'};",
                    f"const {c} u1 = {self.uniform('first', positive=True)};",
                    f"const {c} u2 = {self.uniform(second)};",
                    f"const {c} radius = {self.fn('sqrt')}({num(-2.0)} * {self.fn('log')}(u1));",
                    f"const {c} angle = {num(2 * math.pi)} * u2;",
                    f"const {c} z = radius * (j % 2 == 0 ? {self.fn('cos')}(angle) : "
                    f"{self.fn('sin')}(angle));",
                    self.store(0, f"z * {num(std)} + {num(mean)}", dt)]
        u = "(double)r.w[j] * 2.3283064365386963e-10"      # w / 2^32 in [0, 1), exact
        if k.op == "bernoulli":
            p = self.load(0, dt)
            return [self.store(1, f"{u} < (double){p} ? 1.0f : 0.0f", dt)]
        if k.op == "bernoulli_scalar":
            out = f"{u} < {float(k.params[0])!r}"
            if dt is D.bool:
                return [f"b0[i] = (unsigned char)({out});"]
            if dt.is_floating_point:
                return [self.store(0, f"{out} ? 1.0f : 0.0f", dt)]
            return [f"b0[i] = ({mem_type(dt)})({out} ? 1 : 0);"]
        p = float(k.params[0])
        # p = 1 drops everything: x * 0, as torch's dropout
        scale = num(1.0 / (1.0 - p) if p < 1 else 0.0)
        return [f"const bool keep = {u} >= {p!r};",
                "b2[i] = (unsigned char)keep;",
                self.store(1, f"{self.load(0, dt)} * ({c})keep * {scale}", dt)]

    def uniform(self, word, positive=False):
        """A uniform draw in [0, 1) (``positive``: (0, 1]) from word ``word`` (two from it on for
        float64), exactly representable in the compute type."""
        dt = self.kernel.dtype
        extra = " + 1" if positive else ""
        if dt is D.float64:
            return (f"((double)(r.w[{word}] >> 5) * 67108864.0 + (double)(r.w[{word} + 1] >> 6)"
                    f"{extra}) * 1.1102230246251565e-16")
        digits = _DIGITS[dt]
        return f"(float)((r.w[{word}] >> {32 - digits}){extra}) * {float_literal(2.0 ** -digits, D.float32)}"

    def fn(self, name):
        return name if self.kernel.dtype is D.float64 else name + "f"

    @staticmethod
    def load(buffer, dt):
        at = f"b{buffer}[i]"
        return {D.float16: f"dg_h2f({at})", D.bfloat16: f"dg_bf2f({at})"}.get(dt, at)

    @staticmethod
    def store(buffer, value, dt):
        conv = {D.float16: "dg_f2h", D.bfloat16: "dg_f2bf"}.get(dt)
        return f"b{buffer}[i] = {conv}({value});" if conv else f"b{buffer}[i] = {value};"


# ---------------------------------------------------------------- the same in numpy


def philox(counters, keys):
    """Philox4x32-10 of ``counters`` (..., 4) under ``keys`` (..., 2), uint32 arrays."""
    c = [np.asarray(counters, np.uint32)[..., i].astype(np.uint64) for i in range(4)]
    k = [np.asarray(keys, np.uint32)[..., i].astype(np.uint64) for i in range(2)]
    mask = np.uint64(0xFFFFFFFF)
    for round_ in range(ROUNDS):
        if round_:
            k = [(k[0] + np.uint64(W0)) & mask, (k[1] + np.uint64(W1)) & mask]
        p0, p1 = np.uint64(M0) * c[0], np.uint64(M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k[1],
             p0 & mask]
    return np.stack(c, axis=-1).astype(np.uint32)


def words(kernel, seed, offset):
    """(counters, 4) uint32: the words a RandomKernel draws from."""
    t = np.arange(kernel.counters(), dtype=np.uint64) + np.uint64(offset)
    ctr = np.stack([t & np.uint64(0xFFFFFFFF), t >> np.uint64(32), 0 * t, 0 * t], -1)
    key = np.broadcast_to(np.array([seed & 0xFFFFFFFF, seed >> 32], np.uint64), ctr.shape[:1] + (2,))
    return philox(ctr.astype(np.uint32), key.astype(np.uint32))


def reference(kernel, seed, offset, inputs=()):
    """The outputs of ``kernel`` (a list of arrays) computed in numpy as the CUDA kernel does:
    uniform and bernoulli draws bit for bit; normals to the math library's rounding."""
    k, dt = kernel, kernel.dtype
    w = words(k, seed, offset)
    n = k.n
    c = np.float64 if dt is D.float64 else np.float32

    def uniform(first, positive=False):
        extra = 1 if positive else 0
        if dt is D.float64:
            hi = (w[:, first] >> 5).astype(np.float64)
            lo = (w[:, first + 1] >> 6).astype(np.float64)
            return (hi * 67108864.0 + lo + extra) * 2.0 ** -53
        digits = _DIGITS[dt]
        return ((w[:, first] >> (32 - digits)) + extra).astype(np.float32) * np.float32(2.0 ** -digits)
    if k.op == "uniform":
        low, high = k.params
        per = k.per_counter
        u = np.stack([uniform(2 * j if per == 2 else j) for j in range(per)], -1).reshape(-1)[:n]
        if low != 0 or high != 1:
            u = u * c(high - low) + c(low)
        return [u.astype(dt.np)]
    if k.op == "normal":
        mean, std = k.params
        pairs = [(0, 2)] if dt is D.float64 else [(0, 1), (2, 3)]
        z = []
        for a, b in pairs:
            radius = np.sqrt(c(-2.0) * np.log(uniform(a, positive=True)))
            angle = c(2 * math.pi) * uniform(b)
            z += [radius * np.cos(angle), radius * np.sin(angle)]
        z = np.stack(z, -1).reshape(-1)[:n]
        return [(z * c(std) + c(mean)).astype(dt.np)]
    u = (w.astype(np.float64) * 2.0 ** -32).reshape(-1)[:n]
    if k.op == "bernoulli":
        return [(u < inputs[0].astype(np.float64)).astype(dt.np)]
    if k.op == "bernoulli_scalar":
        return [(u < float(k.params[0])).astype(dt.np)]
    p = float(k.params[0])
    keep = u >= p
    scale = c(1.0 / (1.0 - p) if p < 1 else 0.0)
    x = inputs[0].astype(c)
    with np.errstate(invalid="ignore"):
        return [(x * keep.astype(c) * scale).astype(dt.np), keep]

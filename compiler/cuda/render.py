"""Render a loop-level Kernel (compiler/lowering/description.py) as one CUDA C function.

The function is ``extern "C" __global__ void name(b0, ..., bN[, fault])``: one ``__restrict__``
pointer per buffer (inputs first, ``const`` unless an in-place variant stores into it), then
the fault flag of kernels that divide integers.  Shapes and strides are constants.

Mapping: one thread per kept (outer) index of the schedule's collapsed domain
(compiler/lowering/schedule.py), in a grid-stride loop, so any launch shape covers the domain.
Each thread runs the reductions of its index itself, in the schedule's groups, over the reduce
axes, the innermost in blocks of ``BLOCK`` each summed into its own partial before joining the
total, as on the CPU.  A column-wise schedule (the innermost axis kept) needs nothing more:
neighbouring threads then hold neighbouring columns, so their loads along the reduce axes are
coalesced.  Then the stores made once per kept index, then a nest over the reduce axes for the
stores that vary along it.

Scalars follow the builder's semantics (compiler/lowering/scalar.py) exactly as the LLVM
renderer does: float16/bfloat16 are stored as 16-bit patterns, computed in float and rounded to
nearest even when converted or stored (helpers in the source's prelude, bit exact on any
target); integer arithmetic wraps (done in unsigned types: signed overflow is undefined in C);
integer division and remainder never trap (``x / 0`` is 0 and sets the fault flag, ``MIN / -1``
wraps); float ``max``/``min`` propagate NaN; bool lives in ``bool`` registers and ``unsigned
char`` memory.  The text is deterministic (goldens compare it).
"""
import numpy as np

from dynograph.runtime import dtypes as D
from ..lowering.scalar import Unsupported
from ..lowering.walk import ExpressionWalker
from ..lowering.schedule import ARG_COMBINES, BLOCK, schedule

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_HALVES = (D.float16, D.bfloat16)
_INT_C = {1: "signed char", 2: "short", 4: "int", 8: "long long"}

# conversions between float and the 16-bit patterns of float16 / bfloat16, rounding to nearest
# even; written on bits so that the GPU and the CPU emulation (emulation.h) agree bit for bit
PRELUDE = r"""#ifndef DG_CUDA_PRELUDE
#define DG_CUDA_PRELUDE
__device__ __forceinline__ float dg_h2f(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
  unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0)   /* zero or subnormal: m * 2^-24 is exact */
    return __uint_as_float(sign | __float_as_uint((float)m * 5.9604644775390625e-8f));
  if (e == 31)
    return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short dg_f2h(float f) {
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);       /* NaN */
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);      /* >= 65520: inf */
  if (ax < 0x38800000u)   /* below 2^-14: adding 0.5 rounds to a multiple of 2^-24 */
    return (unsigned short)(sign | (__float_as_uint(__uint_as_float(ax) + 0.5f) - 0x3f000000u));
  ax += 0xc8000fffu + ((ax >> 13) & 1u);  /* rebias the exponent, round to nearest even */
  return (unsigned short)(sign | (ax >> 13));
}
__device__ __forceinline__ float dg_bf2f(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}
__device__ __forceinline__ unsigned short dg_f2bf(float f) {
  unsigned int x = __float_as_uint(f);
  if (f != f) return (unsigned short)0x7fc0u;
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
#endif
"""


def reg_type(dt):
    """The C type a value of ``dt`` is computed in (half types compute in float)."""
    if dt is D.bool:
        return "bool"
    if dt is D.uint8:
        return "unsigned char"
    if dt.is_complex:
        raise Unsupported(f"{dt} on cuda")
    if dt.is_floating_point:
        return "double" if dt is D.float64 else "float"
    return _INT_C[dt.itemsize]


def mem_type(dt):
    """The C type of ``dt`` in memory."""
    if dt is D.bool:
        return "unsigned char"
    if dt in _HALVES:
        return "unsigned short"
    return reg_type(dt)


def _wide_unsigned(dt):
    """The unsigned type integer arithmetic of ``dt`` wraps in (at least 32 bits, so that C's
    promotions never reach a signed type that could overflow)."""
    return "unsigned long long" if dt.itemsize == 8 else "unsigned int"


def _unsigned(dt):
    return dt is D.bool or dt is D.uint8


def _signed(literal):
    """Negative literals in parentheses (``x - -1.0f``, never ``--1.0f``)."""
    return f"({literal})" if literal.startswith("-") else literal


def float_literal(value, dt):
    """``value`` rounded to ``dt`` (half types round, then compute in float) as a C literal."""
    v = np.asarray(value, dtype=dt.np)
    if dt is D.float64:
        if np.isfinite(v):
            return _signed(repr(float(v)))
        return f"__longlong_as_double({int(v.view(np.int64))}LL)"
    v = np.float32(v)
    if np.isfinite(v):
        return _signed(repr(float(v)) + "f")
    return f"__uint_as_float({int(v.view(np.uint32))}u)"


def const(value, dt):
    """A C constant of ``dt``."""
    if dt is D.bool:
        return "true" if value else "false"
    if dt.is_floating_point:
        return float_literal(value, dt)
    v = int(value)
    if dt is D.int64:
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        return _signed(f"{v}LL")
    if dt is D.int32 and v == -(1 << 31):
        return "(-2147483647 - 1)"
    return f"(({reg_type(dt)}){v})"


def _index(terms, offset=0):
    """``offset + sum(index * stride)`` as a C expression."""
    parts = [f"i{a}" if s == 1 else f"i{a} * ({s})" for a, s in terms]
    if offset:
        parts.append(f"({offset})")
    return " + ".join(parts) or "0"


class Renderer(ExpressionWalker):
    """Builds the CUDA C text of one kernel; ``render()`` returns it."""

    def __init__(self, kernel, name):
        self.k = kernel
        self.name = name
        self.s = schedule(kernel)
        self.domain, self.red_axes = self.s.domain, self.s.red_axes
        self.lines = []
        self.depth = 1
        self.scope = set()          # the axes whose index variables are in scope
        self.acc_values = {}        # reduction -> the variable holding its total
        self.fresh = 0

    # -- text
    def emit(self, line):
        self.lines.append("  " * self.depth + line)

    def open(self, head):
        self.emit(head + " {")
        self.depth += 1

    def close(self):
        self.depth -= 1
        self.emit("}")

    def var(self, stem):
        self.fresh += 1
        return f"{stem}{self.fresh}"

    # -- structure
    def signature(self, bounds=""):
        k = self.k
        written = {s.buffer for s in k.stores}
        params = []
        for i, (_, dt, role) in enumerate(k.buffers):
            const_ = "const " if role == "in" and i not in written else ""
            params.append(f"{const_}{mem_type(dt)}* __restrict__ b{i}")
        if k.divides_integers:
            params.append("unsigned char* __restrict__ fault")
        return f'extern "C" __global__ void {bounds}{self.name}({", ".join(params)})'

    # what the mapping adds to the first line, and to the signature (launch bounds)
    kind, bounds = "", ""

    def render(self):
        k = self.k
        for _, dt, _ in k.buffers:
            reg_type(dt)        # raises Unsupported for complex buffers
        uses_halves = any(dt in _HALVES for _, dt, _ in k.buffers) or \
            any(e.dtype in _HALVES for e in k.exprs)
        dims = ",".join(str(n) for n in k.domain)
        head = [f"// {k.name}: domain [{dims}] reduce {tuple(k.reduce_axes)}; "
                f"collapsed {self.s.domain} reduce {tuple(self.red_axes)}{self.kind}"]
        if uses_halves:
            head.append(PRELUDE.rstrip("\n"))
        head += [self.signature(self.bounds), "{"]
        if k.divides_integers:
            self.emit("bool faulted = false;   // an integer divisor was 0 (torch raises)")
        self.kernel_body()
        if k.divides_integers:
            # only a fault is written: every thread that saw one writes the same byte
            self.emit("if (faulted) *fault = 1;")
        return "\n".join(head + self.lines + ["}", ""])

    def kernel_body(self):
        """One thread per kept index in a grid-stride loop."""
        outer = self.s.outer_axes
        total = int(np.prod([self.domain[a] for a in outer])) if outer else 1
        self.open(f"for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                  f"t < {total}LL; t += (long long)blockDim.x * gridDim.x)")
        self.split_index("t", outer, "rest")
        self.body()
        self.close()

    def split_index(self, index, axes, rest=None):
        """Constants ``i<a>`` for ``axes`` from the row-major linear ``index`` over them, put in
        scope; ``rest`` names the running quotient (fresh when None)."""
        if not axes:
            return
        rest_name = rest or self.var("rest")
        current = index
        for j, a in enumerate(reversed(axes)):
            if j == len(axes) - 1:
                self.emit(f"const long long i{a} = {current};")
            else:
                self.emit(f"const long long i{a} = {current} % {self.domain[a]}LL;")
                if j == 0:
                    self.emit(f"long long {rest_name} = {index} / {self.domain[a]}LL;")
                else:
                    self.emit(f"{rest_name} /= {self.domain[a]}LL;")
                current = rest_name
            self.scope.add(a)

    def body(self):
        cache = {}
        for group in self.s.groups:
            reds = [self.k.reductions[j] for j in group]
            if reds[0].combine in ARG_COMBINES:
                totals = [self.arg_reduce(reds[0], cache)]
            else:
                totals = self.reduce(reds, cache)
            self.acc_values.update(zip(group, totals))
        for s, strides in self.s.outer_stores:
            self.store(s, strides, cache)
        if self.s.inner_stores:
            def inner(inner_cache):
                for s, st in self.s.inner_stores:
                    self.store(s, st, inner_cache)
            self.nest(list(self.red_axes), inner, cache)

    def nest(self, axes, body, cache, first=None):
        """Loops over ``axes`` (the last one from ``first`` when given: a (begin, stop) pair),
        then ``body(cache)`` with a cache that sees the enclosing scope's values."""
        if not axes:
            body(dict(cache))
            return
        a = axes[0]
        begin, stop = first if first is not None and len(axes) == 1 else ("0", f"{self.domain[a]}LL")
        self.open(f"for (long long i{a} = {begin}; i{a} < {stop}; ++i{a})")
        self.scope.add(a)
        self.nest(axes[1:], body, cache, first)
        self.scope.discard(a)
        self.close()

    def hoist(self, values, cache):
        """Compute in the current scope the parts of ``values`` that do not vary along the
        reduce axes (loop invariants, written once)."""
        seen = set()

        def walk(i):
            if i in seen:
                return
            seen.add(i)
            e = self.k.exprs[i]
            if e.level == 0:
                self.gen(i, cache)
            else:
                for a in e.args:
                    walk(a)
        for v in values:
            walk(v)

    def reduce(self, reds, cache):
        """The reductions of one group accumulated in one nest over the reduce axes, the
        innermost in blocks of BLOCK each summed into a partial; returns the totals' names."""
        totals = [self.var("r") for _ in reds]
        for red, t in zip(reds, totals):
            self.emit(f"{reg_type(red.dtype)} {t} = {const(red.identity, red.dtype)};")
        self.hoist([r.value for r in reds], cache)
        axes = list(self.red_axes)
        if not axes:
            for red, t in zip(reds, totals):
                v = self.gen(red.value, cache)
                self.emit(f"{t} = {self.combine(red.combine, t, v, red.dtype)};")
            return totals
        last = axes[-1]
        n = self.domain[last]

        def blocks(block_cache):
            blk = self.var("blk")
            self.open(f"for (long long {blk} = 0; {blk} < {n}LL; {blk} += {BLOCK}LL)")
            partials = [self.var("p") for _ in reds]
            for red, p in zip(reds, partials):
                self.emit(f"{reg_type(red.dtype)} {p} = {const(red.identity, red.dtype)};")
            stop = self.var("stop")
            self.emit(f"const long long {stop} = {blk} + {BLOCK}LL < {n}LL ? {blk} + {BLOCK}LL : {n}LL;")

            def accumulate(inner):
                for red, p in zip(reds, partials):
                    v = self.gen(red.value, inner)
                    self.emit(f"{p} = {self.combine(red.combine, p, v, red.dtype)};")
            self.nest([last], accumulate, block_cache, first=(blk, stop))
            for red, t, p in zip(reds, totals, partials):
                self.emit(f"{t} = {self.combine(red.combine, t, p, red.dtype)};")
            self.close()
        self.nest(axes[:-1], blocks, cache)
        return totals

    def arg_reduce(self, red, cache):
        """The row-major index over the reduce axes of the first extreme element (a NaN wins:
        the first NaN, the last for ``argmax_pool``, as PyTorch's max pooling picks)."""
        best, where = self.var("best"), self.var("at")
        self.emit(f"{reg_type(red.dtype)} {best} = {const(red.identity, red.dtype)};")
        self.emit(f"long long {where} = 0;")
        self.hoist([red.value], cache)

        def body(inner):
            v = self.gen(red.value, inner)
            self.open(f"if ({self.better(red, v, best)})")
            self.emit(f"{best} = {v};")
            self.emit(f"{where} = {self.position()};")
            self.close()
        self.nest(list(self.red_axes), body, cache)
        return where

    @staticmethod
    def better(red, v, best):
        """Whether ``v``, met after ``best`` in the row, replaces it in arg reduction ``red``."""
        better = f"{v} {'<' if red.combine == 'argmin' else '>'} {best}"
        if red.dtype.is_floating_point:
            nan = f"{v} != {v}"
            if red.combine != "argmax_pool":
                nan = f"({nan} && {best} == {best})"
            better = f"{better} || {nan}"
        return better

    def position(self):
        """The row-major index over the reduce axes of the current element."""
        expr = "0"
        for a in self.red_axes:
            expr = f"i{a}" if expr == "0" else f"({expr}) * {self.domain[a]}LL + i{a}"
        return expr

    # -- memory
    def address(self, strides, offset):
        terms = []
        for a, s in enumerate(strides):
            if not s:
                continue
            if a not in self.scope:
                raise AssertionError(f"{self.k.name}: an access varies along axis {a} out of its loop")
            terms.append((a, s))
        return _index(terms, offset)

    def load(self, ld_index, dt):
        ld = self.k.loads[ld_index]
        at = f"b{ld.buffer}[{self.address(self.s.load_strides[ld_index], ld.offset)}]"
        if dt is D.bool:
            return f"({at} != 0)"
        if dt is D.float16:
            return f"dg_h2f({at})"
        if dt is D.bfloat16:
            return f"dg_bf2f({at})"
        return at

    def store(self, s, strides, cache):
        dt = self.k.buffers[s.buffer][1]
        v = self.gen(s.value, cache)
        if dt is D.bool:
            v = f"(unsigned char){v}"
        elif dt is D.float16:
            v = f"dg_f2h({v})"
        elif dt is D.bfloat16:
            v = f"dg_f2bf({v})"
        self.emit(f"b{s.buffer}[{self.address(strides, s.offset)}] = {v};")

    # -- scalar expressions (gen: walk.py), each a const variable named after its expr
    def bind(self, expr, value):
        name = self.var("v")
        self.emit(f"const {reg_type(expr.dtype)} {name} = {value};")
        return name

    def const(self, value, dt):
        return const(value, dt)

    def cmp(self, op, x, y, dt):
        return f"{x} {_CMP[op]} {y}"

    def select(self, c, a, b):
        return f"{c} ? {a} : {b}"

    def cast(self, x, src, dst):
        if dst is D.bool:
            return f"{x} != 0"
        to = reg_type(dst)
        if dst.is_floating_point:
            if src is D.float64 and dst in _HALVES:
                x = f"(float){x}"           # as LLVM: to float, then to the half type
            elif reg_type(src) != to:
                x = f"({to}){x}"
            if dst is D.float16:
                return f"dg_h2f(dg_f2h({x}))"
            if dst is D.bfloat16:
                return f"dg_bf2f(dg_f2bf({x}))"
            return x
        return f"({to}){x}"

    def math(self, name, args, dt):
        fname = name if dt is D.float64 else name + "f"
        return f"{fname}({', '.join(args)})"

    def combine(self, name, acc, v, dt):
        return getattr(self, "op_" + name)(acc, v, dt)

    # arithmetic: one method per builder operation
    def _wrap(self, x, op, y, dt):
        """Integer ``x op y`` wrapping around: computed in an unsigned type."""
        if dt is D.bool:
            return f"(((int){x} {op} (int){y}) & 1) != 0"
        u = _wide_unsigned(dt)
        return f"({reg_type(dt)})(({u}){x} {op} ({u}){y})"

    def op_add(self, x, y, dt):
        return f"{x} + {y}" if dt.is_floating_point else self._wrap(x, "+", y, dt)

    def op_sub(self, x, y, dt):
        return f"{x} - {y}" if dt.is_floating_point else self._wrap(x, "-", y, dt)

    def op_mul(self, x, y, dt):
        return f"{x} * {y}" if dt.is_floating_point else self._wrap(x, "*", y, dt)

    def _divisor_check(self, y):
        if self.k.divides_integers:
            self.emit(f"faulted |= {y} == 0;")

    def op_div(self, x, y, dt):
        if dt.is_floating_point:
            return f"{x} / {y}"
        self._divisor_check(y)
        t = reg_type(dt)
        if _unsigned(dt):
            return f"{y} == 0 ? ({t})0 : ({t})({x} / {y})"
        return f"{y} == 0 ? ({t})0 : {y} == ({t})-1 ? {self.op_neg(x, dt)} : ({t})({x} / {y})"

    def op_rem(self, x, y, dt):
        if dt.is_floating_point:
            return f"{'fmod' if dt is D.float64 else 'fmodf'}({x}, {y})"
        self._divisor_check(y)
        t = reg_type(dt)
        if _unsigned(dt):
            return f"{y} == 0 ? ({t})0 : ({t})({x} % {y})"
        return f"{y} == 0 || {y} == ({t})-1 ? ({t})0 : ({t})({x} % {y})"

    def op_neg(self, x, dt):
        if dt.is_floating_point:
            return f"-{x}"
        if dt is D.bool:
            return x
        return f"({reg_type(dt)})(0u - ({_wide_unsigned(dt)}){x})"

    def op_abs(self, x, dt):
        if dt.is_floating_point:
            return f"{'fabs' if dt is D.float64 else 'fabsf'}({x})"
        if _unsigned(dt):
            return x
        return f"{x} < 0 ? {self.op_neg(x, dt)} : {x}"

    def op_max(self, x, y, dt):
        if dt.is_floating_point:      # NaN-propagating, like numpy.maximum
            return f"{x} > {y} || {x} != {x} ? {x} : {y}"
        return f"{x} > {y} ? {x} : {y}"

    def op_min(self, x, y, dt):
        if dt.is_floating_point:
            return f"{x} < {y} || {x} != {x} ? {x} : {y}"
        return f"{x} < {y} ? {x} : {y}"

    def op_and_(self, x, y, dt):
        return f"{x} && {y}" if dt is D.bool else f"({reg_type(dt)})({x} & {y})"

    def op_or_(self, x, y, dt):
        return f"{x} || {y}" if dt is D.bool else f"({reg_type(dt)})({x} | {y})"

    def op_xor(self, x, y, dt):
        return f"{x} != {y}" if dt is D.bool else f"({reg_type(dt)})({x} ^ {y})"

    def op_not_(self, x, dt):
        return f"!{x}" if dt is D.bool else f"({reg_type(dt)})~{x}"

    def op_shl(self, x, y, dt):
        return f"({reg_type(dt)})(({_wide_unsigned(dt)}){x} << {y})"

    def op_shr(self, x, y, dt):
        return f"({reg_type(dt)})({x} >> {y})"     # arithmetic on signed types


def render(kernel, name, per_thread=False):
    """CUDA C source of ``kernel`` as a ``__global__`` function called ``name``, in the mapping
    mapping.py chooses for it (``per_thread``: one thread per kept index whatever it is)."""
    from .mapping import mapping_of         # the mappings' renderers derive from Renderer
    kind = "thread" if per_thread else mapping_of(kernel).kind
    if kind == "gemm":
        from .gemm import GemmRenderer as cls
    elif kind in ("block", "warp"):
        from .reduction import CooperativeRenderer as cls
    else:
        cls = Renderer
    return cls(kernel, name).render()

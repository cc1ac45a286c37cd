"""The loop-level kernel description every code generator renders: ``Kernel`` and its parts,
and ``Recorder``, the scalar builder (compiler/lowering/scalar.py) that records expressions.

A ``Kernel`` is

* a ``domain``: the shape of the loop nest, and ``reduce_axes``, the axes its reductions run
  over (empty for elementwise kernels);
* ``buffers``: the arguments, inputs first, each with its dtype;
* ``exprs``: a scalar expression DAG in topological order.  ``load`` reads a buffer at
  ``offset + sum(index[a] * strides[a])`` over the domain axes (zero strides broadcast);
  ``acc`` reads the result of a reduction; ``level`` is 1 for expressions that vary along the
  reduce axes, 0 for those computed once per outer index;
* ``reductions``: combine, identity and accumulation dtype, and the expression reduced, run in
  order (a later one may read an earlier one's result: softmax's max, then its sum);
* ``stores``: expression -> output buffer with strides over the domain.

``str(kernel)`` prints it (the ``kernels`` dump stage) and ``kernel.key`` is a hash of that
text, which caches compiled code.  This module depends on nothing but dtypes, so the op set's
direct-kernel rules (convolution, pooling) can build descriptions too::

    kernel k0 domain [8,5] reduce (1,)
      in0: f32  out0: f32
      %0 = load in0 strides (5,1) offset 0 : f32
      ...
"""
import functools
import hashlib
from dataclasses import dataclass, replace

import numpy as np

from dynograph.runtime import dtypes as D
from .scalar import COMPARISONS, MATH_FUNCTIONS, Unsupported


@dataclass(frozen=True)
class Expr:
    op: str             # load const acc cast cmp select math add sub mul div rem neg abs max min ...
    args: tuple         # indices of earlier exprs
    dtype: object       # the compute dtype of the result
    attr: object = None
    level: int = 0


@dataclass(frozen=True)
class Load:
    buffer: int
    strides: tuple      # elements, per domain axis
    offset: int


@dataclass(frozen=True)
class ReductionStep:
    combine: str
    identity: object
    dtype: object
    value: int          # the expr reduced


@dataclass(frozen=True)
class Store:
    buffer: int
    value: int
    strides: tuple
    offset: int = 0     # elements


@dataclass
class Kernel:
    name: str
    domain: tuple
    reduce_axes: tuple
    buffers: list       # (name, dtype, role)
    exprs: list
    loads: list
    reductions: list
    stores: list
    # float multiplications and additions may fuse into multiply-adds rounded once (a direct
    # kernel's sums of products, which eager execution runs through the same kernel)
    contract: bool = False
    # the code generator unrolls the kernel's loops: a direct kernel's small constant loops (a
    # pooling window, a convolution's taps), which its rows vectorize only once they are
    # straight code (max pooling ran 6-9x slower without); for other kernels the backend
    # decides (compiler/llvm/backend.py unrolled)
    unroll: bool = False

    @property
    def n_inputs(self):
        return sum(1 for b in self.buffers if b[2] == "in")

    def __str__(self):
        dims = ",".join(str(n) for n in self.domain)
        lines = [f"kernel {self.name} domain [{dims}] reduce {self.reduce_axes}",
                 "  " + "  ".join(f"{n}: {dt.abbr}" for n, dt, _ in self.buffers)]
        for i, ld in enumerate(self.loads):
            lines.append(f"  load{i} = {self.buffers[ld.buffer][0]} strides {ld.strides} "
                         f"offset {ld.offset}")
        for i, e in enumerate(self.exprs):
            attr = "" if e.attr is None else f"[{e.attr!r}]"
            args = ", ".join(f"%{a}" for a in e.args)
            lines.append(f"  %{i} = {e.op}{attr}({args}) : {e.dtype.abbr} @{e.level}")
        for i, r in enumerate(self.reductions):
            lines.append(f"  r{i} = reduce {r.combine} %{r.value} init {r.identity!r} : "
                         f"{r.dtype.abbr}")
        for s in self.stores:
            at = f" offset {s.offset}" if s.offset else ""
            lines.append(f"  store {self.buffers[s.buffer][0]} strides {s.strides}{at} <- %{s.value}")
        if self.contract:
            lines.append("  contract")
        if self.unroll:
            lines.append("  unroll")
        return "\n".join(lines)

    @property
    def divides_integers(self):
        """Whether an integer division or remainder may meet a 0 divisor (torch raises): the
        kernel then reports it through a flag."""
        return any(e.op in ("div", "rem") and not e.dtype.is_floating_point for e in self.exprs)

    def writing_into(self, pairs):
        """This kernel with the stores to output ``j`` going to input buffer ``k`` instead, for
        each ``(j, k)`` of ``pairs``: an update made in place.  The caller guarantees the input
        is laid out as the output (contiguous, same shape), so element i is read and then written
        at one address within the same iteration; the output argument is passed but unused."""
        n = self.n_inputs
        target = {n + j: k for j, k in pairs}
        stores = [replace(s, buffer=target.get(s.buffer, s.buffer)) for s in self.stores]
        return replace(self, stores=stores, name=self.name + "_inplace")

    @functools.cached_property
    def key(self):
        """A hash of everything the generated code depends on (the name excluded); kernels
        are not changed once described, so it is computed once (``replace`` makes a new one)."""
        text = str(self).split("\n", 1)[1] + repr((self.domain, self.reduce_axes))
        return hashlib.sha256(text.encode()).hexdigest()[:24]


# ---------------------------------------------------------------- recording builder


class Handle:
    """A scalar of the recording builder: an index into the kernel's exprs."""
    __slots__ = ("index", "dtype")

    def __init__(self, index, dtype):
        self.index = index
        self.dtype = dtype

    def __repr__(self):
        return f"%{self.index}:{self.dtype.abbr}"


def _convert(value, dt):
    """A Python number converted as numpy's astype converts it (integers wrap)."""
    if dt is D.bool:
        return bool(value)
    if dt.is_floating_point:
        return float(value)
    v = int(value)
    info = np.iinfo(dt.np)
    span = info.max - info.min + 1
    return (v - info.min) % span + info.min


def _binary(op):
    """A builder method recording a binary operation on two handles of one dtype."""
    def method(self, x, y):
        assert x.dtype is y.dtype, (op, x, y)
        return self._add(op, (x, y), x.dtype)
    method.__name__ = op
    return method


class Recorder:
    """The scalar builder of compiler/lowering/scalar.py, recording a hash-consed DAG."""

    def __init__(self):
        self.exprs = []
        self.memo = {}

    def _add(self, op, args, dtype, attr=None):
        index = tuple([a.index for a in args])
        # (repr: a key tells 1 from 1.0 and True; most exprs have no attribute)
        key = (op, index, dtype.name, None if attr is None else repr(attr))
        handle = self.memo.get(key)
        if handle is None:
            exprs = self.exprs
            level = max([exprs[i].level for i in index], default=0)
            exprs.append(Expr(op, index, dtype, attr, level))
            handle = self.memo[key] = Handle(len(exprs) - 1, dtype)
        return handle

    def load(self, index, dtype, level):
        key = ("load", index)
        if key not in self.memo:
            self.exprs.append(Expr("load", (), dtype, index, level))
            self.memo[key] = Handle(len(self.exprs) - 1, dtype)
        return self.memo[key]

    def acc(self, index, dtype):
        return self._add("acc", (), dtype, index)

    def const(self, value, dtype):
        if isinstance(value, Handle):       # a run-time scalar in place of a number (OpDef.scalar_attrs)
            return self.cast(value, dtype)
        return self._add("const", (), dtype, _convert(value, dtype))

    def literal(self, x):
        e = self.exprs[x.index]
        return e.attr if e.op == "const" else None

    def cast(self, x, dtype):
        if x.dtype is dtype:
            return x
        return self._add("cast", (x,), dtype)

    def round_to(self, x, dtype):
        """A cast that always rounds (half types hold float32 values between ops)."""
        return self._add("cast", (x,), dtype)

    add, sub, mul, div, rem = (_binary(o) for o in ("add", "sub", "mul", "div", "rem"))
    max, min, and_, or_, xor = (_binary(o) for o in ("max", "min", "and_", "or_", "xor"))
    shl, shr = _binary("shl"), _binary("shr")

    def neg(self, x):
        return self._add("neg", (x,), x.dtype)

    def abs(self, x):
        return self._add("abs", (x,), x.dtype)

    def not_(self, x):
        return self._add("not_", (x,), x.dtype)

    def cmp(self, op, x, y):
        assert op in COMPARISONS and x.dtype is y.dtype, (op, x, y)
        return self._add("cmp", (x, y), D.bool, op)

    def select(self, c, x, y):
        assert c.dtype is D.bool and x.dtype is y.dtype, (c, x, y)
        return self._add("select", (c, x, y), x.dtype)

    def exp(self, x):
        return self.call_math("exp", x)

    def log(self, x):
        return self.call_math("log", x)

    def sqrt(self, x):
        return self.call_math("sqrt", x)

    def call_math(self, name, *xs):
        if name not in MATH_FUNCTIONS or not xs[0].dtype.is_floating_point:
            raise Unsupported(f"math function {name} on {xs[0].dtype}")
        return self._add("math", xs, xs[0].dtype, name)


def apply_elementwise(b, op, specs, args, attrs):
    """The scalar code of elementwise primitive ``op`` on ``args`` (handles for its tensor
    operands, Python numbers, None), as every kernel computes one: the arguments converted to
    the op's compute dtype, its lowering rule, the result converted to its output dtype.
    ``specs`` are the operands as its dtype rule reads them."""
    # a run-time scalar attribute promotes as the Python float it stands for
    ct, odt = op.dtype_rule(*specs, **{k: 0.5 if isinstance(a, Handle) else a
                                       for k, a in attrs.items()})
    scalars = []
    for a in args:
        if isinstance(a, Handle):
            scalars.append(b.cast(a, ct) if op.cast_inputs else a)
        elif a is None:
            scalars.append(None)
        elif isinstance(a, (bool, int, float)):
            scalars.append(b.const(a, ct))
        else:
            raise Unsupported(f"{op.name} argument {a!r}")
    r = op.lowering(b, *scalars, **attrs)
    if odt.itemsize == 2 and odt.is_floating_point:
        return b.round_to(r, odt)
    return b.cast(r, odt)


# ---------------------------------------------------------------- describing a subgraph

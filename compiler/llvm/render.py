"""Render a loop-level Kernel (compiler/lowering/kernel.py) as LLVM IR with llvmlite.ir.

The kernel's exported function is a task of the worker pool (pool.py): ``void k(ptr args, i64
begin, i64 end)``, ``args`` holding one pointer per buffer (inputs, then outputs), ``[begin, end)``
the range of the schedule's lead axes (flattened) to run (so that a call can be split across
threads).  It loads the pointers and calls the body, a function of one ``noalias`` pointer per
buffer that LLVM inlines into it (the pointers stay known not to alias), so that no code outside
the kernel's module is needed to call it on any thread.  Shapes and strides are constants, so
LLVM sees exact trip counts and unit strides and vectorizes the innermost loop.  Adjacent axes
that every buffer walks contiguously are merged first, so an elementwise kernel over contiguous
tensors is one flat loop.

The loop nest: the kept (outer) axes; inside, one loop nest over the reduce axes per
reduction, whose innermost axis runs in blocks of ``BLOCK`` elements, each summed into its own
partial before joining the total (16M float32 ones sum to 16777216 exactly, and the partial
may be vectorized, its additions reassociated); then the stores of values computed once per
outer index; then a last loop nest over the reduce axes for the stores that vary along it.

This module implements the scalar builder of compiler/lowering/scalar.py on LLVM values:
float16 and bfloat16 live in float registers and round when converted or stored; integer
division and remainder never trap: a 0 divisor sets a fault flag the caller turns into torch's
error.
"""
from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from dynograph.runtime import dtypes as D
from ..lowering.walk import ExpressionWalker
from ..lowering.schedule import ARG_COMBINES, BLOCK, COLUMNS, schedule

VECTOR_BYTES = 32       # an AVX2 register
TILE_VECTORS = 4        # registers a vector tile's partial and total take each


def _pieces(width, lanes):
    """``width`` columns as (offset, lanes) vectors: whole registers of ``lanes``, then
    power-of-two pieces (a non-power-of-two vector would be split into single elements)."""
    pieces, offset = [], 0
    while offset < width:
        n = lanes
        while n > width - offset:
            n //= 2
        pieces.append((offset, n))
        offset += n
    return pieces

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

# C math functions LLVM knows as intrinsics; the others are called in the C library
INTRINSICS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
              "sqrt": "sqrt", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil",
              "trunc": "trunc", "rint": "rint", "pow": "pow", "copysign": "copysign",
              "fmax": "maxnum", "fmin": "minnum", "fma": "fma"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def reg_type(dt):
    """The register type of a dtype (half types compute in float)."""
    if dt is D.bool:
        return I1
    if dt.is_floating_point:
        return F64 if dt is D.float64 else F32
    return ir.IntType(dt.itemsize * 8)


def mem_type(dt):
    if dt is D.bool:
        return I8
    if dt is D.float16:
        return F16
    if dt is D.bfloat16:
        return I16
    return reg_type(dt)


def _unsigned(dt):
    return dt is D.bool or dt is D.uint8


class Renderer(ExpressionWalker):
    """Builds the LLVM module of one kernel; ``render()`` returns its IR text."""

    def __init__(self, kernel, name, triple):
        self.k = kernel
        self.name = name
        self.mod = ir.Module(name=name)
        self.mod.triple = triple
        self.s = sched = schedule(kernel)
        self.domain, self.red_axes = sched.domain, sched.red_axes
        self.load_strides, self.store_strides = sched.load_strides, sched.store_strides
        self.outer_axes = sched.outer_axes
        self.lanes = None           # inside a vector tile: its width (values are vectors)
        self._vector = None
        # fast-math flags of float arithmetic: "contract" lets LLVM fuse multiply-adds
        self.flags = ("contract",) if kernel.contract else ()

    # -- structure
    def render(self):
        k = self.k
        # the buffers, the fault flag (kernels dividing integers), then the range [begin, end)
        # of the schedule's lead axes (flattened) this call runs
        flags = [PTR] if k.divides_integers else []
        pointers = len(k.buffers) + len(flags)
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * pointers + [I64, I64])
        self.fn = ir.Function(self.mod, fnty, name=self.name + "_body")
        self.fn.linkage = "internal"
        for arg in self.fn.args[:pointers]:
            arg.add_attribute("noalias")
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("alwaysinline")
        self.task(pointers)
        alloca_block = self.fn.append_basic_block("allocas")
        start = self.fn.append_basic_block("start")
        self.alloca_builder = ir.IRBuilder(alloca_block)
        self.b = ir.IRBuilder(start)
        self.index = {}
        self.fault = None
        if flags:       # set when an integer divisor is 0: the caller raises, as torch does
            self.fault = self.alloca_builder.alloca(I1)
            self.b.store(I1(0), self.fault)
        if self.s.columnwise:
            self.render_columns()
        elif self.outer_axes:
            with self.for_range(self.fn.args[-1], self.fn.args[-2]) as i:
                self.split_lead(i)
                self.nest(self.outer_axes[len(self.s.lead):], self.outer_body)
        else:
            self.outer_body()
        if self.fault is not None:
            # only a fault is written: calls running parts of the range share the flag
            with self.b.if_then(self.b.load(self.fault)):
                self.b.store(I8(1), self.fn.args[len(k.buffers)])
        self.b.ret_void()
        self.alloca_builder.branch(start)
        return str(self.mod)

    def task(self, pointers):
        """The exported ``name(args, begin, end)``: the body on the pointers ``args`` holds."""
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name=self.name)
        fn.attributes.add("nounwind")
        args, begin, end = fn.args
        b = ir.IRBuilder(fn.append_basic_block())
        values = [b.load(b.gep(args, [I64(i)], source_etype=PTR), typ=PTR) for i in range(pointers)]
        b.call(self.fn, values + [begin, end])
        b.ret_void()

    def render_columns(self):
        """The kept axes, the innermost in tiles of ``COLUMNS``; each tile accumulates its
        columns side by side (contiguous: vectorizable, and no reassociation) over the reduce
        axes, in blocks of ``BLOCK`` along the last reduce axis as in ``reduce``."""
        args = self.fn.args
        if len(self.outer_axes) == 1:
            self.column_range(args[-2], args[-1])
            return
        with self.for_range(args[-1], args[-2]) as i:
            self.split_lead(i)
            self.column_axis()

    def column_range(self, lo, hi):
        """The tiles of the range [lo, hi) of the innermost kept axis (the one calls split)."""
        last = self.outer_axes[-1]
        if not self.vector_columns():
            self.column_tiles(lo, hi)
            return
        # whole tiles of constant width, then what is left of the range (on an axis shorter
        # than a tile, only that: LLVM need not compile a tile no call runs)
        first = lo
        if self.domain[last] >= COLUMNS:
            whole = self.b.sdiv(self.b.sub(hi, lo), I64(COLUMNS))
            with self.for_range(whole) as t:
                self.tile(last, self.b.add(lo, self.b.mul(t, I64(COLUMNS))), COLUMNS)
            first = self.b.add(lo, self.b.mul(whole, I64(COLUMNS)))
        with self.b.if_then(self.b.icmp_signed("<", first, hi)):
            self.column_tile(last, first, self.b.sub(hi, first))

    def column_axis(self):
        """The tiles of the whole innermost kept axis."""
        last, n = self.outer_axes[-1], self.domain[self.outer_axes[-1]]
        if not self.vector_columns():
            self.column_tiles(I64(0), I64(n))
            return
        # known bounds: vector tiles of constant width (their accumulators live in registers)
        if n >= COLUMNS:
            with self.for_range(n // COLUMNS) as t:
                self.tile(last, self.b.mul(t, I64(COLUMNS)), COLUMNS)
        if n % COLUMNS:
            self.tile(last, I64(n - n % COLUMNS), n % COLUMNS)

    def column_tiles(self, lo, hi):
        """Generic column tiles over the range [lo, hi) of the innermost kept axis, each
        ``COLUMNS`` wide but the last: their columns live in memory, where a constant width
        buys nothing measurable, so one loop of tiles compiles once (a constant tile and a
        remainder took LLVM twice as long)."""
        last = self.outer_axes[-1]
        if self.domain[last] <= COLUMNS:            # one tile
            self.column_tile(last, lo, self.b.sub(hi, lo))
            return
        count = self.b.sdiv(self.b.add(self.b.sub(hi, lo), I64(COLUMNS - 1)), I64(COLUMNS))
        with self.for_range(count) as t:
            first = self.b.add(lo, self.b.mul(t, I64(COLUMNS)))
            left = self.b.sub(hi, first)
            width = self.b.select(self.b.icmp_signed("<", left, I64(COLUMNS)), left, I64(COLUMNS))
            self.column_tile(last, first, width)

    def split_lead(self, i):
        """Set the indices of the lead axes from ``i``, their flattened index."""
        for a in reversed(self.s.lead[1:]):
            n = I64(self.domain[a])
            self.index[a] = self.b.urem(i, n)
            i = self.b.udiv(i, n)
        self.index[self.s.lead[0]] = i

    def tile(self, axis, first, width):
        """A column tile of constant ``width`` as vector code (``vector_columns``)."""
        item = self.k.reductions[0].dtype.itemsize
        lanes = VECTOR_BYTES // item
        for start in range(0, width, TILE_VECTORS * lanes):
            self.vector_tile(axis, self.b.add(first, I64(start)),
                             _pieces(min(TILE_VECTORS * lanes, width - start), lanes))

    def vector_columns(self):
        """Whether column tiles can be vector code: float sums of values made by + - * of
        loads that walk the columns contiguously or not at all (a convolution, a bias
        gradient), stored contiguously once per column."""
        if self._vector is None:
            self._vector = self._vectorizable()
        return self._vector

    def _vectorizable(self):
        k, axis = self.k, self.outer_axes[-1]
        dt = k.reductions[0].dtype
        if dt not in (D.float32, D.float64) or not self.red_axes or self.s.inner_stores or \
                any(r.combine != "add" or r.dtype is not dt for r in k.reductions):
            return False
        seen, todo = set(), [r.value for r in k.reductions] + [s.value for s, _ in self.s.outer_stores]
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            e = k.exprs[i]
            if e.op not in ("load", "acc", "const", "add", "sub", "mul", "neg") or e.dtype is not dt:
                return False
            if e.op == "load" and (self.load_strides[e.attr][axis] not in (0, 1) or
                                   k.buffers[k.loads[e.attr].buffer][1] is not dt):
                return False
            todo.extend(e.args)
        return all(st[axis] == 1 and k.buffers[s.buffer][1] is dt for s, st in self.s.outer_stores)

    def vector_tile(self, axis, first, pieces):
        """The columns from ``first`` on side by side as vectors, one per (offset, lanes) of
        ``pieces``: each reduction's partial and total per piece is a vector (registers, not
        memory), summed over the reduce axes in blocks of ``BLOCK`` as ``column_tile`` sums each
        column."""
        axes = list(self.red_axes)
        last, n = axes[-1], self.domain[axes[-1]]
        values = {}                 # per piece: the reductions' totals finished so far

        def at(piece):              # the vector values of ``piece`` from here on
            self.lanes = piece[1]
            self.index[axis] = self.b.add(first, I64(piece[0]))
            self.acc_values = values.setdefault(piece, {})

        for group in self.s.groups:
            reds = [self.k.reductions[j] for j in group]
            dt = reds[0].dtype
            totals, partials = {}, {}
            for piece in pieces:
                at(piece)
                ty = ir.VectorType(reg_type(dt), piece[1])
                totals[piece] = [self.alloca_builder.alloca(ty) for _ in reds]
                partials[piece] = [self.alloca_builder.alloca(ty) for _ in reds]
                for t in totals[piece]:
                    self.b.store(self.const(0.0, dt), t)

            def blocks(reds=reds, totals=totals, partials=partials, dt=dt):
                with self.for_range((n + BLOCK - 1) // BLOCK) as blk:
                    begin = self.b.mul(blk, I64(BLOCK))
                    stop = self.b.add(begin, I64(BLOCK))
                    stop = self.b.select(self.b.icmp_signed("<", stop, I64(n)), stop, I64(n))
                    for piece in pieces:
                        at(piece)
                        for p in partials[piece]:
                            self.b.store(self.const(0.0, dt), p)
                    with self.for_range(stop, begin) as i:
                        self.index[last] = i
                        for piece in pieces:
                            at(piece)
                            cache = {}
                            for red, p in zip(reds, partials[piece]):
                                self.b.store(self.b.fadd(self.b.load(p), self.gen(red.value, cache),
                                                         flags=self.flags), p)
                    for piece in pieces:
                        for t, p in zip(totals[piece], partials[piece]):
                            self.b.store(self.b.fadd(self.b.load(t), self.b.load(p)), t)
            self.nest(axes[:-1], blocks)
            for piece in pieces:
                values.setdefault(piece, {}).update(
                    (j, self.b.load(t)) for j, t in zip(group, totals[piece]))
        for piece in pieces:
            at(piece)
            cache = {}
            for s, st in self.s.outer_stores:
                self.store(s, st, cache)
        self.lanes = None

    def splat(self, x):
        """A vector of ``self.lanes`` copies of the scalar ``x``."""
        ty = ir.VectorType(x.type, self.lanes)
        v = self.b.insert_element(ir.Constant(ty, ir.Undefined), x, I32(0))
        return self.b.shuffle_vector(v, ir.Constant(ty, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))

    @contextmanager
    def columns(self, axis, first, width, accs):
        """``for c in range(width)`` at column ``first + c`` of ``axis``, with the reductions
        finished so far (``accs``: their per-column totals) readable by the expressions."""
        with self.for_range(width) as c:
            self.index[axis] = self.b.add(first, c)
            self.acc_values = {j: self.b.load(self.b.gep(arr, [c], source_etype=arr.allocated_type))
                               for j, arr in enumerate(accs)}
            yield c

    def column_tile(self, axis, first, width):
        accs = []                               # per reduction, in order: its column totals
        axes = list(self.red_axes)
        for group in self.s.groups:
            reds = [self.k.reductions[j] for j in group]
            if reds[0].combine in ARG_COMBINES:
                accs.append(self.column_arg(axis, first, width, reds[0], accs))
                continue
            tys = [reg_type(r.dtype) for r in reds]
            totals = [self.alloca_builder.alloca(ty, size=I64(COLUMNS)) for ty in tys]
            partials = [self.alloca_builder.alloca(ty, size=I64(COLUMNS)) for ty in tys]
            identities = [self.const(r.identity, r.dtype) for r in reds]

            def at(arr, ty, c):
                return self.b.gep(arr, [c], source_etype=ty)

            def fill(arrays, identities=identities, tys=tys):
                with self.columns(axis, first, width, accs) as c:
                    for arr, ident, ty in zip(arrays, identities, tys):
                        self.b.store(ident, at(arr, ty, c))

            def fold(into, values, reds=reds, tys=tys):
                """into[c] = combine(into[c], values(c)) for each reduction, column by column."""
                with self.columns(axis, first, width, accs) as c:
                    cache = {}
                    for red, arr, ty, v in zip(reds, into, tys, values(c, cache)):
                        self.b.store(self.combine(red.combine, self.b.load(at(arr, ty, c)), v,
                                                  red.dtype, ()), at(arr, ty, c))

            fill(totals)

            def blocks(reds=reds, totals=totals, partials=partials, tys=tys, fill=fill, fold=fold):
                n = self.domain[axes[-1]] if axes else 1
                with self.for_range((n + BLOCK - 1) // BLOCK) as blk:
                    begin = self.b.mul(blk, I64(BLOCK))
                    stop = self.b.add(begin, I64(BLOCK))
                    stop = self.b.select(self.b.icmp_signed("<", stop, I64(n)), stop, I64(n))
                    fill(partials)
                    with self.for_range(stop, begin) as i:
                        if axes:
                            self.index[axes[-1]] = i
                        # the group's values share their loads (one cache per column)
                        fold(partials, lambda c, cache: [self.gen(r.value, cache) for r in reds])
                    fold(totals, lambda c, cache: [self.b.load(at(p, ty, c))
                                                   for p, ty in zip(partials, tys)])
            self.nest(axes[:-1], blocks)
            accs.extend(totals)
        inner, outer = self.s.inner_stores, self.s.outer_stores
        if outer:
            with self.columns(axis, first, width, accs):
                cache = {}
                for s, st in outer:
                    self.store(s, st, cache)
        if inner:
            def body():
                with self.columns(axis, first, width, accs):
                    cache = {}
                    for s, st in inner:
                        self.store(s, st, cache)
            self.nest(list(self.red_axes), body)

    def column_arg(self, axis, first, width, red, accs):
        """An arg reduction of a tile's columns side by side, over the reduce axes in order;
        returns the array of positions."""
        ty = reg_type(red.dtype)
        best = self.alloca_builder.alloca(ty, size=I64(COLUMNS))
        where = self.alloca_builder.alloca(I64, size=I64(COLUMNS))
        with self.columns(axis, first, width, accs) as c:
            self.b.store(self.const(red.identity, red.dtype), self.b.gep(best, [c], source_etype=ty))
            self.b.store(I64(0), self.b.gep(where, [c], source_etype=I64))

        def body():
            position = self.position()
            with self.columns(axis, first, width, accs) as c:
                at_best = self.b.gep(best, [c], source_etype=ty)
                at_where = self.b.gep(where, [c], source_etype=I64)
                v, old = self.gen(red.value, {}), self.b.load(at_best)
                better = self.better(red, v, old)
                self.b.store(self.b.select(better, v, old), at_best)
                self.b.store(self.b.select(better, position, self.b.load(at_where)), at_where)
        self.nest(list(self.red_axes), body)
        return where

    def nest(self, axes, body):
        if not axes:
            body()
            return
        with self.for_range(self.domain[axes[0]]) as i:
            self.index[axes[0]] = i
            self.nest(axes[1:], body)

    @contextmanager
    def for_range(self, count, start=None):
        """``for i in range(start, count)`` (i64; count a constant or a value)."""
        b = self.b
        count = I64(count) if isinstance(count, int) else count
        pre = b.block
        cond = self.fn.append_basic_block("cond")
        body = self.fn.append_basic_block("body")
        end = self.fn.append_basic_block("end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.phi(I64)
        i.add_incoming(I64(0) if start is None else start, pre)
        b.cbranch(b.icmp_signed("<", i, count), body, end)
        b.position_at_end(body)
        yield i
        i.add_incoming(b.add(i, I64(1)), b.block)
        b.branch(cond)
        b.position_at_end(end)

    def outer_body(self):
        self.acc_values = {}
        for group in self.s.groups:
            reds = [self.k.reductions[j] for j in group]
            if len(reds) == 1 and reds[0].combine in ARG_COMBINES:
                totals = [self.arg_reduce(reds[0])]
            else:
                totals = self.reduce(reds)
            self.acc_values.update(zip(group, totals))
        cache = {}
        inner, outer = self.s.inner_stores, self.s.outer_stores
        for s, strides in outer:
            self.store(s, strides, cache)
        if inner:
            def body():
                cache = {}
                for s, st in inner:
                    self.store(s, st, cache)
            self.nest(list(self.red_axes), body)

    def reduce(self, reds):
        """Accumulate each reduction's value over the reduce axes in one loop nest (values
        share their loads: a weight gradient's kernel offsets read one output gradient);
        returns the totals."""
        tys = [reg_type(r.dtype) for r in reds]
        totals = [self.alloca_builder.alloca(ty) for ty in tys]
        for red, total in zip(reds, totals):
            self.b.store(self.const(red.identity, red.dtype), total)
        axes = list(self.red_axes)

        def accumulate(pointers, flags):
            cache = {}
            for red, ptr in zip(reds, pointers):
                v = self.gen(red.value, cache)
                self.b.store(self.combine(red.combine, self.b.load(ptr), v, red.dtype, flags), ptr)

        if not axes:
            accumulate(totals, ())
            return [self.b.load(t) for t in totals]
        last = axes[-1]
        n = self.domain[last]
        partials = [self.alloca_builder.alloca(ty) for ty in tys]

        def blocks():
            with self.for_range((n + BLOCK - 1) // BLOCK) as blk:
                begin = self.b.mul(blk, I64(BLOCK))
                stop = self.b.add(begin, I64(BLOCK))
                stop = self.b.select(self.b.icmp_signed("<", stop, I64(n)), stop, I64(n))
                for red, partial in zip(reds, partials):
                    self.b.store(self.const(red.identity, red.dtype), partial)
                with self.for_range(stop, begin) as i:
                    self.index[last] = i
                    accumulate(partials, ("reassoc",) + self.flags)
                for red, total, partial in zip(reds, totals, partials):
                    self.b.store(self.combine(red.combine, self.b.load(total),
                                              self.b.load(partial), red.dtype, ()), total)
        self.nest(axes[:-1], blocks)
        return [self.b.load(t) for t in totals]

    def arg_reduce(self, red):
        """The row-major index over the reduce axes of the first extreme element (a NaN wins;
        the first NaN, the last for ``argmax_pool``, as PyTorch's max pooling picks).  A plain
        loop: the strict comparison keeps the first of equal elements."""
        b = self.b
        best = self.alloca_builder.alloca(reg_type(red.dtype))
        where = self.alloca_builder.alloca(I64)
        b.store(self.const(red.identity, red.dtype), best)
        b.store(I64(0), where)
        axes = list(self.red_axes)

        def body():
            v = self.gen(red.value, {})
            old = b.load(best)
            better = self.better(red, v, old)
            b.store(b.select(better, v, old), best)
            b.store(b.select(better, self.position(), b.load(where)), where)
        self.nest(axes, body)
        return b.load(where)

    def better(self, red, v, old):
        """Whether an arg reduction takes ``v`` over the best so far."""
        b = self.b
        better = self.cmp("lt" if red.combine == "argmin" else "gt", v, old, red.dtype)
        if red.dtype.is_floating_point:
            nan = b.fcmp_unordered("uno", v, v)
            if red.combine != "argmax_pool":         # the first NaN; max pooling: the last
                nan = b.and_(nan, b.fcmp_ordered("ord", old, old))
            better = b.or_(better, nan)
        return better

    def position(self):
        """The row-major index over the reduce axes of the current element."""
        position = I64(0)
        for a in self.red_axes:
            position = self.b.add(self.b.mul(position, I64(self.domain[a])), self.index[a])
        return position

    # -- memory
    def address(self, buffer, strides, dt):
        offset = I64(0)
        for a, s in enumerate(strides):
            if s and a in self.index:
                offset = self.b.add(offset, self.b.mul(self.index[a], I64(s)))
        return self.b.gep(self.fn.args[buffer], [offset], source_etype=mem_type(dt))

    def load(self, ld_index, dt):
        ld = self.k.loads[ld_index]
        strides = self.load_strides[ld_index]
        ptr = self.address(ld.buffer, strides, dt)
        if ld.offset:
            ptr = self.b.gep(ptr, [I64(ld.offset)], source_etype=mem_type(dt))
        if self.lanes:          # a vector tile (only float32/float64 loads: vector_columns)
            if self.load_strides[ld_index][self.outer_axes[-1]]:
                return self.b.load(ptr, typ=ir.VectorType(mem_type(dt), self.lanes),
                                   align=dt.itemsize)
            return self.splat(self.b.load(ptr, typ=mem_type(dt)))
        raw = self.b.load(ptr, typ=mem_type(dt))
        if dt is D.bool:
            return self.b.icmp_unsigned("!=", raw, I8(0))
        if dt is D.float16:
            return self.b.fpext(raw, F32)
        if dt is D.bfloat16:
            return self.b.bitcast(self.b.shl(self.b.zext(raw, I32), I32(16)), F32)
        return raw

    def store(self, s, strides, cache):
        dt = self.k.buffers[s.buffer][1]
        v = self.gen(s.value, cache)
        b = self.b
        if dt is D.bool:
            v = b.zext(v, I8)
        elif dt is D.float16:
            v = b.fptrunc(v, F16)
        elif dt is D.bfloat16:
            v = self.bf16_bits(v)
        ptr = self.address(s.buffer, strides, dt)
        if s.offset:
            ptr = b.gep(ptr, [I64(s.offset)], source_etype=mem_type(dt))
        b.store(v, ptr, align=dt.itemsize)

    def bf16_bits(self, v):
        """float -> bfloat16 bits, rounding to nearest even (NaN stays a quiet NaN)."""
        b = self.b
        bits = b.bitcast(v, I32)
        lsb = b.and_(b.lshr(bits, I32(16)), I32(1))
        rounded = b.lshr(b.add(bits, b.add(I32(0x7FFF), lsb)), I32(16))
        nan = b.fcmp_unordered("uno", v, v)
        return b.trunc(b.select(nan, I32(0x7FC0), rounded), I16)

    # -- scalar expressions (gen: walk.py)
    def select(self, c, a, b):
        return self.b.select(c, a, b)

    def const(self, value, dt):
        ty = reg_type(dt)
        if dt.is_floating_point:
            c = ir.Constant(ty, float(np.asarray(value, dtype=dt.np).astype(np.float64)))
        else:
            c = ir.Constant(ty, int(value))
        return ir.Constant(ir.VectorType(ty, self.lanes), [c] * self.lanes) if self.lanes else c

    def cast(self, x, src, dst):
        b = self.b
        if dst is D.bool:
            if src.is_floating_point:
                return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
            return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
        to = reg_type(dst)
        if src.is_floating_point and dst.is_floating_point:
            if x.type != to:
                x = b.fpext(x, to) if to == F64 else b.fptrunc(x, to)
            if dst is D.float16:
                return b.fpext(b.fptrunc(x, F16), F32)
            if dst is D.bfloat16:
                return b.bitcast(b.shl(b.zext(self.bf16_bits(x), I32), I32(16)), F32)
            return x
        if src.is_floating_point:
            return b.fptoui(x, to) if _unsigned(dst) else b.fptosi(x, to)
        if dst.is_floating_point:
            v = b.uitofp(x, to) if _unsigned(src) else b.sitofp(x, to)
            return self.cast(v, D.float32 if to == F32 else D.float64, dst)
        if to.width < x.type.width:
            return b.trunc(x, to)
        if to.width > x.type.width:
            return b.zext(x, to) if _unsigned(src) else b.sext(x, to)
        return x

    def cmp(self, op, x, y, dt):
        if dt.is_floating_point:
            if op == "ne":
                return self.b.fcmp_unordered("!=", x, y)
            return self.b.fcmp_ordered(_CMP[op], x, y)
        if _unsigned(dt):
            return self.b.icmp_unsigned(_CMP[op], x, y)
        return self.b.icmp_signed(_CMP[op], x, y)

    def function(self, name, ret, args):
        if name in self.mod.globals:
            return self.mod.globals[name]
        return ir.Function(self.mod, ir.FunctionType(ret, args), name=name)

    def intrinsic(self, name, x, *rest):
        ty = x.type
        suffix = "f64" if ty == F64 else "f32"
        fn = self.function(f"llvm.{name}.{suffix}", ty, [ty] * (1 + len(rest)))
        return self.b.call(fn, [x, *rest])

    def math(self, name, args, dt):
        ty = args[0].type
        if ty == F32 and name in ("exp", "tanh"):
            return (self.exp_f32 if name == "exp" else self.tanh_f32)(args[0])
        if name in INTRINSICS:
            return self.intrinsic(INTRINSICS[name], *args)
        cname = name if ty == F64 else name + "f"
        return self.b.call(self.function(cname, ty, [ty] * len(args)), args)

    # float32 exp and tanh as straight-line code the loop vectorizer can widen (a C library call
    # per element would stay scalar); accurate to a few float32 ulps (Cephes' expf and tanhf)
    def poly(self, x, coefficients):
        b = self.b
        r = F32(coefficients[0])
        for c in coefficients[1:]:
            r = b.fadd(b.fmul(r, x), F32(c))
        return r

    def exp_f32(self, x):
        b = self.b
        nan = b.fcmp_unordered("uno", x, x)
        c = self.intrinsic("minnum", self.intrinsic("maxnum", x, F32(-104.0)), F32(89.0))
        n = self.intrinsic("floor", b.fadd(b.fmul(c, F32(1.44269504088896341)), F32(0.5)))
        r = b.fsub(b.fsub(c, b.fmul(n, F32(0.693359375))), b.fmul(n, F32(-2.12194440e-4)))
        p = self.poly(r, (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                          1.6666665459e-1, 5.0000001201e-1))
        y = b.fadd(b.fadd(b.fmul(p, b.fmul(r, r)), r), F32(1.0))
        # y * 2**n, in two factors so that n in [-150, 128] stays in the exponent's range
        k = b.fptosi(n, I32)
        k1 = b.ashr(k, I32(1))
        k2 = b.sub(k, k1)
        for part in (k1, k2):
            y = b.fmul(y, b.bitcast(b.shl(b.add(part, I32(127)), I32(23)), F32))
        return b.select(nan, x, y)

    def tanh_f32(self, x):
        b = self.b
        ax = self.intrinsic("fabs", x)
        z = b.fmul(x, x)
        small = b.fadd(b.fmul(b.fmul(self.poly(z, (-5.70498872745e-3, 2.06390887954e-2,
                                                   -5.37397155531e-2, 1.33314422036e-1,
                                                   -3.33332819422e-1)), z), x), x)
        e = self.exp_f32(b.fmul(ax, F32(2.0)))
        large = b.fsub(F32(1.0), b.fdiv(F32(2.0), b.fadd(e, F32(1.0))))
        large = self.intrinsic("copysign", large, x)
        return b.select(b.fcmp_ordered("<", ax, F32(0.625)), small, b.select(
            b.fcmp_unordered("uno", x, x), x, large))

    def combine(self, name, acc, v, dt, flags):
        if dt.is_floating_point and name in ("add", "mul"):
            op = self.b.fadd if name == "add" else self.b.fmul
            return op(acc, v, flags=flags)
        return getattr(self, "op_" + name)(acc, v, dt)

    # arithmetic: one method per builder operation
    def op_add(self, x, y, dt):
        return self.b.fadd(x, y, flags=self.flags) if dt.is_floating_point else self.b.add(x, y)

    def op_sub(self, x, y, dt):
        return self.b.fsub(x, y, flags=self.flags) if dt.is_floating_point else self.b.sub(x, y)

    def op_mul(self, x, y, dt):
        return self.b.fmul(x, y, flags=self.flags) if dt.is_floating_point else self.b.mul(x, y)

    def _safe_divisor(self, y, dt):
        """Integer division by 0 or by -1 would trap: divide by 1 and fix the result (a 0
        divisor also sets the fault flag)."""
        b = self.b
        zero = ir.Constant(y.type, 0)
        is_zero = b.icmp_unsigned("==", y, zero)
        if self.fault is not None:
            b.store(b.or_(b.load(self.fault), is_zero), self.fault)
        if _unsigned(dt):
            return is_zero, None, b.select(is_zero, ir.Constant(y.type, 1), y)
        minus = b.icmp_signed("==", y, ir.Constant(y.type, -1))
        bad = b.or_(is_zero, minus)
        return bad, minus, b.select(bad, ir.Constant(y.type, 1), y)

    def op_div(self, x, y, dt):
        b = self.b
        if dt.is_floating_point:
            return b.fdiv(x, y)
        bad, minus, safe = self._safe_divisor(y, dt)
        if minus is None:
            return b.select(bad, ir.Constant(x.type, 0), b.udiv(x, safe))
        q = b.sdiv(x, safe)
        zero = ir.Constant(x.type, 0)
        return b.select(minus, b.sub(zero, x), b.select(bad, zero, q))

    def op_rem(self, x, y, dt):
        b = self.b
        if dt.is_floating_point:
            return b.frem(x, y)
        bad, minus, safe = self._safe_divisor(y, dt)
        r = b.urem(x, safe) if minus is None else b.srem(x, safe)
        return b.select(bad, ir.Constant(x.type, 0), r)

    def op_neg(self, x, dt):
        if dt.is_floating_point:
            return self.b.fneg(x)
        return self.b.sub(ir.Constant(x.type, 0), x)

    def op_abs(self, x, dt):
        if dt.is_floating_point:
            return self.intrinsic("fabs", x)
        if _unsigned(dt):
            return x
        neg = self.b.icmp_signed("<", x, ir.Constant(x.type, 0))
        return self.b.select(neg, self.b.sub(ir.Constant(x.type, 0), x), x)

    def _extreme(self, x, y, dt, fname, op):
        if dt.is_floating_point:
            return self.intrinsic(fname, x, y)     # NaN-propagating, like numpy.maximum
        cmp = self.b.icmp_unsigned if _unsigned(dt) else self.b.icmp_signed
        return self.b.select(cmp(op, x, y), x, y)

    def op_max(self, x, y, dt):
        return self._extreme(x, y, dt, "maximum", ">")

    def op_min(self, x, y, dt):
        return self._extreme(x, y, dt, "minimum", "<")

    def op_and_(self, x, y, dt):
        return self.b.and_(x, y)

    def op_or_(self, x, y, dt):
        return self.b.or_(x, y)

    def op_xor(self, x, y, dt):
        return self.b.xor(x, y)

    def op_not_(self, x, dt):
        return self.b.not_(x)

    def op_shl(self, x, y, dt):
        return self.b.shl(x, y)

    def op_shr(self, x, y, dt):
        return self.b.lshr(x, y) if _unsigned(dt) else self.b.ashr(x, y)


def render(kernel, name, triple):
    """LLVM IR text of ``kernel`` as a function called ``name``."""
    return Renderer(kernel, name, triple).render()

"""Block and warp reductions (mapping.py's ``block`` and ``warp`` kinds): the threads of a block,
or the 32 lanes of a warp, share one kept index.

Each thread accumulates the elements ``e = lane, lane + width, ...`` of the row (the reduce axes
flattened row-major, ``width`` the block's or the warp's threads), in the schedule's reduction
groups as the per-thread path runs them; the partials are joined by ``__shfl_down_sync`` within
each warp, then (blocks) through one ``__shared__`` slot per warp, which warp 0 joins the same
way.  The total reaches every thread (a shuffle from lane 0, or the shared slot), so a later
group reading it (softmax's sum reading its max) and the stores that vary along the row (run
by all threads, element ``e`` by thread ``e % width``) see it.  The stores made once per kept
index are made by thread 0 (lane 0 of the warp).

Numerics: integer, bool, max and min reductions give exactly the per-thread result; float sums
and products are the same terms in another order (strided partials joined by a tree instead of
blocks of BLOCK elements joined in order), so they agree with the per-thread path and the CPU
within float reassociation, and a total does not depend on the grid, only on the block size.
"""
import math

from dynograph.runtime import dtypes as D
from ..lowering.schedule import ARG_COMBINES
from .mapping import WARP, mapping_of
from .render import Renderer, const, reg_type

FULL_MASK = "0xffffffffu"


class CooperativeRenderer(Renderer):
    """A reduction kernel with a block (``kind`` block) or a warp (warp) per kept index; the
    block size is any multiple of 32 up to 1024."""

    def __init__(self, kernel, name):
        super().__init__(kernel, name)
        self.block = mapping_of(kernel).kind == "block"
        self.kind = "; a block per kept index" if self.block else "; a warp per kept index"
        self.scratch = {}           # reduction -> its shared slots, one per warp (blocks)

    def kernel_body(self):
        outer = self.s.outer_axes
        total = self.count(outer)
        if self.block:
            for group in self.s.groups:
                for j in group:
                    red = self.k.reductions[j]
                    self.scratch[j] = f"shared{j}"
                    self.emit(f"__shared__ {reg_type(red.dtype)} shared{j}[32];")
                    if red.combine in ARG_COMBINES:
                        self.emit(f"__shared__ long long shared{j}_at[32];")
            self.emit("const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;")
            self.open(f"for (long long t = blockIdx.x; t < {total}LL; t += gridDim.x)")
            self.width, self.first = "blockDim.x", "threadIdx.x"
        else:
            self.emit("const unsigned lane = threadIdx.x & 31u;")
            self.emit("const long long warps = blockDim.x >> 5;")
            self.open(f"for (long long t = blockIdx.x * warps + (threadIdx.x >> 5); t < {total}LL; "
                      "t += gridDim.x * warps)")
            self.width, self.first = f"{WARP}", "lane"
        self.split_index("t", outer, "rest")
        self.body()
        self.close()

    def count(self, axes):
        """The number of indices over ``axes``."""
        return math.prod(self.domain[a] for a in axes)

    def row_loop(self, body, cache):
        """``body(cache)`` for this thread's elements of the row: the flattened reduce axes
        from its lane in steps of the width."""
        axes = list(self.red_axes)
        e = self.var("e")
        self.open(f"for (long long {e} = {self.first}; {e} < {self.count(axes)}LL; "
                  f"{e} += {self.width})")
        self.split_index(e, axes)
        self.flat = e
        body(dict(cache))
        for a in axes:
            self.scope.discard(a)
        self.close()

    def position(self):
        """The row-major index over the reduce axes of the current element: its flat index."""
        return self.flat

    def body(self):
        cache = {}
        for group in self.s.groups:
            reds = [self.k.reductions[j] for j in group]
            if reds[0].combine in ARG_COMBINES:
                self.acc_values[group[0]] = self.arg_reduce(reds[0], group[0], cache)
            else:
                self.acc_values.update(zip(group, self.reduce(reds, group, cache)))
        if self.s.outer_stores:
            self.open(f"if ({self.first} == 0)")
            for s, strides in self.s.outer_stores:
                self.store(s, strides, dict(cache))
            self.close()
        if self.s.inner_stores:
            def inner(inner_cache):
                for s, st in self.s.inner_stores:
                    self.store(s, st, inner_cache)
            self.row_loop(inner, cache)

    def reduce(self, reds, group, cache):
        totals = [self.var("r") for _ in reds]
        for red, t in zip(reds, totals):
            self.emit(f"{reg_type(red.dtype)} {t} = {const(red.identity, red.dtype)};")
        self.hoist([r.value for r in reds], cache)

        def accumulate(inner):
            for red, t in zip(reds, totals):
                v = self.gen(red.value, inner)
                self.emit(f"{t} = {self.combine(red.combine, t, v, red.dtype)};")
        self.row_loop(accumulate, cache)
        self.warp_join(reds, totals)
        if not self.block:
            for red, t in zip(reds, totals):
                self.emit(f"{t} = {self.shuffle('__shfl_sync', t, '0', red.dtype)};")
            return totals
        for j, t in zip(group, totals):
            self.emit(f"if (lane == 0) {self.scratch[j]}[warp] = {t};")
        self.emit("__syncthreads();")
        self.open("if (warp == 0)")
        for j, red, t in zip(group, reds, totals):
            self.emit(f"{t} = lane < (blockDim.x >> 5) ? {self.scratch[j]}[lane] : "
                      f"{const(red.identity, red.dtype)};")
        self.warp_join(reds, totals)
        for j, t in zip(group, totals):
            self.emit(f"if (lane == 0) {self.scratch[j]}[0] = {t};")
        self.close()
        self.emit("__syncthreads();")
        for j, t in zip(group, totals):
            self.emit(f"{t} = {self.scratch[j]}[0];")
        self.emit("__syncthreads();     // the slots are rewritten for the next kept index")
        return totals

    def arg_reduce(self, red, j, cache):
        """The position of the first extreme element (as the per-thread path picks it): each
        thread scans its elements in order, then (value, position) pairs are joined, the
        extreme winning, the lower position on a tie (NaNs: the first, or the last for
        ``argmax_pool``)."""
        best, where = self.var("best"), self.var("at")
        self.emit(f"{reg_type(red.dtype)} {best} = {const(red.identity, red.dtype)};")
        self.emit(f"long long {where} = 0;")
        self.hoist([red.value], cache)

        def scan(inner):
            v = self.gen(red.value, inner)
            self.open(f"if ({self.better(red, v, best)})")
            self.emit(f"{best} = {v};")
            self.emit(f"{where} = {self.position()};")
            self.close()
        self.row_loop(scan, cache)
        self.arg_join(red, best, where)
        if not self.block:
            self.emit(f"{where} = {self.shuffle('__shfl_sync', where, '0', D.int64)};")
            return where
        values, places = self.scratch[j], f"{self.scratch[j]}_at"
        self.emit(f"if (lane == 0) {values}[warp] = {best}, {places}[warp] = {where};")
        self.emit("__syncthreads();")
        self.open("if (warp == 0)")
        self.emit(f"{best} = lane < (blockDim.x >> 5) ? {values}[lane] : "
                  f"{const(red.identity, red.dtype)};")
        self.emit(f"{where} = lane < (blockDim.x >> 5) ? {places}[lane] : 0;")
        self.arg_join(red, best, where)
        self.emit(f"if (lane == 0) {places}[0] = {where};")
        self.close()
        self.emit("__syncthreads();")
        self.emit(f"{where} = {places}[0];")
        self.emit("__syncthreads();     // the slots are rewritten for the next kept index")
        return where

    def arg_join(self, red, best, where):
        """(best, where) joined over the warp's lanes: lane 0 ends with the row's pick."""
        self.open("for (int offset = 16; offset > 0; offset >>= 1)")
        v, at = self.var("o"), self.var("o_at")
        self.emit(f"const {reg_type(red.dtype)} {v} = "
                  f"{self.shuffle('__shfl_down_sync', best, 'offset', red.dtype)};")
        self.emit(f"const long long {at} = "
                  f"{self.shuffle('__shfl_down_sync', where, 'offset', D.int64)};")
        # the later of two candidates wins only where the scan would have replaced the
        # earlier with it; on equal values (and two NaNs but for argmax_pool) the earlier stays
        first, second = f"{at} < {where}", f"{at} > {where}"
        take = f"{first} ? !({self.better(red, best, v)}) : ({second} && {self.better(red, v, best)})"
        self.open(f"if ({take})")
        self.emit(f"{best} = {v};")
        self.emit(f"{where} = {at};")
        self.close()
        self.close()

    def warp_join(self, reds, totals):
        """Each total joined over the 32 lanes of the warp: lane 0 ends with the whole."""
        self.open("for (int offset = 16; offset > 0; offset >>= 1)")
        for red, t in zip(reds, totals):
            other = self.var("o")
            self.emit(f"const {reg_type(red.dtype)} {other} = "
                      f"{self.shuffle('__shfl_down_sync', t, 'offset', red.dtype)};")
            self.emit(f"{t} = {self.combine(red.combine, t, other, red.dtype)};")
        self.close()

    @staticmethod
    def shuffle(fn, value, lane, dt):
        """A shuffle of ``value``: types narrower than 32 bits travel as int."""
        t = reg_type(dt)
        if t in ("int", "long long", "float", "double"):
            return f"{fn}({FULL_MASK}, {value}, {lane})"
        moved = f"{fn}({FULL_MASK}, (int){value}, {lane})"
        return f"{moved} != 0" if t == "bool" else f"({t}){moved}"

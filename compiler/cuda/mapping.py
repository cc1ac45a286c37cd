"""How a kernel description maps onto CUDA threads, decided once from its Schedule
(compiler/lowering/schedule.py) for the renderer and the launch:

* ``thread``: one thread per kept (outer) index, reductions run by that thread (elementwise
  kernels, short rows, column-wise reductions whose neighbouring threads read neighbouring
  columns);
* ``warp``: one warp of 32 threads per kept index, each lane summing every 32nd element of the
  row and the lanes joined by shuffles (rows of ``WARP_ROW`` up to ``BLOCK_ROW`` elements);
* ``block``: one block per kept index, its threads' partials joined by shuffles within each warp
  and through shared memory across warps (rows of ``BLOCK_ROW`` elements or more, and full
  reductions);
* ``gemm``: a contraction (one sum over the reduce axes of a product of two loads, then an
  epilogue of the total: a matrix product, a convolution read as an implicit GEMM) computed
  in 64 x 64 tiles of the output through shared memory (gemm.py).

Arg reductions join (value, position) pairs, so every mapping picks the element the per-thread
scan picks (the first extreme; NaNs: the first, or the last for max pooling's ``argmax_pool``).
"""
import math
from dataclasses import dataclass

from ..lowering.schedule import schedule

WARP = 32
WARP_ROW = 64           # rows this long or longer: a warp per kept index
BLOCK_ROW = 2048        # rows this long or longer, or few rows: a block per kept index
FEW_ROWS = 64           # fewer kept indices than this use blocks for rows of WARP_ROW or more
THREADS = 256           # threads per block of the cooperative mappings
MAX_BLOCKS = 65535


@dataclass
class Contraction:
    """A kernel whose one reduction sums ``a * b`` of two loads over the reduce axes: the kept
    axes classified by which operand walks them (``m``: a only, ``n``: b only, ``batch``:
    both or neither), each a list of collapsed axes, outermost first."""
    a: int                  # the expr of each operand (a load, or a cast of one)
    b: int
    a_load: int             # the load index of each operand
    b_load: int
    batch: list
    m: list
    n: list
    k: list

    def size(self, domain, axes):
        return math.prod(domain[x] for x in axes)


@dataclass
class Mapping:
    kind: str               # thread, warp, block, gemm
    work: int               # units the grid covers: threads, warps, blocks or output tiles
    threads: int            # threads per block a launch must use (thread: at most)
    contraction: Contraction = None

    @property
    def cooperative(self):
        """Whether the threads of a block share memory or wait for each other."""
        return self.kind != "thread"

    def check_block(self, threads):
        """Raise ValueError unless a block of ``threads`` threads can run this mapping: whole
        warps for the warp and block reductions, exactly ``THREADS`` for a GEMM tile."""
        if self.kind == "gemm" and threads != THREADS:
            raise ValueError(f"a gemm kernel runs in blocks of {THREADS} threads, not {threads}")
        if self.kind in ("warp", "block") and (threads % WARP or not 0 < threads <= 1024):
            raise ValueError(f"a {self.kind} reduction runs in blocks of whole warps (a multiple "
                             f"of {WARP} up to 1024 threads), not {threads}")


def _operand(kernel, i):
    """The load index under expr ``i`` when it is a load or a cast of one, else None."""
    e = kernel.exprs[i]
    if e.op == "cast":
        e = kernel.exprs[e.args[0]]
    if e.op == "load" and e.level == 1 and e.dtype.is_floating_point:
        return e.attr
    return None


def contraction(kernel):
    """The Contraction of ``kernel``, or None when it is not one with both an m and an n axis."""
    s = schedule(kernel)
    if len(kernel.reductions) != 1 or s.inner_stores or not s.red_axes:
        return None
    red = kernel.reductions[0]
    if red.combine != "add" or red.identity != 0 or not red.dtype.is_floating_point:
        return None
    e = kernel.exprs[red.value]
    if e.op != "mul" or e.dtype is not red.dtype:
        return None
    loads = [_operand(kernel, x) for x in e.args]
    if None in loads or any(kernel.exprs[x].dtype is not red.dtype for x in e.args):
        return None
    sa, sb = (s.load_strides[j] for j in loads)
    groups = {"batch": [], "m": [], "n": []}
    for ax in s.outer_axes:
        groups["batch" if bool(sa[ax]) == bool(sb[ax]) else "m" if sa[ax] else "n"].append(ax)
    if not groups["m"] or not groups["n"]:
        return None
    return Contraction(e.args[0], e.args[1], loads[0], loads[1], groups["batch"], groups["m"],
                       groups["n"], list(s.red_axes))


def _choose(kernel):
    s = schedule(kernel)
    kept = math.prod(s.domain[a] for a in s.outer_axes)
    if kernel.reductions and s.red_axes:
        c = contraction(kernel)
        if c is not None:
            from .gemm import TILE
            tiles = c.size(s.domain, c.batch) * -(-c.size(s.domain, c.m) // TILE) * \
                -(-c.size(s.domain, c.n) // TILE)
            return Mapping("gemm", tiles, THREADS, c)
        row = math.prod(s.domain[a] for a in s.red_axes)
        if not s.columnwise and row >= WARP_ROW:
            if row >= BLOCK_ROW or kept < FEW_ROWS:
                return Mapping("block", kept, THREADS)
            return Mapping("warp", kept, THREADS)
    return per_thread_mapping(kernel)


def per_thread_mapping(kernel):
    """The ``thread`` Mapping of ``kernel``, whatever mapping_of chooses."""
    s = schedule(kernel)
    return Mapping("thread", math.prod(s.domain[a] for a in s.outer_axes), THREADS)


def mapping_of(kernel):
    """The Mapping of ``kernel`` (cached on it, as its schedule is)."""
    cached = getattr(kernel, "_cuda_mapping", None)
    if cached is None:
        cached = kernel._cuda_mapping = _choose(kernel)
    return cached


def launch_shape(m, threads=None, max_blocks=MAX_BLOCKS):
    """(blocks, threads per block) covering mapping ``m``'s work; ``threads`` may change the
    block size, except a GEMM's (checked by ``check_block``)."""
    if m.kind == "thread":
        threads = max(1, min(threads or m.threads, m.work))
        return max(1, min(max_blocks, -(-m.work // threads))), threads
    threads = m.threads if m.kind == "gemm" else threads or m.threads
    m.check_block(threads)
    per_block = threads // WARP if m.kind == "warp" else 1
    return max(1, min(max_blocks, -(-m.work // per_block))), threads

"""Matrix products on the worker pool: numpy's BLAS called from every thread, one block each.

A BLAS library keeps threads of its own, and OpenBLAS's spin for a while after each call:
running its threads next to the pool's (pool.py) makes the two compete for the cores, and
kernels and products run slower on two cores than on one.  So, while the pool has more than
one thread, a product ``out = a @ b`` (and nn.Linear's ``addmm``) is cut into a grid of blocks,
one per thread (``grid``: rows, columns or both, whichever packs the least), and each block is
one single-threaded BLAS call made by a pool thread (``dg_gemm_f32/f64``, tasks compiled here);
the BLAS library's own thread count is 1 while a compiled program runs (``single_threaded``:
any other numpy product in it runs on the calling thread, next to the pool, not against it).
Measured on the MLP step's products, OpenBLAS's own threads (with the pool asleep) were slower
than this split for every one of them (docs/llvm.md).  ``gemm(None, ...)`` runs the task as one
block on the calling thread at the library's own thread count.

The BLAS functions are those numpy itself uses, found by the library's file (in the process's
memory map on Linux, else through threadpoolctl) and by name (``cblas_sgemm``,
``openblas_set_num_threads``..., possibly with numpy's ``scipy_`` prefix and ``64_`` suffix),
called directly.  Integer arguments are passed as 64-bit values, which both the 32- and the
64-bit integer interfaces read correctly on the little-endian 64-bit targets this is used on.
Where no OpenBLAS is found (another numpy build), ``gemm`` returns None and the caller uses
numpy.

``addmm``'s ``beta * input + alpha * (a @ b)`` is finished by the task, row by row, in the
order numpy computes it eagerly (the product scaled by alpha, then ``input`` or ``input *
beta`` added; ``input`` ignored when beta is 0), so the compiled step matches the eager one.
"""
import contextlib
import ctypes
import os
import struct
import threading

import numpy as np
from llvmlite import ir

from dynograph.runtime.backend import unwatched
from dynograph.runtime.executor import address
from . import jit
from . import pool
from .pool import call_pointer

I64, F32, F64 = ir.IntType(64), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

# the task's argument block, in 64-bit words (the *_BATCH words: bytes between the matrices
# of a batched product)
(GEMM, TRANS_A, TRANS_B, M, N, K, A, LDA, A_STEP, B, LDB, B_STEP, C, LDC, ALPHA, BETA, BIAS,
 BIAS_ROW, BIAS_COL, ROW_BLOCKS, COL_BLOCKS, A_BATCH, B_BATCH, C_BATCH) = range(24)
WORDS = 24
MIN_FLOPS = 1 << 20          # a block of a product does at least this many multiply-adds
BATCH_PIECES_PER_THREAD = 4  # a batch's matrices in pieces: a late worker takes fewer


def _block(mod, name, real, gemm_type):
    """block(args, matrix, r0, r1, c0, c1): rows [r0, r1) and columns [c0, c1) of the product
    number ``matrix`` of the batch, one BLAS call, then the epilogue."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] + [I64] * 5), name)
    fn.attributes.add("nounwind")
    fn.linkage = "internal"
    args, matrix, r0, r1, c0, c1 = fn.args
    blocks = {n: fn.append_basic_block(n) for n in
              ("entry", "row", "col", "body", "bias", "store", "next", "done")}
    b = ir.IRBuilder(blocks["entry"])

    def word(i, ty=I64):
        value = b.load(b.gep(args, [I64(i)], source_etype=I64), typ=I64)
        if ty is PTR:
            return b.inttoptr(value, PTR)
        if ty is F64:
            return b.bitcast(value, F64)
        return value

    def base(i, step):          # the matrix's own operand
        return b.gep(word(i, PTR), [b.mul(matrix, word(step))], source_etype=ir.IntType(8))

    a = b.gep(base(A, A_BATCH), [b.mul(r0, word(A_STEP))], source_etype=ir.IntType(8))
    bb = b.gep(base(B, B_BATCH), [b.mul(c0, word(B_STEP))], source_etype=ir.IntType(8))
    ldc = word(LDC)
    out = base(C, C_BATCH)
    c = b.gep(out, [b.add(b.mul(r0, ldc), c0)], source_etype=real)
    one, zero = ir.Constant(real, 1.0), ir.Constant(real, 0.0)
    call_pointer(b, word(GEMM, PTR), gemm_type,
                 [I64(ROW_MAJOR), word(TRANS_A), word(TRANS_B), b.sub(r1, r0), b.sub(c1, c0),
                  word(K), one, a, word(LDA), bb, word(LDB), zero, c, ldc])
    # the epilogue: c = c * alpha (alpha != 1), then + bias (beta == 1) or + bias * beta (beta != 0)
    alpha = word(ALPHA, F64)
    beta = word(BETA, F64)
    scale = b.fcmp_ordered("!=", alpha, F64(1.0))
    add = b.and_(b.fcmp_unordered("!=", beta, F64(0.0)),
                 b.icmp_unsigned("!=", word(BIAS), I64(0)))
    alpha_r = b.fptrunc(alpha, real) if real is F32 else alpha
    beta_r = b.fptrunc(beta, real) if real is F32 else beta
    beta_one = b.fcmp_ordered("==", beta, F64(1.0))
    bias, bias_row, bias_col = word(BIAS, PTR), word(BIAS_ROW), word(BIAS_COL)
    b.cbranch(b.and_(b.or_(scale, add), b.icmp_signed("<", r0, r1)), blocks["row"],
              blocks["done"])

    b.position_at_end(blocks["row"])
    row = b.phi(I64)
    row.add_incoming(r0, blocks["entry"])
    b.branch(blocks["col"])
    b.position_at_end(blocks["col"])
    col = b.phi(I64)
    col.add_incoming(c0, blocks["row"])
    b.cbranch(b.icmp_signed("<", col, c1), blocks["body"], blocks["next"])
    b.position_at_end(blocks["body"])
    at = b.gep(out, [b.add(b.mul(row, ldc), col)], source_etype=real)
    value = b.load(at, typ=real)
    scaled = b.select(scale, b.fmul(value, alpha_r), value)
    b.cbranch(add, blocks["bias"], blocks["store"])     # (no bias: nothing to read there)
    b.position_at_end(blocks["bias"])
    term = b.load(b.gep(bias, [b.add(b.mul(row, bias_row), b.mul(col, bias_col))],
                        source_etype=real), typ=real)
    term = b.select(beta_one, term, b.fmul(term, beta_r))
    biased = b.fadd(scaled, term)
    b.branch(blocks["store"])
    b.position_at_end(blocks["store"])
    value = b.phi(real)
    value.add_incoming(scaled, blocks["body"])
    value.add_incoming(biased, blocks["bias"])
    b.store(value, at)
    col.add_incoming(b.add(col, I64(1)), blocks["store"])
    b.branch(blocks["col"])
    b.position_at_end(blocks["next"])
    following = b.add(row, I64(1))
    row.add_incoming(following, blocks["next"])
    b.cbranch(b.icmp_signed("<", following, r1), blocks["row"], blocks["done"])
    b.position_at_end(blocks["done"])
    b.ret_void()
    return fn


def _task(mod, name, block):
    """task(args, lo, hi): the blocks [lo, hi) of the products' grids of ROW_BLOCKS x
    COL_BLOCKS, numbered matrix by matrix of the batch, then row by row; block (i, j) has rows
    [m*i/R, m*(i+1)/R) and columns [n*j/C, n*(j+1)/C)."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name)
    fn.attributes.add("nounwind")
    args, lo, hi = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)

    def word(i):
        return b.load(b.gep(args, [I64(i)], source_etype=I64), typ=I64)

    m, n, rows, cols = word(M), word(N), word(ROW_BLOCKS), word(COL_BLOCKS)
    per_matrix = b.mul(rows, cols)
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    piece = b.phi(I64)
    piece.add_incoming(lo, entry)
    matrix, at = b.udiv(piece, per_matrix), b.urem(piece, per_matrix)
    i, j = b.udiv(at, cols), b.urem(at, cols)
    bounds = [b.udiv(b.mul(size, edge), parts) for size, parts, at in ((m, rows, i), (n, cols, j))
              for edge in (at, b.add(at, I64(1)))]
    b.call(block, [args, matrix] + bounds)
    following = b.add(piece, I64(1))
    piece.add_incoming(following, loop)
    b.cbranch(b.icmp_signed("<", following, hi), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _pair_task(mod, name, task):
    """pair(args, lo, hi): two products at once, their argument blocks one after the other;
    pieces [0, P) are the first's blocks (P = its ROW_BLOCKS x COL_BLOCKS), the rest the
    second's."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name)
    fn.attributes.add("nounwind")
    args, lo, hi = fn.args
    entry, loop, first, second, following, done = (
        fn.append_basic_block(n) for n in ("entry", "loop", "first", "second", "next", "done"))
    b = ir.IRBuilder(entry)

    def word(i):
        return b.load(b.gep(args, [I64(i)], source_etype=I64), typ=I64)

    pieces = b.mul(word(ROW_BLOCKS), word(COL_BLOCKS))
    other = b.gep(args, [I64(WORDS)], source_etype=I64)
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    piece = b.phi(I64)
    piece.add_incoming(lo, entry)
    b.cbranch(b.icmp_signed("<", piece, pieces), first, second)
    b.position_at_end(first)
    b.call(task, [args, piece, b.add(piece, I64(1))])
    b.branch(following)
    b.position_at_end(second)
    own = b.sub(piece, pieces)
    b.call(task, [other, own, b.add(own, I64(1))])
    b.branch(following)
    b.position_at_end(following)
    after = b.add(piece, I64(1))
    piece.add_incoming(after, following)
    b.cbranch(b.icmp_signed("<", after, hi), loop, done)
    b.position_at_end(done)
    b.ret_void()


def _module():
    mod = ir.Module(name="dg_gemm")
    mod.triple = jit.triple()
    for real, suffix in ((F32, "f32"), (F64, "f64")):
        gemm = ir.FunctionType(ir.VoidType(), [I64] * 6 + [real, PTR, I64, PTR, I64, real, PTR, I64])
        task = _task(mod, f"dg_gemm_{suffix}", _block(mod, f"dg_gemm_block_{suffix}", real, gemm))
        _pair_task(mod, f"dg_gemm_pair_{suffix}", task)
    return str(mod)


class _Library:
    """numpy's BLAS: its gemm functions and thread count, and the tasks calling them (compiled
    on the first product)."""

    def __init__(self, functions, set_threads, get_threads):
        self.functions = functions          # dtype -> the BLAS gemm's address
        self.set_threads, self.get_threads = set_threads, get_threads
        self._tasks = None

    def tasks(self, pair=False):
        """dtype -> (the address of the task computing its products, a ctypes callable of it
        for this thread); ``pair``: the tasks computing two products at once."""
        if self._tasks is None:
            with _lock, unwatched():
                self._load()
        return self._tasks[pair]

    def _load(self):
        if self._tasks is None:
            obj = jit.runtime_object("dg_gemm", [__file__, pool.__file__], _module)
            names = [f"dg_gemm{kind}_{suffix}" for kind in ("", "_pair") for suffix in ("f32", "f64")]
            tasks = jit.load_all(obj, names)
            self._tasks = {pair: {np.dtype(real): (tasks[name], pool.TASK(tasks[name]))
                                  for real, name in ((np.float32, f"dg_gemm{kind}_f32"),
                                                     (np.float64, f"dg_gemm{kind}_f64"))}
                           for pair, kind in ((False, ""), (True, "_pair"))}


_found = []
_lock = threading.Lock()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have (pool.warm_up's,
    finding the BLAS or compiling the tasks while the parent forked)."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def _blas():
    """The _Library of numpy's BLAS, or None where it cannot be used."""
    if not _found:
        with _lock, unwatched():
            if not _found:
                _found.append(_find())
    return _found[0]


_MAPS = "/proc/self/maps"      # Linux's map of the process's memory, with each file mapped


def _openblas_paths():
    """The files of the OpenBLAS libraries loaded in this process: from Linux's map of the
    process's memory (a fraction of a millisecond), else as threadpoolctl finds them (3-4 ms,
    which a compiled function's first product waited for)."""
    paths = set()
    try:
        with open(_MAPS) as f:
            for line in f:          # address, permissions, offset, device, inode, file
                fields = line.rstrip("\n").split(None, 5)
                if len(fields) == 6 and "openblas" in os.path.basename(fields[5]):
                    paths.add(fields[5])
    except OSError:
        pass
    if paths:
        return sorted(paths)
    try:
        from threadpoolctl import ThreadpoolController
        controllers = ThreadpoolController().select(user_api="blas").lib_controllers
    except Exception:       # noqa: BLE001  (no threadpoolctl, or it cannot inspect this process)
        return []
    # only OpenBLAS is known to take a thread count per call this way
    return [lib.filepath for lib in controllers if lib.internal_api == "openblas"]


def _find():
    if struct.calcsize("P") != 8 or np.little_endian is False:
        return None
    # numpy's own first (scipy may bring another OpenBLAS; its products are not ours)
    for path in sorted(_openblas_paths(), key=lambda path: "numpy" not in path):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        gemms = [_symbol(library, "cblas_sgemm"), _symbol(library, "cblas_dgemm")]
        get, set_ = _symbol(library, "openblas_get_num_threads"), \
            _symbol(library, "openblas_set_num_threads")
        if None in gemms or get is None or set_ is None:
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        set_.restype, set_.argtypes = None, [ctypes.c_int]
        functions = {np.dtype(np.float32): ctypes.cast(gemms[0], ctypes.c_void_p).value,
                     np.dtype(np.float64): ctypes.cast(gemms[1], ctypes.c_void_p).value}
        return _Library(functions, set_, get)
    return None


def _symbol(library, name):
    """The function ``name`` of an OpenBLAS build, whose names may carry numpy's ``scipy_``
    prefix and ``64_`` suffix (64-bit integers), or None."""
    for candidate in (f"scipy_{name}64_", f"{name}64_", name):
        if hasattr(library, candidate):
            return getattr(library, candidate)
    return None


def _operand(x, size):
    """(transposed flag, leading dimension) of a 2-D operand BLAS reads in place, or None."""
    rows, cols = x.strides
    # the stride of a dim of size 1 is never stepped (numpy's broadcast_to sets it to 0)
    if x.shape[1] == 1:
        cols = size
    if x.shape[0] == 1:
        rows = max(1, x.shape[1]) * size
    if cols == size and rows >= max(1, x.shape[1]) * size and rows % size == 0:
        return NO_TRANS, rows // size
    if rows == size and cols >= max(1, x.shape[0]) * size and cols % size == 0:
        return TRANS, cols // size
    return None


# Measured on two cores (docs/llvm.md, fifteenth round): a linear layer's weight gradient
# ``x.t() @ g`` (the MLP's 512 x 784, k = 128) took 616-658 us in two row blocks against
# 698-911 us in two column blocks, the whole MLP step 3-6% less; its forward products
# ``x @ w.t()`` (128 rows) were faster in column blocks.
TRANSPOSED_COST = 2


def grid(m, n, k, threads, a_transposed=False, b_transposed=False):
    """(row blocks, column blocks) of an m x k by k x n product on ``threads`` threads: one
    block per thread, of at least MIN_FLOPS multiply-adds.  Each block's BLAS call packs its
    rows of ``a`` and its columns of ``b`` (m/R + n/C of them per k), so the grid that packs
    the least wins, an operand read transposed counting ``TRANSPOSED_COST`` times: columns for
    few rows, 2-D once the threads outnumber what one side can take (a 128 x 512 product on 16
    threads: 2 x 8 blocks of 64 x 64, where 16 column blocks of 128 x 32 would each pack all of
    ``a``); ties go to row blocks, contiguous in the result."""
    pieces = min(threads, m * n * k // MIN_FLOPS)
    rows_cost = m * (TRANSPOSED_COST if a_transposed else 1)
    cols_cost = n * (TRANSPOSED_COST if b_transposed else 1)
    while pieces > 1:
        shapes = [(rows, pieces // rows) for rows in range(pieces, 0, -1)
                  if pieces % rows == 0 and rows <= m and pieces // rows <= n]
        if shapes:
            return min(shapes, key=lambda rc: rows_cost / rc[0] + cols_cost / rc[1])
        pieces -= 1
    return 1, 1


_blocks = {}            # argument blocks by everything they are made of (a step's products
BLOCKS_KEPT = 256       # see the same buffers on every call)


def gemm(workers, a, b, out, bias=None, alpha=1.0, beta=1.0):
    """``out = a @ b`` (with ``bias``: ``beta * bias + alpha * (a @ b)``, addmm) on the pool
    ``workers`` (None: on this thread, at numpy's BLAS's own thread count); returns ``out``, or
    None where this path does not apply.  3-D operands (without ``bias``): the batch of
    products ``out[i] = a[i] @ b[i]`` (bmm), whole matrices spread over the pool's threads,
    where the batch has ``BATCH_PIECES_PER_THREAD`` matrices a thread or more (numpy's
    matmul makes one BLAS call per matrix, at the BLAS's thread count: on a short batch of
    large matrices, as fast; on a long batch of small ones, each call runs on one thread)."""
    library = _blas()
    if library is None or (out.ndim == 3 and (workers is None or out.shape[0] <
                                              workers.threads * BATCH_PIECES_PER_THREAD)):
        return None
    dtype = out.dtype
    block = _kept_arguments(library, a, b, out, bias, alpha, beta,
                            1 if workers is None else workers.threads)
    if block is None:
        return None
    task, call = library.tasks()[dtype]
    pieces = int(block[ROW_BLOCKS] * block[COL_BLOCKS]) * (out.shape[0] if out.ndim == 3 else 1)
    if workers is None:
        call(address(block), 0, pieces)
        return out
    parts = pieces if out.ndim == 2 else min(pieces, workers.threads * BATCH_PIECES_PER_THREAD)
    workers.lib.add(task, call)         # (run calls it here when the pool is busy)
    before = library.get_threads()
    if before != 1:         # (inside a program it is 1 already: Backend.running)
        library.set_threads(1)
    try:
        workers.run(task, address(block), pieces, parts)
    finally:
        if before != 1:
            library.set_threads(before)
    return out


def bind(workers, products):
    """A launcher of one product, or of two independent ones at once, each on its share of the
    pool's threads (a product alone on one core runs faster than its halves on two: every
    block packs its operands); each product is ``gemm``'s arguments ``(a, b, out, bias, alpha,
    beta)``, 2-D.  None where BLAS cannot run them.  The launcher runs them on the argument
    blocks made now (a program's step sees the same buffers at every call) and returns True;
    False, having run nothing, once the process' pool is another.  For programs, which run with
    numpy's BLAS on one thread (``single_threaded``)."""
    library = _blas()
    if library is None or workers is None or len(products) > workers.threads:
        return None
    dtype = products[0][2].dtype
    if any(p[2].dtype != dtype or p[2].ndim != 2 for p in products):
        return None
    # the threads shared out, the first product taking what does not divide evenly
    shares = [workers.threads // len(products)] * len(products)
    shares[0] += workers.threads - sum(shares)
    blocks = [_kept_arguments(library, *p, share) for p, share in zip(products, shares)]
    if any(x is None for x in blocks):
        return None
    block = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    task, call = library.tasks(pair=len(blocks) == 2)[dtype]
    workers.lib.add(task, call)         # (run calls it here when the pool is busy)
    pieces = sum(int(x[ROW_BLOCKS] * x[COL_BLOCKS]) for x in blocks)
    at = address(block)

    def launch():
        if pool.pool() is not workers:
            return False
        workers.run(task, at, pieces, pieces)
        return True
    launch.block = block                # (its memory is what the tasks read)
    return launch


def _kept_arguments(library, a, b, out, bias, alpha, beta, threads):
    """The argument block of ``gemm``'s task for these operands on ``threads`` threads, kept
    between calls by everything it is made of; None where BLAS cannot run the product."""
    dtype = out.dtype
    if dtype not in library.functions or not out.flags.c_contiguous or a.dtype != dtype or \
            b.dtype != dtype:
        return None
    key = (dtype, threads, address(a), a.shape, a.strides, address(b), b.shape, b.strides,
           address(out), out.shape, alpha, beta) + \
        (() if bias is None else (bias.dtype, address(bias), bias.shape, bias.strides))
    block = _blocks.get(key)
    if block is None:
        block = _arguments(library, a, b, out, bias, alpha, beta, threads)
        if block is None:
            return None
        if len(_blocks) >= BLOCKS_KEPT:
            _blocks.clear()
        _blocks[key] = block
    return block


def _arguments(library, a, b, out, bias, alpha, beta, threads):
    """The task's argument block for these operands, or None where BLAS cannot read them."""
    dtype = out.dtype
    size = dtype.itemsize
    batch = a.shape[0] if a.ndim == 3 else 1
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if m == 0 or n == 0 or k == 0 or batch == 0 or (batch > 1 and bias is not None):
        return None
    layouts = [_operand(x, size) for x in ((a, b) if a.ndim == 2 else (a[0], b[0]))]
    if None in layouts:
        return None
    (ta, lda), (tb, ldb) = layouts
    words = [0] * WORDS         # (a list, made an array once: item assignments cost more)
    words[GEMM], words[TRANS_A], words[TRANS_B] = library.functions[dtype], ta, tb
    words[M], words[N], words[K], words[LDA], words[LDB], words[LDC] = m, n, k, lda, ldb, n
    if a.ndim == 3:
        if a.strides[0] % size or b.strides[0] % size:
            return None
        words[A_BATCH], words[B_BATCH], words[C_BATCH] = a.strides[0], b.strides[0], out.strides[0]
    words[ROW_BLOCKS], words[COL_BLOCKS] = (1, 1) if a.ndim == 3 else \
        grid(m, n, k, threads, ta == TRANS, tb == TRANS)
    words[A], words[B], words[C] = address(a), address(b), address(out)
    words[A_STEP] = (lda if ta == NO_TRANS else 1) * size          # bytes per row of a @ b
    words[B_STEP] = (1 if tb == NO_TRANS else ldb) * size          # bytes per column
    words[ALPHA], words[BETA] = struct.unpack("qq", struct.pack("dd", alpha, beta))
    if bias is not None:
        if bias.dtype != dtype or any(s % size for s in bias.strides):
            return None
        view = np.broadcast_to(bias, out.shape)
        words[BIAS] = address(view)
        words[BIAS_ROW], words[BIAS_COL] = (s // size for s in view.strides)
    return np.array(words, np.int64)


@contextlib.contextmanager
def single_threaded():
    """numpy's BLAS on one thread (its thread count restored after)."""
    library = _blas()
    threads = 1 if library is None else library.get_threads()
    if threads != 1:
        library.set_threads(1)
    try:
        yield
    finally:
        if threads != 1:
            library.set_threads(threads)


def build():
    """Compile the product tasks now where products run on the pool (pool.warm_up)."""
    library = _blas()
    if library is not None:
        library.tasks()


def usable():
    """Whether products run on the pool here (numpy's BLAS was found)."""
    return _blas() is not None

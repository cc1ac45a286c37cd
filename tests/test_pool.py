"""The llvm backend's worker pool (compiler/llvm/pool.py) and its matrix products on numpy's
BLAS (compiler/llvm/blas.py): every piece of a launch runs exactly once, whatever the thread
count, the piece count, a fork or a second launching thread; products equal numpy's."""
import ctypes
import os
import threading
import time

import numpy as np
import pytest
from llvmlite import ir

import dynograph as dg
from dynograph.compiler.llvm import blas, jit, pool
from dynograph.runtime import threads
from dynograph.runtime.backend import unwatched

I64, PTR = ir.IntType(64), ir.PointerType()


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(threads, "_count", [3])
    yield pool.pool()


def _count_kernel():
    """A task as kernels are (count(args, begin, end), args[0] = out): out[i] += 1 for i in
    [begin, end), with some work per element (so that pieces overlap in time)."""
    mod = ir.Module("count")
    mod.triple = jit.triple()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), "count")
    entry, loop, spin, step, done = (fn.append_basic_block(n) for n in
                                     ("entry", "loop", "spin", "step", "done"))
    b = ir.IRBuilder(entry)
    args, begin, end = fn.args
    out = b.load(args, typ=PTR)
    b.cbranch(b.icmp_signed("<", begin, end), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(begin, entry)
    b.branch(spin)
    b.position_at_end(spin)
    j = b.phi(I64)
    j.add_incoming(I64(0), loop)
    nxt = b.add(j, I64(1))
    j.add_incoming(nxt, spin)
    at = b.gep(out, [i], source_etype=I64)
    b.store(b.add(b.load(at, typ=I64), I64(0)), at)     # a volatile-free busy loop on memory
    b.cbranch(b.icmp_signed("<", nxt, I64(200)), spin, step)
    b.position_at_end(step)
    b.store(b.add(b.load(at, typ=I64), I64(1)), at)
    following = b.add(i, I64(1))
    i.add_incoming(following, step)
    b.cbranch(b.icmp_signed("<", following, end), loop, done)
    b.position_at_end(done)
    b.ret_void()
    address = jit.load_all(jit.emit_object(str(mod), "count"), ["count"])["count"]
    task = pool.TASK(address)
    task.address = address
    return task


COUNT = []


def _launch(workers, extent, parts):
    if not COUNT:
        COUNT.append(_count_kernel())
    out = np.zeros(max(extent, 1), np.int64)
    workers.run_kernel(COUNT[0], (ctypes.c_void_p * 1)(out.ctypes.data), extent, parts)
    return out[:extent]


def test_every_piece_runs_once_and_the_workers_take_some(three_threads):
    rng = np.random.default_rng(0)
    before = three_threads.state[pool.HELPED]
    for _ in range(300):
        extent = int(rng.integers(0, 3000))
        parts = int(rng.integers(1, 80))
        assert (_launch(three_threads, extent, parts) == 1).all(), (extent, parts)
    # the workers run pieces too (on a loaded machine they may wake after the caller took them
    # all for a while: keep launching)
    deadline = time.monotonic() + 30
    while three_threads.state[pool.HELPED] == before and time.monotonic() < deadline:
        assert (_launch(three_threads, 3000, 64) == 1).all()
    assert three_threads.state[pool.HELPED] > before


def test_the_pool_follows_the_thread_count(monkeypatch):
    monkeypatch.setattr(threads, "_count", [1])
    assert pool.pool() is None
    dg.set_num_threads(3)
    try:
        first = pool.pool()
        assert first.threads == 3 and len(first.workers) == 2 and pool.pool() is first
        dg.set_num_threads(2)
        second = pool.pool()
        assert second.threads == 2 and not any(t.is_alive() for t in first.workers)
        assert (_launch(second, 1000, 8) == 1).all()
    finally:
        dg.set_num_threads(1)
    assert pool.pool() is None


def test_two_python_threads_launch_at_once(three_threads):
    results, errors = [], []

    def launch():
        try:
            for _ in range(50):
                results.append(bool((_launch(three_threads, 2000, 6) == 1).all()))
        except Exception as e:     # noqa: BLE001
            errors.append(e)
    others = [threading.Thread(target=launch) for _ in range(2)]
    for t in others:
        t.start()
    launch()
    for t in others:
        t.join()
    assert not errors and len(results) == 150 and all(results)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_pool(three_threads):
    assert (_launch(three_threads, 500, 4) == 1).all()
    child = os.fork()
    if child == 0:      # the child has no workers of the parent's: it must not wait for them
        ok = pool.pool() is not three_threads and (_launch(pool.pool(), 500, 4) == 1).all()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0


def test_a_kernel_of_the_compiler_split_into_pieces_matches_numpy(three_threads, monkeypatch):
    from dynograph.compiler.llvm import backend
    monkeypatch.setattr(backend, "PIECE_MIN", 1 << 10)
    x = np.random.default_rng(1).standard_normal((300, 257)).astype(np.float32)

    @dg.compile(backend="llvm", fullgraph=True)
    def f(t):
        return (t.exp() * 2 - 1).sum(1)
    assert np.allclose(f(dg.from_numpy(x)).numpy(), (np.exp(x) * 2 - 1).sum(1), rtol=1e-4)


# ---------------------------------------------------------------- products

needs_blas = pytest.mark.skipif(not blas.usable(), reason="numpy's BLAS is not OpenBLAS here")


def _operand(rng, shape, dtype, layout):
    if layout == "T":
        return np.ascontiguousarray(rng.standard_normal(shape[::-1]).astype(dtype)).T
    if layout == "padded":      # rows longer than the matrix (a slice of a wider one)
        return rng.standard_normal((shape[0], shape[1] + 3)).astype(dtype)[:, :shape[1]]
    return rng.standard_normal(shape).astype(dtype)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 300, 2), (200, 64, 33), (5, 40, 900)])
@pytest.mark.parametrize("la, lb", [("C", "C"), ("T", "C"), ("C", "T"), ("padded", "T")])
def test_products_equal_numpy(three_threads, dtype, m, k, n, la, lb):
    rng = np.random.default_rng(m * n + k)
    a, b = _operand(rng, (m, k), dtype, la), _operand(rng, (k, n), dtype, lb)
    out = np.full((m, n), np.nan, dtype)
    assert blas.gemm(three_threads, a, b, out) is out
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol * k)


@needs_blas
@pytest.mark.parametrize("bias_shape", [(33,), (1, 33), (200, 33), (200, 1), ()])
@pytest.mark.parametrize("alpha, beta", [(1, 1), (0.5, 1), (1, -2.0), (3, 0)])
def test_addmm_products_finish_like_numpy(three_threads, bias_shape, alpha, beta):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((200, 64)).astype(np.float32), \
        rng.standard_normal((64, 33)).astype(np.float32)
    bias = rng.standard_normal(bias_shape).astype(np.float32)
    if beta == 0:
        bias[...] = np.nan          # ignored, as torch ignores input when beta is 0
    out = np.empty((200, 33), np.float32)
    assert blas.gemm(three_threads, a, b, out, bias, alpha, beta) is out
    np.testing.assert_allclose(out, addmm_expected(a, b, bias, alpha, beta), rtol=1e-5, atol=1e-4)


def addmm_expected(a, b, bias, alpha, beta):
    """alpha * a @ b + beta * bias in numpy, the bias ignored (NaN or not) where beta is 0."""
    expect = a @ b
    if alpha != 1:
        expect *= alpha
    if beta != 0:
        expect += bias if beta == 1 else bias * beta
    return expect


def _batch(rng, shape, dtype, layout):
    """A (batch, rows, cols) operand: each matrix in ``layout``, the batch contiguous, from a
    permuted array (the batch dim inside) or expanded (stride 0)."""
    if layout == "expanded":
        return np.broadcast_to(rng.standard_normal((1, *shape[1:])).astype(dtype), shape)
    if layout == "batch inside":
        return np.moveaxis(rng.standard_normal((shape[1], shape[0], shape[2])).astype(dtype), 1, 0)
    return np.stack([_operand(rng, shape[1:], dtype, layout) for _ in range(shape[0])]) \
        if layout == "C" else np.moveaxis(np.stack(
            [_operand(rng, shape[1:], dtype, layout).T for _ in range(shape[0])]), 1, 2)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch, m, k, n", [(12, 1, 1, 1), (13, 64, 16, 64), (40, 7, 30, 2)])
@pytest.mark.parametrize("la, lb", [("C", "C"), ("T", "C"), ("C", "T"), ("batch inside", "T"),
                                    ("expanded", "C"), ("C", "expanded")])
def test_batched_products_equal_numpy(three_threads, dtype, batch, m, k, n, la, lb):
    rng = np.random.default_rng(batch + m * n + k)
    a, b = _batch(rng, (batch, m, k), dtype, la), _batch(rng, (batch, k, n), dtype, lb)
    out = np.full((batch, m, n), np.nan, dtype)
    assert blas.gemm(three_threads, a, b, out) is out
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol * k)


@needs_blas
def test_short_batches_are_left_to_numpy(three_threads):
    a, b = np.ones((11, 4, 5), np.float32), np.ones((11, 5, 6), np.float32)
    assert blas.gemm(three_threads, a, b, np.empty((11, 4, 6), np.float32)) is None  # < 4 x 3
    assert blas.gemm(None, a, b, np.empty((11, 4, 6), np.float32)) is None


@needs_blas
def test_eager_bmm_runs_on_the_pool_and_equals_numpy(three_threads, monkeypatch):
    calls = []
    real = blas.gemm
    monkeypatch.setattr(blas, "gemm", lambda *args: calls.append(args[1].shape) or real(*args))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64, 16)).astype(np.float32)
    b = rng.standard_normal((128, 64, 16)).astype(np.float32)
    out = dg.bmm(dg.from_numpy(a), dg.from_numpy(b).transpose(1, 2))
    np.testing.assert_allclose(out.numpy(), a @ b.transpose(0, 2, 1), rtol=1e-5, atol=1e-4)
    assert calls == [(128, 64, 16)]


@needs_blas
def test_layouts_blas_cannot_read_are_left_to_numpy(three_threads):
    a = np.ones((8, 16), np.float32)[:, ::2]        # no unit stride
    b = np.ones((8, 4), np.float32)
    assert blas.gemm(three_threads, a, b, np.empty((8, 4), np.float32)) is None
    assert blas.gemm(three_threads, b.T, a, np.empty((4, 8), np.float64)) is None   # dtype


@needs_blas
def test_blas_runs_on_one_thread_inside_and_is_restored_after():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def count():        # numpy's BLAS (scipy may bring one of its own)
        return [p["num_threads"] for p in threadpoolctl.threadpool_info()
                if p["user_api"] == "blas" and "numpy" in p["filepath"]]
    before = count()
    with blas.single_threaded():
        assert set(count()) == {1}
    assert count() == before


def test_compiled_linear_layers_on_the_pool_match_eager(three_threads, monkeypatch):
    calls = []
    real = blas.gemm

    def gemm(*args):
        with unwatched():           # (the trace runs products too: this list is not the program's)
            calls.append(args[1].shape)
        return real(*args)
    monkeypatch.setattr(blas, "gemm", gemm)
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(300, 200), dg.nn.ReLU(), dg.nn.Linear(200, 10))
    x = dg.randn(64, 300)

    def loss(inp):
        return model(inp).square().mean()
    compiled = dg.compile(loss, backend="llvm", fullgraph=True)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).item(), loss(x).item(), rtol=1e-5)
    assert (64, 300) in calls       # the first layer's addmm ran on the pool

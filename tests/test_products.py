"""Matrix products on the worker pool (compiler/llvm/blas.py): the grid of blocks a product is
cut into, products on pools of several sizes (2-D grids included) and on the calling thread,
against numpy and torch, and the argument blocks kept between calls."""
import os

import numpy as np
import pytest

import dynograph as dg
from tools.bench.workloads.training import classifier_step
from dynograph.compiler.llvm import blas, pool
from dynograph.runtime import threads
from test_pool import addmm_expected

needs_blas = pytest.mark.skipif(not blas.usable(), reason="numpy's BLAS is not OpenBLAS here")


def _pool(monkeypatch, n):
    monkeypatch.setattr(threads, "_count", [n])
    return pool.pool()


def _operand(rng, shape, dtype, layout):
    if layout == "T":
        return np.ascontiguousarray(rng.standard_normal(shape[::-1]).astype(dtype)).T
    if layout == "padded":      # rows longer than the matrix (a slice of a wider one)
        return rng.standard_normal((shape[0], shape[1] + 5)).astype(dtype)[:, :shape[1]]
    return rng.standard_normal(shape).astype(dtype)


def _tolerance(dtype, k):
    tol = 1e-5 if dtype == np.float32 else 1e-12
    return {"rtol": tol, "atol": tol * k}


# ---------------------------------------------------------------- the grid

@pytest.mark.parametrize("m, n, k, threads, transposed, expect", [
    (128, 512, 784, 2, "b", (1, 2)),    # few rows: column blocks (the MLP's forward product)
    (512, 128, 784, 2, "", (2, 1)),
    (512, 512, 128, 2, "", (2, 1)),     # a tie: row blocks, contiguous in the result
    (512, 784, 128, 2, "", (1, 2)),
    (512, 784, 128, 2, "a", (2, 1)),    # the MLP's grad-weight product: a transposed counts double
    (64, 120, 400, 2, "b", (1, 2)),     # the CIFAR CNN's first linear layer
    (128, 512, 784, 16, "", (2, 8)),    # 64 x 64 blocks, not 16 thin column blocks
    (512, 784, 128, 16, "", (4, 4)),
    (128, 512, 784, 1, "", (1, 1)),
    (64, 64, 64, 8, "", (1, 1)),        # too small to split at all
    (1, 1, 1 << 24, 4, "", (1, 1)),     # one element: nothing to cut
    (3, 1000, 4000, 4, "", (1, 4)),
])
def test_the_grid_packs_the_least(m, n, k, threads, transposed, expect):
    assert blas.grid(m, n, k, threads, "a" in transposed, "b" in transposed) == expect


@pytest.mark.parametrize("m, n, k", [(7, 900, 300), (2, 3, 1 << 20), (100, 100, 500),
                                     (5000, 1, 400), (129, 257, 301)])
@pytest.mark.parametrize("threads", [2, 3, 5, 7, 16, 64])
def test_every_grid_fits_the_product_and_the_threads(m, n, k, threads):
    rows, cols = blas.grid(m, n, k, threads)
    assert 1 <= rows <= m and 1 <= cols <= n and rows * cols <= threads
    if rows * cols > 1:
        assert m * n * k // (rows * cols) >= blas.MIN_FLOPS


# ---------------------------------------------------------------- products

SHAPES = [(129, 301, 257), (1000, 3, 517), (17, 1200, 90), (64, 64, 64)]


@needs_blas
@pytest.mark.parametrize("threads_", [2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("la, lb", [("C", "C"), ("T", "C"), ("C", "T"), ("T", "T"),
                                    ("padded", "padded")])
def test_products_on_pools_equal_numpy(monkeypatch, threads_, dtype, m, k, n, la, lb):
    workers = _pool(monkeypatch, threads_)
    rng = np.random.default_rng(m + 7 * n + k)
    a, b = _operand(rng, (m, k), dtype, la), _operand(rng, (k, n), dtype, lb)
    out = np.full((m, n), np.nan, dtype)
    assert blas.gemm(workers, a, b, out) is out
    np.testing.assert_allclose(out, a @ b, **_tolerance(dtype, k))


@needs_blas
def test_a_two_dimensional_grid_covers_every_block(monkeypatch):
    workers = _pool(monkeypatch, 4)
    m, k, n = 130, 400, 150
    assert blas.grid(m, n, k, 4) == (2, 2)
    rng = np.random.default_rng(1)
    a, b = _operand(rng, (m, k), np.float64, "C"), _operand(rng, (k, n), np.float64, "T")
    bias = rng.standard_normal(n)
    out = np.full((m, n), np.nan)
    helped = workers.state[pool.HELPED]
    assert blas.gemm(workers, a, b, out, bias, 0.5, -2.0) is out
    np.testing.assert_allclose(out, (a @ b) * 0.5 + bias * -2.0, rtol=1e-12, atol=1e-10)
    assert workers.state[pool.HELPED] >= helped      # (the workers may or may not take blocks)


@needs_blas
@pytest.mark.parametrize("threads_", [3, 4])
@pytest.mark.parametrize("bias_shape", [(257,), (1, 257), (129, 257), (129, 1), ()])
@pytest.mark.parametrize("alpha, beta", [(1, 1), (0.5, 1), (1, -2.0), (3, 0)])
def test_addmm_on_grids_finishes_like_numpy(monkeypatch, threads_, bias_shape, alpha, beta):
    workers = _pool(monkeypatch, threads_)
    rng = np.random.default_rng(3)
    a = _operand(rng, (129, 301), np.float32, "C")
    b = _operand(rng, (301, 257), np.float32, "T")
    bias = rng.standard_normal(bias_shape).astype(np.float32)
    if beta == 0:
        bias[...] = np.nan          # ignored, as torch ignores input when beta is 0
    out = np.empty((129, 257), np.float32)
    assert blas.gemm(workers, a, b, out, bias, alpha, beta) is out
    np.testing.assert_allclose(out, addmm_expected(a, b, bias, alpha, beta), rtol=1e-5, atol=1e-4)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la, lb", [("C", "T"), ("T", "C"), ("padded", "C")])
def test_products_on_the_calling_thread_equal_numpy(dtype, la, lb):
    rng = np.random.default_rng(5)
    a, b = _operand(rng, (129, 301), dtype, la), _operand(rng, (301, 67), dtype, lb)
    bias = rng.standard_normal(67).astype(dtype)
    out = np.full((129, 67), np.nan, dtype)
    assert blas.gemm(None, a, b, out) is out
    np.testing.assert_allclose(out, a @ b, **_tolerance(dtype, 301))
    assert blas.gemm(None, a, b, out, bias, 2.0, 1) is out
    np.testing.assert_allclose(out, (a @ b) * 2.0 + bias, **_tolerance(dtype, 301))


@needs_blas
def test_operands_blas_cannot_take_are_left_to_numpy(monkeypatch):
    workers = _pool(monkeypatch, 2)
    a = np.ones((300, 200), np.float32)
    assert blas.gemm(workers, a, a.T.astype(np.float64), np.empty((300, 300), np.float32)) \
        is None                                                 # mixed dtypes
    assert blas.gemm(workers, a, a.T, np.empty((300, 300), np.float32).T) is None   # out
    assert blas.gemm(None, a[:, ::2], a[:100].T, np.empty((300, 300), np.float32)) is None
    assert blas.gemm(workers, a[:0], a.T, np.empty((0, 300), np.float32)) is None   # empty


@needs_blas
def test_products_on_more_threads_than_cores(monkeypatch):
    """Workers that wait for a core (and yield theirs while they spin) still run every block
    exactly once."""
    workers = _pool(monkeypatch, threads.usable_cores() + 2)
    assert workers.state[pool.YIELD] > 0 and workers.state[pool.YIELD] & \
        (workers.state[pool.YIELD] + 1) == 0                    # a mask of the pause count
    rng = np.random.default_rng(11)
    a = _operand(rng, (300, 500), np.float32, "T")
    b = _operand(rng, (500, 400), np.float32, "C")
    out = np.empty((300, 400), np.float32)
    for _ in range(20):
        out[...] = np.nan
        blas.gemm(workers, a, b, out)
        np.testing.assert_allclose(out, a @ b, **_tolerance(np.float32, 500))


# ---------------------------------------------------------------- kept argument blocks

@needs_blas
@pytest.mark.parametrize("threads_", [None, 2])
def test_a_kept_block_reads_the_operands_current_values(monkeypatch, threads_):
    workers = None if threads_ is None else _pool(monkeypatch, threads_)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((200, 300)), rng.standard_normal((300, 100))
    bias = rng.standard_normal(100)
    out = np.empty((200, 100))
    for _ in range(3):          # the same buffers each time, new values (a training step's)
        a[...] = rng.standard_normal(a.shape)
        bias[...] = rng.standard_normal(bias.shape)
        blas.gemm(workers, a, b, out, bias)
        np.testing.assert_allclose(out, a @ b + bias, rtol=1e-12, atol=1e-10)
    # the same shapes elsewhere, a view of the same memory, other scalars: their own blocks
    a2, out2 = a.copy() * 2, np.empty_like(out)
    blas.gemm(workers, a2, b, out2, bias)
    np.testing.assert_allclose(out2, a2 @ b + bias, rtol=1e-12, atol=1e-10)
    blas.gemm(workers, a[1:], b, out[1:], bias, 1, 0.5)
    np.testing.assert_allclose(out[1:], a[1:] @ b + bias * 0.5, rtol=1e-12, atol=1e-10)


@needs_blas
def test_the_kept_blocks_are_bounded(monkeypatch):
    monkeypatch.setattr(blas, "_blocks", {})
    a = np.ones((4, 4))
    for i in range(blas.BLOCKS_KEPT + 10):
        blas.gemm(None, a, a, np.empty((4, 4)), alpha=float(i))
    assert len(blas._blocks) <= blas.BLOCKS_KEPT


# ---------------------------------------------------------------- against torch

@needs_blas
@pytest.mark.parametrize("threads_", [1, 2, 4])
def test_a_compiled_mlp_step_on_grids_matches_torch(monkeypatch, threads_):
    torch = pytest.importorskip("torch")
    _pool(monkeypatch, threads_)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 200)).astype(np.float32)
    y = rng.integers(0, 10, 96)

    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(200, 256), lib.nn.ReLU(), lib.nn.Linear(256, 130),
                                 lib.nn.ReLU(), lib.nn.Linear(130, 10))
    theirs = make(torch)
    ours = make(dg)
    ours.load_state_dict({k: dg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})

    def steps(lib, model, compile):
        step = classifier_step(model, lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), lib)
        return compile(step) if compile else step
    step = steps(dg, ours, lambda f: dg.compile(f, backend="llvm"))
    step_t = steps(torch, theirs, None)
    xs, ys = dg.from_numpy(x), dg.from_numpy(y)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(4):          # the trace, then replays of the compiled program
        np.testing.assert_allclose(step(xs, ys).item(), step_t(xt, yt).item(), rtol=1e-4)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=name)
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_the_blas_lock_is_held_gets_a_free_one():
    """pool.warm_up finds the BLAS and compiles the product tasks on a helper thread: a fork
    in the meantime must not leave the child a lock that no thread of its own will release."""
    with blas._lock:
        child = os.fork()
        if child == 0:
            ok = blas._lock.acquire(timeout=5)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's memory map")
def test_the_blas_found_in_the_memory_map_is_numpys_as_threadpoolctl_finds_it(monkeypatch, tmp_path):
    """blas._find reads the OpenBLAS libraries from the process's memory map (threadpoolctl
    took 3-4 ms of a first call for this): the library it uses is the one threadpoolctl
    reports for numpy, and a process without that map still finds it through threadpoolctl."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    reported = [lib.filepath for lib in threadpoolctl.ThreadpoolController()
                .select(user_api="blas").lib_controllers if lib.internal_api == "openblas"]
    if not reported:
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    found = blas._openblas_paths()
    assert {os.path.realpath(p) for p in reported} <= {os.path.realpath(p) for p in found}
    monkeypatch.setattr(blas, "_MAPS", os.path.join(str(tmp_path), "no-such-map"))
    fallback = blas._openblas_paths()
    assert fallback == reported
    library = blas._find()
    assert library is not None and library.get_threads() >= 1


@needs_blas
def test_eager_products_do_not_wait_for_the_pool_being_built(monkeypatch):
    """While warm_up's thread builds the pool and the product tasks (a cold start compiles
    them), a compiled function's first call traces on: its products are numpy's meanwhile
    (waiting cost a cold first call 80-140 ms), on one BLAS thread as in a program."""
    from dynograph.compiler.llvm.backend import LLVM
    monkeypatch.setattr(pool, "_warming", [True])
    monkeypatch.setattr(pool, "_built", [])
    assert pool.building()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
    assert LLVM.matmul(a, b, np.empty((300, 100))) is None
    np.testing.assert_allclose(dg.mm(dg.tensor(a), dg.tensor(b)).numpy(), a @ b, rtol=1e-12)
    # a child forked during the build has no warm-up thread: it builds when it needs to
    monkeypatch.setattr(pool, "_lock", pool._lock)
    monkeypatch.setattr(pool, "_current", [])
    pool._forget()
    assert not pool.building()


@needs_blas
def test_a_first_call_traces_with_numpys_blas_on_one_thread(monkeypatch):
    """numpy's products in a trace (here all of them: the pool is being built) run on one BLAS
    thread, as in a program, and the thread count is put back after."""
    monkeypatch.setattr(threads, "count", lambda: 2)
    seen = []
    real = np.dot

    def dot(*args, **kwargs):
        seen.append(blas._blas().get_threads())
        return real(*args, **kwargs)
    monkeypatch.setattr(pool, "_warming", [True])
    monkeypatch.setattr(pool, "_built", [])
    monkeypatch.setattr("dynograph.compiler.ops.linalg.np.dot", dot)
    before = blas._blas().get_threads()

    @dg.compile
    def f(x, w):
        return (x @ w).sum()
    f(dg.randn(300, 200), dg.randn(200, 100))
    assert seen and set(seen) == {1}
    assert blas._blas().get_threads() == before
    # a step that traces ahead (SGD's dampened momentum) does so on one thread too
    w = dg.randn(200, 100, requires_grad=True)
    opt = dg.optim.SGD([w], lr=0.1, momentum=0.9, dampening=0.5)

    @dg.compile
    def step(x):
        opt.zero_grad()
        loss = (x @ w).square().sum()
        loss.backward()
        opt.step()
        return loss
    del seen[:]
    step(dg.randn(300, 200))
    assert "look-ahead" in {kind for kind, _ in step.events}
    assert len(seen) >= 4 and set(seen) == {1}
    assert blas._blas().get_threads() == before


@pytest.mark.parametrize("alpha, beta", [(1, 1), (0.5, -2.0), (1, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_addmm_without_a_backend_product_equals_the_impl(dtype, alpha, beta):
    """Where the backend has no product (one thread), a program's addmm is numpy's product
    into its buffer, then the impl's scaling and sum: bit for bit eager's."""
    from dynograph.compiler.lowering.direct import addmm_into
    from dynograph.compiler.ops.linalg import _addmm
    rng = np.random.default_rng(2)
    bias, a, b = (rng.standard_normal(s).astype(dtype) for s in ((40,), (30, 50), (50, 40)))
    out = np.full((30, 40), np.nan, dtype)
    assert addmm_into(None, [bias, a, b], {"alpha": alpha, "beta": beta}, out,
                      lambda kernel: None) is out
    np.testing.assert_array_equal(out, _addmm(bias, a, b, beta=beta, alpha=alpha))

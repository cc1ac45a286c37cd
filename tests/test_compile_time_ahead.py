"""The kernels of the direct rules (convolutions, max pooling, their padded copies) are described
before a program's first run and compiled on helper threads with the fused kernels
(compiler/lowering/ahead.py): the same kernels the run then takes."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dynograph as dg
from tools.bench.workloads.training import classifier_step
from dynograph.compiler.llvm.backend import LLVM
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.lowering import ahead, conv, pool
from dynograph.runtime import backend


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    backend.settle_compilations()
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


def _cnn_step():
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Conv2d(3, 4, 3, padding=1), dg.nn.ReLU(), dg.nn.MaxPool2d(2),
                             dg.nn.Flatten(), dg.nn.Linear(4 * 4 * 4, 5))
    opt = dg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    return model, classifier_step(model, opt)


def _data():
    rng = np.random.default_rng(0)
    return (dg.from_numpy(rng.standard_normal((2, 3, 8, 8)).astype(np.float32)),
            dg.from_numpy(rng.integers(0, 5, 2)))


def test_the_direct_kernels_are_described_ahead_as_the_run_compiles_them(fresh_cache,
                                                                         two_threads):
    _, step = _cnn_step()
    compiled = dg.compile(step)
    x, y = _data()
    compiled(x, y)
    entry = compiled.entries[-1]
    direct = []
    ahead.plans_ahead(entry.graph, entry.read_inputs([x, y]), None, entry.writable, LLVM,
                      direct=direct)
    names = {k.name for k in direct}
    assert {"conv", "max_pool", "max_pool_backward", "pad"} <= names, names
    loss = compiled(x, y)                   # the first replay runs them
    assert compiled.hits == 1
    assert all(("llvm", k.key) in backend._loaded for k in direct)
    assert np.isfinite(loss.numpy())


def test_a_rules_plans_ahead_are_kept_nowhere():
    x = np.zeros((2, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    kept = len(conv._PLANS), len(pool._PLANS)
    kernels = []

    class Collect:
        backend, matmul = LLVM, None

        def __call__(self, kernel):
            kernels.append(kernel)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, transposed=False,
                 output_padding=(0, 0))
    conv.run_convolution.plans((x, w, None), attrs, Collect())
    pool.run_max_pool.plans((x,), dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0),
                                       dilation=(1, 1), ceil_mode=False), Collect())
    assert [k.name for k in kernels] == ["pad", "conv", "max_pool"]
    assert (len(conv._PLANS), len(pool._PLANS)) == kept


def test_the_kernels_of_a_fused_node_run_node_by_node_are_described_ahead(fresh_cache,
                                                                         two_threads,
                                                                         monkeypatch):
    """A fused group that no kernel covers whole runs node by node, a kernel for each node;
    those are described ahead too.  (A reshape merging dims of a permuted argument is such a
    group once its kernel may not read a row-major copy of the argument.)"""
    from dynograph.compiler.lowering import program
    monkeypatch.setattr(program, "_from_copies", lambda *args: (None, ()))
    dg.manual_seed(0)
    lin, norm = dg.nn.Linear(4, 6), dg.nn.LayerNorm(6)
    opt = dg.optim.SGD(list(lin.parameters()) + list(norm.parameters()), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = norm(lin(x)).tanh().sum() + (x.reshape(-1) * 2).exp().sum()
        loss.backward()
        opt.step()
        return loss
    compiled = dg.compile(step)
    x = dg.from_numpy(np.random.default_rng(0).standard_normal((4, 3, 2)).astype(np.float32))
    x = x.permute(2, 1, 0)
    compiled(x)
    entry = compiled.entries[-1]
    plans = ahead.plans_ahead(entry.graph, entry.read_inputs([x]), None, entry.writable, LLVM)
    names = [p.kernel.name for p in plans]
    assert "mul" in names and "exp" in names, names     # the subgraph's nodes
    compiled(x)
    assert compiled.hits == 1
    assert all(("llvm", p.kernel.key) in backend._loaded for p in plans)


def test_a_trace_runs_ready_kernels_and_compiles_none(fresh_cache):
    """A trace runs its ops once: an eager convolution inside it takes numpy's implementation
    where its direct kernel would have to be compiled now (the program's kernels compile on
    helper threads), and the kernel where it is ready; the eager calls' own choice (the kernel)
    is not changed by the trace."""
    from dynograph import _direct_kernels
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((8, 3, 32, 32)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((6, 3, 5, 5)).astype(np.float32))
    conv2d = dg.nn.functional.conv2d
    compiled = backend.STATS["compiled"]
    traced = dg.compile(lambda x, w: conv2d(x, w), backend="interpreter")(x, w)
    assert backend.STATS["compiled"] == compiled
    eager = conv2d(x, w)                              # compiles the kernel, eagerly
    assert backend.STATS["compiled"] > compiled
    np.testing.assert_allclose(traced.numpy(), eager.numpy(), rtol=1e-4, atol=1e-4)
    key = [k for k in _direct_kernels._owners if k[0] == "convolution"][-1]
    op, ran = REGISTRY["convolution"], []
    run = op.kernel
    op.kernel = lambda *a: ran.append(1) or run(*a)
    try:
        compiled = backend.STATS["compiled"]
        again = dg.compile(lambda x, w: conv2d(x, w) * 1, backend="interpreter")(x, w)
    finally:
        op.kernel = run
    assert ran and backend.STATS["compiled"] == compiled      # ready: the kernel ran
    assert again.numpy().tolist() == eager.numpy().tolist()
    assert _direct_kernels._owners[key] is not None


def test_a_compiled_functions_first_call_builds_the_thread_pool_on_a_helper_thread(tmp_path):
    """The pool's runtime code (and the products' tasks) compile on a helper thread while the
    first call traces; in a fresh process with an empty cache, so that nothing built them."""
    code = """if 1:
        import threading
        import dynograph as dg
        from dynograph.compiler.llvm import pool
        dg.set_num_threads(2)
        started = []
        start = threading.Thread.start
        threading.Thread.start = lambda t: (started.append(t.name), start(t))[1]
        f = dg.compile(lambda x: (x * 2).sum(), backend="llvm")
        assert float(f(dg.ones(8))) == 16.0
        threading.Thread.start = start
        assert "dynograph-pool-build" in started, started
        assert pool.pool() is not None and pool._library
        assert float(f(dg.ones(8))) == 16.0
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, DYNOGRAPH_CACHE_DIR=str(tmp_path)))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]

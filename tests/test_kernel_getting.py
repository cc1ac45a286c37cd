"""Getting a compiled kernel (runtime/backend.py kernel_function): hidden from a trace's
watcher, and the same entries on disk whether compiled or loaded."""
import os
import random
import sys
import time

import numpy as np
import pytest

import dynograph as dg
from dynograph.runtime import backend


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


def _step(scale):
    w = dg.nn.Parameter(dg.ones(4, 3))
    opt = dg.optim.SGD([w], lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = ((w * x).tanh() * scale).sum()
        loss.backward()
        opt.step()
        return loss
    return step


def test_compiling_a_kernel_runs_no_python_a_watcher_would_see(fresh_cache):
    step = dg.compile(_step(1.2345), backend="llvm")
    x = dg.ones(4, 3)
    step(x)                                 # traces (and traces ahead)
    frames = []

    def hook(frame, event, arg):            # a trace hook as a watcher's: every frame that starts
        frames.append(frame.f_code.co_filename)
    hook.watching = True                    # hidden from as a trace's watcher is
    before = backend.STATS["compiled"]
    sys.settrace(hook)
    try:
        step(x)                             # the first replay compiles the kernels
    finally:
        sys.settrace(None)
    assert backend.STATS["compiled"] > before
    ours = [f for f in frames if f.endswith((os.path.join("llvm", "jit.py"),
                                             os.path.join("runtime", "cache.py")))]
    assert not ours
    assert sys.gettrace() is None


def test_a_profiler_that_is_not_a_watcher_sees_the_work_and_stays_on():
    """cProfile's hook is a C function that ``sys.setprofile`` cannot put back: dynograph's
    own work leaves it on, and a trace (whose watcher replaces it meanwhile) re-enables it."""
    import cProfile
    import pstats
    a, b = dg.randn(8, 8), dg.randn(8, 8)
    step = dg.compile(_step(0.5), backend="llvm")
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        product = a @ b                     # a product gets its kernel with the hooks as they are
        losses = [step(dg.ones(4, 3)).item() for _ in range(3)]
        after = a @ b
    finally:
        profiler.disable()
    np.testing.assert_allclose(product.numpy(), a.numpy() @ b.numpy(), rtol=1e-5)
    np.testing.assert_array_equal(after.numpy(), product.numpy())
    eager = _step(0.5)
    np.testing.assert_allclose(losses, [eager(dg.ones(4, 3)).item() for _ in range(3)], rtol=1e-6)
    calls = {fn: stat[0] for (_, _, fn), stat in pstats.Stats(profiler).stats.items()}
    assert calls.get("matmul", 0) >= 2      # both products, the one after the traces too
    assert sys.getprofile() is None


class _Clocked(backend.Backend):
    """A backend whose compiler reads the clock and draws a random name (as the LLVM JIT and
    the disk cache do)."""
    name = "test-clocked"

    def render(self, kernel, name):
        return name

    def compile(self, source, name, kernel):
        time.perf_counter()
        random.Random(0).random()          # as tempfile's names: its own generator
        return b""

    def load(self, obj, name, kernel):
        return lambda *args: None

    def launch(self, fn, kernel, addresses):
        fn(*addresses)

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data


class _Kernel:
    key = "test-clocked-kernel"


def test_a_kernel_compiled_while_tracing_is_no_side_effect_of_the_program():
    """The eager part of a traced call may compile kernels: the compiler's clock and random
    names are not the program's (they would break the graph)."""
    from dynograph.compiler.tracer import Tracer
    from dynograph.compiler.watch import Watcher

    def program():
        return backend.kernel_function(_Clocked(), _Kernel())
    with Watcher(Tracer(), program) as watcher:
        fn = program()
    backend._loaded.pop(("test-clocked", _Kernel.key))
    assert fn is not None and not list(watcher.side_effects())


def test_a_warm_process_loads_what_a_cold_one_wrote(fresh_cache):
    step = dg.compile(_step(0.75), backend="llvm")
    x = dg.ones(4, 3)
    losses = [step(x).item() for _ in range(3)]
    files = sorted(os.listdir(fresh_cache / "kernels"))
    assert files
    backend._loaded.clear()                 # as a new process: memory empty, disk filled
    before = dict(backend.STATS)
    again = dg.compile(_step(0.75), backend="llvm")
    got = [again(x).item() for _ in range(3)]
    assert backend.STATS["compiled"] == before["compiled"]
    assert backend.STATS["disk_hits"] > before["disk_hits"]
    assert sorted(os.listdir(fresh_cache / "kernels")) == files
    np.testing.assert_allclose(got, losses, rtol=1e-6)

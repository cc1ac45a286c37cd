"""Kernels compiled on several threads (compiler/llvm/jit.py, runtime/backend.py's
compile_ahead, compiler/lowering/ahead.py): the same object code and the same kernels as the
serial path, errors where the serial path raises them, and nothing ahead on one thread."""
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dynograph as dg
from tools.bench.workloads.training import classifier_step
from dynograph.compiler.llvm import jit
from dynograph.compiler.llvm.backend import LLVM
from dynograph.compiler.lowering import ahead
from dynograph.runtime import backend, threads


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def no_kernels(monkeypatch):
    """No kernel loaded or on its way yet (earlier tests compile the same ones)."""
    monkeypatch.setattr(backend, "_loaded", {})
    monkeypatch.setattr(backend, "_ahead", {})


def _model_and_step(seed):
    dg.manual_seed(seed)
    model = dg.nn.Sequential(dg.nn.Linear(12, 16), dg.nn.ReLU(), dg.nn.Linear(16, 5))
    opt = dg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    return model, classifier_step(model, opt)


def _data():
    rng = np.random.default_rng(0)
    return (dg.from_numpy(rng.standard_normal((8, 12)).astype(np.float32)),
            dg.from_numpy(rng.integers(0, 5, 8)))


def _kernel_texts(seed):
    """LLVM IR of the kernels of a small training step's graph."""
    model, step = _model_and_step(seed)
    compiled = dg.compile(step)
    x, y = _data()
    compiled(x, y)
    graph = compiled.entries[-1].graph
    plans = ahead.plans_ahead(graph, compiled.entries[-1].read_inputs([x, y]), None,
                              compiled.entries[-1].writable, LLVM)
    assert plans
    return [LLVM.render(p.kernel, f"dg_{p.kernel.key}") for p in plans]


def test_threads_compile_the_same_object_code():
    texts = _kernel_texts(0)
    serial = [jit.emit_object(t, "serial") for t in texts]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda t: jit.emit_object(t, "parallel"), texts))
    assert parallel == serial


def test_a_program_compiled_ahead_needs_no_other_kernel_and_agrees(fresh_cache, no_kernels,
                                                                   two_threads):
    x, y = _data()
    model, step = _model_and_step(1)
    compiled = dg.compile(step)
    before = dict(backend.STATS)
    compiled(x, y)              # traces, traces ahead for the next call, starts its kernels
    assert [k for k in backend._ahead if k[0] == "llvm"]
    loss = compiled(x, y)                   # the first replay: its kernels compiled ahead
    entry = compiled.entries[-1]
    assert compiled.hits == 1
    keys = {p.kernel.key for p in ahead.plans_ahead(entry.graph, entry.read_inputs([x, y]),
                                                    None, entry.writable, LLVM)}
    assert keys and all(("llvm", k) in backend._loaded for k in keys)
    # every kernel compiled was one the program ran (no layout guessed wrong, none of the
    # first trace's own update kernels)
    assert backend.STATS["compiled"] - before["compiled"] == len(keys)
    assert not any(k[1] in keys for k in backend._ahead)

    # the same step compiled serially (one thread) gives the same values
    threads.set_threads(1)
    model2, step2 = _model_and_step(1)
    compiled2 = dg.compile(step2)
    compiled2(x, y)
    loss2 = compiled2(x, y)
    np.testing.assert_array_equal(loss.numpy(), loss2.numpy())
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_compile_ahead_does_nothing_on_one_thread(fresh_cache, no_kernels, monkeypatch):
    monkeypatch.setattr(threads, "_count", [1])
    started = []
    real = ThreadPoolExecutor.submit

    def submit(self, *args, **kwargs):
        started.append(args)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit)
    x, y = _data()
    _, step = _model_and_step(2)
    compiled = dg.compile(step)
    compiled(x, y)
    compiled(x, y)
    assert compiled.hits == 1 and not started and not backend._ahead
    assert all(k in backend._loaded for k in
               [("llvm", p.kernel.key) for p in ahead.plans_ahead(
                   compiled.entries[-1].graph, compiled.entries[-1].read_inputs([x, y]), None,
                   compiled.entries[-1].writable, LLVM)])


class _Kernel:
    def __init__(self, key):
        self.key = key


class _Slow(backend.Backend):
    """A backend whose compiler takes a while and fails on kernels named 'bad...'."""
    name = "test-slow"
    parallel_compile = True

    def __init__(self):
        self.compiled_on = {}

    def render(self, kernel, name):
        return name

    def compile(self, source, name, kernel):
        self.compiled_on[kernel.key] = threading.current_thread().name
        threading.Event().wait(0.02)
        if kernel.key.startswith("bad"):
            raise RuntimeError(f"cannot compile {kernel.key}")
        return source.encode()

    def load(self, obj, name, kernel):
        return obj

    def launch(self, fn, kernel, addresses):
        pass

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data


def test_errors_surface_when_the_kernel_is_needed(two_threads):
    slow = _Slow()
    kernels = [_Kernel(k) for k in ("ok_a", "bad_b", "ok_c", "bad_d", "ok_e")]
    backend.compile_ahead(slow, kernels)
    assert backend.kernel_function(slow, kernels[0]) == b"dg_ok_a"
    with pytest.raises(RuntimeError, match="cannot compile bad_b"):
        backend.kernel_function(slow, kernels[1])
    assert backend.kernel_function(slow, kernels[4]) == b"dg_ok_e"
    assert backend.kernel_function(slow, kernels[2]) == b"dg_ok_c"
    # as the serial path: a failed kernel is not kept, asking again compiles it again and fails
    with pytest.raises(RuntimeError, match="cannot compile bad_b"):
        backend.kernel_function(slow, kernels[1])
    with pytest.raises(RuntimeError, match="cannot compile bad_d"):
        backend.kernel_function(slow, kernels[3])
    # one helper thread (two threads in all): the caller compiled some of them itself
    helpers = {name for name in slow.compiled_on.values() if name.startswith("dynograph-compile")}
    assert len(helpers) == 1
    assert threading.current_thread().name in slow.compiled_on.values()
    assert not any(k[0] == "test-slow" for k in backend._ahead)


def test_a_kernel_a_waiting_caller_compiles_is_waited_for_not_cancelled(two_threads):
    """settle_compilations (before a fork) while the calling thread, waiting for a helper,
    compiles the next kernel itself: it waits for that compilation too, which completes."""
    settled = []

    class _Helping(_Slow):
        name = "test-helping"

        def compile(self, source, name, kernel):
            if kernel.key == "helped":      # on the calling thread, inside kernel_function
                settler = threading.Thread(target=lambda: settled.append(
                    backend.settle_compilations()))
                settler.start()
                settler.join(0.1)
                settled.append(settler)
            elif kernel.key == "long":
                threading.Event().wait(0.3)
            return super().compile(source, name, kernel)

    slow = _Helping()
    kernels = [_Kernel("long"), _Kernel("helped")]
    backend.compile_ahead(slow, kernels)
    threading.Event().wait(0.05)            # the one helper thread is on "long"
    assert backend.kernel_function(slow, kernels[0]) == b"dg_long"
    assert slow.compiled_on["helped"] == threading.current_thread().name
    assert backend.kernel_function(slow, kernels[1]) == b"dg_helped"
    settler = settled[0]
    settler.join(5)
    assert not settler.is_alive() and settled[1:] == [None]


def test_threads_compile_the_same_kernels_as_one(fresh_cache, no_kernels, two_threads,
                                                 monkeypatch):
    """The kernels a program needs, compiled ahead on two threads, are the ones the serial
    path compiles, byte for byte on disk."""
    x, y = _data()
    _, step = _model_and_step(3)
    compiled = dg.compile(step)
    compiled(x, y)
    compiled(x, y)
    ahead_files = {p.name: p.read_bytes() for p in (fresh_cache / "kernels").iterdir()}
    serial_dir = fresh_cache / "serial"
    serial_dir.mkdir(mode=0o700)
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(serial_dir))
    backend._loaded.clear()
    threads.set_threads(1)
    _, step = _model_and_step(3)
    compiled = dg.compile(step)
    compiled(x, y)
    compiled(x, y)
    serial_files = {p.name: p.read_bytes() for p in (serial_dir / "kernels").iterdir()}
    assert serial_files == ahead_files


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_while_kernels_compile_ahead_leaves_a_child_that_compiles(fresh_cache,
                                                                        no_kernels, two_threads):
    x, y = _data()
    _, step = _model_and_step(4)
    compiled = dg.compile(step)
    compiled(x, y)                          # helper threads now compile the next call's kernels
    pid = os.fork()
    if pid == 0:                            # the child: compiles and runs kernels of its own
        code = 1
        try:
            _, step2 = _model_and_step(5)
            compiled2 = dg.compile(step2)
            losses = [float(compiled2(x, y)) for _ in range(3)]
            code = 0 if compiled2.hits == 2 and all(np.isfinite(losses)) else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child of a fork made while kernels compiled ahead hung")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    compiled(x, y)                          # the parent's kernels: taken or compiled now
    assert compiled.hits == 1


def _loops(n):
    """LLVM IR of ``n`` small loop functions (a module that takes a while to compile)."""
    return "\n".join(f"""
define void @f{i}(ptr noalias %a, ptr noalias %b, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %pa = getelementptr float, ptr %a, i64 %i
  %pb = getelementptr float, ptr %b, i64 %i
  %y = load float, ptr %pa
  %z = fmul float %y, {float(i + 1)}
  store float %z, ptr %pb
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}}""" for i in range(n))


def test_compiling_leaves_llvmlites_lock_to_other_threads():
    """What lets compilations run in parallel: while one thread optimizes and generates code,
    llvmlite's process-wide lock stays free (another thread's compilation would wait on it).
    The lock is looked at many times during the compilation: parsing holds it for a moment,
    and so may a compilation queued ahead by an earlier test, so one look proves nothing."""
    from llvmlite.binding import ffi
    jit.triple()
    jit.settle_compilations()
    for n in (40, 160, 640):
        text, started, done = _loops(n), threading.Event(), threading.Event()

        def compile_(text=text, started=started, done=done):
            started.set()
            jit.emit_object(text, "loops")
            done.set()
        thread = threading.Thread(target=compile_)
        thread.start()
        started.wait()
        looks = free = 0
        while not done.is_set():
            got = ffi.lib._lock._lock.acquire(blocking=False)
            if got:
                ffi.lib._lock._lock.release()
            if not done.is_set():       # the compilation was still running at this look
                looks, free = looks + 1, free + got
            time.sleep(0.0005)
        thread.join()
        if looks >= 20:
            assert free > looks // 2, f"the lock was free at {free} of {looks} looks"
            return
    pytest.fail("every compilation ended before the lock could be looked at often enough")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_waits_for_another_threads_compilation(monkeypatch):
    """A compilation on a thread of the user's (outside llvmlite's lock) ends before the
    process forks: the child inherits no thread inside LLVM, and compiles."""
    jit.triple()
    generated, started = threading.Event(), threading.Event()
    real = jit._object_code

    def object_code(mod):
        obj = real(mod)
        generated.set()
        return obj
    monkeypatch.setattr(jit, "_object_code", object_code)

    def compile_():
        started.set()
        jit.emit_object(_loops(640), "loops")
    thread = threading.Thread(target=compile_)
    thread.start()
    started.wait()
    time.sleep(0.005)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if generated.is_set() and jit.emit_object(_loops(2), "child") else 3
        finally:
            os._exit(code)
    thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

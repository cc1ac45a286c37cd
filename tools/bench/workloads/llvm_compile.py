"""W7: how long ``dynograph.compile(step, backend="llvm")`` takes to get the W4 MLP training
step (784-512-512-10, batch 128, SGD momentum) running at full speed.

Each measurement runs in a fresh Python process, so nothing compiled earlier in the runner's
process (W4 compiles the same kernels) can help it:

* ``llvm-cold``: an empty ``DYNOGRAPH_CACHE_DIR``: tracing, the passes, LLVM compilation;
* ``llvm-warm``: a cache directory a previous process filled: tracing, the passes and loading
  object code from disk.  It must compile no kernel (``jit.STATS``); if it does, it raises,
  and the runner leaves it out with that error.

A compiled step does not finish compiling on its first call: the first calls trace it (and
run it eagerly meanwhile), and the first replay compiles or loads its kernels.  So the child
process calls the step until one call neither compiles nor loads a kernel, after the kernels
were first touched; the compile time is the time of the calls before that one minus as many
steady-state calls (the median of a few later calls).  The workload is ``self_timed``: each
call returns that time in seconds (wall clock of the child), and the runner reports those.

One measurement by hand, with the per-call times and kernel counters::

    python -c "from tools.bench.workloads import llvm_compile as c; print(c.measure(c.tempfile.mkdtemp()))"
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import dynograph
from dynograph.compiler.llvm import jit

from ..runner import workload
from .llvm import _llvm_compile
from .training import _mlp, mlp_batch, train_step

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MAX_CALLS = 10      # a step not steady by then is a bug of the compiler, not a slow compile
STEADY_CALLS = 5


def _kernel_activity():
    return jit.STATS["compiled"] + jit.STATS["disk_hits"] + jit.STATS["memory_hits"]


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def child():
    """In the fresh process: compile and run the W4 step; prints the measurement as JSON."""
    from threadpoolctl import threadpool_limits
    # one BLAS thread, as in the runner: on a shared machine idle BLAS threads spin, which
    # makes the steady-state call (subtracted below) noisy
    threadpool_limits(1, user_api="blas")
    x, y = (dynograph.from_numpy(a) for a in mlp_batch())
    step = train_step(dynograph, _mlp(dynograph), x, y, compile=_llvm_compile)
    calls, touched = [], False
    while len(calls) < MAX_CALLS:
        before = _kernel_activity()
        t = _timed(step)
        quiet = _kernel_activity() == before
        if quiet and touched:
            break                   # the first steady call
        touched = touched or not quiet
        calls.append(t)
    else:
        raise RuntimeError(f"the step still compiles or loads kernels after {MAX_CALLS} calls")
    steady = float(np.median([t] + [_timed(step) for _ in range(STEADY_CALLS - 1)]))
    print(json.dumps({"compile_s": sum(calls) - len(calls) * steady, "calls_s": calls,
                      "steady_s": steady, "stats": dict(jit.STATS)}))


def measure(cache_dir):
    """One measurement in a fresh process using ``cache_dir``; the child's JSON as a dict."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, DYNOGRAPH_CACHE_DIR=cache_dir, PYTHONPATH=path)
    code = "from tools.bench.workloads.llvm_compile import child; child()"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compile-time child failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _systems():
    # removed when the runner drops the callables (``cold`` holds it)
    root = tempfile.TemporaryDirectory(prefix="dynograph-w7-")
    warm_dir = os.path.join(root.name, "warm")

    def cold():
        fresh = tempfile.mkdtemp(dir=root.name)
        try:
            return measure(fresh)["compile_s"]
        finally:
            shutil.rmtree(fresh, ignore_errors=True)

    def warm():
        if not os.path.isdir(warm_dir):
            measure(warm_dir)               # a first process fills the cache
        got = measure(warm_dir)
        if got["stats"]["compiled"]:
            raise AssertionError(f"a warm process compiled {got['stats']['compiled']} kernels")
        return got["compile_s"]
    return {"llvm-cold": cold, "llvm-warm": warm}


@workload("llvm_w7_compile_time", "W7: compile time of the W4 MLP step, fresh process; cold "
          "(empty disk cache) and warm (filled cache)", tags=("compiler",), self_timed=True)
def w7_compile_time():
    return _systems()

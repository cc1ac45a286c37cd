"""DataLoader workers and start methods: torch's default (fork on Linux before Python 3.14)
runs scripts without a main guard and lambdas; 'spawn' and 'forkserver' fail with errors
that name the cause and the fix; no worker (nor fork server, nor resource tracker)
outlives a killed main process.  Scripts run as subprocesses; every wait is bounded and
every process started is ended."""
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import dynograph
from dynograph.utils.data import DataLoader, Dataset
from dynograph.utils.data._multiprocessing import _default_context

FORK_IS_DEFAULT = mp.get_context().get_start_method() == "fork"
needs_fork_default = pytest.mark.skipif(not FORK_IS_DEFAULT, reason="the platform's default is not fork")


def run_scripts(tmp_path, source, argvs, timeout=120):
    """Run ``source`` once per argument list, side by side; (returncode, stdout, stderr) each."""
    script = tmp_path / "script.py"
    script.write_text(source)
    procs = [subprocess.Popen([sys.executable, str(script), *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for argv in argvs]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return results


def test_default_start_method_is_multiprocessings_default():
    assert _default_context() is mp.get_context()
    it = iter(DataLoader(list(range(4)), batch_size=2, num_workers=1))
    assert it._start_method == mp.get_start_method()
    assert [b.tolist() for b in it] == [[0, 1], [2, 3]]


# ---------------------------------------------------------------- scripts without a main guard

UNGUARDED = """
import sys
from dynograph.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return i * i

method = None if sys.argv[1] == "default" else sys.argv[1]
collate = (lambda batch: sum(batch)) if method is None else None
loader = DataLoader(Squares(), batch_size=2, num_workers=2, multiprocessing_context=method,
                    collate_fn=collate)
print([int(b.sum()) if hasattr(b, "sum") else int(b) for b in loader])
"""


@needs_fork_default
def test_script_without_main_guard_runs_with_the_default_start_method(tmp_path):
    (code, out, err), = run_scripts(tmp_path, UNGUARDED, [["default"]])
    assert code == 0, err
    assert out.strip() == "[1, 13, 41]"


def test_script_without_main_guard_fails_clearly_with_spawn_and_forkserver(tmp_path):
    methods = ["spawn", "forkserver"]
    for method, (code, out, err) in zip(methods, run_scripts(tmp_path, UNGUARDED, [[m] for m in methods])):
        # the main process's error; a worker's own traceback may be written after it
        found = [line for line in err.splitlines() if line.startswith("RuntimeError: DataLoader worker")]
        assert code == 1 and out == "", err
        assert found, err
        assert f"Workers started with '{method}' import the main script again" in found[-1]
        assert 'if __name__ == "__main__":' in found[-1] and "multiprocessing_context='fork'" in found[-1]
        assert "BrokenPipeError" not in err


# ---------------------------------------------------------------- what cannot be pickled

class HoldsLambda(Dataset):
    def __init__(self):
        self.fn = lambda i: i

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.fn(i)


def local_dataset():
    class Local(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i
    return Local()


@needs_fork_default
def test_lambdas_and_local_classes_work_with_the_default_start_method():
    loader = DataLoader(local_dataset(), batch_size=2, num_workers=2, collate_fn=lambda b: [x * 10 for x in b])
    assert list(loader) == [[0, 10], [20, 30]]
    assert [b.tolist() for b in DataLoader(HoldsLambda(), batch_size=2, num_workers=2)] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_unpicklable_arguments_are_named_with_the_fix(method):
    cases = [(dict(dataset=list(range(4)), collate_fn=lambda b: b), r"the collate_fn <function .*<lambda>"),
             (dict(dataset=local_dataset()), r"the dataset \(a local_dataset.<locals>.Local\)"),
             (dict(dataset=HoldsLambda()), r"the dataset \(a HoldsLambda\) cannot be pickled \(.*<lambda>")]
    for kwargs, names in cases:
        with pytest.raises(Exception, match=names) as info:
            iter(DataLoader(batch_size=2, num_workers=2, multiprocessing_context=method, **kwargs))
        message = str(info.value)
        assert f"workers started with '{method}' receive it pickled" in message
        assert "at module level" in message and "multiprocessing_context='fork'" in message
    assert mp.active_children() == []


# ---------------------------------------------------------------- what fork copies

class MatMul(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        a = np.full((256, 256), float(i), dtype=np.float32)
        return float((a @ a)[0, 0])


@needs_fork_default
def test_forked_workers_use_blas_after_the_parent_did():
    a = np.ones((512, 512), dtype=np.float32)
    assert (a @ a)[0, 0] == 512          # the parent's BLAS thread pool is running now
    loader = DataLoader(MatMul(), batch_size=None, num_workers=2, timeout=60)
    assert list(loader) == [256.0 * i * i for i in range(4)]


def _double(x):
    return x * 2


_COMPILED_DOUBLE = dynograph.compile(_double)


class CompiledWork(Dataset):
    """Each item runs a compiled function big enough to use the kernel thread pool."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return float(_COMPILED_DOUBLE(dynograph.full((1 << 22,), float(i)))[-1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_workers_run_compiled_functions_after_the_parent_did():
    # the parent's kernel thread pool and JIT lock exist now; a forked child needs its own
    assert float(_COMPILED_DOUBLE(dynograph.ones(1 << 22))[0]) == 2.0
    loader = DataLoader(CompiledWork(), batch_size=None, num_workers=2, timeout=120,
                        multiprocessing_context="fork")
    assert list(loader) == [0.0, 2.0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_leaves_its_parents_workers_alone():
    it = iter(DataLoader(list(range(8)), batch_size=2, num_workers=1, multiprocessing_context="fork"))
    first = next(it).tolist()
    pid = os.fork()
    if pid == 0:                         # as the copy of the iterator in a worker would, on collection
        it._shutdown_workers()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [first] + [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5], [6, 7]]


# ---------------------------------------------------------------- ending with the main process

ORPHAN = """
import os, sys, threading, time
from multiprocessing import forkserver, resource_tracker
from dynograph.utils.data import DataLoader, Dataset

class Forever(Dataset):
    def __init__(self, out):
        self.out = out

    def __len__(self):
        return 8

    def __getitem__(self, i):
        open(os.path.join(self.out, f"worker-{os.getpid()}"), "w").close()
        time.sleep(3600)

def load(out, method):
    it = iter(DataLoader(Forever(out), num_workers=2, multiprocessing_context=method))
    helpers = [forkserver._forkserver._forkserver_pid, resource_tracker._resource_tracker._pid]
    for pid in helpers:
        if pid:
            open(os.path.join(out, f"helper-{pid}"), "w").close()
    open(os.path.join(out, "main"), "w").close()
    next(it)

if __name__ == "__main__":
    out, method, where = sys.argv[1:]
    method = None if method == "default" else method
    if where == "thread":           # started from a thread that stays alive
        threading.Thread(target=load, args=(out, method), daemon=True).start()
        time.sleep(3600)
    else:
        load(out, method)
"""


def running(pid):
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(condition, within):
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def started(out):
    """The pids a run reported once its main process and both workers are inside the dataset."""
    names = os.listdir(out)
    workers = [n for n in names if n.startswith("worker-")]
    if "main" not in names or len(workers) < 2:
        return None
    return [int(n.split("-")[1]) for n in names if n != "main"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_process_outlives_a_killed_main_process(tmp_path):
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    runs = {}
    for method, where in [("default", "main"), ("default", "thread"), ("forkserver", "main")]:
        out = tmp_path / f"{method}-{where}"
        out.mkdir()
        runs[method, where] = out, subprocess.Popen([sys.executable, str(script), str(out), method, where],
                                                    stderr=subprocess.DEVNULL)
    left = []
    try:
        for (method, where), (out, proc) in runs.items():
            assert wait_for(lambda: started(out) or proc.poll() is not None, within=120), (method, where)
            assert proc.poll() is None, (method, where)
        for _, proc in runs.values():
            proc.kill()                  # SIGKILL: no cleanup in the main process at all
            proc.wait()
        for (method, where), (out, _) in runs.items():
            pids = started(out)
            assert wait_for(lambda: not any(running(p) for p in pids), within=5.0), \
                (method, where, [p for p in pids if running(p)])
    finally:
        for out, proc in runs.values():
            proc.kill()
            proc.wait()
            left += [p for p in (started(out) or []) if running(p)]
        for pid in left:                 # a failed check leaves nothing behind either
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- devices

def test_device_equals_only_devices(torch):
    others = ["half", "cpu", "cpu:0", "cuda", "xyz:1", "cpu:x", "", 5, 0, None, 1.5, object()]
    for other in others:
        assert (dynograph.device("cpu") == other) is (torch.device("cpu") == other) is False
        assert (dynograph.device("cpu") != other) is (torch.device("cpu") != other) is True
    assert dynograph.device("cpu") == dynograph.device("cpu")
    assert dynograph.device("cpu") != dynograph.device("cpu", 0)
    assert dynograph.device("cuda:1") == dynograph.device("cuda", 1)
    assert "cpu" not in {dynograph.device("cpu")} and dynograph.device("cpu") in {dynograph.device("cpu")}

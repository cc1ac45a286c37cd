"""dynograph.distributed, DistributedDataParallel and dynograph-run.

The MPI checks run as few jobs as possible (starting Python on every rank costs seconds):
one 2-rank mpiexec job runs every check of tests/distributed_cases.py (each collective for
each dtype, mismatches, timeouts, DDP against one process), one job lets a rank fail through
the launcher, one single process checks the lazy import and a world of one.  The rest runs
here without MPI.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import dynograph
import dynograph.distributed as dist
from dynograph import nn
from dynograph.distributed import run as launcher
from dynograph.nn.parallel._reducer import assign_buckets

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "distributed_cases.py")
ROOT = os.path.dirname(HERE)


def mpiexec():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed (pip install \"dynograph[distributed]\")")
    try:
        return launcher.find_mpiexec()
    except SystemExit as e:
        pytest.skip(str(e))


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    return e


# ---------------------------------------------------------------- 2 ranks under mpiexec


def run_checks_on_two_ranks(tmp_path, cases, args, checks, timeout=300):
    """Run the script ``cases`` with ``args`` on 2 ranks; each rank writes {check: failure
    text or ""} to tmp_path/rank<r>.json.  A failure names the check and the rank; every check
    of ``checks`` must have run on both."""
    cmd = [mpiexec(), "-n", "2", sys.executable, cases, *args, str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env(), cwd=ROOT)
    results = {}
    for r in (0, 1):
        path = tmp_path / f"rank{r}.json"
        results[r] = json.loads(path.read_text()) if path.exists() else {}
    failures = [f"rank {r}, {name}:\n{text}" for r in (0, 1) for name, text in results[r].items() if text]
    assert not failures, "\n".join(failures)
    for r in (0, 1):
        assert sorted(results[r]) == sorted(checks), (
            f"rank {r} did not finish every check (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return results


def test_two_ranks_every_collective_and_ddp(tmp_path):
    """Every check of distributed_cases.py on 2 ranks; a failure names the check and rank."""
    import distributed_cases
    run_checks_on_two_ranks(tmp_path, CASES, ["checks"], distributed_cases.CHECKS, timeout=400)


def test_a_rank_raising_mid_training_ends_the_job(tmp_path):
    """dynograph-run: rank 1 raises at step 3; the job exits non-zero well within the timeout."""
    mpiexec()
    cmd = [sys.executable, "-m", "dynograph.distributed.run", "-n", "2", "--timeout", "120", CASES, "fail"]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env(), cwd=ROOT)
    took = time.monotonic() - start
    assert proc.returncode != 0
    assert "ValueError: rank 1 fails at step 3" in proc.stderr
    assert "finished all steps" not in proc.stdout
    # well before rank 0's collective timeout (120 s): the failing rank ended the job
    assert took < 100, f"the job took {took:.0f} s to end: the other rank waited for its timeout"


def test_one_process_import_is_lazy_and_a_world_of_one():
    """``import dynograph`` loads no MPI; without mpiexec a process is a world of one."""
    mpiexec()
    code = """if True:
        import sys
        import dynograph, dynograph.distributed as dist, dynograph.nn.parallel
        assert "mpi4py" not in sys.modules, "import dynograph loaded mpi4py"
        dist.init_process_group("mpi")
        assert "mpi4py" in sys.modules and dist.get_world_size() == 1 and dist.get_rank() == 0
        t = dynograph.arange(4.0)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        model = dynograph.nn.Linear(3, 2)
        ddp = dynograph.nn.parallel.DistributedDataParallel(model)
        ddp(dynograph.ones(4, 3)).sum().backward()
        assert model.weight.grad.tolist() == [[4.0] * 3] * 2
        dist.destroy_process_group()
        assert not dist.is_initialized()
        print("ok")
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=env(), cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


# ---------------------------------------------------------------- without MPI


def test_before_init_process_group():
    assert not dist.is_initialized()
    for fn in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            fn()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(dynograph.ones(2))
    with pytest.raises(ValueError, match="backend 'gloo' is not available"):
        dist.init_process_group("gloo")
    assert dist.is_main_process()             # no group: the one process is rank 0
    assert dist.ReduceOp.SUM == "sum" and repr(dist.ReduceOp.MAX) == "<RedOpType.MAX: 3>"


def test_launcher_command(monkeypatch):
    ns = launcher._parser().parse_args(["-n", "4", "--hostfile", "hosts", "--mpi-arg=-bind-to",
                                        "--mpi-arg=core", "train.py", "--epochs", "3"])
    cmd = launcher.command(ns)
    assert cmd[1:] == ["-n", "4", "-hostfile", "hosts", "-bind-to", "core", sys.executable, "-m",
                       "dynograph.distributed.run", "--worker", "train.py", "--epochs", "3"]
    ns = launcher._parser().parse_args(["-n", "2", "--mpiexec", "/opt/mpi/bin/mpiexec", "-m", "pkg.train"])
    assert launcher.command(ns)[0] == "/opt/mpi/bin/mpiexec" and launcher.command(ns)[-2:] == ["-m", "pkg.train"]
    # the worker side: the rank environment from the MPI launcher's variables
    monkeypatch.setattr(os, "environ", {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                                        "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    seen = {}
    monkeypatch.setattr(launcher.runpy, "run_path", lambda path, run_name: seen.update(
        {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}, argv=list(sys.argv)))
    assert launcher.worker(["train.py", "a"]) == 0
    assert seen == {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "argv": ["train.py", "a"]}


def test_launcher_gives_each_rank_its_share_of_the_cores(monkeypatch, capsys):
    from dynograph.runtime import threads
    monkeypatch.setattr(threads, "usable_cores", lambda: 8)

    def env(*args, base=None):
        return launcher.environment(launcher._parser().parse_args([*args, "train.py"]), base or {})
    assert env("-n", "2")["OMP_NUM_THREADS"] == "4"
    assert env("-n", "16")["OMP_NUM_THREADS"] == "1"
    assert env("-n", "4", "--hostfile", "hosts")["OMP_NUM_THREADS"] == "1"     # ranks per machine unknown
    assert "OMP_NUM_THREADS=4" in capsys.readouterr().err
    assert env("-n", "2", base={"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"   # the user's
    assert "OMP_NUM_THREADS" not in env("-n", "1")
    assert env("-n", "2", "--timeout", "5")["DYNOGRAPH_DIST_TIMEOUT"] == "5.0"


def test_omp_num_threads_sets_the_default_thread_count():
    code = "import dynograph; print(dynograph.get_num_threads())"
    for given, expect in (("1", "1"), ("3", "3"), ("", None), ("zero", None)):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": given}).stdout.strip()
        assert out == (expect or str(len(os.sched_getaffinity(0))))


def test_buckets_reverse_order_by_size_and_dtype():
    ps = [nn.Parameter(dynograph.zeros(n, dtype=dt)) for n, dt in
          [(100, dynograph.float32), (300, dynograph.float32), (50, dynograph.float64), (200, dynograph.float32),
           (10, dynograph.float32)]]
    buckets = assign_buckets(ps, cap_bytes=1200, first_cap_bytes=800)
    ids = [[next(i for i, q in enumerate(ps) if q is p) for p in b] for b in buckets]
    # reverse order; a bucket closes once it holds 800 bytes (the first) or 1200; float64 apart;
    # buckets ordered by their first parameter
    assert ids == [[4, 3], [2], [1], [0]]


def test_post_accumulate_grad_hook_like_torch():
    torch = pytest.importorskip("torch")
    seen = {}
    for lib in (dynograph, torch):
        w = lib.ones(3, requires_grad=True)
        calls = []
        h = w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.tolist()))
        (w * 2).sum().backward()
        (w * 3).sum().backward()
        h.remove()
        (w * 4).sum().backward()
        seen[lib.__name__] = calls
        with pytest.raises(RuntimeError) as e:
            (w * 2).register_post_accumulate_grad_hook(print)
        seen[lib.__name__ + " non-leaf"] = str(e.value)
        with pytest.raises(RuntimeError) as e:
            lib.ones(2).register_post_accumulate_grad_hook(print)
        seen[lib.__name__ + " no grad"] = str(e.value)
    assert seen["dynograph"] == seen["torch"] == [[2.0] * 3, [5.0] * 3]
    assert seen["dynograph non-leaf"] == seen["torch non-leaf"]
    assert seen["dynograph no grad"] == seen["torch no grad"]


def test_post_accumulate_grad_hook_in_a_compiled_backward_falls_back():
    w = dynograph.ones(3, requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(1))

    @dynograph.compile
    def step(x):
        (w * x).sum().backward()

    with pytest.warns(UserWarning, match="post-accumulate-grad hook"):
        step(dynograph.ones(3))
    step(dynograph.ones(3))
    assert calls == [1, 1] and w.grad.tolist() == [2.0] * 3


def test_the_launcher_forwards_sigterm_and_the_job_ends(tmp_path):
    mpiexec()
    script = tmp_path / "sleeper.py"
    script.write_text("import os, time\nprint('ready', os.environ['RANK'], flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-m", "dynograph.distributed.run", "-n", "2", str(script)],
                            stdout=subprocess.PIPE, text=True, env=env(), cwd=ROOT)
    try:
        ready = {proc.stdout.readline().split()[-1] for _ in range(2)}
        assert ready == {"0", "1"}
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc != 0 and time.monotonic() - start < 30

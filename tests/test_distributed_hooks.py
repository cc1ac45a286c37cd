"""DDP communication hooks and the futures of collectives on 2 ranks under mpiexec: one job
runs the "hooks" checks of tests/distributed_hooks_cases.py (tests/test_distributed_join.py
runs its "join" checks)."""
import json
import os
import subprocess
import sys

from test_distributed import ROOT, env, mpiexec

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_hooks_cases.py")


def run_two_ranks(tmp_path, kind):
    """Run the ``kind`` checks on 2 ranks; a failure names the check and the rank."""
    cmd = [mpiexec(), "-n", "2", sys.executable, CASES, kind, str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env(), cwd=ROOT)
    results = {}
    for r in (0, 1):
        path = tmp_path / f"rank{r}.json"
        results[r] = json.loads(path.read_text()) if path.exists() else {}
    failures = [f"rank {r}, {name}:\n{text}" for r in (0, 1) for name, text in results[r].items() if text]
    assert not failures, "\n".join(failures)
    import distributed_hooks_cases
    for r in (0, 1):
        assert sorted(results[r]) == sorted(distributed_hooks_cases.CHECKS[kind]), (
            f"rank {r} did not finish every check (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_two_ranks_comm_hooks_and_work_futures(tmp_path):
    run_two_ranks(tmp_path, "hooks")

"""DDP communication hooks and the futures of collectives on 2 ranks under mpiexec: one job
runs the "hooks" checks of tests/distributed_hooks_cases.py (tests/test_distributed_join.py
runs its "join" checks)."""
import os

from test_distributed import run_checks_on_two_ranks

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_hooks_cases.py")


def run_two_ranks(tmp_path, kind):
    """Run the ``kind`` checks on 2 ranks; a failure names the check and the rank."""
    import distributed_hooks_cases
    run_checks_on_two_ranks(tmp_path, CASES, [kind], distributed_hooks_cases.CHECKS[kind])


def test_two_ranks_comm_hooks_and_work_futures(tmp_path):
    run_two_ranks(tmp_path, "hooks")

"""DistributedDataParallel.join() and dynograph.distributed.algorithms.Join on 2 ranks with
uneven inputs (the "join" checks of tests/distributed_hooks_cases.py, one mpiexec job)."""
from test_distributed_hooks import run_two_ranks


def test_two_ranks_join_with_uneven_inputs(tmp_path):
    run_two_ranks(tmp_path, "join")

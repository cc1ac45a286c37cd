"""dynograph.distributed: torch.distributed's API on MPI (through mpi4py).

Start a program with ``dynograph-run -n N train.py`` (or ``mpiexec -n N python train.py``) and
call ``init_process_group("mpi")``.  mpi4py is imported on first use, never by
``import dynograph``.  See docs/distributed.md.
"""
from ._collectives import (ReduceOp, all_gather, all_gather_into_tensor, all_reduce, all_to_all,
                           all_to_all_single, barrier, broadcast, gather, monitored_barrier, reduce,
                           reduce_scatter, reduce_scatter_tensor, scatter)
from ._group import (Backend, GroupMember, ProcessGroup, default_pg_timeout, destroy_process_group,
                     get_backend, get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
                     get_world_size, init_process_group, is_available, is_initialized, is_mpi_available,
                     new_group)
from ._grad_bucket import GradBucket
from ._mpi import DistBackendError, DistError
from ._objects import all_gather_object, broadcast_object_list, gather_object, scatter_object_list
from ._p2p import irecv, isend, recv, send
from ._work import Work
from .rank0 import get_rank0_logger, is_main_process, print_on_rank0, rank0_only, save_on_rank0

group = GroupMember

__all__ = ["Backend", "DistBackendError", "DistError", "GradBucket", "GroupMember", "ProcessGroup",
           "ReduceOp", "Work",
           "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
           "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "default_pg_timeout",
           "destroy_process_group", "gather", "gather_object", "get_backend", "get_global_rank",
           "get_group_rank",
           "get_process_group_ranks", "get_rank", "get_rank0_logger", "get_world_size", "group",
           "init_process_group", "irecv", "is_available", "is_initialized", "is_main_process",
           "is_mpi_available", "isend", "monitored_barrier", "new_group", "print_on_rank0", "rank0_only",
           "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "save_on_rank0", "scatter",
           "scatter_object_list", "send"]

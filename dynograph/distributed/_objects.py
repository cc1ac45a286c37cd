"""Collectives of picklable Python objects (torch's *_object functions).

As in torch these pickle: only exchange objects between processes of the same job (an
unpickled object can run code).  Tensors inside travel as pickled dynograph tensors.
"""
import pickle
import time

import numpy as np

from ._collectives import agree, describe_call, not_member, not_traced, root_rank, signature
from ._group import resolve
from ._mpi import mpi, wait


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replace ``object_list``'s items on every rank with rank ``src``'s (lists of equal length)."""
    if not_member(group):
        return None
    pg = resolve(group)
    not_traced("broadcast_object_list")
    MPI = mpi()
    root = root_rank(pg, src, group_src, "broadcast_object_list", "src", default=0)
    deadline = time.monotonic() + pg.timeout
    sig = signature("broadcast_object_list", np.empty(len(object_list), np.uint8), root)
    agree(pg, "broadcast_object_list", sig, deadline, roles="list")
    mine = pg.rank() == root
    payloads = [pickle.dumps(o) for o in object_list] if mine else []
    sizes = np.array([len(p) for p in payloads] if mine else [0] * len(object_list), np.int64)
    describe = describe_call(pg, "broadcast_object_list")
    wait(pg.comm.Ibcast([sizes, MPI.INT64_T], root), deadline, "broadcast_object_list", describe)
    if mine:
        data = np.frombuffer(b"".join(payloads), np.uint8).copy()
    else:
        data = np.empty(int(sizes.sum()), np.uint8)
    wait(pg.comm.Ibcast([data, MPI.BYTE], root), deadline, "broadcast_object_list", describe)
    if not mine:
        k = 0
        for i, n in enumerate(sizes):
            object_list[i] = pickle.loads(data[k:k + n].tobytes())
            k += int(n)


def all_gather_object(object_list, obj, group=None):
    """Every rank's ``obj`` into each rank's ``object_list`` (world size long)."""
    if not_member(group):
        return None
    pg = resolve(group)
    not_traced("all_gather_object")
    if len(object_list) != pg.size():
        raise ValueError(f"dynograph.distributed.all_gather_object: object_list must have {pg.size()} "
                         f"items (one per rank), got {len(object_list)}")
    MPI = mpi()
    deadline = time.monotonic() + pg.timeout
    agree(pg, "all_gather_object", signature("all_gather_object"), deadline)
    payload = np.frombuffer(pickle.dumps(obj), np.uint8).copy()
    sizes = np.empty(pg.size(), np.int64)
    describe = describe_call(pg, "all_gather_object")
    wait(pg.comm.Iallgather([np.array([payload.size], np.int64), MPI.INT64_T], [sizes, MPI.INT64_T]),
         deadline, "all_gather_object", describe)
    data = np.empty(int(sizes.sum()), np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    wait(pg.comm.Iallgatherv([payload, MPI.BYTE], [data, (sizes.tolist(), displs), MPI.BYTE]),
         deadline, "all_gather_object", describe)
    for i, (d, n) in enumerate(zip(displs, sizes)):
        object_list[i] = pickle.loads(data[d:d + n].tobytes())


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """Every rank's ``obj`` into rank ``dst``'s ``object_gather_list`` (world size long; None on
    the other ranks)."""
    if not_member(group):
        return None
    pg = resolve(group)
    not_traced("gather_object")
    root = root_rank(pg, dst, group_dst, "gather_object", "dst", default=0)
    mine = pg.rank() == root
    if mine and (object_gather_list is None or len(object_gather_list) != pg.size()):
        got = "None" if object_gather_list is None else f"{len(object_gather_list)} items"
        raise ValueError(f"dynograph.distributed.gather_object: object_gather_list must have "
                         f"{pg.size()} items (one per rank) on the destination rank, got {got}")
    if not mine and object_gather_list is not None:
        raise ValueError("Argument ``object_gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    MPI = mpi()
    deadline = time.monotonic() + pg.timeout
    agree(pg, "gather_object", signature("gather_object", root=root), deadline)
    payload = np.frombuffer(pickle.dumps(obj), np.uint8).copy()
    sizes = np.empty(pg.size(), np.int64) if mine else None
    describe = describe_call(pg, "gather_object")
    wait(pg.comm.Igather([np.array([payload.size], np.int64), MPI.INT64_T],
                         [sizes, MPI.INT64_T] if mine else None, root),
         deadline, "gather_object", describe)
    if mine:
        data = np.empty(int(sizes.sum()), np.uint8)
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
        received = [data, (sizes.tolist(), displs), MPI.BYTE]
    else:
        received = None
    wait(pg.comm.Igatherv([payload, MPI.BYTE], received, root), deadline, "gather_object",
         describe)
    if mine:
        for i, (d, n) in enumerate(zip(displs, sizes)):
            object_gather_list[i] = pickle.loads(data[d:d + n].tobytes())


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """The i-th object of rank ``src``'s ``scatter_object_input_list`` (world size long) into
    item 0 of rank i's ``scatter_object_output_list``."""
    if not_member(group):
        return None
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at "
                         "least 1.")
    pg = resolve(group)
    not_traced("scatter_object_list")
    root = root_rank(pg, src, group_src, "scatter_object_list", "src", default=0)
    mine = pg.rank() == root
    if mine and (scatter_object_input_list is None or
                 len(scatter_object_input_list) != pg.size()):
        got = "None" if scatter_object_input_list is None else \
            f"{len(scatter_object_input_list)} items"
        raise ValueError(f"dynograph.distributed.scatter_object_list: scatter_object_input_list "
                         f"must have {pg.size()} items (one per rank) on the source rank, got {got}")
    MPI = mpi()
    deadline = time.monotonic() + pg.timeout
    agree(pg, "scatter_object_list", signature("scatter_object_list", root=root), deadline)
    describe = describe_call(pg, "scatter_object_list")
    if mine:
        payloads = [pickle.dumps(o) for o in scatter_object_input_list]
        sizes = np.array([len(b) for b in payloads], np.int64)
        data = np.frombuffer(b"".join(payloads), np.uint8).copy()
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    size = np.empty(1, np.int64)
    wait(pg.comm.Iscatter([sizes, MPI.INT64_T] if mine else None, [size, MPI.INT64_T], root),
         deadline, "scatter_object_list", describe)
    mine_data = np.empty(int(size[0]), np.uint8)
    wait(pg.comm.Iscatterv([data, (sizes.tolist(), displs), MPI.BYTE] if mine else None,
                           [mine_data, MPI.BYTE], root), deadline, "scatter_object_list", describe)
    scatter_object_output_list[0] = pickle.loads(mine_data.tobytes())

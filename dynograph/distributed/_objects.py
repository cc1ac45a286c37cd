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

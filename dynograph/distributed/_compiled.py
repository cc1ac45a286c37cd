"""The collectives compiled graphs run: the op set's ``all_reduce`` primitive on MPI.

A graph names its process group by a string (graph attributes are text): ``"world"`` for the
default group, ``"group[0, 1]"`` for a subgroup (``"group[0, 1]#2"`` for the third live group of
those ranks).  Every rank creates its groups in the same order, so every rank resolves a name
to the same communicator.  Importing this module installs ``all_reduce`` in the op set.

The data moves exactly as DistributedDataParallel's eager bucket all-reduces move it (one
non-blocking ``Iallreduce``, waited on with the group's timeout): a rank whose step runs
compiled meets the same MPI calls as a rank whose step runs eagerly, one round per call.
"""
import time

import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.compiler.ops import collective
from dynograph.runtime import dtypes
from ._group import STATE
from ._mpi import DistError, buffer, reduce_op, wait


def group_name(pg):
    """The name a graph gives process group ``pg``."""
    if pg is STATE.world:
        return "world"
    same = [g for g in STATE.groups if g is not STATE.world and g.ranks == pg.ranks]
    k = same.index(pg) if pg in same else 0
    return f"group{pg.ranks}" + (f"#{k}" if k else "")


def group_named(name, what):
    for g in STATE.groups:
        if g.comm is not None and group_name(g) == name:
            return g
    raise DistError(f"dynograph.distributed.{what}: the compiled step communicates on process "
                    f"group {name!r}, which does not exist (any more) in this process: "
                    "destroy_process_group ended it, or init_process_group was not called")


def all_reduce(x, group, op, what):
    """``x`` reduced with ``op`` over the ranks of group ``group`` (a new array)."""
    pg = group_named(group, what)
    tracer = TRACE.tracer
    if tracer is not None and tracer.undo is not None:
        # tracing ahead (compiled.py's look-ahead) runs the step once more and puts it all back:
        # a collective there would meet the other ranks' next call.  Its values are not kept.
        return np.array(x)
    src = np.ascontiguousarray(x)
    out = np.empty_like(src)
    deadline = time.monotonic() + pg.timeout
    request = pg.comm.Iallreduce(buffer(src), buffer(out), reduce_op(op, src.dtype))
    wait(request, deadline, what, lambda: f"after {pg.timeout:g} s on rank {STATE.world.rank()} "
         f"({src.size} {dtypes.from_numpy_dtype(src.dtype).name} values)")
    return out


collective.install(all_reduce)

"""The collectives compiled graphs run: the op set's ``all_reduce_start``/``all_reduce_wait``
primitives on MPI.

A graph names its process group by a string (graph attributes are text): ``"world"`` for the
default group, ``"group[0, 1]"`` for a subgroup (``"group[0, 1]#2"`` when another group of those
ranks had the name first).  A name stays with its group while the group lives; each process
resolves the names of its own graphs.  Importing this module installs them in the op set.

The data moves exactly as DistributedDataParallel's eager bucket all-reduces move it (one
non-blocking ``Iallreduce`` per bucket, started as backward produces its gradients and waited
on after backward with the group's timeout): a rank whose step runs compiled meets the same MPI
calls as a rank whose step runs eagerly, one round per call.
"""
import itertools
import time
import weakref

import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.compiler.ops import collective
from dynograph.runtime import dtypes
from ._group import STATE
from ._mpi import DistError, buffer, reduce_op, wait


_NAMES = weakref.WeakKeyDictionary()       # ProcessGroup -> its name in graphs
_GROUPS = weakref.WeakValueDictionary()     # name -> ProcessGroup
_SERIAL = itertools.count(2)


def group_name(pg):
    """The name a graph gives process group ``pg``."""
    name = _NAMES.get(pg)
    if name is None:
        name = "world" if pg is STATE.world else f"group{pg.ranks}"
        if name != "world" and _GROUPS.get(name) is not None:
            name = f"{name}#{next(_SERIAL)}"
        _NAMES[pg] = name
        _GROUPS[name] = pg          # a new default group takes "world" over from a destroyed one
    return name


def group_named(name, what):
    g = _GROUPS.get(name)
    if g is not None and g.comm is not None:
        return g
    raise DistError(f"dynograph.distributed.{what}: the compiled step communicates on process "
                    f"group {name!r}, which does not exist (any more) in this process: "
                    "destroy_process_group ended it, or init_process_group was not called")


# id(result array) -> (result, source, MPI request or None, group) of each all-reduce started
_IN_FLIGHT = {}


def all_reduce_start(x, group, op, what):
    """Start reducing ``x`` with ``op`` over the ranks of group ``group``; returns the new array
    the result arrives in (``all_reduce_wait`` completes it)."""
    pg = group_named(group, what)
    src = np.ascontiguousarray(x)
    out = np.empty_like(src)
    tracer = TRACE.tracer
    if tracer is not None and tracer.undo is not None:
        # tracing ahead (compiled.py's look-ahead) runs the step once more and puts it all back:
        # a collective there would meet the other ranks' next call.  Its values are not kept.
        out[...] = src
        request = None
    else:
        request = pg.comm.Iallreduce(buffer(src), buffer(out), reduce_op(op, src.dtype))
    _IN_FLIGHT[id(out)] = (out, src, request, pg)       # MPI reads src, writes out until waited
    return out


def all_reduce_wait(y, x, what):
    """``y``, the result of the all-reduce ``all_reduce_start`` started, once it is complete
    (within the group's timeout, counted from now as eager DDP counts from the end of
    backward)."""
    entry = _IN_FLIGHT.pop(id(y), None)
    if entry is None or entry[0] is not y:
        raise DistError(f"dynograph.distributed.{what}: waiting for an all-reduce that was not "
                        "started (its all_reduce_start did not run)")
    _, src, request, pg = entry
    if request is not None:
        wait(request, time.monotonic() + pg.timeout, what,
             lambda: f"after {pg.timeout:g} s on rank {STATE.world.rank()} "
                     f"({src.size} {dtypes.from_numpy_dtype(src.dtype).name} values)")
    return y


collective.install(all_reduce_start=all_reduce_start, all_reduce_wait=all_reduce_wait)

"""Collective primitives: ops whose result combines their input over the processes of a group.

``all_reduce(x, group=, reduce_op=, what=)`` is ``x`` reduced (``"sum"``, ``"max"``...) over every
rank of the process group named ``group`` (``"world"``, or the name dynograph.distributed gives
a subgroup); ``what`` names the call in timeout errors ("all_reduce of DistributedDataParallel
bucket 0").  DistributedDataParallel's gradient averaging is these nodes in a compiled
training step.

A collective is a call every rank makes in the same order, so its kind gives it the ``effect``
facet: passes never drop it (even when its result is unread), merge, fold or fuse it, and it
keeps its order among the graph's other effects.  A compiled program runs it as an extern
step, through the same MPI calls and timeout as the eager collective.

The op set stands below ``dynograph.distributed``, which owns MPI, so that package installs the
function that communicates (``install``) when it is imported, as the eager core installs the
functions derivative rules call (eager.py).
"""
from .core import TensorSpec, define

_INSTALLED = {}
REDUCE_OPS = ("sum", "product", "max", "min")


def install(all_reduce):
    """Called by ``dynograph.distributed`` with ``all_reduce(array, group, reduce_op, what)``."""
    _INSTALLED["all_reduce"] = all_reduce


def _all_reduce(x, *, group, reduce_op, what):
    run = _INSTALLED.get("all_reduce")
    if run is None:
        raise RuntimeError(f"{what}: a collective needs dynograph.distributed with an initialized "
                           "process group (import dynograph.distributed; init_process_group)")
    return run(x, group, reduce_op, what)


def _all_reduce_meta(x, *, group, reduce_op, what):
    if reduce_op not in REDUCE_OPS:
        raise ValueError(f"{what}: unknown reduce_op {reduce_op!r}; expected one of {REDUCE_OPS}")
    if not isinstance(group, str):
        raise TypeError(f"{what}: group must be a process group's name, got {type(group).__name__}")
    return TensorSpec(tuple(x.shape), x.dtype)


all_reduce = define(
    "all_reduce", "collective", _all_reduce, meta=_all_reduce_meta, differentiable=False,
    doc="x reduced with ``reduce_op`` over every rank of process group ``group`` (a new tensor; "
        "x is not changed).")

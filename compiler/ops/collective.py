"""Collective primitives: ops whose result combines their input over the processes of a group.

An all-reduce is two nodes, so that a compiled program computes on while the data travels:

    y = all_reduce_start(x, group=, reduce_op=, what=)   starts reducing x ("sum", "max"...)
                                                          over every rank of process group
                                                          ``group``; y is the buffer the result
                                                          arrives in (not to be read yet)
    r = all_reduce_wait(y, x, what=)                      waits for it: r is y, complete

``group`` is a process group's name (``"world"``, or the name dynograph.distributed gives a
subgroup); ``what`` names the call in timeout errors ("all_reduce of DistributedDataParallel
bucket 0").  The wait reads ``x`` too, so that ``x`` (which the transfer reads) stays alive and
unchanged until then.  DistributedDataParallel's gradient averaging is these nodes in a
compiled training step: each bucket's start where backward has produced its gradients, the
waits after the last one, as eager DDP waits after backward.

A collective is a call every rank makes in the same order, so its kind gives it the ``effect``
facet: passes never drop it (even when its result is unread), merge, fold or fuse it, and it
keeps its order among the graph's other effects.  A compiled program runs it as an extern
step, through the same MPI calls and timeout as the eager collective.

The op set stands below ``dynograph.distributed``, which owns MPI, so that package installs the
functions that communicate (``install``) when it is imported, as the eager core installs the
functions derivative rules call (eager.py).
"""
from .core import TensorSpec, define

_INSTALLED = {}
REDUCE_OPS = ("sum", "product", "max", "min")


def install(**functions):
    """Called by ``dynograph.distributed`` with ``all_reduce_start(array, group, reduce_op,
    what)`` (returns the array the result arrives in) and ``all_reduce_wait(result, array,
    what)`` (returns the result, complete)."""
    _INSTALLED.update(functions)


def _installed(name, what):
    run = _INSTALLED.get(name)
    if run is None:
        raise RuntimeError(f"{what}: a collective needs dynograph.distributed with an initialized "
                           "process group (import dynograph.distributed; init_process_group)")
    return run


def _start(x, *, group, reduce_op, what):
    return _installed("all_reduce_start", what)(x, group, reduce_op, what)


def _start_meta(x, *, group, reduce_op, what):
    if reduce_op not in REDUCE_OPS:
        raise ValueError(f"{what}: unknown reduce_op {reduce_op!r}; expected one of {REDUCE_OPS}")
    if not isinstance(group, str):
        raise TypeError(f"{what}: group must be a process group's name, got {type(group).__name__}")
    return TensorSpec(tuple(x.shape), x.dtype)


def _wait(y, x, *, what):
    return _installed("all_reduce_wait", what)(y, x, what)


def _wait_meta(y, x, *, what):
    if tuple(y.shape) != tuple(x.shape) or y.dtype != x.dtype:
        raise ValueError(f"{what}: the result {y.dtype}{list(y.shape)} of an all-reduce of "
                         f"{x.dtype}{list(x.shape)}")
    return TensorSpec(tuple(y.shape), y.dtype)


all_reduce_start = define(
    "all_reduce_start", "collective", _start, meta=_start_meta, differentiable=False,
    doc="Starts reducing x with ``reduce_op`` over every rank of process group ``group``; the "
        "result arrives in the returned tensor, complete once all_reduce_wait returned it.")
all_reduce_wait = define(
    "all_reduce_wait", "collective", _wait, meta=_wait_meta, differentiable=False,
    doc="Waits for the all-reduce that all_reduce_start(x) started into y; returns y, complete.")

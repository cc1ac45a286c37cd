"""DistributedDataParallel inside a compiled training step.

While ``dynograph.compile`` traces a step whose ``backward()`` reaches a DDP model, the reducer's
gradient hooks do a bucket's work with dynograph ops, which the trace records, instead of
starting MPI calls of their own.  When backward has produced a bucket's gradients: the
gradients flattened into one tensor and divided by the world size, and an
``all_reduce_start`` node (the op set's collective primitives, run on every call of the
compiled step; passes never drop, merge or reorder them), so the program computes the rest of
backward while the bucket travels.  After the last bucket: an ``all_reduce_wait`` node per
bucket, and the slices of its result written back into ``.grad`` (into the bucket itself with
``gradient_as_bucket_view``, as eagerly).  The traced call runs for real, so it averages too.
Bucket by bucket and in the same order, the ranks divide the same numbers and sum them with
the same MPI call as eager DDP: from the same local gradients a compiled step averages to eager
DDP's values bit for bit, and a rank whose step runs compiled pairs with a rank whose step runs
eagerly.
"""
import weakref

from dynograph._creation import ones
from dynograph._dispatch import call
from dynograph._shape import cat
from dynograph._tensor import Tensor
from dynograph.autograd.grad_mode import no_grad
from dynograph.compiler.ops.collective import all_reduce_start, all_reduce_wait
from dynograph.distributed._compiled import group_name
from dynograph.runtime.dtypes import uint8

_GUARDED = weakref.WeakKeyDictionary()      # tracer -> ids of the DDP modules it guards


def hook(reducer, p, tracer):
    """The reducer's gradient hook while ``tracer`` records a compiled step: True when this
    module did the hook's work, False when the eager hook must (the trace then breaks, or the
    eager hook raises its error)."""
    guard_sync(reducer.ddp, tracer)
    reason = untraceable(reducer)
    if reason is not None:
        tracer.graph_break(reason)
        return False
    if not reducer.ddp.require_backward_grad_sync:
        return True                 # no_sync(): gradients only accumulate, no collective
    if id(p) in reducer.ready:
        return False                # a second gradient in one reduction: the eager error
    reducer.ready.add(id(p))
    reducer.where[id(p)][0].pending -= 1
    buckets = reducer.buckets
    while reducer.next_bucket < len(buckets) and buckets[reducer.next_bucket].pending == 0:
        start_bucket(reducer, buckets[reducer.next_bucket])
        reducer.next_bucket += 1
    if reducer.next_bucket == len(buckets):       # backward is done with this model: wait
        used = start_used(reducer) if reducer.used is not None else None
        for b in buckets:
            finish_bucket(reducer, b)
        if used is not None:
            with no_grad():
                call(all_reduce_wait, *used, what=USED)
        reducer._reset()
    return True


def untraceable(reducer):
    """Why the reducer's work cannot be graph ops in this step, or None."""
    if getattr(reducer, "comm_hook", None) is not None:
        return ("DistributedDataParallel has a communication hook (register_comm_hook): it runs "
                "Python on each gradient bucket, which the compiled graph does not replay")
    if reducer.used is not None and not reducer.used.all():
        return ("DistributedDataParallel(find_unused_parameters=True): this forward did not use "
                "every parameter, and whether another rank used them is known only when the step runs")
    if getattr(reducer, "ranks_training", None) is not None:
        return ("DistributedDataParallel runs under Join: the ranks still training change from "
                "step to step, which the compiled graph does not replay")
    return None


def check_unused(ddp, tracer, unused):
    """find_unused_parameters in a trace: parameters this forward did not use make the step
    run eagerly (whether another rank used them is known only when the step runs); with every
    parameter used, the backward must be traced too (a compiled forward alone would not make
    the used-parameter all-reduce that follows backward on every rank)."""
    if unused:
        names = ", ".join(ddp._param_names[id(p)] for p in unused)
        tracer.graph_break(
            f"DistributedDataParallel(find_unused_parameters=True): this forward did not use {names}, "
            "and whether another rank used them is known only when the step runs")
        return
    reducer = ddp.reducer

    def backward_traced():
        if reducer.used is not None:
            tracer.graph_break(
                "DistributedDataParallel(find_unused_parameters=True) with backward() outside the "
                "compiled function: the all-reduce of the used parameters after backward would not "
                "run in the compiled replays; compile the whole step (forward, backward, step)")
    tracer.at_end(backward_traced)


def guard_sync(ddp, tracer):
    """The compiled step depends on whether backward averages (``no_sync()`` or not) as it was
    when the call began: guard it where DDP first runs in the trace (a ``no_sync()`` inside the
    step is part of the traced code, so the hooks' later view of the flag follows from it).
    Also on whether a communication hook is registered and whether ``join()`` is on: either
    makes the step run eagerly, so one that comes after the step compiled must not replay it."""
    seen = _GUARDED.setdefault(tracer, set())
    if id(ddp) not in seen:
        seen.add(id(ddp))
        name = f"DistributedDataParallel {id(ddp):#x}"
        tracer.fact(f"{name} require_backward_grad_sync", lambda: ddp.require_backward_grad_sync)
        tracer.fact(f"{name} has a communication hook", lambda: ddp.reducer.comm_hook is not None)
        tracer.fact(f"{name} runs under join()", lambda: ddp._join_config.enable)


USED = "all_reduce of DistributedDataParallel's used parameters"


def start_bucket(reducer, bucket):
    """Start averaging ``bucket``'s gradients over the ranks (graph ops, see the module note)."""
    pg = reducer.pg
    what = f"all_reduce of DistributedDataParallel bucket {bucket.index}"
    with no_grad():
        grads = [p._grad.reshape(-1) for p in bucket.params]
        flat = (grads[0] if len(grads) == 1 else cat(grads)) / pg.size()  # eager divides first too
        bucket.traced = (call(all_reduce_start, flat, group=group_name(pg), reduce_op="sum",
                              what=what), flat, what)


def finish_bucket(reducer, bucket):
    """Wait for ``bucket``'s average and write it into the ``.grad`` of its parameters."""
    started, flat, what = bucket.traced
    bucket.traced = None
    with no_grad():
        total = call(all_reduce_wait, started, flat, what=what)
        if reducer.ddp.gradient_as_bucket_view:
            _bucket_tensor(bucket).copy_(total)
        for i, p in enumerate(bucket.params):
            lo, hi = bucket.offsets[i], bucket.offsets[i + 1]
            if reducer.ddp.gradient_as_bucket_view:
                if bucket.views[i] is None:
                    bucket.views[i] = Tensor._wrap(bucket.slot(i).reshape(p._data.shape))
                p._grad = bucket.views[i]
            else:
                p._grad.copy_(total[lo:hi].view(p._data.shape))


def start_used(reducer):
    """find_unused_parameters: the all-reduce of the used-parameter flags eager DDP starts after
    the last bucket (every parameter was used here, or the trace broke; the result, every flag
    set, changes nothing, but the other ranks take part in the call).  The (result, flags) to
    wait on."""
    with no_grad():
        flags = ones(len(reducer.params), dtype=uint8)
        return call(all_reduce_start, flags, group=group_name(reducer.pg), reduce_op="max",
                    what=USED), flags


def _bucket_tensor(bucket):
    t = getattr(bucket, "tensor", None)
    if t is None or t._data is not bucket.flat:
        t = bucket.tensor = Tensor._wrap(bucket.flat)
    return t


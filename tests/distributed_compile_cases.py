"""The checks tests/test_distributed_compile.py runs on 2 ranks under mpiexec (one job):
DistributedDataParallel training steps compiled whole, their all-reduces nodes of the graph.

    mpiexec -n 2 python tests/distributed_compile_cases.py OUT_DIR

writes OUT_DIR/rank<r>.json: check name -> null (passed) or the error text.  The model, the
batches and the one-process reference are tests/distributed_cases.py's.
"""
import datetime
import os
import sys
import warnings

import numpy as np

import dynograph
import dynograph.distributed as dist
from dynograph import nn
from dynograph.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distributed_cases import TwoHeads, assert_close, batches, make_model, raises, reference_weights, run_checks  # noqa: E402

CHECKS = {}
PER_RANK = 4


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def rank():
    return dist.get_rank()


def shard(t):
    """This rank's part of a batch: the ranks' data differ, so a step that skipped the
    all-reduce would leave their weights apart (and away from the one-process reference)."""
    return t[rank() * PER_RANK:(rank() + 1) * PER_RANK]


def all_reduces(compiled):
    """The all-reduces the graph the compiled function replays starts, by their ``what``; each
    is waited on, after every start (backward computes on while they travel)."""
    nodes = compiled.entries[-1].graph.nodes
    starts = [n.attrs["what"] for n in nodes if n.op == "all_reduce_start"]
    waits = [n.attrs["what"] for n in nodes if n.op == "all_reduce_wait"]
    assert waits == starts, (starts, waits)
    order = [n.op for n in nodes if n.op.startswith("all_reduce")]
    assert order == ["all_reduce_start"] * len(starts) + ["all_reduce_wait"] * len(waits), order
    return starts


def same_on_both_ranks(tensors, what):
    everyone = [None, None]
    dist.all_gather_object(everyone, [t.tolist() for t in tensors])
    assert everyone[0] == everyone[1], f"{what}: the ranks' tensors differ"


def train_compiled(steps=10, compiled=True, **ddp_kwargs):
    """DDP trained ``steps`` steps by one compiled function (zero_grad, forward, backward, step)."""
    model = make_model(100 + rank())        # different on each rank: DDP copies rank 0's
    ddp = DDP(model, bucket_cap_mb=0.002, **ddp_kwargs)
    assert len(ddp.reducer.buckets) > 1
    opt = dynograph.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = dynograph.compile(step)
    xs, ys = batches(steps, PER_RANK)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # a fallback warns: make it fail here
        for x, y in zip(xs, ys):
            step(shard(x), shard(y))
    return ddp, model, step


def train_eager(steps=10):
    model = make_model(100 + rank())
    ddp = DDP(model, bucket_cap_mb=0.002)
    opt = dynograph.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for x, y in zip(*batches(steps, PER_RANK)):
        opt.zero_grad()
        nn.functional.mse_loss(ddp(shard(x)), shard(y)).backward()
        opt.step()
    return model


# ---------------------------------------------------------------- the compiled step


@check
def compiled_step_equals_one_process_and_eager_ddp():
    ddp, model, step = train_compiled()
    weights = list(model.parameters())
    assert_close(weights, reference_weights(), "compiled step")
    assert_close(weights, list(train_eager().parameters()), "compiled step against eager DDP", 1e-6)
    same_on_both_ranks(weights, "compiled step")
    assert step.eager_reason is None, step.eager_reason
    report = step.explain()
    text = str(report)
    assert not report.breaks and report.fallback is None, text
    # every call from the second replays the graph, and each replay all-reduced (the ranks'
    # data differ, so the weights above would not agree otherwise)
    assert step.hits >= 8, text
    wanted = [f"all_reduce of DistributedDataParallel bucket {b.index}" for b in ddp.reducer.buckets]
    assert all_reduces(step) == wanted, all_reduces(step)


@check
def a_compiled_rank_and_an_eager_rank_train_together():
    """Rank 0 compiled (its first call traces, then traces ahead and puts that run back),
    rank 1 eager: one round of bucket all-reduces per call on both, the same MPI calls."""
    _, model, step = train_compiled(compiled=rank() == 0)
    assert_close(list(model.parameters()), reference_weights(), "compiled rank 0, eager rank 1")
    if rank() == 0:
        assert step.hits >= 8 and step.eager_reason is None, str(step.explain())


@check
def compiled_step_gradient_as_bucket_view():
    ddp, model, step = train_compiled(gradient_as_bucket_view=True)
    assert_close(list(model.parameters()), reference_weights(), "gradient_as_bucket_view")
    flats = [b.flat for b in ddp.reducer.buckets]
    assert all(any(np.shares_memory(p.grad._data, f) for f in flats) for p in model.parameters())
    assert len(all_reduces(step)) == len(ddp.reducer.buckets)


@check
def the_all_reduce_is_drawn_by_viz():
    import dynograph.viz as viz
    _, _, step = train_compiled(steps=3)
    graph = step.graphs()[-1]
    assert "all_reduce_start" in viz.render(graph, format="dot")
    assert "all_reduce of DistributedDataParallel bucket 0" in viz.render(graph, format="text")


# ---------------------------------------------------------------- no_sync


@check
def no_sync_around_and_inside_the_compiled_step():
    """Two accumulating passes under no_sync(), then one that averages: one process's
    gradients over the three batches, each variant replayed only where it applies."""
    model = make_model(100)
    ddp = DDP(make_model(100 + rank()), bucket_cap_mb=0.002)

    @dynograph.compile
    def accumulate(x, y):
        nn.functional.mse_loss(ddp(x), y).backward()

    @dynograph.compile
    def accumulate_inside(x, y):
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x), y).backward()

    xs, ys = batches(3, PER_RANK)
    for x, y in zip(xs, ys):
        nn.functional.mse_loss(model(x), y).backward()
    want = [p.grad.clone() for p in model.parameters()]
    for rounds in range(3):                 # the first traces; the later ones replay
        for p in ddp.parameters():
            p.grad = None
        with ddp.no_sync():
            accumulate(shard(xs[0]), shard(ys[0]))
        accumulate_inside(shard(xs[1]), shard(ys[1]))
        accumulate(shard(xs[2]), shard(ys[2]))
        assert_close([p.grad for p in ddp.parameters()], want, f"no_sync round {rounds}", 1e-6)
    assert accumulate.eager_reason is None and accumulate_inside.eager_reason is None
    assert accumulate.hits >= 2 and accumulate.misses == 2, str(accumulate.explain())
    assert accumulate_inside.hits == 2 and accumulate_inside.misses == 1, str(accumulate_inside.explain())
    graphs = {len([n for n in e.graph.nodes if n.op == "all_reduce_start"]) for e in accumulate.entries}
    assert 0 in graphs and len(ddp.reducer.buckets) in graphs, graphs
    assert all(not n.op.startswith("all_reduce") for e in accumulate_inside.entries for n in e.graph.nodes)


# ---------------------------------------------------------------- what falls back


@check
def find_unused_parameters_compiles_when_every_parameter_is_used():
    ddp, model, step = train_compiled(find_unused_parameters=True)
    assert_close(list(model.parameters()), reference_weights(), "find_unused_parameters")
    assert all_reduces(step)[-1] == "all_reduce of DistributedDataParallel's used parameters"
    # a compiled forward alone would skip the used-parameter all-reduce after backward: eager
    forward = dynograph.compile(ddp)
    x, y = (t[0] for t in batches(1, PER_RANK))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for _ in range(2):
            nn.functional.mse_loss(forward(shard(x)), shard(y)).backward()
    reason = forward._compiled_call.eager_reason or ""
    assert "backward() outside the compiled function" in reason, reason


@check
def find_unused_parameters_with_an_unused_parameter_falls_back():
    ref = TwoHeads()
    xs = dynograph.randn(8, 4, generator=dynograph.Generator().manual_seed(5))
    ((ref(xs[:4], True).square().mean() + ref(xs[4:], False).square().mean()) / 2).backward()
    ddp = DDP(TwoHeads(), find_unused_parameters=True)

    @dynograph.compile
    def backward(x, use_b):
        ddp(x, use_b).square().mean().backward()

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        backward(shard(xs), rank() == 0)
    for name in ("a", "b"):
        for p, q in zip(getattr(ddp.module, name).parameters(), getattr(ref, name).parameters()):
            assert_close([p.grad], [q.grad], f"find_unused_parameters {name}", 1e-6)
    assert ddp.module.never.weight.grad is None
    text = str(backward.explain())
    assert "runs eagerly" in text and "this forward did not use" in text and "never.weight" in text, text


@check
def a_comm_hook_makes_the_step_fall_back():
    from dynograph.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp = DDP(make_model(100), bucket_cap_mb=0.002)
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)

    @dynograph.compile
    def backward(x, y):
        nn.functional.mse_loss(ddp(x), y).backward()

    model = make_model(100)
    x, y = (t[0] for t in batches(1, PER_RANK))
    nn.functional.mse_loss(model(x), y).backward()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        backward(shard(x), shard(y))
    assert_close([p.grad for p in ddp.parameters()], [p.grad for p in model.parameters()], "comm hook", 1e-6)
    assert "communication hook" in (backward.eager_reason or ""), backward.explain()


@check
def a_comm_hook_registered_after_compiling_is_not_skipped_by_a_replay():
    from dynograph.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp = DDP(make_model(100), bucket_cap_mb=0.002)
    calls = []

    def counting_hook(state, bucket):
        calls.append(bucket.index())
        return default_hooks.allreduce_hook(state, bucket)

    @dynograph.compile
    def backward(x, y):
        ddp.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()

    x, y = (t[0] for t in batches(1, PER_RANK))
    backward(shard(x), shard(y))
    backward(shard(x), shard(y))
    assert backward.eager_reason is None, backward.explain()
    ddp.register_comm_hook(None, counting_hook)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        backward(shard(x), shard(y))
    assert calls, "the hook did not run: the compiled step replayed"
    assert "communication hook" in (backward.eager_reason or ""), backward.explain()


# ---------------------------------------------------------------- failures


@check
def a_rank_that_skips_the_compiled_step_times_out_naming_the_all_reduce():
    g = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=60))
    ddp = DDP(nn.Linear(4, 2), process_group=g)       # one bucket

    @dynograph.compile
    def backward(x):
        ddp(x).sum().backward()

    x = dynograph.ones(3, 4)
    backward(x)
    backward(x)                 # both ranks replay once
    if rank() == 0:
        g.timeout = 1.0         # rank 0 gives up after 1 s in the replay rank 1 does not join
        raises(lambda: backward(x), dist.DistBackendError,
               "all_reduce of DistributedDataParallel bucket 0 timed out after 1 s on rank 0")
        dist.barrier()
    else:
        dist.barrier()
        backward(x)             # late: rank 0's all-reduce completes, nothing stays pending
    assert backward.eager_reason is None


@check
def groups_of_the_same_ranks_keep_their_own_names():
    from dynograph.distributed._compiled import group_name, group_named
    a, b = dist.new_group([0, 1]), dist.new_group([0, 1])
    name_a, name_b = group_name(a), group_name(b)
    assert name_a != name_b and group_named(name_a, "x") is a and group_named(name_b, "x") is b
    assert group_name(dist.group.WORLD) == "world"
    dist.destroy_process_group(a)
    assert group_name(b) == name_b and group_named(name_b, "x") is b
    raises(lambda: group_named(name_a, "all_reduce of x"), dist.DistError,
           f"process group {name_a!r}, which does not exist (any more)")
    dist.destroy_process_group(b)


# ---------------------------------------------------------------- the job


if __name__ == "__main__":
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
    run_checks(CHECKS, sys.argv[1])
    dist.destroy_process_group()

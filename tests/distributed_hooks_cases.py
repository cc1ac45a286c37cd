"""The 2-rank checks of DDP communication hooks, futures of collectives, and Join
(tests/test_distributed_hooks.py and tests/test_distributed_join.py run them under mpiexec).

    mpiexec -n 2 python tests/distributed_hooks_cases.py hooks|join OUT_DIR

writes OUT_DIR/rank<r>.json: check name -> null (passed) or the error text.  The helpers
(the model, the batches, one process's reference training) are tests/distributed_cases.py's.
"""
import datetime
import sys

import dynograph
import dynograph.distributed as dist
from dynograph import nn
from dynograph.distributed.algorithms import Join, Joinable, JoinHook
from dynograph.distributed.algorithms.ddp_comm_hooks import DDPCommHookType, default_hooks, register_ddp_comm_hook
from dynograph.futures import Future
from dynograph.nn.parallel import DistributedDataParallel as DDP

from distributed_cases import assert_close, batches, make_model, raises, rank, reference_weights, run_checks

CHECKS = {"hooks": {}, "join": {}}


def check(kind):
    def register(fn):
        CHECKS[kind][fn.__name__] = fn
        return fn
    return register


def train(steps, hook=None, state=None, lr=0.05, per_rank=4, **ddp_kwargs):
    """10 (or ``steps``) SGD steps of DDP on each rank's half of the batches of distributed_cases."""
    model = make_model(100 + rank())
    ddp = DDP(model, bucket_cap_mb=0.002, **ddp_kwargs)
    assert len(ddp.reducer.buckets) > 1
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = dynograph.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    xs, ys = batches(steps, per_rank)
    part = slice(rank() * per_rank, (rank() + 1) * per_rank)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x[part]), y[part]).backward()
        opt.step()
    return list(model.parameters())


# ---------------------------------------------------------------- futures of collectives


@check("hooks")
def work_futures_hold_the_outputs_and_chain():
    t = dynograph.tensor([1.0, 2.0]) * (rank() + 1)
    fut = dist.all_reduce(t, async_op=True).get_future()
    assert isinstance(fut, Future)
    halved = fut.then(lambda f: f.value()[0] / 2).then(lambda f: f.value() + 1)
    assert halved.wait().tolist() == [2.5, 4.0]
    assert fut.done() and fut.value()[0] is t and t.tolist() == [3.0, 6.0]
    assert dist.barrier(async_op=True).get_future().wait() == []
    outs = [dynograph.zeros(2) for _ in range(2)]
    work = dist.all_gather(outs, dynograph.full((2,), float(rank())), async_op=True)
    both = dynograph.futures.collect_all([work.get_future(), dist.barrier(async_op=True).get_future()])
    assert [x.tolist() for x in both.wait()[0].value()] == [[0.0, 0.0], [1.0, 1.0]]
    work.wait()
    assert work.get_future().value()[1].tolist() == [1.0, 1.0]     # a completed Work's future
    polled = dist.all_reduce(dynograph.ones(3), async_op=True)
    fut = polled.get_future()
    while not fut.done():           # done() polls MPI (is_completed too)
        pass
    assert polled.is_completed() and fut.value()[0].tolist() == [2.0, 2.0, 2.0]
    # a dropped handle: the tensor still gets the result, its buffer alive until MPI is done
    kept = dynograph.ones(2)
    dist.all_reduce(kept, async_op=True)
    dist.barrier()
    dist.all_reduce(dynograph.ones(1), async_op=True).wait()
    assert kept.tolist() == [2.0, 2.0]


# ---------------------------------------------------------------- communication hooks


@check("hooks")
def default_hooks_train_like_no_hook():
    ref = reference_weights()
    assert_close(train(10, default_hooks.allreduce_hook), ref, "allreduce_hook")
    # the half types round each bucket's average: 10 steps stay within their precision
    assert_close(train(10, default_hooks.fp16_compress_hook), ref, "fp16_compress_hook", 5e-4)
    assert_close(train(10, default_hooks.bf16_compress_hook), ref, "bf16_compress_hook", 3e-3)
    wrapped = default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook)
    assert_close(train(10, wrapped), ref, "fp16_compress_wrapper(allreduce_hook)", 5e-4)
    assert_close(train(10, default_hooks.allreduce_hook, gradient_as_bucket_view=True), ref,
                 "allreduce_hook, gradient_as_bucket_view")
    ddp = DDP(make_model(100))
    register_ddp_comm_hook(DDPCommHookType.ALLREDUCE, ddp, dist.group.WORLD)
    raises(lambda: ddp.register_comm_hook(None, default_hooks.allreduce_hook), RuntimeError,
           "can only be called once")


@check("hooks")
def a_hook_that_sums_doubles_the_step():
    """Summing without dividing by the world size doubles every gradient: with SGD (momentum
    included) that is the one-process run at twice the learning rate."""
    def sum_hook(state, bucket: dist.GradBucket) -> Future[dynograph.Tensor]:
        state.append(bucket.index())
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda f: f.value()[0])

    calls = []
    ref = reference_weights_at(lr=0.1)
    assert_close(train(10, sum_hook, calls), ref, "sum hook")
    n = len(calls) // 10
    assert n > 1 and calls == list(range(n)) * 10, calls


def reference_weights_at(lr):
    model = make_model(100)
    opt = dynograph.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for x, y in zip(*batches(10, 4)):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return list(model.parameters())


@check("hooks")
def the_bucket_a_hook_sees():
    ddp = DDP(make_model(100), bucket_cap_mb=0.002)
    seen = []

    def inspect_hook(state, bucket):
        grads = bucket.gradients()
        params = bucket.parameters()
        local = [p.grad.clone() for p in params]         # .grad is still the local gradient
        assert [tuple(g.shape) for g in grads] == [tuple(p.shape) for p in params]
        assert all(bool((g == q).all()) for g, q in zip(grads, local))
        flat = dynograph.cat([q.reshape(-1) for q in local])
        assert bool((bucket.buffer() == flat).all()), "the buffer is the local gradients, not divided"
        seen.append((bucket.index(), bucket.is_last(), [id(p) for p in params]))
        # a chained Future that averages
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0]).then(lambda f: f.value().div_(2))

    ddp.register_comm_hook(None, inspect_hook)
    x, y = batches(1, 4)
    part = slice(rank() * 4, (rank() + 1) * 4)
    nn.functional.mse_loss(ddp(x[0][part]), y[0][part]).backward()
    buckets = ddp.reducer.buckets
    assert [s[0] for s in seen] == list(range(len(buckets)))
    assert [s[1] for s in seen] == [False] * (len(buckets) - 1) + [True]
    assert [s[2] for s in seen] == [[id(p) for p in b.params] for b in buckets]
    ref = make_model(100)
    nn.functional.mse_loss(ref(x[0]), y[0]).backward()
    assert_close([p.grad for p in ddp.parameters()], [p.grad for p in ref.parameters()], "chained hook", 1e-6)


@check("hooks")
def hooks_skip_no_sync_and_local_noop():
    calls = []

    def counting(state, bucket):
        calls.append(bucket.index())
        return default_hooks.allreduce_hook(None, bucket)

    model = make_model(100)
    ddp = DDP(make_model(100 + rank()), bucket_cap_mb=0.002)
    ddp.register_comm_hook(None, counting)
    xs, ys = batches(3, 4)
    part = slice(rank() * 4, (rank() + 1) * 4)
    with ddp.no_sync():
        for x, y in zip(xs[:2], ys[:2]):
            nn.functional.mse_loss(ddp(x[part]), y[part]).backward()
    assert calls == [], "a hook ran inside no_sync()"
    nn.functional.mse_loss(ddp(xs[2][part]), ys[2][part]).backward()
    assert calls == list(range(len(ddp.reducer.buckets)))
    for x, y in zip(xs, ys):
        nn.functional.mse_loss(model(x), y).backward()
    assert_close([p.grad for p in ddp.parameters()], [p.grad for p in model.parameters()], "no_sync", 1e-6)
    # the noop hook: each rank keeps its own gradients
    noop = DDP(make_model(100))
    register_ddp_comm_hook(DDPCommHookType.NOOP, noop)
    local = make_model(100)
    nn.functional.mse_loss(noop(xs[0][part]), ys[0][part]).backward()
    nn.functional.mse_loss(local(xs[0][part]), ys[0][part]).backward()
    assert_close([p.grad for p in noop.parameters()], [p.grad for p in local.parameters()], "noop", 0)


@check("hooks")
def hook_errors():
    ddp = DDP(nn.Linear(3, 2))
    raises(lambda: ddp.register_comm_hook(None, 3), TypeError, "Communication hook must be callable")
    raises(lambda: ddp.register_comm_hook(None, lambda bucket: None), TypeError,
           "must take two arguments (state, bucket)")

    def wrong_bucket(state, bucket: int):
        return None

    def wrong_return(state, bucket) -> int:
        return None

    raises(lambda: ddp.register_comm_hook(None, wrong_bucket), ValueError,
           "bucket annotation should be dist.GradBucket")
    raises(lambda: ddp.register_comm_hook(None, wrong_return), ValueError, "return annotation should be")
    x = dynograph.ones(2, 3)
    not_a_future = DDP(nn.Linear(3, 2))
    not_a_future.register_comm_hook(None, lambda state, bucket: 5)
    raises(lambda: not_a_future(x).sum().backward(), RuntimeError,
           "must return a dynograph.futures.Future object, but got builtins.int")

    def done(value):
        f = Future()
        f.set_result(value)
        return f

    wrong_shape = DDP(nn.Linear(3, 2))
    wrong_shape.register_comm_hook(None, lambda state, bucket: done(dynograph.ones(3)))
    raises(lambda: wrong_shape(x).sum().backward(), RuntimeError, "has shape [3]", "buffer has shape [8]")
    a_list = DDP(nn.Linear(3, 2))
    a_list.register_comm_hook(None, lambda state, bucket: done([bucket.buffer()]))
    raises(lambda: a_list(x).sum().backward(), RuntimeError, "must hold one tensor", "list")


# ---------------------------------------------------------------- Join


class Counted(nn.Module):
    """make_model's network with a buffer that counts the forwards (buffers sync under join)."""

    def __init__(self, seed):
        super().__init__()
        self.net = make_model(seed)
        self.register_buffer("forwards", dynograph.zeros(1))

    def forward(self, x):
        self.forwards += 1
        return self.net(x)


def join_reference(counts, divide_by_initial_world_size=True, per_rank=4):
    """One process: both ranks' halves while both train, then the longer rank's half alone
    (its gradient divided by 2 with divide_by_initial_world_size: the other rank adds zeros)."""
    model = make_model(100)
    opt = dynograph.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs, ys = batches(max(counts), per_rank)
    lone = slice(per_rank * counts.index(max(counts)), per_rank * (counts.index(max(counts)) + 1))
    for i, (x, y) in enumerate(zip(xs, ys)):
        opt.zero_grad()
        if i < min(counts):
            loss = nn.functional.mse_loss(model(x), y)
        else:
            loss = nn.functional.mse_loss(model(x[lone]), y[lone])
            if divide_by_initial_world_size:
                loss = loss / 2
        loss.backward()
        opt.step()
    return list(model.parameters())


def join_train(counts, hook=None, per_rank=4, ddp_kwargs=None, **join_kwargs):
    model = Counted(100 + rank())
    ddp = DDP(model, bucket_cap_mb=0.002, **(ddp_kwargs or {}))
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = dynograph.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    xs, ys = batches(max(counts), per_rank)
    part = slice(rank() * per_rank, (rank() + 1) * per_rank)
    with ddp.join(**join_kwargs):
        for x, y in list(zip(xs, ys))[:counts[rank()]]:
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x[part]), y[part]).backward()
            opt.step()
    return model


@check("join")
def join_with_uneven_inputs_equals_one_process():
    counts = (5, 3)           # rank 0 trains two steps alone
    ref = join_reference(counts)
    model = join_train(counts)
    assert_close(list(model.net.parameters()), ref, "join")
    # the final model and buffers are the last joiner's (rank 0 ran 5 forwards)
    assert model.forwards.tolist() == [5.0], model.forwards
    counts = (2, 4)           # rank 1 runs longer, and buffers are not synced before forwards
    model = join_train(counts, ddp_kwargs={"broadcast_buffers": False})
    assert_close(list(model.net.parameters()), join_reference(counts), "join, rank 1 longer")


@check("join")
def join_dividing_by_the_ranks_still_training():
    counts = (5, 3)
    model = join_train(counts, divide_by_initial_world_size=False)
    assert_close(list(model.net.parameters()), join_reference(counts, False), "join, effective world size")


@check("join")
def join_with_a_comm_hook_and_unused_parameter_search():
    counts = (4, 2)
    ref = join_reference(counts)
    model = join_train(counts, default_hooks.allreduce_hook)
    assert_close(list(model.net.parameters()), ref, "join with allreduce_hook")
    model = join_train(counts, ddp_kwargs={"find_unused_parameters": True})
    assert_close(list(model.net.parameters()), ref, "join with find_unused_parameters")


@check("join")
def join_with_no_sync_steps():
    """Gradient accumulation over 2 steps: the no_sync() steps send nothing, and the joined
    rank does not wait for an all-reduce then."""
    ddp = DDP(make_model(100 + rank()), bucket_cap_mb=0.002)
    xs, ys = batches(4, 4)
    part = slice(rank() * 4, (rank() + 1) * 4)
    grads = []
    with ddp.join():
        for i in range(4 if rank() == 0 else 2):
            if i % 2 == 0:
                with ddp.no_sync():          # the forward and the backward inside, as torch needs
                    nn.functional.mse_loss(ddp(xs[i][part]), ys[i][part]).backward()
            else:
                nn.functional.mse_loss(ddp(xs[i][part]), ys[i][part]).backward()
                grads.append([p.grad.clone() for p in ddp.parameters()])
                ddp.zero_grad()
    ref = make_model(100)
    for i in range(4):
        if i < 2:       # both ranks: the average of their halves
            nn.functional.mse_loss(ref(xs[i]), ys[i]).backward()
        else:           # rank 0 alone: its half, halved by the joined rank's zeros
            (nn.functional.mse_loss(ref(xs[i][:4]), ys[i][:4]) / 2).backward()
        if i % 2:
            assert_close(grads[i // 2], [p.grad for p in ref.parameters()], f"no_sync under join, step {i}", 1e-6)
            ref.zero_grad()
            if rank() == 1:
                break

@check("join")
def join_throw_on_early_termination_raises_on_every_rank():
    ddp = DDP(make_model(100), bucket_cap_mb=0.002)
    x = dynograph.ones(4, 6)
    steps = 5 if rank() == 0 else 2
    done = 0

    def loop():
        nonlocal done
        with ddp.join(throw_on_early_termination=True):
            for _ in range(steps):
                ddp(x).sum().backward()
                done += 1

    if rank() == 0:
        raises(loop, RuntimeError, "Detected at least one rank that exhausted inputs")
    else:
        raises(loop, RuntimeError, "Rank 1 exhausted all inputs.")
    assert done == 2, done
    # the ranks are still in step: a plain DDP iteration works
    ddp(x).sum().backward()
    raises(lambda: Join([]), ValueError, "requires at least one joinable")
    with ddp.join(enable=False):
        ddp(x).sum().backward()


class Summer(Joinable):
    """A user's Joinable: sums a number over the ranks every iteration."""

    def __init__(self, group=None):
        super().__init__()
        self.group = group or dist.group.WORLD
        self.total = 0.0
        self.last_joiner = None

    def step(self, x):
        Join.notify_join_context(self)
        t = dynograph.tensor([float(x)])
        dist.all_reduce(t, group=self.group)
        self.total += t.item()

    def join_hook(self, **kwargs):
        summer = self

        class Shadow(JoinHook):
            def main_hook(self):
                dist.all_reduce(dynograph.zeros(1), group=summer.group)

            def post_hook(self, is_last_joiner):
                summer.last_joiner = is_last_joiner

        return Shadow()

    @property
    def join_device(self):
        return dynograph.device("cpu")

    @property
    def join_process_group(self):
        return self.group


@check("join")
def a_user_joinable():
    summer = Summer()
    with Join([summer]):
        for _ in range(3 if rank() == 0 else 1):
            summer.step(1 if rank() == 0 else 10)
    assert summer.total == (13.0 if rank() == 0 else 11.0), summer.total
    assert summer.last_joiner == (rank() == 0)
    ddp = DDP(nn.Linear(2, 2), process_group=dist.new_group([0, 1]))
    raises(lambda: Join([ddp, Summer()]), ValueError, "multiple process groups")


# ---------------------------------------------------------------- entry point


if __name__ == "__main__":
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
    run_checks(CHECKS[sys.argv[1]], sys.argv[2])
    dist.destroy_process_group()

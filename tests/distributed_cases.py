"""The checks tests/test_distributed.py runs on 2 ranks under mpiexec (one job runs them all).

    mpiexec -n 2 python tests/distributed_cases.py checks OUT_DIR
    python -m dynograph.distributed.run -n 2 tests/distributed_cases.py fail

``checks`` writes OUT_DIR/rank<r>.json: check name -> null (passed) or the error text.
``fail`` trains a DDP model and raises on rank 1 at step 3 (the job must end non-zero).
"""
import datetime
import json
import os
import sys
import traceback

import numpy as np

import dynograph
import dynograph.distributed as dist
from dynograph import nn
from dynograph.nn.parallel import DistributedDataParallel as DDP
from dynograph.runtime import dtypes
from dynograph.utils.data import DistributedSampler

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def raises(fn, kind, *fragments):
    try:
        fn()
    except kind as e:
        text = str(e)
        missing = [f for f in fragments if f not in text]
        assert not missing, f"message lacks {missing}: {text}"
        return text
    raise AssertionError(f"no {kind.__name__} raised")


def rank():
    return dist.get_rank()


def data(dtype, r, shape=(2, 3)):
    """Rank ``r``'s tensor: small values, exact in every dtype."""
    base = np.arange(int(np.prod(shape))).reshape(shape) % 5 + r * 3 + 1
    if dtype == dynograph.bool:
        return dynograph.from_numpy((base % 2 == r)).clone()
    return dynograph.from_numpy(base.astype(dtype.np))


def expect(t, array, what):
    got = t.numpy()
    want = np.asarray(array).astype(got.dtype)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(
        got.astype(np.float64), want.astype(np.float64)), f"{what}: got {got!r}, expected {want!r}"




# ---------------------------------------------------------------- the group


@check
def group_basics():
    assert dist.is_available() and dist.is_initialized()
    assert dist.get_world_size() == 2 and rank() == int(os.environ.get("PMI_RANK", rank()))
    assert dist.get_backend() == "mpi"
    raises(lambda: dist.init_process_group("mpi"), ValueError, "twice")
    g = dist.new_group([1])
    if rank() == 1:
        assert dist.get_rank(g) == 0 and dist.get_world_size(g) == 1 and dist.get_process_group_ranks(g) == [1]
        t = dynograph.ones(2)
        dist.all_reduce(t, group=g)
        expect(t, [1, 1], "all_reduce on a group of one")
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
        assert dist.all_reduce(dynograph.ones(2), group=g) is None
    pair = dist.new_group([1, 0])
    t = data(dynograph.float32, rank())
    dist.broadcast(t, src=1, group=pair)
    expect(t, data(dynograph.float32, 1).numpy(), "broadcast in a new group")


# ---------------------------------------------------------------- reductions, every dtype


@check
def all_reduce_every_dtype_and_op():
    a0, a1 = None, None
    for dt in dtypes.ALL_DTYPES:
        a0, a1 = data(dt, 0).numpy(), data(dt, 1).numpy()
        if dt == dynograph.bool:
            table = {dist.ReduceOp.SUM: a0 | a1, dist.ReduceOp.MAX: a0 | a1,
                     dist.ReduceOp.MIN: a0 & a1, dist.ReduceOp.PRODUCT: a0 & a1}
        else:
            w0, w1 = a0.astype(np.float64), a1.astype(np.float64)
            table = {dist.ReduceOp.SUM: w0 + w1, dist.ReduceOp.PRODUCT: w0 * w1}
            if not getattr(dt, "is_complex", False):        # no order on complex numbers
                table.update({dist.ReduceOp.MAX: np.maximum(w0, w1), dist.ReduceOp.MIN: np.minimum(w0, w1)})
            if dt.is_floating_point or getattr(dt, "is_complex", False):
                table[dist.ReduceOp.AVG] = (w0 + w1) / 2
        for op, want in table.items():
            t = data(dt, rank())
            v = t._version
            assert dist.all_reduce(t, op=op) is None
            expect(t, want, f"all_reduce {op} {dt}")
            assert t._version > v, "the write bumps the version counter"


@check
def reduce_and_reduce_scatter_every_dtype():
    def both(dt, shape):        # what SUM gives from the two ranks' data (or, for bool)
        a0, a1 = data(dt, 0, shape).numpy(), data(dt, 1, shape).numpy()
        return a0 | a1 if dt == dynograph.bool else a0.astype(np.float64) + a1

    def twice(t):               # a second piece: the data doubled (negated for bool)
        return ~t if t.dtype == dynograph.bool else t * 2

    for dt in dtypes.ALL_DTYPES:
        t = data(dt, rank())
        dist.reduce(t, dst=1)
        if rank() == 1:
            expect(t, both(dt, (2, 3)), f"reduce {dt}")
        mine = data(dt, rank(), (3,))
        if dt == dynograph.bool:
            parts = [both(dt, (3,)), ~data(dt, 0, (3,)).numpy() | ~data(dt, 1, (3,)).numpy()]
        else:
            parts = [both(dt, (3,)), both(dt, (3,)) * 2]
        out = dynograph.zeros(3, dtype=dt)
        dist.reduce_scatter(out, [mine, twice(mine)], op=dist.ReduceOp.SUM)
        expect(out, parts[rank()], f"reduce_scatter {dt}")
        out = dynograph.zeros(3, dtype=dt)
        dist.reduce_scatter_tensor(out, dynograph.cat([mine, twice(mine)]))
        expect(out, parts[rank()], f"reduce_scatter_tensor {dt}")
    t = dynograph.tensor([1.0, 3.0]) * (rank() + 1)
    dist.reduce(t, dst=0, op=dist.ReduceOp.AVG)
    if rank() == 0:
        expect(t, [1.5, 4.5], "reduce AVG")


# ---------------------------------------------------------------- data movement, every dtype


@check
def movement_every_dtype():
    for dt in dtypes.ALL_DTYPES:
        mine, other = data(dt, rank()), data(dt, 1 - rank())
        d0, d1 = data(dt, 0).numpy(), data(dt, 1).numpy()
        t = data(dt, rank())
        dist.broadcast(t, src=1)
        expect(t, d1, f"broadcast {dt}")
        outs = [dynograph.zeros(2, 3, dtype=dt) for _ in range(2)]
        dist.all_gather(outs, mine)
        expect(outs[0], d0, f"all_gather {dt}")
        expect(outs[1], d1, f"all_gather {dt}")
        cat = dynograph.zeros(4, 3, dtype=dt)
        dist.all_gather_into_tensor(cat, mine)
        expect(cat, np.concatenate([d0, d1]), f"all_gather_into_tensor {dt}")
        stacked = dynograph.zeros(2, 2, 3, dtype=dt)
        dist.all_gather_into_tensor(stacked, mine)
        expect(stacked, np.stack([d0, d1]), f"all_gather_into_tensor stacked {dt}")
        if rank() == 0:
            got = [dynograph.zeros(2, 3, dtype=dt) for _ in range(2)]
            dist.gather(mine, got, dst=0)
            expect(got[1], d1, f"gather {dt}")
        else:
            dist.gather(mine, dst=0)
        out = dynograph.zeros(2, 3, dtype=dt)
        dist.scatter(out, [data(dt, 5), data(dt, 6)] if rank() == 1 else None, src=1)
        expect(out, data(dt, 5 + rank()).numpy(), f"scatter {dt}")
        if rank() == 0:
            dist.send(mine, dst=1, tag=3)
        else:
            got = dynograph.zeros(2, 3, dtype=dt)
            assert dist.recv(got, src=0, tag=3) == 0
            expect(got, d0, f"send/recv {dt}")
        got = dynograph.zeros(2, 3, dtype=dt)
        works = [dist.isend(mine, dst=1 - rank()), dist.irecv(got, src=None)]
        assert all(w.wait() for w in works)
        expect(got, other.numpy(), f"isend/irecv {dt}")
        # all_to_all with pieces of different sizes: rank r sends r + j + 1 elements to rank j
        ins = [dynograph.full((rank() + j + 1,), 1, dtype=dt) * (j + 1) if dt != dynograph.bool
               else dynograph.ones(rank() + j + 1, dtype=dt) for j in range(2)]
        outs = [dynograph.zeros(i + rank() + 1, dtype=dt) for i in range(2)]
        dist.all_to_all(outs, ins)
        for i in range(2):
            want = np.ones(i + rank() + 1) * (1 if dt == dynograph.bool else rank() + 1)
            expect(outs[i], want, f"all_to_all {dt}")
        single_in = dynograph.cat([data(dt, rank(), (2,)), data(dt, rank() + 2, (2,))])
        single_out = dynograph.zeros(4, dtype=dt)
        dist.all_to_all_single(single_out, single_in)
        want = np.concatenate([data(dt, 0 + 2 * rank(), (2,)).numpy(), data(dt, 1 + 2 * rank(), (2,)).numpy()])
        expect(single_out, want, f"all_to_all_single {dt}")


@check
def receives_waited_out_of_order():
    if rank() == 0:
        for k in range(3):
            dist.isend(dynograph.full((k + 1,), float(k)), dst=1).wait()
    else:
        got = [dynograph.zeros(k + 1) for k in range(3)]
        works = [dist.irecv(got[k], src=None) for k in range(3)]
        for w in reversed(works):
            w.wait()
        assert [g.tolist() for g in got] == [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]], got


@check
def async_work_handles():
    t = dynograph.ones(1000) * (rank() + 1)
    work = dist.all_reduce(t, async_op=True)
    assert isinstance(work, dist.Work)
    assert work.wait() is True and work.is_completed() and work.is_success()
    expect(t, np.full(1000, 3.0), "async all_reduce")
    outs = [dynograph.zeros(2) for _ in range(2)]
    w = dist.all_gather(outs, dynograph.full((2,), float(rank())), async_op=True)
    assert [x.tolist() for x in w.result()] == [[0, 0], [1, 1]]
    w = dist.barrier(async_op=True)
    w.wait()


@check
def objects():
    objs = [{"lr": 0.1, "names": ["a", "b"]}, 7, None] if rank() == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"lr": 0.1, "names": ["a", "b"]}, 7, None], objs
    everyone = [None, None]
    dist.all_gather_object(everyone, ("rank", rank(), "x" * (rank() * 100)))
    assert everyone == [("rank", 0, ""), ("rank", 1, "x" * 100)], everyone
    for dst in (0, 1):
        gathered = [None, None] if rank() == dst else None
        dist.gather_object({"from": rank(), "data": list(range(rank() * 50))}, gathered, dst=dst)
        if rank() == dst:
            assert gathered == [{"from": 0, "data": []}, {"from": 1, "data": list(range(50))}]
    if rank() == 0:         # raised before any message: rank 1 does not take part
        raises(lambda: dist.gather_object(1, [None], dst=0), ValueError,
               "object_gather_list must have 2 items")
    out = [None]
    dist.scatter_object_list(out, [("to", 0), {"to": 1, "pad": "y" * 300}] if rank() == 1 else None,
                             src=1)
    assert out == [[("to", 0), {"to": 1, "pad": "y" * 300}][rank()]], out
    raises(lambda: dist.scatter_object_list([], None, src=0), ValueError, "at least 1")


# ---------------------------------------------------------------- failures


@check
def mismatches_fail_fast_naming_ranks_and_shapes():
    raises(lambda: dist.all_reduce(dynograph.ones(3 + rank())), RuntimeError,
           "all_reduce", "rank 0 has float32[3]", "rank 1 has float32[4]")
    raises(lambda: dist.all_reduce(dynograph.ones(2, dtype=[dynograph.float32, dynograph.int64][rank()])),
           RuntimeError, "rank 0 has float32[2]", "rank 1 has int64[2]")
    raises(lambda: dist.all_reduce(dynograph.ones(2), op=[dist.ReduceOp.SUM, dist.ReduceOp.MAX][rank()]),
           RuntimeError, "op SUM", "op MAX")
    raises(lambda: dist.broadcast(dynograph.ones(2), src=rank()), RuntimeError, "root rank 0", "root rank 1")
    raises(lambda: dist.broadcast_object_list([None] * (2 + rank()), src=0), RuntimeError,
           "rank 0 has a list of 2 (root rank 0); rank 1 has a list of 3 (root rank 0)")
    t = dynograph.ones(2)
    raises(lambda: dist.all_reduce(t) if rank() == 0 else dist.broadcast(t, src=0), RuntimeError,
           "rank 0 called all_reduce with float32[2] (op SUM); rank 1 called broadcast with float32[2] (root rank 0)")
    outs = [dynograph.zeros(1 + rank()), dynograph.zeros(2)]
    raises(lambda: dist.all_to_all(outs, [dynograph.ones(1), dynograph.ones(1)]), RuntimeError,
           "all_to_all", "sends 1 elements")
    if rank() == 0:
        dist.send(dynograph.ones(3), dst=1)
    else:
        raises(lambda: dist.recv(dynograph.zeros(4), src=0), RuntimeError,
               "rank 0 sent float32[3]", "rank 1's tensor is float32[4]")
    dist.barrier()


@check
def bad_arguments():
    raises(lambda: dist.all_reduce(dynograph.ones(4, 4).t()), ValueError, "contiguous")
    raises(lambda: dist.all_reduce(dynograph.ones(2, dtype=dynograph.int64), op=dist.ReduceOp.AVG),
           ValueError, "AVG", "int64")
    raises(lambda: dist.all_gather([dynograph.zeros(2)], dynograph.zeros(2)), ValueError, "list of 2")
    raises(lambda: dist.all_gather([dynograph.zeros(3), dynograph.zeros(2)], dynograph.zeros(2)), ValueError,
           "tensor_list[0] is float32[3]", "float32[2]")
    raises(lambda: dist.broadcast(dynograph.zeros(2), src=5), ValueError, "rank 5")
    raises(lambda: dist.broadcast(dynograph.zeros(2)), ValueError, "either src or group_src must be given")
    raises(lambda: dist.send(dynograph.zeros(2), dst=rank()), ValueError, "should not be the same")
    raises(lambda: dist.all_reduce(np.zeros(2)), TypeError, "dynograph Tensor")
    raises(lambda: dist.init_process_group("nccl"), ValueError, "nccl")


def late_timeout():
    """A timeout is each process's own: rank 0 waits 1 s for a rank 1 that comes late; rank 1
    then has time to complete what rank 0 gave up on, however loaded the machine."""
    return datetime.timedelta(seconds=1 if rank() == 0 else 60)


@check
def a_rank_that_does_not_come_times_out_naming_the_collective():
    g = dist.new_group([0, 1], timeout=late_timeout())
    if rank() == 0:
        raises(lambda: dist.barrier(group=g), dist.DistBackendError,
               "dynograph.distributed.barrier timed out after 1 s on rank 0", "did not call it")
        dist.barrier()
    else:
        dist.barrier()
        dist.barrier(group=g)       # the barrier rank 0 gave up on completes, nothing left pending


# ---------------------------------------------------------------- DDP


def make_model(seed):
    dynograph.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 3))


def batches(steps, per_rank):
    g = dynograph.Generator().manual_seed(1234)
    xs = [dynograph.randn(2 * per_rank, 6, generator=g) for _ in range(steps)]
    ys = [dynograph.randn(2 * per_rank, 3, generator=g) for _ in range(steps)]
    return xs, ys


def reference_weights(steps=10, per_rank=4):
    """One process, the concatenated batch of both ranks, the same optimizer."""
    model = make_model(100)     # rank 0's initial weights
    opt = dynograph.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs, ys = batches(steps, per_rank)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_weights(mode, steps=10, per_rank=4, **ddp_kwargs):
    model = make_model(100 + rank())     # different on each rank: DDP copies rank 0's
    ddp = DDP(model, bucket_cap_mb=0.002, **ddp_kwargs)
    assert len(ddp.reducer.buckets) > 1
    opt = dynograph.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    xs, ys = batches(steps, per_rank)

    def loss_of(x, y):
        return nn.functional.mse_loss(ddp(x), y)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled_loss = dynograph.compile(loss_of)
    compiled_step = dynograph.compile(step)
    compiled_model = dynograph.compile(ddp)
    for x, y in zip(xs, ys):
        x, y = x[rank() * per_rank:(rank() + 1) * per_rank], y[rank() * per_rank:(rank() + 1) * per_rank]
        if mode == "eager":
            step(x, y)
        elif mode == "compiled":
            opt.zero_grad()
            compiled_loss(x, y).backward()
            opt.step()
        elif mode == "compiled module":
            opt.zero_grad()
            nn.functional.mse_loss(compiled_model(x), y).backward()
            opt.step()
        else:
            compiled_step(x, y)
    if mode == "compiled":
        assert compiled_loss.eager_reason is None, compiled_loss.eager_reason
    if mode == "compiled module":
        reason = compiled_model._compiled_call.eager_reason
        assert reason is None, reason
    if mode == "compiled step":     # the all-reduces are nodes of its graph (distributed_compile_cases.py)
        assert compiled_step.eager_reason is None, compiled_step.eager_reason
    return ddp, model


def assert_close(ours, ref, what, tol=1e-5):
    worst = max(float((a - b).abs().max()) for a, b in zip(ours, ref))
    assert worst <= tol, f"{what}: weights differ from one process by {worst:g}"


@check
def ddp_ten_steps_equal_one_process():
    ref = reference_weights()
    for mode in ("eager", "compiled", "compiled module", "compiled step"):
        ddp, model = ddp_weights(mode)
        assert_close(list(model.parameters()), ref, mode)


@check
def ddp_gradient_as_bucket_view():
    ref = reference_weights()
    ddp, model = ddp_weights("eager", gradient_as_bucket_view=True)
    assert_close(list(model.parameters()), ref, "gradient_as_bucket_view")
    flats = [b.flat for b in ddp.reducer.buckets]
    assert all(any(np.shares_memory(p.grad._data, f) for f in flats) for p in model.parameters())


@check
def ddp_no_sync_accumulates_then_averages():
    model = make_model(100)
    ddp = DDP(make_model(100 + rank()), bucket_cap_mb=0.002)
    xs, ys = batches(3, 4)
    part = slice(rank() * 4, (rank() + 1) * 4)
    with ddp.no_sync():
        for x, y in zip(xs[:2], ys[:2]):
            nn.functional.mse_loss(ddp(x[part]), y[part]).backward()
    local = [p.grad.clone() for p in ddp.parameters()]
    nn.functional.mse_loss(ddp(xs[2][part]), ys[2][part]).backward()
    for x, y in zip(xs, ys):
        nn.functional.mse_loss(model(x), y).backward()
    assert_close([p.grad for p in ddp.parameters()], [p.grad for p in model.parameters()], "no_sync", 1e-6)
    # inside no_sync the gradients stayed local (they differ between the ranks)
    everyone = [None, None]
    dist.all_gather_object(everyone, [g.tolist() for g in local])
    assert everyone[0] != everyone[1]


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        dynograph.manual_seed(0)
        self.a = nn.Linear(4, 2)
        self.b = nn.Linear(4, 2)
        self.never = nn.Linear(4, 2)

    def forward(self, x, use_b):
        return self.a(x) + self.b(x) if use_b else self.a(x)


@check
def ddp_find_unused_parameters():
    ref = TwoHeads()
    xs = dynograph.randn(8, 4, generator=dynograph.Generator().manual_seed(5))
    # rank 0 uses head b, rank 1 does not: b's gradient is the average with zeros
    loss = (ref(xs[:4], True).square().mean() + ref(xs[4:], False).square().mean()) / 2
    loss.backward()
    ddp = DDP(TwoHeads(), find_unused_parameters=True)
    ddp(xs[rank() * 4:(rank() + 1) * 4], rank() == 0).square().mean().backward()
    m = ddp.module
    for name in ("a", "b"):
        for p, q in zip(getattr(m, name).parameters(), getattr(ref, name).parameters()):
            assert_close([p.grad], [q.grad], f"find_unused_parameters {name}", 1e-6)
    assert m.never.weight.grad is None, "a parameter no rank used keeps grad None"
    plain = DDP(TwoHeads())
    plain(xs[:4], True).square().mean().backward()
    raises(lambda: plain(xs[:4], True), RuntimeError, "Expected to have finished reduction",
           "find_unused_parameters=True", "never.weight")


@check
def ddp_a_rank_that_skips_backward_times_out_naming_the_all_reduce():
    g = dist.new_group([0, 1], timeout=late_timeout())
    ddp = DDP(nn.Linear(4, 2), process_group=g)
    x = dynograph.ones(3, 4)
    if rank() == 0:
        raises(lambda: ddp(x).sum().backward(), dist.DistBackendError,
               "all_reduce of DistributedDataParallel bucket 0 timed out")
        dist.barrier()
    else:
        dist.barrier()
        ddp(x).sum().backward()     # late: rank 0's all-reduce completes, nothing stays pending


@check
def ddp_checks_the_model_across_ranks():
    model = nn.Linear(3, 2 + rank())
    raises(lambda: DDP(model), RuntimeError, "DDP expects same model across all ranks",
           "rank 0's parameter weight is dynograph.float32[2, 3]", "rank 1's weight is dynograph.float32[3, 3]")
    raises(lambda: DDP(nn.Linear(2, 2), device_ids=[0]), ValueError, "device_ids")


@check
def sampler_and_rank0_helpers():
    s = DistributedSampler(range(11), shuffle=False)
    assert s.num_replicas == 2 and s.rank == rank()
    assert list(s) == (list(range(11)) + [0])[rank()::2], list(s)      # padded from the start
    shards = [None, None]
    dist.all_gather_object(shards, list(DistributedSampler(range(11), seed=4, drop_last=True)))
    assert len(shards[0]) == 5 and not set(shards[0]) & set(shards[1])
    assert dist.is_main_process() == (rank() == 0)
    path = os.path.join(OUT, "ckpt.pt")
    dist.save_on_rank0({"w": dynograph.arange(3.0) + rank()}, path)
    assert dynograph.load(path)["w"].tolist() == [0.0, 1.0, 2.0]
    assert dist.rank0_only(lambda: 5)() == (5 if rank() == 0 else None)


# ---------------------------------------------------------------- the entry points


def run_checks(checks, out):
    """Run ``checks`` ({name: function}) in order, writing {name: None or the traceback} to
    out/rank<r>.json after each one."""
    results = {}
    only = os.environ.get("DIST_CASES_ONLY")       # for debugging: a comma-separated subset
    for name, fn in checks.items():
        if only and name not in only.split(","):
            continue
        try:
            fn()
            results[name] = None
        except Exception:
            results[name] = traceback.format_exc()
        # written after every check: when a failed check leaves the ranks out of step, the
        # job ends in a timeout, and the test still reports which check failed first
        with open(os.path.join(out, f"rank{rank()}.json"), "w") as f:
            json.dump(results, f)
        dist.barrier()


def fail_mid_training():
    ddp = DDP(make_model(0))
    opt = dynograph.optim.SGD(ddp.parameters(), lr=0.1)
    xs, ys = batches(10, 2)
    for i, (x, y) in enumerate(zip(xs, ys)):
        if i == 3 and rank() == 1:
            raise ValueError("rank 1 fails at step 3")
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    print("finished all steps", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    # checks: a failed check that leaves the ranks out of step ends the job in a minute;
    # fail: the launcher's --timeout (DYNOGRAPH_DIST_TIMEOUT) applies
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60) if mode == "checks" else None)
    if mode == "checks":
        OUT = sys.argv[2]
        run_checks(CHECKS, OUT)
    else:
        fail_mid_training()
    dist.destroy_process_group()

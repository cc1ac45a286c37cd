"""dynograph.distributed on 2 ranks: all-reduce bandwidth against mpi4py, and DDP's MLP step.

    python -m tools.bench_distributed [--sizes 1,4,16,64,256] [--repeats 9] [--steps 20]
                                      [--nproc 2] [--json FILE]

Part 1 — all-reduce: for each size (MB of float32) the same rank pair runs, interleaved
repeat by repeat, mpi4py's own ``comm.Allreduce(MPI.IN_PLACE, numpy_array)``, the same as
``comm.Iallreduce(...).Wait()`` (MPI's non-blocking algorithm, which dynograph uses) and
``dynograph.distributed.all_reduce(tensor)`` (which adds a signature check and a non-blocking
call waited on with a timeout).  Each repeat starts after a barrier; the median time gives
the algorithm bandwidth (bytes / time) and the ratio to mpi4py's.

Part 2 — the MLP training step of tools/bench (784-512-512-10, SGD momentum, 128 samples per
rank): one process without DDP, then ``--nproc`` ranks with DistributedDataParallel, eager,
with the forward compiled, and with the whole step compiled (its bucket all-reduces nodes of
the graph).  Throughput is samples per second over all ranks; the 2-rank
eager step is split into forward, backward (gradient hooks copy into buckets and start the
all-reduces), the wait for the all-reduces after backward, and the optimizer step; a step
under ``no_sync()`` (no communication) shows what communication adds.  On a machine with
fewer cores than 2 x (ranks' threads) the ranks compete for cores, so the ideal speed-up is
below the rank count.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mlp(lib):
    m = lib.nn
    return m.Sequential(m.Linear(784, 512), m.ReLU(), m.Linear(512, 512), m.ReLU(), m.Linear(512, 10))


# ---------------------------------------------------------------- inside the ranks


def bench_allreduce(sizes_mb, repeats):
    from mpi4py import MPI
    import dynograph
    import dynograph.distributed as dist
    comm = MPI.COMM_WORLD
    rows = []
    for mb in sizes_mb:
        n = int(mb * 1024 * 1024) // 4
        plain = np.zeros(n, np.float32)
        ours = dynograph.zeros(n)
        reps = max(3, repeats if mb <= 64 else repeats // 2)
        calls = {"mpi4py": lambda: comm.Allreduce(MPI.IN_PLACE, plain, MPI.SUM),
                 "mpi4py_nonblocking": lambda: comm.Iallreduce(MPI.IN_PLACE, plain, MPI.SUM).Wait(),
                 "dynograph": lambda: dist.all_reduce(ours)}
        times = {k: [] for k in calls}
        names = list(calls)
        for i in range(reps + 1):                    # the first round warms them up
            for name in names[i % 3:] + names[:i % 3]:      # each goes first in turn
                comm.Barrier()
                t0 = time.perf_counter()
                calls[name]()
                if i:
                    times[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"MB": mb, **{f"{k}_ms": 1e3 * v for k, v in med.items()},
                     **{f"{k}_GBps": mb / 1024 / v for k, v in med.items()},
                     "ratio": med["mpi4py"] / med["dynograph"]})
    return rows


def batch(rank, per_rank=128):
    rng = np.random.default_rng(rank)
    return rng.standard_normal((per_rank, 784)).astype(np.float32), rng.integers(0, 10, size=per_rank)


def bench_mlp(steps, distributed):
    import dynograph
    from dynograph import nn
    rank = 0
    if distributed:
        import dynograph.distributed as dist
        from dynograph.nn.parallel import DistributedDataParallel as DDP
        rank = dist.get_rank()
    x, y = (dynograph.from_numpy(a) for a in batch(rank))
    results = {}
    for mode in ("eager", "compiled forward"):
        dynograph.manual_seed(0)
        model = mlp(dynograph)
        net = DDP(model) if distributed else model
        opt = dynograph.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
        forward = dynograph.compile(net) if mode == "compiled forward" else net
        parts = {"forward": [], "backward": [], "all-reduce wait": [], "optimizer": [], "step": []}
        if distributed:
            reducer = net.reducer
            finish = reducer._finish

            def timed_finish():
                t = time.perf_counter()
                finish()
                parts["all-reduce wait"][-1] += time.perf_counter() - t
            reducer._finish = timed_finish
        for i in range(steps + 3):
            if distributed:
                dist.barrier()
            parts["all-reduce wait"].append(0.0)
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(forward(x), y)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            if i >= 3:
                parts["forward"].append(t1 - t0)
                parts["backward"].append(t2 - t1 - parts["all-reduce wait"][-1])
                parts["optimizer"].append(t3 - t2)
                parts["step"].append(t3 - t0)
            else:
                parts["all-reduce wait"].pop()
        results[mode] = {k: 1e3 * statistics.median(v) for k, v in parts.items() if v}
        if distributed and mode == "eager":
            local = []
            for i in range(steps + 3):
                dist.barrier()
                t0 = time.perf_counter()
                opt.zero_grad()
                with net.no_sync():
                    nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
                if i >= 3:
                    local.append(time.perf_counter() - t0)
            results["eager, no_sync (no communication)"] = {"step": 1e3 * statistics.median(local)}
    results["compiled step"] = {"step": _compiled_step_ms(steps, distributed, x, y)}
    return results


def _compiled_step_ms(steps, distributed, x, y):
    """The whole step compiled (zero_grad, forward, backward, optimizer step): with DDP, its
    bucket all-reduces are nodes of the graph."""
    import dynograph
    from dynograph import nn
    dynograph.manual_seed(0)
    net = mlp(dynograph)
    if distributed:
        import dynograph.distributed as dist
        from dynograph.nn.parallel import DistributedDataParallel as DDP
        net = DDP(net)
    opt = dynograph.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

    @dynograph.compile
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    times = []
    for i in range(steps + 3):
        if distributed:
            dist.barrier()
        t0 = time.perf_counter()
        step(x, y)
        if i >= 3:
            times.append(time.perf_counter() - t0)
    assert step.eager_reason is None, step.eager_reason
    return 1e3 * statistics.median(times)


def worker(ns):
    if ns.single:
        out = {"mlp": bench_mlp(ns.steps, distributed=False)}
        rank = 0
    else:
        import dynograph.distributed as dist
        dist.init_process_group("mpi")
        rank = dist.get_rank()
        out = {"allreduce": bench_allreduce(ns.sizes, ns.repeats),
               "mlp": bench_mlp(ns.steps, distributed=True)}
        dist.destroy_process_group()
    if rank == 0:
        with open(ns.out, "w") as f:
            json.dump(out, f)


# ---------------------------------------------------------------- the driver


def run(ns):
    sys.path.insert(0, ROOT)
    from dynograph.distributed.run import environment, find_mpiexec
    script = os.path.abspath(__file__)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    common = ["--sizes", ",".join(str(s) for s in ns.sizes), "--repeats", str(ns.repeats),
              "--steps", str(ns.steps)]
    with tempfile.TemporaryDirectory() as d:
        one, many = os.path.join(d, "one.json"), os.path.join(d, "many.json")
        subprocess.run([sys.executable, script, "--worker", "--single", "--out", one] + common,
                       check=True, env=env)
        # the ranks get what dynograph-run gives them (their share of the cores)
        ranks_env = environment(argparse.Namespace(nproc=ns.nproc, hostfile=None, timeout=None), env)
        subprocess.run([find_mpiexec(), "-n", str(ns.nproc), sys.executable, script, "--worker",
                        "--out", many] + common, check=True, env=ranks_env)
        single, multi = json.load(open(one)), json.load(open(many))
    report(single, multi, ns.nproc)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"nproc": ns.nproc, "cpus": os.cpu_count(), "one_process": single,
                       "ranks": multi}, f, indent=1)


def report(single, multi, nproc):
    print(f"all-reduce, float32, {nproc} ranks (median of the repeats; bandwidth = bytes / time)")
    print(f"{'MB':>6} {'mpi4py ms':>10} {'(Iallreduce)':>13} {'dynograph ms':>13} {'mpi4py GB/s':>12} "
          f"{'dynograph GB/s':>15} {'of mpi4py':>10}")
    for r in multi["allreduce"]:
        print(f"{r['MB']:>6g} {r['mpi4py_ms']:>10.2f} {r['mpi4py_nonblocking_ms']:>13.2f} "
              f"{r['dynograph_ms']:>13.2f} {r['mpi4py_GBps']:>12.2f} {r['dynograph_GBps']:>15.2f} "
              f"{100 * r['ratio']:>9.0f}%")
    print("(mpi4py: comm.Allreduce on a numpy array; (Iallreduce): comm.Iallreduce(...).Wait();"
          " of mpi4py: dynograph's bandwidth / mpi4py Allreduce's)")
    print()
    print("MLP 784-512-512-10 training step, 128 samples per rank (median ms per step)")
    per_rank = 128
    for mode in ("eager", "compiled forward", "compiled step"):
        t1 = single["mlp"][mode]["step"]
        tn = multi["mlp"][mode]["step"]
        speedup = (nproc * per_rank / tn) / (per_rank / t1)
        print(f"  {mode:<17} 1 process {t1:7.2f} ms ({1e3 * per_rank / t1:6.0f} samples/s)   "
              f"{nproc} ranks {tn:7.2f} ms ({1e3 * nproc * per_rank / tn:6.0f} samples/s)   "
              f"speed-up {speedup:.2f}x")
    print(f"  where a {nproc}-rank step's time goes (ms):")
    for mode, parts in multi["mlp"].items():
        print(f"    {mode:<36} " + "  ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    print("    1 process, for comparison             " +
          "  ".join(f"{k} {v:.2f}" for k, v in single["mlp"]["eager"].items()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1,4,16,64,256", type=lambda s: [float(x) for x in s.split(",")])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--json")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.worker:
        sys.path.insert(0, ROOT)
        worker(ns)
    else:
        run(ns)


if __name__ == "__main__":
    main()

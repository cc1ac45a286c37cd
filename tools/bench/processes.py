"""The benchmark runner in fresh processes: medians of the ratios of several processes.

On a virtual machine one process's speed can differ from the next one's by a third (where its
memory lands, what the host's other tenants do), for dynograph and torch alike, so one run of
``python -m tools.bench`` gives one sample of a ratio.  This runs it in ``--processes`` fresh
processes and prints, per threading table, workload and system, the median of the
processes' ratios to the baseline, their range and the median time.  With ``--against DIR``
(another checkout: ``git worktree add DIR COMMIT``, its ``dynograph/compiler`` and
``dynograph/runtime`` linked to ``../compiler`` and ``../runtime`` where dynograph is
installed in development mode) the processes alternate between the two trees, so both meet
the same minutes of the machine.

    python -m tools.bench.processes --filter llvm_w4 --systems dynograph-llvm,torch --processes 6
    python -m tools.bench.processes --filter 'llvm_w4|llvm_w5' --against /tmp/before

Every other option is the runner's (``--filter``, ``--systems``, ``--repeats``, ``--threads``,
``--baseline``, ``--target-ms``), passed to each process.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from .runner import _fmt_time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_once(tree, options, threads):
    """One ``python -m tools.bench`` process in ``tree`` (``threads``: its ``--threads``):
    {pass ("default", "one"): [result record]}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        done = subprocess.run([sys.executable, "-m", "tools.bench", *options, "--json", out],
                              cwd=tree, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"tools.bench in {tree} failed:\n{done.stdout}\n{done.stderr}")
        with open(out) as f:
            document = json.load(f)
    passes = document["passes"] if threads == "both" else {threads: document}
    return {name: doc["results"] for name, doc in passes.items()}


def collect(trees, options, threads, processes, progress=None):
    """{(tree, pass, workload, system): {"ratios": [...], "medians": [...], "load": [...]}}
    over ``processes`` rounds, the trees alternating within each round."""
    samples = {}
    for i in range(processes):
        for tree in trees:
            if progress:
                progress(f"round {i + 1}/{processes}: {tree}")
            for name, results in run_once(tree, options, threads).items():
                for rec in results:
                    for system, stats in rec["systems"].items():
                        entry = samples.setdefault((tree, name, rec["workload"], system),
                                                   {"ratios": [], "medians": [], "load": []})
                        if system in rec["ratios"]:
                            entry["ratios"].append(rec["ratios"][system])
                        entry["medians"].append(stats["median_s"])
                        entry["load"].append(rec.get("foreign_load_cores") or 0.0)
    return samples


def format_summary(samples, trees, baseline):
    lines = []
    passes = sorted({k[1] for k in samples}, key=("default", "one").index)
    for name in passes:
        lines.append(f"# {'default threading' if name == 'default' else 'one thread'}: "
                     f"ratio to {baseline}, median over the processes [range], median time; "
                     f"most other load seen")
        keys = sorted({(k[2], k[3]) for k in samples if k[1] == name})
        for workload, system in keys:
            cells = []
            for tree in trees:
                s = samples.get((tree, name, workload, system))
                if s is None:
                    cells.append(f"{tree}: -")
                    continue
                ratio = (f"{statistics.median(s['ratios']):.3f}x "
                         f"[{min(s['ratios']):.2f}-{max(s['ratios']):.2f}]" if s["ratios"] else "")
                cells.append(f"{tree}: {ratio} {_fmt_time(statistics.median(s['medians']))} "
                             f"(load {max(s['load']):.1f})")
            lines.append(f"{workload:20s} {system:16s} " + "   ".join(cells))
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tools.bench.processes",
                                description=__doc__.split("\n")[0])
    p.add_argument("--processes", type=int, default=5, metavar="N",
                   help="fresh processes per tree (default 5)")
    p.add_argument("--against", metavar="DIR", help="another checkout, alternating with this one")
    p.add_argument("--filter", metavar="PATTERN")
    p.add_argument("--systems", metavar="A,B")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", choices=("both", "default", "one"), default="both")
    p.add_argument("--baseline", default="torch")
    p.add_argument("--target-ms", type=float, default=50.0)
    args = p.parse_args(argv)
    if args.processes < 1:
        p.error("--processes must be at least 1")
    trees = [ROOT] if args.against is None else [os.path.abspath(args.against), ROOT]
    for tree in trees:
        if not os.path.isfile(os.path.join(tree, "tools", "bench", "runner.py")):
            p.error(f"{tree} holds no tools/bench")
    options = ["--repeats", str(args.repeats),
               "--baseline", args.baseline, "--target-ms", str(args.target_ms)]
    if args.filter:
        options += ["--filter", args.filter]
    if args.systems:
        options += ["--systems", args.systems]
    samples = collect(trees, options + ["--threads", args.threads], args.threads, args.processes,
                      progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(format_summary(samples, trees, args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())

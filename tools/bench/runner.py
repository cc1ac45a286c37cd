"""The benchmark runner: a registry of named workloads and an interleaved timer.

A workload is a function that builds its inputs and returns one zero-argument callable
per system (``{"dynograph": fn, "numpy": fn, "torch": fn}``); systems that cannot run
here (torch not installed) are simply left out.  Every callable returns its result, so
the runner can check once that all systems compute the same values before timing them.

Timing: each callable is warmed up, then its inner loop count is sized so that one
repeat takes about ``target_s``; then the systems are timed in turn, one repeat each,
rotating the order every round, so that drifts of the machine (frequency, other load)
touch every system alike.  We report the median, minimum and interquartile range of
the per-call times, and each system's median relative to a baseline system.
"""
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np

WORKLOADS = {}


@dataclass
class Workload:
    name: str
    setup: object           # () -> {system: callable}
    description: str = ""
    rtol: float = 1e-4      # tolerance of the cross-system result check
    atol: float = 1e-5
    tags: tuple = ()
    # The callables time themselves: each call makes one measurement (e.g. a compile time,
    # taken in a fresh process) and returns its seconds, which the runner reports as is.
    self_timed: bool = False


def workload(name, description="", *, rtol=1e-4, atol=1e-5, tags=(), self_timed=False):
    """Register ``setup`` (returning ``{system: callable}``) as the workload ``name``."""
    def register(setup):
        assert name not in WORKLOADS, f"workload {name} registered twice"
        WORKLOADS[name] = Workload(name, setup, description or (setup.__doc__ or "").strip(),
                                   rtol, atol, tuple(tags), self_timed)
        return setup
    return register


def optional_torch():
    """The torch module, or None where it is not installed (its workloads are skipped)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def optional_torch_compile(fn):
    """``torch.compile(fn)``, or None where torch is missing or torch.compile refuses ``fn``
    (the reason is printed).  Compilation itself happens on the first call: the agreement
    check or the warm-up, never a timed call; a first call that fails leaves the system out
    like any system that raises."""
    torch = optional_torch()
    if torch is None:
        return None
    try:
        return torch.compile(fn)
    except Exception as e:                    # e.g. a Python version dynamo does not support
        print(f"torch-compile left out: {type(e).__name__}: {e}", file=sys.stderr)
        return None


def load_workloads():
    """Import the workload modules (each registers itself) and return the registry."""
    from . import workloads  # noqa: F401
    return WORKLOADS


def select(pattern=None):
    """The registered workloads whose name matches the regular expression ``pattern``."""
    names = sorted(load_workloads())
    if pattern:
        rx = re.compile(pattern)
        names = [n for n in names if rx.search(n)]
    return [WORKLOADS[n] for n in names]


# ---------------------------------------------------------------- timing

@dataclass
class Stats:
    median: float           # seconds per call
    min: float
    iqr: float
    number: int             # calls per repeat
    samples: list = field(default_factory=list)

    def as_json(self):
        return {"median_s": self.median, "min_s": self.min, "iqr_s": self.iqr,
                "inner_loop": self.number, "repeats_s": self.samples}


# "wall": elapsed time.  "cpu": CPU time of this process, which leaves out the time the
# process waits for a core, so it is steadier on a machine shared with other jobs (but
# counts the work of every thread: keep torch at one thread when comparing with it).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _time(fn, number, clock=time.perf_counter):
    """Seconds per call over ``number`` calls."""
    t0 = clock()
    for _ in range(number):
        fn()
    return (clock() - t0) / number


def calibrate(fn, target_s, clock=time.perf_counter):
    """Calls per repeat so that one repeat lasts about ``target_s`` (at least one call).  Each
    count is timed three times and the fastest kept: on a loaded machine one timing may include
    a wait for the core, which would size the loop from that wait."""
    number = 1
    while True:
        t = min(_time(fn, number, clock) for _ in range(3)) * number
        if t >= target_s / 10 or number >= 1 << 30:
            break
        number *= 10 if t < target_s / 100 else 2
    return max(1, round(number * target_s / max(t, 1e-9)))


def warm_up(fn, seconds):
    """Run ``fn`` for about ``seconds`` (caches, lazy imports, allocator pools)."""
    fn()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()


def _quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def _stats(xs, number):
    q1, q3 = _quartiles(xs)
    return Stats(statistics.median(xs), min(xs), q3 - q1, number, xs)


def _rotations(names, repeats):
    """The order of the systems in each round, rotating who goes first, so that slow drifts
    of the machine reach all systems alike."""
    for r in range(repeats):
        k = r % len(names)
        yield names[k:] + names[:k]


def measure(fns, *, repeats=11, target_s=0.05, warmup_s=0.05, clock="wall"):
    """Time every callable of ``fns`` (dict system -> fn), interleaved; dict system -> Stats."""
    clock = CLOCKS[clock]
    names = list(fns)
    for n in names:
        warm_up(fns[n], warmup_s)
    numbers = {n: calibrate(fns[n], target_s, clock) for n in names}
    samples = {n: [] for n in names}
    for order in _rotations(names, repeats):
        for n in order:
            gc.collect()
            samples[n].append(_time(fns[n], numbers[n], clock))
    return {n: _stats(samples[n], numbers[n]) for n in names}


def measure_self_timed(fns, *, repeats=11):
    """Collect ``repeats`` measurements from every self-timing callable, interleaved."""
    names = list(fns)
    samples = {n: [] for n in names}
    for order in _rotations(names, repeats):
        for n in order:
            samples[n].append(float(fns[n]()))
    return {n: _stats(samples[n], 1) for n in names}


# ---------------------------------------------------------------- the machine's other load

def _busy_jiffies():
    """CPU time (in clock ticks) every process of the machine has used so far, or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


class LoadMeter:
    """How many cores other processes kept busy while a workload ran: the machine's busy CPU
    time (/proc/stat) minus this process's, over the elapsed time.  None off Linux."""

    def __enter__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), _busy_jiffies(), time.process_time()
        return self

    def __exit__(self, *exc):
        busy1 = _busy_jiffies()
        self.foreign = None
        if self.busy0 is not None and busy1 is not None:
            elapsed = time.perf_counter() - self.t0
            busy = (busy1 - self.busy0) / os.sysconf("SC_CLK_TCK")
            own = time.process_time() - self.own0
            self.foreign = max(0.0, (busy - own) / elapsed) if elapsed > 0 else None
        return False


# ---------------------------------------------------------------- result check

def to_numpy(x):
    """A float64 numpy array of a result from any system (a tuple of results: a list)."""
    if isinstance(x, tuple):
        return [to_numpy(v) for v in x]
    if hasattr(x, "_data"):                   # dynograph
        x = x._data
    elif hasattr(x, "detach"):                # torch
        x = x.detach().float().numpy()
    return np.asarray(x, dtype=np.float64)


def first_calls(fns):
    """Run each system once: ({system: result}, {system: error text of those that raised})."""
    results, errors = {}, {}
    for name, fn in fns.items():
        try:
            results[name] = fn()
        except Exception as e:                # a system that cannot run this workload yet
            errors[name] = f"{type(e).__name__}: {e}"
    return results, errors


def check_agreement(w, fns):
    """Run each system once; the systems that raised, as {system: error text}.

    Raises AssertionError when a system computes something else than the first one.
    """
    results, errors = first_calls(fns)
    ref_name, ref = None, None
    for name, result in results.items():
        got = to_numpy(result)
        if ref_name is None:
            ref_name, ref = name, got
            continue
        refs, gots = (ref, got) if isinstance(ref, list) else ([ref], [got])
        if isinstance(got, list) != isinstance(ref, list) or len(gots) != len(refs):
            raise AssertionError(f"{w.name}: {name} returns other results than {ref_name}")
        for a, b in zip(refs, gots):
            if a.shape != b.shape:
                raise AssertionError(f"{w.name}: {name} disagrees with {ref_name} "
                                     f"(shape {b.shape} != {a.shape})")
            if not np.allclose(a, b, rtol=w.rtol, atol=w.atol, equal_nan=True):
                raise AssertionError(f"{w.name}: {name} disagrees with {ref_name} "
                                     f"(max abs diff {np.max(np.abs(a - b))})")
    return errors


# ---------------------------------------------------------------- machine info

def machine_info():
    """Where the numbers come from: CPU, cores, library versions, source revision."""
    info = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": None,
        "torch_threads": None,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # other jobs on the machine make the numbers noisy: this says how busy it was
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    torch = optional_torch()
    if torch is not None:
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


# ---------------------------------------------------------------- running and reporting

def run(workloads, *, repeats=11, target_s=0.05, warmup_s=0.05, clock="wall", systems=None,
        check=True, progress=None):
    """Measure ``workloads``; a list of ``{"workload", "description", "systems", "errors"}``.

    A system that raises on its first call is left out of the timing and its error is
    recorded (and reported through ``progress``) instead.
    """
    results = []
    for w in workloads:
        fns = w.setup()
        if systems:
            fns = {k: v for k, v in fns.items() if k in systems}
        if not fns:
            continue
        if progress is not None:
            progress(f"{w.name}: {', '.join(fns)}")
        if not check:
            errors = {}
        elif w.self_timed:                    # results are times: only check that they run
            errors = first_calls(fns)[1]
        else:
            errors = check_agreement(w, fns)
        for name, err in errors.items():
            del fns[name]
            if progress is not None:
                progress(f"  {name} skipped: {err}")
        with LoadMeter() as load:
            if not fns:
                stats = {}
            elif w.self_timed:
                stats = measure_self_timed(fns, repeats=repeats)
            else:
                stats = measure(fns, repeats=repeats, target_s=target_s, warmup_s=warmup_s,
                                clock=clock)
        results.append({"workload": w.name, "description": w.description, "systems": stats,
                        "errors": errors, "foreign_load": load.foreign})
    return results


def ratios(record, baseline):
    """Each system's median over the baseline's median (None without the baseline)."""
    base = record["systems"].get(baseline)
    if base is None:
        return {}
    return {n: s.median / base.median for n, s in record["systems"].items()}


def _fmt_time(s):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_table(results, baseline, header=True):
    """The results as an aligned text table; ratios are medians over the baseline's."""
    rows = []
    for rec in results:
        load = rec.get("foreign_load")
        load = "" if load is None else f"{load:.1f}"
        if not rec["systems"]:
            rows.append((rec["workload"], "(none ran)", "", "", "", "", "", load))
        rs = ratios(rec, baseline) if baseline else {}
        for i, (name, s) in enumerate(rec["systems"].items()):
            ratio = f"{rs[name]:.2f}x" if name in rs else ""
            rows.append((rec["workload"] if i == 0 else "", name, _fmt_time(s.median),
                         _fmt_time(s.min), _fmt_time(s.iqr), f"{s.number}", ratio,
                         load if i == 0 else ""))
    head = ("workload", "system", "median", "min", "IQR", "loop",
            f"vs {baseline}" if baseline else "", "other load")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    lines = []
    if header:
        lines.append("  ".join(h.ljust(w) if i < 2 else h.rjust(w)
                               for i, (h, w) in enumerate(zip(head, widths))).rstrip())
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return "\n".join(lines)


def to_json(results, baseline, settings):
    return {
        "machine": machine_info(),
        "settings": dict(settings, baseline=baseline),
        "results": [{"workload": r["workload"], "description": r["description"],
                     "systems": {n: s.as_json() for n, s in r["systems"].items()},
                     "ratios": ratios(r, baseline), "errors": r["errors"],
                     "foreign_load_cores": r.get("foreign_load")} for r in results],
    }


def thread_counts():
    """Threads each system uses now: dynograph's kernels, torch's intra-op pool, numpy's BLAS."""
    counts = {"cores": os.cpu_count()}
    try:
        import dynograph
        counts["dynograph"] = dynograph.get_num_threads()
    except ImportError:
        pass
    torch = optional_torch()
    if torch is not None:
        counts["torch"] = torch.get_num_threads()
    try:
        from threadpoolctl import threadpool_info
        blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
        counts["blas"] = max(blas) if blas else None
    except ImportError:
        counts["blas"] = None
    return counts


def set_threads(n):
    """Every system on ``n`` threads (None: each system's own default, as a user runs it)."""
    import dynograph
    torch = optional_torch()
    n_all = n or os.cpu_count() or 1
    dynograph.set_num_threads(n_all)     # also numpy's BLAS, through threadpoolctl
    if torch is not None:
        torch.set_num_threads(n_all)
    if n is None:                        # numpy's BLAS back to its own default
        try:
            from threadpoolctl import threadpool_limits
            threadpool_limits(None, user_api="blas")
        except ImportError:
            pass


def _describe_threads(counts):
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n")[0])
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--filter", metavar="PATTERN", help="only workloads whose name matches this regex")
    p.add_argument("--repeats", type=int, default=11, metavar="N", help="timed repeats per system")
    p.add_argument("--json", metavar="FILE", help="also write the results and machine info here")
    p.add_argument("--baseline", default="torch", metavar="SYSTEM",
                   help="system the ratios are relative to (default torch)")
    p.add_argument("--systems", metavar="A,B", help="only these systems (comma separated)")
    p.add_argument("--target-ms", type=float, default=50.0,
                   help="length of one repeat; the inner loop is sized to it (default 50)")
    p.add_argument("--warmup-ms", type=float, default=50.0, help="warm-up per system (default 50)")
    p.add_argument("--timer", choices=sorted(CLOCKS), default="wall",
                   help="wall: elapsed time (default); cpu: this process's CPU time, steadier "
                        "on a busy machine")
    p.add_argument("--threads", choices=("both", "default", "one"), default="both",
                   help="both (default): a table with every system at its default threading "
                        "(as a user runs it: torch and BLAS on every core), then a table with "
                        "every system on one thread; default or one: only that table")
    p.add_argument("--no-check", action="store_true",
                   help="skip the check that all systems compute the same result")
    args = p.parse_args(argv)

    chosen = select(args.filter)
    if args.list:
        for w in chosen:
            print(f"{w.name:24s} {w.description}")
        return 0
    if not chosen:
        print(f"no workload matches {args.filter!r}", file=sys.stderr)
        return 2
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    systems = set(args.systems.split(",")) if args.systems else None
    settings = {"repeats": args.repeats, "target_ms": args.target_ms, "warmup_ms": args.warmup_ms,
                "timer": args.timer, "filter": args.filter,
                "systems": sorted(systems) if systems else None}
    passes = {"both": ("default", "one"), "default": ("default",), "one": ("one",)}[args.threads]
    document = {"passes": {}}
    for mode in passes:
        set_threads(None if mode == "default" else 1)
        counts = thread_counts()
        print(f"# {'default threading' if mode == 'default' else 'one thread'}: "
              f"{_describe_threads(counts)}; 'other load' is cores busy with other processes",
              flush=True)
        results = run(chosen, repeats=args.repeats, target_s=args.target_ms / 1e3,
                      warmup_s=args.warmup_ms / 1e3, clock=args.timer, systems=systems,
                      check=not args.no_check,
                      progress=lambda msg: print(msg, file=sys.stderr, flush=True))
        print(format_table(results, args.baseline))
        print()
        document["passes"][mode] = dict(to_json(results, args.baseline,
                                                dict(settings, threads=counts)))
    if args.json:
        if len(passes) == 1:
            document = document["passes"][passes[0]]
        with open(args.json, "w") as f:
            json.dump(document, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    return 0

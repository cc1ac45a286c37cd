"""First-call costs of the examples' compiled training steps, each in a fresh process.

For each step (the MLP of W4/W7, examples/demo.py's CNN with Adam, examples/cifar10_cnn.py's
tutorial CNN with SGD momentum at the tutorial's batch of 4, examples/char_transformer.py's
transformer with AdamW) a child process builds the model and the step the way the example does
(random data of the example's shapes), then calls the compiled step until a call neither traces
nor compiles nor loads a kernel.  It reports each call's wall time, where the first calls' time
went (tracing, the passes, LLVM optimization, machine-code generation, loading, the rest: eager
execution inside the traces and the replays), after how many calls the step first replays, and
the process's peak memory.

    python -m tools.bench.first_calls                  # every step, cold and warm disk cache
    python -m tools.bench.first_calls mlp cifar        # some of them

``cold``: an empty ``DYNOGRAPH_CACHE_DIR``; ``warm``: the folder the cold process filled.
``--repeat N`` measures each N times and prints medians (the compile time with its range), and
with another variant the paired differences of the rounds (its own line).  The
trees measured are byte-compiled first, as an installed package is.  ``--compare`` also
measures, in alternation, the compiler as it was before issue 14's first-call work (no
look-ahead trace, LLVM at O3 with loop interleaving), so that both run under the same load.  ``--against DIR``
measures, in alternation too, another checkout (``git worktree add DIR COMMIT``; where
dynograph is installed in development mode, link ``DIR/dynograph/compiler`` and
``DIR/dynograph/runtime`` to ``../compiler`` and ``../runtime`` so that it imports from DIR).
LLVM's times are summed over the threads that compile (they can exceed the wall time).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = ("mlp", "demo", "cifar", "transformer")
MAX_CALLS = 10


# ---------------------------------------------------------------- the steps (in the child)

def _mlp_step(torch):
    from .workloads.training import _mlp, sgd_step
    import numpy as np
    rng = np.random.default_rng(0)
    step = sgd_step(torch, _mlp(torch))
    x = torch.from_numpy(rng.standard_normal((128, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 128))
    return step, lambda: (x, y)


def _demo_step(torch):
    from .workloads.training import classifier_step
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from demo import DigitNet
    rng = np.random.default_rng(0)
    model = DigitNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.from_numpy(rng.random((64, 1, 8, 8), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))
    return classifier_step(model, opt, torch), lambda: (x, y)


def _cifar_step(torch):
    from .workloads.training import cifar_net, classifier_step
    import numpy as np
    rng = np.random.default_rng(0)
    net = cifar_net(torch)
    criterion = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    x = torch.from_numpy(rng.standard_normal((4, 3, 32, 32)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 4))
    return classifier_step(net, opt, torch, criterion), lambda: (x, y)


def _transformer_step(torch):
    import numpy as np
    nn, F = torch.nn, torch.nn.functional
    vocab, block, batch, d_model, heads, layers = 80, 64, 32, 64, 4, 2

    class CharTransformer(nn.Module):       # examples/char_transformer.py's model
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(vocab, d_model)
            self.position = nn.Embedding(block, d_model)
            layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                               dropout=0.0, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block))

        def forward(self, idx):
            t = idx.shape[1]
            x = self.token(idx) + self.position(torch.arange(t))
            x = self.encoder(x, mask=self.mask[:t, :t], is_causal=True)
            return self.head(self.norm(x))

    rng = np.random.default_rng(0)
    model = CharTransformer()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = torch.from_numpy(rng.integers(0, vocab, (batch, block)))
    y = torch.from_numpy(rng.integers(0, vocab, (batch, block)))

    def step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step, lambda: (x, y)


_BUILDERS = {"mlp": _mlp_step, "demo": _demo_step, "cifar": _cifar_step,
             "transformer": _transformer_step}


class _Clock:
    """Seconds spent inside some functions, patched in place (the child's own process)."""

    def __init__(self):
        self.spent = {}
        self.lock = threading.Lock()        # helper threads compile too
        self.running = []                   # the clocks running on the main thread, outermost first

    def wrap(self, owner, attr, name):
        from dynograph._trace_hook import TRACE
        fn = getattr(owner, attr)

        def timed(*args, **kwargs):
            if TRACE.tracer is not None and threading.current_thread() is threading.main_thread():
                # (eager kernels compiled while tracing: the clock would be a graph break of
                # the user's code; helper threads compiling meanwhile are not traced)
                return fn(*args, **kwargs)
            main = threading.current_thread() is threading.main_thread()
            # time inside another clock's function is also counted as "inner within outer"
            # (the passes run inside a trace where it traces ahead, after it where it does not)
            within = [f"{name} within {outer}" for outer in self.running] if main else []
            if main:
                self.running.append(name)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                if main:
                    self.running.pop()
                with self.lock:
                    for key in [name] + within:
                        self.spent[key] = self.spent.get(key, 0.0) + took
        setattr(owner, attr, timed)


def child(which, before=False):
    """In the fresh process: one step's first calls, printed as JSON.  ``before``: without the
    look-ahead trace, LLVM at O3 with loop interleaving (for comparisons)."""
    from threadpoolctl import threadpool_limits
    threadpool_limits(1, user_api="blas")       # as W7: idle BLAS threads make timings noisy
    import dynograph as torch
    from dynograph.compiler import compiled, pipeline
    from dynograph.compiler.llvm import jit
    from dynograph.runtime import backend, cache
    if before:
        compiled.CompiledFunction._look_ahead = lambda *args: None
        jit.SPEED_LEVEL = 3
        jit.TUNING = dict(jit.TUNING, loop_interleaving=True)
    clock = _Clock()
    clock.wrap(compiled.CompiledFunction, "_trace", "trace")
    clock.wrap(pipeline, "optimize", "passes")
    clock.wrap(jit, "optimize", "llvm_optimize")
    clock.wrap(jit, "emit_object", "llvm_total")
    clock.wrap(jit, "load_all", "load")
    clock.wrap(cache.DiskCache, "read", "disk_read")
    torch.manual_seed(0)
    fn, batch = _BUILDERS[which](torch)
    step = torch.compile(fn)
    calls, cpu, first_replay = [], [], None
    for i in range(MAX_CALLS):
        before = (len(step.entries), dict(backend.STATS), step.hits)
        start, start_cpu = time.perf_counter(), time.process_time()
        step(*batch())
        calls.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        stats = dict(backend.STATS)
        if first_replay is None and step.hits > before[2]:
            first_replay = i + 1
        quiet = (len(step.entries) == before[0] and stats["compiled"] == before[1]["compiled"]
                 and stats["disk_hits"] == before[1]["disk_hits"])
        if quiet and first_replay is not None and i + 1 > first_replay:
            break
    else:
        raise RuntimeError(f"{which}: still tracing or compiling after {MAX_CALLS} calls")
    more = [_timed(step, batch) for _ in range(4)]
    steady = statistics.median(calls[-1:] + [wall for wall, _ in more])
    steady_cpu = statistics.median(cpu[-1:] + [c for _, c in more])
    first = calls[:-1]
    spent = dict(clock.spent)
    spent["llvm_codegen"] = spent.get("llvm_total", 0.0) - spent.get("llvm_optimize", 0.0)
    spent["trace_only"] = spent.get("trace", 0.0) - spent.get("passes within trace", 0.0)
    print(json.dumps({"step": which, "calls_s": calls, "steady_s": steady,
                      "first_replay": first_replay, "compile_s": sum(first) - len(first) * steady,
                      "compile_cpu_s": sum(cpu[:-1]) - len(first) * steady_cpu,
                      "spent": spent, "stats": dict(backend.STATS),
                      "eager_reason": step.eager_reason}))


def _timed(step, batch):
    start, start_cpu = time.perf_counter(), time.process_time()
    step(*batch())
    return time.perf_counter() - start, time.process_time() - start_cpu


# ---------------------------------------------------------------- the parent

def _with_bytecode(root):
    """Byte-compile the tree at ``root`` (what pip does when it installs a package): with
    PYTHONDONTWRITEBYTECODE set, as on some CI machines, every child would otherwise compile
    each module it imports from source, some 40 ms of a first call that users never pay."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "dynograph", "compiler", "runtime",
                    "tools"], cwd=root, check=True, capture_output=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"})


def measure(which, cache_dir, before=False, root=ROOT):
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, DYNOGRAPH_CACHE_DIR=cache_dir, PYTHONPATH=path)
    env.pop("PYTHONPYCACHEPREFIX", None)    # the bytecode next to the sources (_with_bytecode)
    # the peak memory is printed by the command itself, so that an older tree's child has it too
    code = (f"from tools.bench.first_calls import child; child({which!r}, {before!r}); "
            "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{which}: child failed:\n{r.stderr[-3000:]}")
    *_, report, peak_kb = r.stdout.strip().splitlines()
    return dict(json.loads(report), peak_mb=int(peak_kb) / 1024)


def cold_and_warm(which, before=False, root=ROOT):
    folder = tempfile.mkdtemp(prefix="dynograph-first-calls-")
    try:
        return measure(which, folder, before, root), measure(which, folder, before, root)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _line(kind, runs):
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    spent = {k: statistics.median(r["spent"].get(k, 0.0) for r in runs)
             for k in ("trace_only", "passes", "llvm_optimize", "llvm_codegen", "load")}
    r = runs[0]
    spread = "" if len(runs) < 2 else \
        f" [{min(r['compile_s'] for r in runs):.3f}-{max(r['compile_s'] for r in runs):.3f}]"
    return (f"  {kind:4s} compile {med('compile_s'):6.3f} s{spread} (CPU "
            f"{med('compile_cpu_s'):6.3f} s)  first replay: call "
            f"{r['first_replay']}  steady {med('steady_s') * 1e3:6.1f} ms  calls "
            + " ".join(f"{t:.3f}" for t in r["calls_s"])
            + "\n        " + "  ".join(f"{k} {v:.3f}" for k, v in spent.items())
            + f"  kernels compiled {r['stats']['compiled']} loaded from disk "
            f"{r['stats']['disk_hits']}" + _peak(runs))


def _peak(runs):
    """The child's peak resident memory (a first call that keeps a trace's tensors alive
    shows here)."""
    return f"  peak {statistics.median(r['peak_mb'] for r in runs):.0f} MB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", help=f"some of {', '.join(STEPS)} (default all)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--compare", action="store_true",
                        help="also measure the compiler before the first-call work")
    parser.add_argument("--against", metavar="DIR",
                        help="also measure the checkout in DIR (alternating with this one)")
    args = parser.parse_args(argv)
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    # (label, before, root): measured in alternation, so that every variant sees the same load
    variants = [("", False, ROOT)]
    if args.compare:
        variants.insert(0, (" (before)", True, ROOT))
    if args.against:
        variants.insert(0, (f" ({os.path.abspath(args.against)})", False,
                            os.path.abspath(args.against)))
    for root in {v[2] for v in variants}:
        _with_bytecode(root)
    for which in args.steps or STEPS:
        runs = {v: [] for v in variants}
        for _ in range(args.repeat):
            for v in variants:
                runs[v].append(cold_and_warm(which, v[1], v[2]))
        for v in variants:
            print(which + v[0])
            print(_line("cold", [c for c, _ in runs[v]]))
            print(_line("warm", [w for _, w in runs[v]]))
        if args.repeat > 1:
            for v in variants[:-1]:
                print(_paired(which, variants[-1], v, runs))


def _paired(which, mine, other, runs):
    """This tree's compile time less the other variant's, round by round (the machine's speed
    drifts between rounds more than most changes move it): the median difference and in how
    many rounds this tree was faster."""
    parts = []
    for kind, k in (("cold", 0), ("warm", 1)):
        diffs = [m[k]["compile_s"] - o[k]["compile_s"] for m, o in zip(runs[mine], runs[other])]
        faster = sum(d < 0 for d in diffs)
        parts.append(f"{kind} {statistics.median(diffs) * 1e3:+.1f} ms, faster in {faster} of "
                     f"{len(diffs)}")
    return f"  {which}: this tree against{other[0] or ' this tree'}, paired by round: " + \
        "; ".join(parts)


if __name__ == "__main__":
    main()

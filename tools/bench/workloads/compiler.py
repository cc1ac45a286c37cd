"""The compiler's own costs on whole training steps (forward, backward, optimizer update):
an MLP 784-512-512-10 (batch 64) and a small CNN (two 3x3 convolutions, batch 16, 28x28),
both with cross-entropy and SGD with momentum.

Systems of each workload:

* ``dynograph``: the eager step;
* ``trace``: ``dynograph.trace`` of the step (captures the graph, runs the step once);
* ``optimize``: the pass pipeline on the captured graph;
* ``compile-cold``: the first call of a fresh ``dynograph.compile(step)`` (trace + optimize);
* ``dynograph-compiled``: a later call of a compiled step (guard check, then the optimized
  graph on the interpreter).

Every callable returns the number of nodes the step captures (the number of ops eager
execution runs: the tracer records one node per op), so the runner's agreement check only
checks that every phase saw the same program.  ``report()`` gives the node and kernel counts
and one cold and one cached timing of each phase::

    python -c "from tools.bench.workloads import compiler; print(*compiler.report(), sep='\\n')"
"""
import copy
import time

import numpy as np

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph.compiler.pipeline import optimize

from ..runner import workload


def _mlp():
    dynograph.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)), (64, 784)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def _cnn():
    dynograph.manual_seed(0)
    return SmallCNN(), (16, 1, 28, 28)


MODELS = {"mlp": _mlp, "cnn": _cnn}


def _setup(kind):
    """(step function factory, batch): each factory call gives a fresh model and optimizer
    that already took one step (so the optimizer state exists and the graph stays put)."""
    model, shape = MODELS[kind]()
    rng = np.random.default_rng(0)
    x = dynograph.tensor(rng.normal(size=shape), dtype=dynograph.float32)
    y = dynograph.tensor(rng.integers(0, 10, size=shape[0]))

    def make():
        m = copy.deepcopy(model)
        opt = dynograph.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

        def step(a, b):
            opt.zero_grad()
            loss = F.cross_entropy(m(a), b)
            loss.backward()
            opt.step()
            return loss
        step(x, y)
        return step
    return make, (x, y)


def counts(kind):
    """Node counts of one training step: captured, after optimization, fused kernels."""
    make, (x, y) = _setup(kind)
    graph = dynograph.trace(make(), x, y)
    optimized, stats = optimize(graph)
    return {"captured_nodes": stats["captured_nodes"], "optimized_nodes": stats["optimized_nodes"],
            "kernels": stats["kernels"], "timings": stats["timings"]}


def _systems(kind):
    make, (x, y) = _setup(kind)
    step = make()
    graph = dynograph.trace(step, x, y)
    n = len(graph.nodes)
    eager = make()
    compiled = dynograph.compile(make())
    compiled(x, y)

    def trace():
        return len(dynograph.trace(step, x, y).nodes)

    def run_optimize():
        return optimize(graph)[1]["captured_nodes"]

    def cold():
        c = dynograph.compile(step)
        c(x, y)
        return c.entries[-1].stats["captured_nodes"]

    def eager_step():
        eager(x, y)
        return n

    def cached():
        compiled(x, y)
        return compiled.entries[-1].stats["captured_nodes"]

    return {"dynograph": eager_step, "trace": trace, "optimize": run_optimize,
            "compile-cold": cold, "dynograph-compiled": cached}


@workload("compile_mlp_step", "MLP 784-512-512-10 SGD training step: eager, trace, optimize, "
          "first compiled call, cached compiled call", rtol=0, atol=0, tags=("compiler",))
def compile_mlp_step():
    return _systems("mlp")


@workload("compile_cnn_step", "small CNN SGD training step: eager, trace, optimize, first "
          "compiled call, cached compiled call", rtol=0, atol=0, tags=("compiler",))
def compile_cnn_step():
    return _systems("cnn")


def report(clock=time.process_time):
    """Counts and one cold and one cached timing of each phase, per model, as text lines.
    The default clock is this process's CPU time (steady on a shared machine)."""
    lines = []
    for kind in MODELS:
        make, (x, y) = _setup(kind)
        step = make()
        times = {}
        for label in ("1st", "2nd"):
            t0 = clock()
            graph = dynograph.trace(step, x, y)
            times[f"trace {label}"] = clock() - t0
            t0 = clock()
            optimized, stats = optimize(graph)
            times[f"optimize {label}"] = clock() - t0
        c = dynograph.compile(make())
        for label in ("first call", "second call"):
            t0 = clock()
            c(x, y)
            times[f"compiled {label}"] = clock() - t0
        lines.append(f"{kind}: {stats['captured_nodes']} ops run eagerly (= nodes captured), "
                     f"{stats['optimized_nodes']} nodes after optimization, "
                     f"{stats['kernels']} fused kernels")
        lines.append("  " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
        lines.append("  passes: " + ", ".join(f"{k} {v * 1e3:.2f} ms"
                                              for k, v in stats["timings"].items()))
    return lines



def _guarded_step(make_model, batch):
    """A compiled SGD-momentum training step after a few calls, and what its guard check
    receives on every call (the flat arguments and their structure)."""
    from dynograph.compiler.compiled import flatten
    model = make_model(dynograph)
    x, y = (dynograph.from_numpy(a) for a in batch())
    opt = dynograph.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

    @dynograph.compile
    def step(a, b):
        opt.zero_grad()
        loss = F.cross_entropy(model(a), b)
        loss.backward()
        opt.step()
        return loss
    for _ in range(3):
        step(x, y)
    flat = []
    spec = flatten(((x, y), {}), flat)
    guards = step.entries[-1].guards
    assert guards.check(flat, spec) is None, "the step retraces"
    return lambda: guards.check(flat, spec) is None


@workload("guard_check", "the guard check every replay of a compiled training step pays (MLP "
          "784-512-512-10 b128, CIFAR tutorial CNN b64; SGD momentum): systems are the steps",
          rtol=0, atol=0, tags=("compiler",))
def guard_check():
    from .training import cifar_net, _mlp, cifar_batch, mlp_batch
    return {"mlp-step": _guarded_step(_mlp, mlp_batch),
            "cifar-step": _guarded_step(cifar_net, cifar_batch)}

"""A program's matrix products: launches bound to their buffers, and independent products at
once.

Each 2-D product of a program runs as a ``Products`` step: the backend binds its launch to the
operands' and result's memory (``Backend.bind_matmul``), and a later call on the same arrays
relaunches it without finding its BLAS arguments again.

A training step's backward pass computes, for each linear layer, the gradient of its input
(``g @ W``) and of its weight (``x.t() @ g``) from the same ``g``: two products neither of which
reads the other.  Split over the pool's threads one after the other, each product's blocks
pack their operands again and run thinner tiles; side by side, each on its share of the
threads, both run nearer the speed of one thread alone (the MLP step's 128 x 512 x 512 pair on
two cores: 0.70 ms for a product alone on one core against 0.38 ms for each split over both).

``product_steps`` finds a product followed by another with only views between them (a
transpose of the second's operand, typically), where neither the second nor the views read
the first's result, and the second's result does not take the memory of one of the first's
operands (the memory plan lets a value reuse a buffer once its last reader has run: the two
run at once now).  The pair runs at the second's place, through ``Backend.bind_matmul``, where
both products are about the same size (one of twice the other's work would run alone on half
the threads while the other waits), or both are too small to be split at all.
"""
import numpy as np

from dynograph.runtime import executor
from ..ops import REGISTRY
from ..symbolic import concrete

PRODUCTS = ("mm", "addmm")
# below this many multiply-adds a product is not split over threads (blas.MIN_FLOPS x 2):
# two such products side by side take the time of one
SMALL = 1 << 21
BALANCE = 0.8           # the smaller of a pair does at least this part of the larger's work
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class Products:
    """A program step running the products of one extern step, or of two at once (each on its
    share of the threads), through the backend's bound launcher (``Backend.bind_matmul``);
    each extern step on its own where the backend has none.  A call that reads the arrays of
    the last call and writes the same ones (planned buffers, results the caller let go)
    relaunches on the argument blocks bound then (a product's Python, run between cache-cold
    kernels, is tens of microseconds)."""

    def __init__(self, *steps):
        self.steps = steps
        self.node = steps[-1].node          # (what a step is labelled by)
        self.outs = [s for step in steps for s in step.outs]
        plain = [step.plain for step in steps]
        self.reads = None if None in plain else [s for slots in plain for s in slots]
        self.same = []                      # the launches of the last calls (executor.Bound)

    def __call__(self, program, env):
        if self.same:
            reads = [env[s] for s in self.reads]
            for same in self.same:
                results = same.again(program, reads)
                if results is None:
                    continue
                if same.launch():
                    for s, o in zip(self.outs, results):
                        env[s] = o
                    return
                self.same = []          # the pool is another now: every launch kept is stale
                break
        backend = self.steps[0].backend
        operands = [_operands(step, program, env) for step in self.steps] \
            if backend.binds_matmul() else [None]
        launch = None if None in operands else backend.bind_matmul(operands)
        if launch is None or not launch():
            for step in self.steps:
                step(program, env)
            return
        results = [o[2] for o in operands]
        for s, o in zip(self.outs, results):
            env[s] = o
        if self.reads is not None:
            bound = executor.Bound([env[s] for s in self.reads], launch, results,
                                   {j: (s, o) for j, (s, o) in enumerate(zip(self.outs, results))
                                    if s not in program.planned})
            self.same = executor.with_bound(self.same, bound)


def _operands(step, program, env):
    """(a, b, out, bias, alpha, beta) of a product step in this call, or None where they are
    not float matrices of one dtype."""
    args, attrs = step.arguments(env)
    if step.node.op == "mm":
        (a, b), bias, alpha, beta = args, None, 1, 1
    else:
        (bias, a, b), alpha, beta = args, attrs.get("alpha", 1), attrs.get("beta", 1)
        if type(bias) is not np.ndarray or type(alpha) not in (int, float) or \
                type(beta) not in (int, float):
            return None
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2 or \
            a.shape[1] != b.shape[0] or a.dtype not in _FLOATS or b.dtype != a.dtype:
        return None
    slot = step.outs[0]
    out = program.planned.get(slot)
    if out is None:
        out = program.result_array(slot, (a.shape[0], b.shape[1]), a.dtype)
    return a, b, out, bias, alpha, beta


def product_steps(steps, frees, memory, batch, extern):
    """``steps`` and ``frees`` (a program's, one entry per step) with each product's extern
    step made a ``Products`` step, pairs of independent products one at the second's place;
    ``extern``: the class of the steps that run a node by its direct kernel or numpy."""
    steps, frees = list(steps), list(frees)
    i = 0
    while i < len(steps):
        j = _partner(steps, i, memory, batch, extern)
        if j is None:
            if _is_product(steps[i], extern):
                steps[i] = Products(steps[i])
            i += 1
            continue
        # the values freed after the first or the views (a view may be the last reader of
        # one of the first's operands) are freed after the pair
        steps[j] = Products(steps[i], steps[j])
        frees[j] = [s for k in range(i, j + 1) for s in frees[k]]
        for k in range(i + 1, j):
            frees[k] = []
        del steps[i], frees[i]
        i = j               # (the step after the pair, one place nearer)
    return steps, frees


def _partner(steps, i, memory, batch, extern):
    """The index of the product step that runs with product step ``i``, or None."""
    if not _is_product(steps[i], extern):
        return None
    first = steps[i].node
    unwritten = set(first.outs)             # the first's results, not there until the pair runs
    j = i + 1
    while j < len(steps) and _is_view(steps[j], extern):
        if unwritten.intersection(steps[j].node.input_values()):
            return None
        j += 1
    if j == len(steps) or not _is_product(steps[j], extern):
        return None
    second = steps[j].node
    if unwritten.intersection(second.input_values()):
        return None
    buffers = memory.buffers
    for writes, reads in ((second, first), (first, second)):
        if buffers.get(writes.outs[0], -1) in {buffers.get(v) for v in reads.input_values()}:
            return None
    work = [_work(n, batch) for n in (first, second)]
    if max(work) >= SMALL and min(work) < BALANCE * max(work):
        return None
    return j


def _is_product(step, extern):
    return type(step) is extern and step.node.op in PRODUCTS and \
        len(step.node.outs[0].type.shape) == 2


def _is_view(step, extern):
    op = REGISTRY.get(step.node.op)
    return type(step) is extern and op is not None and op.view


def _work(node, batch):
    """Multiply-adds of a product node: m * n * k."""
    m, n = concrete(node.outs[0].type.shape, batch)
    a = node.args[1] if node.op == "addmm" else node.args[0]
    return m * n * concrete(a.type.shape, batch)[-1]

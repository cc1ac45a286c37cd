"""The reference semantics of the IR: run a graph with the op set's numpy implementations.

This is the ``interpreter`` backend and the oracle every pass and code generator is checked
against.  Values live in an environment and are dropped after their last use.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from .ir import Value
from .ops import REGISTRY
from .ops.core import TensorSpec
from .ops.evaluate import elementwise
from .symbolic import Sym


def evaluate(op, args, attrs):
    """Apply one primitive to numpy arrays and Python literals (as eager execution does)."""
    if op.kind == "elementwise":
        return elementwise(op, [_spec(a) for a in args], args, attrs)
    return _arrays(op.impl(*args, **attrs))


def _arrays(r):
    """numpy returns scalars for 0-d results of some functions: arrays, as every value is."""
    if isinstance(r, np.generic):
        return np.asarray(r)
    if type(r) is tuple:
        return tuple(np.asarray(x) if isinstance(x, np.generic) else x for x in r)
    return r


def outputs_of(result):
    """The values of a node's outputs from its op's result: a tuple (or list) holds one per
    output, as the tracer records them (a one-element tuple too: ``unbind`` over a dim of
    size 1), anything else is the only one."""
    return result if type(result) in (tuple, list) else (result,)


def _spec(a):
    if isinstance(a, np.ndarray):
        return TensorSpec(a.shape, D.from_numpy_dtype(a.dtype))
    return a


def resolve(x, env):
    if isinstance(x, Value):
        return env[x]
    if isinstance(x, tuple):
        return tuple(resolve(a, env) for a in x)
    if isinstance(x, list):
        return [resolve(a, env) for a in x]
    if isinstance(x, Sym):
        return x.at(env[Sym])           # a size that depends on the batch size (symbolic.py)
    return x


def last_uses(graph):
    """node index -> the values whose last read is that node (they can be freed after it).

    Planned once per graph (graphs are not changed once built) and kept on it."""
    cached = graph.__dict__.get("_last_uses")
    if cached is not None:
        return cached
    last = {}
    for i, node in enumerate(graph.nodes):
        for v in node.input_values():
            last[v] = i
    keep = set(graph.outputs) | {v for _, v in graph.updates}
    frees = {}
    for v, i in last.items():
        if v not in keep:
            frees.setdefault(i, []).append(v)
    graph.__dict__["_last_uses"] = frees
    return frees


def run(graph, inputs, batch=None, writable=()):
    """Execute ``graph`` on ``inputs`` (arrays, or numpy Generators for ``rng`` inputs, in the
    order of ``graph.inputs``).  ``batch`` is the batch size of a general graph (symbolic.py).
    Returns (outputs, {slot name: new value}), all new arrays (``writable``, the slots a backend
    may update in place, is not used here)."""
    env = {inp.value: x for inp, x in zip(graph.inputs, inputs)}
    env[Sym] = batch
    frees = last_uses(graph)
    for i, node in enumerate(graph.nodes):
        args = resolve(node.args, env)
        attrs = {k: resolve(v, env) for k, v in node.attrs.items()}
        if node.op == "fused":
            sub = attrs.pop("graph")
            result, _ = run(sub, args, batch)
            result = tuple(result)
        else:
            result = outputs_of(evaluate(REGISTRY[node.op], args, attrs))
        for v, r in zip(node.outs, result):
            env[v] = r
        for v in frees.get(i, ()):
            del env[v]
    return [env[v] for v in graph.outputs], {slot: env[v] for slot, v in graph.updates}

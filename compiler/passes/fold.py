"""Constant folding: a node computed only from constants is evaluated at compile time.

Constants are the values of ops with the ``constant`` facet (``full``, ``arange``,
``linspace``, ``logspace``, ``eye``; not ``empty``, whose contents are undefined) and of nodes
computed from constants only.  Such a node is evaluated with the interpreter's op semantics
when its inputs and results are small (at most ``MAX_ELEMENTS`` elements each); when every
result is uniform (all elements equal, bit for bit up to the sign of zero) the node becomes
``full`` nodes.
Non-uniform results stay as they are (the IR has no tensor literal) but still count as
constants for the nodes after them, so ``arange(4) * 0`` folds.

A node whose result is read by an op that depends on the memory layout of its input
(the ``reads_layout`` facet: ``view``...) is not replaced: ``full`` is contiguous, the folded
node's result might not be.
"""
import numpy as np

from ..interpreter import evaluate
from ..ir import Node, TensorType, remap
from ..ops import REGISTRY

MAX_ELEMENTS = 1 << 16


def layout_sensitive_reads(graph):
    """The values read by ops whose result depends on their input's strides, and the values
    views of those are taken of (``view(t(t(mm)))``: the product's layout decides the view's)."""
    found = set()
    for node in reversed(graph.nodes):
        op = REGISTRY.get(node.op)         # None for a fused node
        if op is not None and (op.reads_layout or (op.view and any(v in found for v in node.outs))):
            found.update(node.input_values())
    return found


def _small(v):
    # (a size that depends on a symbolic batch size is not known to be small)
    return isinstance(v.type, TensorType) and all(type(n) is int for n in v.type.shape) and \
        v.type.numel <= MAX_ELEMENTS


def _uniform(a):
    flat = a.reshape(-1)
    if flat.size == 0:
        return None
    first = flat[0]
    same = np.isnan(flat).all() if a.dtype.kind in "fc" and np.isnan(first) else (flat == first).all()
    return first.item() if same else None


def _fill_value(x, dtype):
    if dtype is not None and dtype.is_floating_point:
        return float(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return int(x)


def fold(graph):
    """Replace nodes computed from constants by ``full`` nodes where the result is uniform."""
    known = {}                  # Value -> numpy array of a constant
    sensitive = layout_sensitive_reads(graph)
    nodes, changed = [], False
    for node in graph.nodes:
        results = constant_results(node, known)
        if results is None:
            nodes.append(node)
            continue
        known.update(zip(node.outs, results))
        if REGISTRY[node.op].constant or any(v in sensitive for v in node.outs):
            nodes.append(node)
            continue
        fills = [_uniform(a) for a in results]
        if any(f is None for f in fills):
            nodes.append(node)
            continue
        changed = True
        for v, f in zip(node.outs, fills):
            attrs = dict(shape=tuple(v.type.shape), fill_value=_fill_value(f, v.type.dtype),
                         dtype=v.type.dtype)
            nodes.append(Node("full", (), attrs, (v,), node.source))
    return graph.replace(nodes=nodes) if changed else graph


def constant_results(node, known):
    """The node's results as arrays when it is a small computation on constants, else None."""
    op = REGISTRY.get(node.op)
    if op is None or op.effect or (op.kind == "creation" and not op.constant):
        return None
    inputs = node.input_values()
    if not op.constant and (not inputs or any(v not in known for v in inputs)):
        return None
    if not all(_small(v) for v in (*inputs, *node.outs)):
        return None
    args = remap(node.args, known)
    attrs = {k: remap(v, known) for k, v in node.attrs.items()}
    try:
        result = evaluate(op, args, attrs)
    except Exception:  # noqa: BLE001 - what fails at compile time is left to run time
        return None
    results = tuple(result) if len(node.outs) > 1 else (result,)
    arrays = [np.asarray(r) for r in results]
    if any(a.shape != tuple(v.type.shape) or a.dtype != v.type.dtype.np
           for a, v in zip(arrays, node.outs)):
        return None
    return arrays


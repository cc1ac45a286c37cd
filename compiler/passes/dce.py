"""Dead-code elimination: drop nodes whose values nobody reads, and unused inputs.

Ops with the ``effect`` facet are kept even when unused: a random op advances the generator
(later draws depend on it), a collective is a call every other process makes too.  Inputs that
no node, output or update reads are removed, except random generators.
"""
from ..ops import REGISTRY


def has_effect(node):
    op = REGISTRY.get(node.op)
    return op is not None and op.effect


def dce(graph):
    live = set(graph.outputs) | {v for _, v in graph.updates}
    kept = []
    for node in reversed(graph.nodes):
        if has_effect(node) or any(v in live for v in node.outs):
            kept.append(node)
            live.update(node.input_values())
    kept.reverse()
    inputs = [inp for inp in graph.inputs if inp.value in live or inp.kind == "rng"]
    return graph.replace(nodes=kept, inputs=inputs)

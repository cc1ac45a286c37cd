"""Common-subexpression elimination: a node that repeats an earlier one is dropped and its
values are replaced by the earlier node's.

Two nodes are the same when they apply the same op to the same values with the same literal
arguments and declare the same result types.  Literals are compared by type and by ``repr``,
so ``1`` and ``1.0`` (different result dtypes) and ``0.0`` and ``-0.0`` (``x + -0.0`` keeps
the sign of a zero, ``x + 0.0`` does not) stay apart.  Ops with an effect are never merged: each
random draw advances the generator, each collective is a call the other processes make too.
Nodes holding a subgraph (fused kernels) are left alone.

The graph-substitution helpers here (remap_node, remap_graph) are shared by simplify.
"""
from dynograph.runtime import dtypes as D
from ..ir import Node, Value, remap
from ..ops import REGISTRY


# ---------------------------------------------------------------- substitution

def remap_node(node, env):
    """``node`` reading ``env``'s replacements (the node itself when nothing changes)."""
    if not env or not any(v in env for v in node.input_values()):
        return node
    attrs = {k: remap(v, env) for k, v in node.attrs.items()}
    return Node(node.op, remap(node.args, env), attrs, node.outs, node.source)


def remap_graph(graph, nodes, env):
    """``graph`` with ``nodes``, and its outputs and updates read through ``env``."""
    return graph.replace(nodes=nodes, outputs=[env.get(v, v) for v in graph.outputs],
                         updates=[(slot, env.get(v, v)) for slot, v in graph.updates])


# ---------------------------------------------------------------- keys

def literal_key(x, position=None):
    """A hashable key of an argument; equal keys mean interchangeable arguments.
    Values are keyed by identity, or by ``position[value]`` where a mapping is given (the same
    structure in two graphs).  Raises TypeError for what cannot be keyed."""
    kind = type(x)
    if kind is Value:                   # (Value has no subclasses)
        return ("v", id(x) if position is None else position[x])
    if kind is tuple:                   # (the common cases first: a node's args, a shape)
        return ("tuple",) + tuple([literal_key(a, position) for a in x])
    if kind is int:
        return ("int", repr(x))
    if x is None or x is Ellipsis:
        return (repr(x),)
    if isinstance(x, (bool, int, float, complex, str)):
        return (type(x).__name__, repr(x))
    if isinstance(x, D.dtype):
        return ("dtype", x.name)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(literal_key(a, position) for a in x)
    if isinstance(x, slice):
        return ("slice",) + tuple(literal_key(a, position) for a in (x.start, x.stop, x.step))
    raise TypeError(f"no key for {type(x).__name__}")


def node_key(node):
    """The key under which equal nodes meet, or None for nodes that must stay distinct."""
    op = REGISTRY.get(node.op)
    if op is None or op.effect:
        return None
    try:
        return (node.op, literal_key(node.args),
                tuple([(k, literal_key(v)) for k, v in sorted(node.attrs.items())]),
                tuple([v.type for v in node.outs]))
    except TypeError:
        return None


# ---------------------------------------------------------------- the pass

def cse(graph):
    """Drop nodes equal to an earlier node; their values become the earlier node's."""
    env, seen, nodes = {}, {}, []
    for node in graph.nodes:
        node = remap_node(node, env)
        key = node_key(node)
        first = seen.get(key) if key is not None else None
        if first is None:
            if key is not None:
                seen[key] = node
            nodes.append(node)
            continue
        for old, new in zip(node.outs, first.outs):
            env[old] = new
    if not env:
        return graph
    return remap_graph(graph, nodes, env)

"""Memory planning: which buffer holds each intermediate value, and which state updates can be
written in place.  An analysis: ``memory`` returns the graph with ``memory_plan`` set.

Buffers.  Every value a node produces gets memory, except

* views (``view``, ``t``, ``expand``, each result of ``split``... as plain nodes): they share
  their base's buffer and keep it alive as long as they are read;
* values that leave the graph (outputs, updates, and the bases of views that do): the runtime
  hands them to the user;
* graph inputs: the runtime owns them.

Values (counting a base together with its views) are live from the node that defines them to
the last node that reads them.  Rule: nodes are visited in order; a buffer becomes free after
the last reader of its value has run (so a node's results never share memory with its own
inputs), and a new value takes the smallest free buffer at least as large as itself (best fit),
else a new buffer.  Buffers are never grown.  ``planned_bytes`` is the sum of the buffers,
``naive_bytes`` what one buffer per value would take.

In-place updates.  An update ``slot <- v`` can overwrite the slot's own buffer when ``v`` is
computed by an elementwise node, or by a fused node, that reads the slot's input value itself
(in a fused node, only through elementwise ops of the slot's shape, so element i of the result
depends on element i of the slot only, and does depend on it: a kernel then loads element i
before it stores element i), and nothing reads the slot's input value (or a view of it) after
that node, nor returns it.  SGD's ``p <- p - lr * buf`` is the typical case.
"""
from dataclasses import dataclass, field

from ..ir import TensorType
from ..ops import REGISTRY
from ..symbolic import concrete

# a graph over a symbolic batch size (s0) is planned as if s0 were this: the runtime sizes
# each buffer for the batch it runs with, the plan only needs comparable sizes
_PLANNING_BATCH = 2


@dataclass
class MemoryPlan:
    buffers: dict = field(default_factory=dict)     # Value -> buffer id (views: their base's)
    sizes: list = field(default_factory=list)       # buffer id -> bytes
    lifetimes: dict = field(default_factory=dict)   # planned Value -> (first node, last node)
    naive_bytes: int = 0
    inplace: list = field(default_factory=list)     # slot names updated in place

    @property
    def planned_bytes(self):
        return sum(self.sizes)

    def __str__(self):
        return (f"memory plan: {len(self.lifetimes)} values in {len(self.sizes)} buffers, "
                f"{self.planned_bytes} bytes planned, {self.naive_bytes} without reuse; "
                f"in place: {', '.join(self.inplace) or 'none'}")


def _nbytes(v):
    return concrete(v.type, _PLANNING_BATCH).numel * v.type.dtype.itemsize


def _is_view(node):
    """Whether every result of ``node`` is a view of its first argument (split and unbind give
    several)."""
    op = REGISTRY.get(node.op)
    return op is not None and op.view and bool(node.args)


def plan_memory(graph):
    """The ``MemoryPlan`` of ``graph``."""
    inputs = {inp.value for inp in graph.inputs}
    base, defined, last = {}, {}, {}
    for i, node in enumerate(graph.nodes):
        for v in node.input_values():
            last[base.get(v, v)] = i
        for v in node.outs:
            defined[v] = i
        if _is_view(node):
            a = node.args[0]
            if a in base or a in defined or a in inputs:
                for v in node.outs:
                    base[v] = base.get(a, a)
    escaping = {base.get(v, v) for v in (*graph.outputs, *(v for _, v in graph.updates))}
    plan = MemoryPlan()
    frees = {}                              # node index -> values whose buffer frees after it
    owner = {}
    free = []                               # (bytes, buffer id) of free buffers
    for i, node in enumerate(graph.nodes):
        for v in node.outs:
            if v in base or v in escaping or not isinstance(v.type, TensorType):
                continue
            size = _nbytes(v)
            fitting = [b for b in free if b[0] >= size]
            if fitting:
                chosen = min(fitting)
                free.remove(chosen)
                buffer = chosen[1]
            else:
                buffer = len(plan.sizes)
                plan.sizes.append(size)
            owner[v] = buffer
            end = last.get(v, i)
            plan.lifetimes[v] = (i, end)
            plan.naive_bytes += size
            frees.setdefault(end, []).append(v)
        for v in frees.pop(i, ()):
            free.append((plan.sizes[owner[v]], owner[v]))
    for v in list(base) + list(owner):
        root = base.get(v, v)
        if root in owner:
            plan.buffers[v] = owner[root]
    plan.inplace = _inplace_updates(graph, base)
    return plan


def _inplace_updates(graph, base):
    producer = {v: (i, n) for i, n in enumerate(graph.nodes) for v in n.outs}
    slots = {inp.name: inp.value for inp in graph.inputs}
    returned = {base.get(v, v) for v in graph.outputs} | {base.get(v, v) for _, v in graph.updates}
    last_read = {}
    for i, node in enumerate(graph.nodes):
        for v in node.input_values():
            last_read[base.get(v, v)] = i
    found = []
    for slot, v in graph.updates:
        old = slots.get(slot)
        if old is None or v not in producer or old in returned:
            continue
        i, node = producer[v]
        if last_read.get(old, -1) > i or old not in node.args:
            continue
        if _elementwise_in(node, old, v):
            found.append(slot)
    return found


def _elementwise_in(node, old, v):
    """Whether element k of ``v`` reads element k of ``old`` only (the node's input)."""
    if node.op != "fused":
        op = REGISTRY.get(node.op)
        return op is not None and op.kind == "elementwise" and v.type.shape == old.type.shape
    sub = node.attrs["graph"]
    tainted = {inp.value for a, inp in zip(node.args, sub.inputs) if a is old}
    for n in sub.nodes:
        if tainted.isdisjoint(n.input_values()):
            continue
        op = REGISTRY.get(n.op)
        if op is None or op.kind != "elementwise" or n.outs[0].type.shape != old.type.shape:
            return False
        tainted.update(n.outs)
    # v must read old: its store then follows the load of the same element, in one iteration
    return sub.outputs[node.outs.index(v)] in tainted


def memory(graph):
    """The graph with its ``memory_plan``."""
    return graph.replace(memory_plan=plan_memory(graph))

"""The graph IR: typed SSA values, nodes in topological order, inputs, outputs and state updates.

A ``Graph`` is a straight-line program over the op set::

    graph(%0: f32[4,8] input x, %1: f32[8] param fc.bias) {
      %2: f32[4,8] = add(%0, %1)
      %3: f32[] = sum(%2)
      return (%3)
      update fc.bias <- %2
    }

* ``inputs`` are named slots the runtime binds to real tensors (a user argument, a parameter,
  a buffer, other state such as a gradient or an optimizer moment, a captured constant tensor,
  a Python scalar that changes between calls such as a learning rate, or a random generator);
* ``nodes`` apply one primitive of ``compiler.ops.REGISTRY`` to values and literal arguments
  and produce one or more values, each with a ``TensorType`` (dtype, shape, device);
* ``outputs`` are the values the call returns;
* ``updates`` name the state slots that receive a new value after a call (functionalized
  in-place writes: ``optimizer.step()``, BatchNorm statistics, ``.grad`` accumulation).

Values have identity only; names (``%3``) are given positionally when printing, so the text
form is deterministic.  Graphs are treated as immutable: passes build new ones.
"""
from dataclasses import dataclass, field

from dynograph.runtime import dtypes as D

# what an input slot stands for
INPUT_KINDS = ("input", "param", "buffer", "state", "const", "scalar", "rng")


@dataclass(frozen=True)
class Sym:
    """A number of a graph that depends on the batch size ``s0`` (``symbolic.generalize`` finds
    them): ``a * s0 + b`` (kind 'int'), ``a * s0`` or ``a / s0`` (kinds 'mul' and 'div', floats)."""
    a: object
    b: object = 0
    kind: str = "int"

    def at(self, s):
        if self.kind == "int":
            return int(self.a * s + self.b)
        if self.kind == "mul":
            return float(self.a * s)
        return float(self.a / s)

    def __str__(self):
        if self.kind == "mul":
            return f"{self.a!r}*s0"
        if self.kind == "div":
            return f"{self.a!r}/s0"
        text = "s0" if self.a == 1 else f"{self.a}*s0"
        if self.b:
            text += f"{self.b:+d}"
        return text


@dataclass(frozen=True)
class TensorType:
    """dtype[shape] on device: the static type of a tensor value."""
    shape: tuple
    dtype: D.dtype
    device: str = "cpu"

    def __str__(self):
        dims = ",".join(str(n) for n in self.shape)
        on = "" if self.device == "cpu" else f" on {self.device}"
        return f"{self.dtype.abbr}[{dims}]{on}"

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


class RngType:
    """The type of a random-generator input: random ops read and advance it."""

    def __str__(self):
        return "rng"

    def __eq__(self, other):
        return isinstance(other, RngType)

    def __hash__(self):
        return hash("rng")


RNG = RngType()


class Value:
    """One SSA value. Compared by identity; its name is given when the graph is printed."""
    __slots__ = ("type",)

    def __init__(self, type):
        self.type = type

    def __repr__(self):
        return f"<Value {self.type}>"


@dataclass(eq=False)
class Input:
    """A graph input: a slot (``name``) of the given ``kind`` that the runtime fills."""
    value: Value
    kind: str
    name: str

    def __post_init__(self):
        assert self.kind in INPUT_KINDS, self.kind


@dataclass(eq=False)
class Node:
    """``outs = op(*args, **attrs)``: args and attrs hold Values and literals."""
    op: str
    args: tuple
    attrs: dict
    outs: tuple
    # where the op was called from in the user's program ("file.py:12 in step"), for humans
    source: str = ""

    def input_values(self):
        """The Values this node reads, in order (inside nested tuples and attributes too), as a
        tuple.  Nodes are not changed once built (passes make new ones), so it is collected
        once: the passes ask each node for its inputs about twenty times."""
        found = self.__dict__.get("_inputs")
        if found is None:
            found = []
            _collect_values(self.args, found)
            if self.attrs:
                _collect_values(self.attrs.values(), found)
            found = self.__dict__["_inputs"] = tuple(found)
        return found


def remap(x, env):
    """``x`` (a Value, a literal, or nested tuples/lists of them) with Values replaced by ``env``."""
    if isinstance(x, Value):
        return env.get(x, x)
    if isinstance(x, tuple):
        return tuple(remap(a, env) for a in x)
    if isinstance(x, list):
        return [remap(a, env) for a in x]
    return x


def _collect_values(items, found):
    # the passes ask every node for its inputs several times: the exact types are tested first
    for a in items:
        t = type(a)
        if t is Value:
            found.append(a)
        elif t is tuple or t is list:
            _collect_values(a, found)
        elif isinstance(a, Value):
            found.append(a)
        elif isinstance(a, (tuple, list)):
            _collect_values(a, found)


@dataclass(eq=False)
class Graph:
    inputs: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    updates: list = field(default_factory=list)     # (slot name, Value)
    # buffer assignment of the intermediate values (compiler.passes.memory.MemoryPlan)
    memory_plan: object = None

    def replace(self, **changes):
        """A new graph with some fields replaced (the lists are copied, not shared)."""
        fields = dict(inputs=list(self.inputs), nodes=list(self.nodes),
                      outputs=list(self.outputs), updates=list(self.updates),
                      memory_plan=self.memory_plan)
        fields.update(changes)
        return Graph(**fields)

    def input(self, name):
        for inp in self.inputs:
            if inp.name == name:
                return inp
        raise KeyError(name)

    def producers(self):
        """Value -> the node that defines it."""
        return {v: n for n in self.nodes for v in n.outs}

    def uses(self):
        """Value -> number of reads by nodes, outputs and updates."""
        count = {}
        for n in self.nodes:
            for v in n.input_values():
                count[v] = count.get(v, 0) + 1
        for v in self.outputs:
            count[v] = count.get(v, 0) + 1
        for _, v in self.updates:
            count[v] = count.get(v, 0) + 1
        return count

    def __str__(self):
        from .text import print_graph
        return print_graph(self)

    def op_counts(self):
        counts = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

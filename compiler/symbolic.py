"""Dynamic batch size: one graph for every batch size, found from two traces.

Tracing specializes every shape.  When a compiled function sees a second batch size, it traces
again and ``generalize`` lines the two graphs up: they must be the same program, and every
number that differs between them must be a simple function of the batch size ``s0`` — a
dimension ``a*s0 + b`` (the batch, a flattened batch ``s0*C*H*W``, ``s0 + 1``) or a float
``c*s0`` or ``c/s0`` (a mean's divisor).  The result holds ``Sym`` objects where those numbers
were; the runtime evaluates them from the argument's size before each call.  Anything that does
not line up keeps one graph per batch size, which is always correct.
"""
from fractions import Fraction

from dynograph._trace_hook import COMPARE, SizeInt, plain  # noqa: F401  (SizeInt, plain: for importers)
from dynograph.runtime import dtypes as D
from .ir import Graph, Input, Node, Sym, TensorType, Value, remap


def fit(x1, x2, s1, s2):
    """The Sym through (s1, x1) and (s2, x2), or None when there is none."""
    if isinstance(x1, bool) or isinstance(x2, bool) or type(x1) is not type(x2):
        return None
    if isinstance(x1, int):
        a = Fraction(x2 - x1, s2 - s1)
        if a.denominator != 1 or a == 0:
            return None
        a = int(a)
        return Sym(a, x1 - a * s1)
    if isinstance(x1, float):
        if x1 != 0 and abs(x1 / s1 - x2 / s2) <= 1e-12 * abs(x1 / s1):
            return Sym(x1 / s1, kind="mul")
        if abs(x1 * s1 - x2 * s2) <= 1e-12 * abs(x1 * s1):
            return Sym(x1 * s1, kind="div")
    return None


class _Mismatch(Exception):
    pass


class _Unifier:
    def __init__(self, s1, s2):
        self.s1, self.s2 = s1, s2
        self.values = {}            # Value of graph 2 -> Value of the general graph

    def literal(self, x1, x2):
        if isinstance(x1, Value):
            if self.values.get(x2) is not x1:
                raise _Mismatch("different dataflow")
            return x1
        if isinstance(x1, Graph):
            return unify_graphs(x1, x2, self.s1, self.s2)
        if isinstance(x1, (tuple, list)):
            if not isinstance(x2, type(x1)) or len(x1) != len(x2):
                raise _Mismatch("different arguments")
            out = [self.literal(a, b) for a, b in zip(x1, x2)]
            return tuple(out) if isinstance(x1, tuple) else out
        if type(x1) is type(x2) and x1 == x2 or (x1 != x1 and x2 != x2):
            return x1
        sym = fit(x1, x2, self.s1, self.s2)
        if sym is None:
            raise _Mismatch(f"{x1!r} and {x2!r} are not a function of the batch size")
        return sym

    def type(self, t1, t2):
        if not isinstance(t1, TensorType):
            if t1 != t2:
                raise _Mismatch("different types")
            return t1
        if t1.dtype is not t2.dtype or len(t1.shape) != len(t2.shape) or t1.device != t2.device:
            raise _Mismatch("different types")
        return TensorType(tuple(self.literal(a, b) for a, b in zip(t1.shape, t2.shape)),
                          t1.dtype, t1.device)

    def value(self, v1, v2):
        general = Value(self.type(v1.type, v2.type)) if _differs(v1.type, v2.type) else v1
        self.values[v2] = general
        return general


def _differs(t1, t2):
    return isinstance(t1, TensorType) and t1.shape != t2.shape


def unify_graphs(g1, g2, s1, s2):
    """The general form of two graphs traced at batch sizes s1 and s2 (raises _Mismatch)."""
    if (len(g1.inputs), len(g1.nodes), len(g1.outputs), len(g1.updates)) != \
            (len(g2.inputs), len(g2.nodes), len(g2.outputs), len(g2.updates)):
        raise _Mismatch("different numbers of nodes")
    u = _Unifier(s1, s2)
    inputs = []
    renamed = {}
    for i1, i2 in zip(g1.inputs, g2.inputs):
        if (i1.kind, i1.name) != (i2.kind, i2.name):
            raise _Mismatch("different inputs")
        v = u.value(i1.value, i2.value)
        renamed[i1.value] = v
        inputs.append(i1 if v is i1.value else Input(v, i1.kind, i1.name))
    nodes = []
    for n1, n2 in zip(g1.nodes, g2.nodes):
        if n1.op != n2.op or len(n1.outs) != len(n2.outs) or set(n1.attrs) != set(n2.attrs):
            raise _Mismatch(f"{n1.op} against {n2.op}")
        args = tuple(u.literal(remap(a, renamed), b) for a, b in zip(n1.args, n2.args))
        attrs = {k: u.literal(remap(v, renamed), n2.attrs[k]) for k, v in n1.attrs.items()}
        outs = []
        for o1, o2 in zip(n1.outs, n2.outs):
            o = u.value(o1, o2)
            renamed[o1] = o
            outs.append(o)
        nodes.append(Node(n1.op, args, attrs, tuple(outs), n1.source))
    outputs = [_same(renamed.get(a, a), b, u) for a, b in zip(g1.outputs, g2.outputs)]
    updates = []
    for (n1, a), (n2, b) in zip(g1.updates, g2.updates):
        if n1 != n2:
            raise _Mismatch("different updates")
        updates.append((n1, _same(renamed.get(a, a), b, u)))
    return g1.replace(inputs=inputs, nodes=nodes, outputs=outputs, updates=updates)


def _same(v1, v2, u):
    if u.values.get(v2) is not v1:
        raise _Mismatch("different outputs")
    return v1


def generalize(g1, g2, s1, s2):
    """The general graph, or None when the two traces are not one program."""
    if s1 == s2:
        return None
    try:
        return unify_graphs(g1, g2, s1, s2)
    except _Mismatch:
        return None


def holds_at_other_sizes(g1, g2, s1, s2):
    """Whether the general form of two traced graphs is consistent at batch sizes other than
    the two it was found from: every node's type must agree with its op's meta rule there.
    Two points fit a line through anything: a size such as ceil(s0 / 2) (a slice with a step)
    equals 2 at both 3 and 4, and only a third size shows that it is not constant."""
    from .verify import VerifyError, verify
    general = generalize(g1, g2, s1, s2)
    if general is None:
        return False
    for s in sorted({s1 + s2 + 1, 2 * max(s1, s2) + 3, 7, 2, 3} - {s1, s2}):
        try:
            verify(instantiate(general, s), f"the graph at batch size {s}")
        except (VerifyError, ValueError, TypeError, IndexError, RuntimeError):
            return False
    return True


def concrete(x, s):
    """``x`` with every Sym evaluated at batch size ``s`` (for attributes and shapes)."""
    if isinstance(x, Sym):
        return x.at(s)
    if isinstance(x, tuple):
        if all(type(a) is int for a in x):      # a plain shape (most are): nothing to evaluate
            return x
        return tuple(concrete(a, s) for a in x)
    if isinstance(x, list):
        return [concrete(a, s) for a in x]
    if isinstance(x, TensorType):
        return TensorType(concrete(x.shape, s), x.dtype, x.device)
    return x


def instantiate(graph, s):
    """A concrete copy of a general graph at batch size ``s`` (what the verifier checks)."""
    values = {}

    def val(v):
        if v not in values:
            values[v] = Value(concrete(v.type, s))
        return values[v]

    def arg(x):
        if isinstance(x, Value):
            return val(x)
        if isinstance(x, (tuple, list)):
            out = [arg(a) for a in x]
            return tuple(out) if isinstance(x, tuple) else out
        if isinstance(x, Graph):
            return instantiate(x, s)
        return concrete(x, s)
    inputs = [Input(val(i.value), i.kind, i.name) for i in graph.inputs]
    nodes = [Node(n.op, arg(n.args), {k: arg(v) for k, v in n.attrs.items()},
                  tuple(val(o) for o in n.outs), n.source) for n in graph.nodes]
    return Graph(inputs, nodes, [val(v) for v in graph.outputs],
                 [(name, val(v)) for name, v in graph.updates])


def is_symbolic(graph):
    return any(_has_sym(n.args) or _has_sym(tuple(n.attrs.values())) for n in graph.nodes)


def _has_sym(items):
    for a in items:
        if isinstance(a, Sym):
            return True
        if isinstance(a, (tuple, list)) and _has_sym(a):
            return True
        if isinstance(a, Graph) and is_symbolic(a):
            return True
    return False


# ---------------------------------------------------------------- sizes seen by Python code

# SizeInt (a size handed to user code while tracing) reports its uses through the eager
# core's trace hook, so it lives there (dynograph._trace_hook); the size guards below read
# what it recorded.


def size_guards(uses1, uses2, s1, s2):
    """The comparisons of the batch size to check before each call of the general graph, from
    the size uses of two traces at batch sizes s1 and s2; None when the user's code used the
    batch size in a way that does not carry over to other sizes (arithmetic, conversion, a
    comparison whose result differs).  Each guard is (op, other, result), other being "s0"
    where the batch size met itself."""
    if len(uses1) != len(uses2):
        return None
    guards = []
    for (v1, kind1, d1, _), (v2, kind2, d2, _) in zip(uses1, uses2):
        if (v1, kind1, d1) == (v2, kind2, d2):
            continue                    # a fixed size: the shape guards hold it
        if (v1, v2) != (s1, s2) or kind1 != kind2 or kind1 != "compare":
            return None
        (op, o1, r1), (op2, o2, r2) = d1, d2
        if op != op2 or r1 != r2:
            return None
        if (o1, o2) == (s1, s2):
            guards.append((op, "s0", r1))
        elif o1 == o2:
            guards.append((op, o1, r1))
        else:
            return None
    return guards


def sizes_hold(guards, batch):
    """Whether batch size ``batch`` passes the comparisons ``size_guards`` recorded."""
    return all(COMPARE[op](batch, batch if other == "s0" else other) == result
               for op, other, result in guards)


del D

"""Algebraic simplification: a table of (op, rewrite) rules applied until nothing changes.

Each rule looks at one node (its inputs' producers too) and returns a ``Rewrite``: the value
that replaces the node's result, with the new nodes that compute it (if any).  The driver
walks the graph in order, applies the first rule that fires, and repeats the walk until a walk
changes nothing or ``MAX_ITERATIONS`` walks are done.  It accepts a rewrite only when

* the replacement has exactly the replaced value's type (dtype and shape: a rule never loses
  a broadcast or a type promotion; ``x * 1`` with ``x: i64`` and ``1.0`` stays);
* the rewrite keeps the memory layout (strides), or no op that depends on the layout of its
  input (``view``...) reads the replaced value;
* a value the graph returns or writes back does not become a graph input (write-backs of two
  slots would alias) or, unless it was one, a view (the user would get a read-only broadcast);
  and ``clone``/``to_copy`` of such a value stay, since they fix the user's tensor's layout.

Rules (x a value, c a literal or a ``full`` constant, possibly seen through views)::

    x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1      -> x      (x + 0 turns -0.0 into +0.0)
    x - x  (integer dtypes)                        -> full(0)
    neg(neg(x))                                    -> x
    t / transpose / permute of t / transpose / permute -> one permute, or x if the identity
    t(mm(a, b)), mm read by nothing else          -> mm(t(b), t(a))  (a contiguous product:
                                                     BLAS reads transposed operands for free, while a
                                                     kernel reading the transposed result strides)
    view/unsafe_view of view/unsafe_view           -> one view of x, or x
    view(x, x.shape), expand(x, x.shape)           -> x
    sum(expand(x)) over the expanded dims          -> x * count   (mean: x)
    clone(x), to_copy(x, dtype=x.dtype)            -> x
"""
import math
from collections import Counter, namedtuple
from itertools import chain

from ..ir import Node, TensorType, Value
from ..ops import REGISTRY
from ..ops.core import TensorSpec, wrap_dim
from ..ops.groups import PERMUTE, RESHAPE
from .cse import remap_graph, remap_node
from .fold import layout_sensitive_reads

MAX_ITERATIONS = 8

# value: what replaces the node's result; nodes: new nodes to insert before its readers;
# keeps_layout: the replacement has the replaced value's strides
Rewrite = namedtuple("Rewrite", "value nodes keeps_layout", defaults=((), False))


class _Context:
    """What rules may ask about the graph being rewritten."""

    def __init__(self, graph):
        self.producer = {}
        self.device = "cpu"
        self.written = {v for _, v in graph.updates}
        self.escaping = set(graph.outputs) | self.written
        self.inputs = {inp.value for inp in graph.inputs}
        # value -> how many nodes (and outputs) read it (a Counter counts in C)
        self.readers = Counter(chain.from_iterable(node.input_values() for node in graph.nodes))
        self.readers.update(self.escaping)

    def is_view(self, v):
        node = self.producer.get(v)
        return node is not None and REGISTRY[node.op].view

    def make(self, op, args, **attrs):
        """A new node ``op(*args, **attrs)`` with its result type from the op's meta rule."""
        specs = [TensorSpec(a.type.shape, a.type.dtype) if isinstance(a, Value) else a for a in args]
        spec = REGISTRY[op].meta(*specs, **attrs)
        value = Value(TensorType(tuple(spec.shape), spec.dtype, self.device))
        return Node(op, tuple(args), attrs, (value,))

    def fill(self, x):
        """The literal number ``x`` stands for, looking through views to a ``full``; else None."""
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, (int, float)):
            return x
        node = self.producer.get(x) if isinstance(x, Value) else None
        # through views that keep the dtype (a view of the bytes as another dtype changes values)
        while node is not None and REGISTRY[node.op].view and \
                node.outs[0].type.dtype == getattr(getattr(node.args[0], "type", None), "dtype", None):
            node = self.producer.get(node.args[0]) if node.args and isinstance(node.args[0], Value) else None
        if node is not None and node.op == "full":
            return node.attrs["fill_value"]
        return None

    def source(self, x, ops):
        """The node producing ``x`` when its op is one of ``ops``."""
        node = self.producer.get(x) if isinstance(x, Value) else None
        return node if node is not None and node.op in ops else None


# ---------------------------------------------------------------- rules

def _identity_operand(node, ctx, neutral, commutes):
    """``x op c`` (and ``c op x`` when ``commutes``) -> x, where ``neutral(c)`` says that ``c``
    (a literal or a ``full``'s fill value) changes no x."""
    a, b = node.args[:2]
    if isinstance(a, Value) and neutral(ctx.fill(b)):
        return Rewrite(a)
    if commutes and isinstance(b, Value) and neutral(ctx.fill(a)):
        return Rewrite(b)
    return None


def _is_one(c):
    return c == 1


def mul_one(node, ctx):
    return _identity_operand(node, ctx, _is_one, commutes=True)


def add_zero(node, ctx):
    alpha = node.attrs.get("alpha", 1)          # x + alpha * c (c + x only where alpha is 1)
    return _identity_operand(node, ctx, _adds_nothing(node, alpha), commutes=alpha == 1)


def sub_zero(node, ctx):
    return _identity_operand(node, ctx, _adds_nothing(node, -node.attrs.get("alpha", 1)),
                             commutes=False)


def _adds_nothing(node, scale):
    """Whether adding ``scale * c`` changes no value of ``node``'s type: any zero on integers;
    on floats only -0.0 (x + 0.0 turns -0.0 into 0.0, eagerly too)."""
    dt = node.outs[0].type.dtype
    if not (dt.is_floating_point or dt.is_complex):
        return lambda c: c == 0

    def neutral(c):
        if type(c) not in (int, float) or type(scale) not in (int, float):
            return False
        v = float(scale) * float(c)
        return v == 0 and math.copysign(1.0, v) < 0
    return neutral


def div_one(node, ctx):
    a = node.args[0]
    if node.attrs.get("rounding_mode") is not None and isinstance(a, Value) \
            and a.type.dtype.is_floating_point:
        return None                     # floor(x / 1) is not x
    return _identity_operand(node, ctx, _is_one, commutes=False)


def sub_self(node, ctx):
    a, b = node.args[:2]
    out = node.outs[0].type
    if a is b and isinstance(a, Value) and not out.dtype.is_floating_point \
            and node.attrs.get("alpha", 1) == 1:
        zeros = ctx.make("full", (), shape=tuple(out.shape), fill_value=0, dtype=out.dtype)
        return Rewrite(zeros.outs[0], (zeros,))
    return None


def neg_neg(node, ctx):
    if not isinstance(node.args[0], Value):
        return None
    inner = ctx.source(node.args[0], ("neg",))
    return Rewrite(inner.args[0]) if inner is not None else None




def _attr(node, name, position):
    """An op argument given by keyword (as the tracer records it) or by position."""
    return node.attrs[name] if name in node.attrs else node.args[position]


def _perm(node):
    """The dimension order a t/transpose/permute node produces from its input's."""
    ndim = len(node.args[0].type.shape)
    if node.op == "t":
        return (1, 0) if ndim == 2 else tuple(range(ndim))
    if node.op == "transpose":
        order = list(range(ndim))
        if ndim:
            a, b = wrap_dim(_attr(node, "dim0", 1), ndim), wrap_dim(_attr(node, "dim1", 2), ndim)
            order[a], order[b] = order[b], order[a]
        return tuple(order)
    return tuple(wrap_dim(d, ndim) for d in _attr(node, "dims", 1))


def permute_permute(node, ctx):
    inner = ctx.source(node.args[0], PERMUTE)
    outer = _perm(node)
    if inner is None:
        if outer == tuple(range(len(outer))):
            return Rewrite(node.args[0], keeps_layout=True)
        return None
    order = tuple(_perm(inner)[p] for p in outer)
    x = inner.args[0]
    if order == tuple(range(len(order))):
        return Rewrite(x, keeps_layout=True)
    new = ctx.make("permute", (x,), dims=order)
    return Rewrite(new.outs[0], (new,), keeps_layout=True)


def transpose_mm(node, ctx):
    """The transpose of a matrix product is the product of the transposes, swapped."""
    mm = ctx.source(node.args[0], ("mm",))
    if mm is None or _perm(node) != (1, 0) or ctx.readers.get(mm.outs[0]) != 1:
        return None
    a, b = mm.args
    (bt, made_b), (at, made_a) = _transposed(b, ctx), _transposed(a, ctx)
    product = ctx.make("mm", (bt, at))
    return Rewrite(product.outs[0], made_b + made_a + (product,))


def _transposed(x, ctx):
    """(the transpose of matrix ``x``, the nodes made for it): the source of a transpose
    itself (``t(t(y))`` is ``y``, which a later walk would find anyway), else a new ``t``."""
    inner = ctx.source(x, PERMUTE)
    if inner is not None and _perm(inner) == (1, 0):
        return inner.args[0], ()
    node = ctx.make("t", (x,))
    return node.outs[0], (node,)


def view_view(node, ctx):
    shape = tuple(node.outs[0].type.shape)      # the shape argument may hold a -1
    inner = ctx.source(node.args[0], RESHAPE)
    if inner is None:
        if shape == tuple(node.args[0].type.shape):
            return Rewrite(node.args[0], keeps_layout=node.op == "view")
        return None
    x = inner.args[0]
    op = "unsafe_view" if "unsafe_view" in (node.op, inner.op) else "view"
    if shape == tuple(x.type.shape):
        return Rewrite(x, keeps_layout=op == "view")
    new = ctx.make(op, (x,), shape=shape)
    return Rewrite(new.outs[0], (new,), keeps_layout=True)


def expand_same(node, ctx):
    x = node.args[0]
    return Rewrite(x, keeps_layout=True) if node.outs[0].type.shape == x.type.shape else None


def reduce_expand(node, ctx):
    """sum/mean over exactly the dimensions an expand made: no reduction needed."""
    expand = ctx.source(node.args[0], ("expand",))
    if expand is None or node.attrs.get("dtype") is not None:
        return None
    x, full_shape = expand.args[0], tuple(node.args[0].type.shape)
    lead = len(full_shape) - len(x.type.shape)
    padded = (1,) * lead + tuple(x.type.shape)
    made = {i for i, (a, b) in enumerate(zip(padded, full_shape)) if a != b}
    dim = node.attrs.get("dim")
    dims = set(range(len(full_shape))) if dim is None else \
        {wrap_dim(d, len(full_shape)) for d in ((dim,) if isinstance(dim, int) else dim)}
    if not made or not made <= dims or any(full_shape[d] != 1 for d in dims - made):
        return None
    count = 1
    for d in made:
        count *= full_shape[d]
    out = node.outs[0].type
    nodes = []
    if tuple(x.type.shape) != tuple(out.shape):
        reshaped = ctx.make("unsafe_view", (x,), shape=tuple(out.shape))
        nodes.append(reshaped)
        x = reshaped.outs[0]
    if node.op.startswith("sum") and count != 1:
        scaled = ctx.make("mul", (x, count))
        nodes.append(scaled)
        x = scaled.outs[0]
    return Rewrite(x, tuple(nodes))


def copy_of_self(node, ctx):
    x = node.args[0]
    if node.outs[0] in ctx.escaping:
        return None
    if node.op == "to_copy" and node.attrs.get("dtype") is not x.type.dtype:
        return None
    return Rewrite(x)


RULES = [
    (("mul",), mul_one),
    (("add",), add_zero),
    (("sub",), sub_zero),
    (("sub",), sub_self),
    (("div",), div_one),
    (("neg",), neg_neg),
    (PERMUTE, permute_permute),
    (PERMUTE, transpose_mm),
    (RESHAPE, view_view),
    (("expand",), expand_same),
    (("sum", "mean"), reduce_expand),
    (("clone", "to_copy"), copy_of_self),
]

_BY_OP = {}
for _ops, _rule in RULES:
    for _op in _ops:
        _BY_OP.setdefault(_op, []).append(_rule)


# ---------------------------------------------------------------- the driver

def simplify(graph, max_iterations=MAX_ITERATIONS):
    """Apply ``RULES`` until a walk over the graph changes nothing (at most ``max_iterations``)."""
    for _ in range(max_iterations):
        graph, changed = _walk(graph)
        if not changed:
            break
    return graph


def _walk(graph):
    ctx = _Context(graph)
    producer = ctx.producer
    sensitive = layout_sensitive_reads(graph)
    env, nodes = {}, []
    for node in graph.nodes:
        node = remap_node(node, env)
        rewrite = _first_rewrite(node, ctx)
        if rewrite is None or not _acceptable(node, rewrite, ctx, sensitive):
            nodes.append(node)
            for v in node.outs:
                producer[v] = node
            continue
        for new in rewrite.nodes:
            new.source = node.source
            nodes.append(new)
            for v in new.outs:
                producer[v] = new
        env[node.outs[0]] = rewrite.value
    if not env:
        return graph, False
    return remap_graph(graph, nodes, env), True


def _acceptable(node, rewrite, ctx, sensitive):
    old, new = node.outs[0], rewrite.value
    if new.type != old.type or (not rewrite.keeps_layout and old in sensitive):
        return False
    if old in ctx.escaping:
        if old in ctx.written and new in ctx.inputs:
            return False
        if ctx.is_view(new) and not REGISTRY[node.op].view:
            return False
    return True


def _first_rewrite(node, ctx):
    rules = _BY_OP.get(node.op)         # (most ops have none: asked first, it is the cheapest)
    if rules is None or len(node.outs) != 1 or not node.input_values():
        return None
    ctx.device = getattr(node.outs[0].type, "device", "cpu")
    for rule in rules:
        rewrite = rule(node, ctx)
        if rewrite is not None:
            return rewrite
    return None

"""From the graph to kernel descriptions: ``describe(node, layouts)`` turns a fused node (or one
lowerable node) into the ``Kernel`` of description.py for inputs laid out as ``layouts``, by
running the op set's lowering rules on a recording builder.  Views of inputs fold into the
load strides; what the description cannot express raises ``Unsupported`` (the node then runs
on the interpreter).
"""
from dataclasses import replace

import numpy as np

from dynograph.runtime import dtypes as D
from ..ir import Graph, Input, Node, TensorType, Value, remap
from ..ops import REGISTRY
from ..ops.core import TensorSpec, wrap_dims
from ..passes.cse import literal_key
from ..symbolic import concrete
from .description import Handle, Kernel, Load, Recorder, ReductionStep, Store  # noqa: F401  (importers)
from .description import apply_elementwise
from .scalar import Composite, Unsupported


def as_subgraph(node):
    """A single node wrapped as the subgraph of a fused node (its inputs are its Values)."""
    if node.op == "fused":
        return node.attrs["graph"], node.attrs.get("name") or "k"
    inputs, mapping = [], {}
    for v in node.input_values():
        if v not in mapping:
            mapping[v] = Value(v.type)
            inputs.append(Input(mapping[v], "input", f"a{len(inputs)}"))
    outs = tuple(Value(v.type) for v in node.outs)
    inner = Node(node.op, remap(node.args, mapping),
                 {k: remap(v, mapping) for k, v in node.attrs.items()}, outs)
    return Graph(inputs, [inner], list(outs)), node.op


def lowerable(node):
    """Whether every op of ``node`` (or of its subgraph) has a lowering (cheap pre-check)."""
    if node.op == "fused":
        return all(_has_rule(n) for n in node.attrs["graph"].nodes)
    # a view on its own stays a numpy view: a kernel would copy it
    op = REGISTRY.get(node.op)
    return op is not None and op.lowering is not None and op.reindex is None


def _has_rule(node):
    op = REGISTRY.get(node.op)
    return op is not None and (op.lowering is not None or op.reindex is not None)


def describe(node, layouts, batch=None):
    """The Kernel computing ``node`` (a fused node or one lowerable node) for inputs laid out as
    ``layouts``: one (element strides, element offset) per input, in argument order.
    Raises Unsupported for what the kernel description cannot express."""
    graph, name = as_subgraph(node)
    structure = _structure(node, graph)
    key = None if structure is None else (structure, tuple(layouts), batch)
    found = _DESCRIBED.get(key) if key is not None else None
    if found is None:
        try:
            found = _Describer(graph, name, layouts, batch).run()
        except Unsupported as e:
            # its message only: the exception raised holds the describer's frames
            found = Unsupported(str(e))
        if key is not None:
            if len(_DESCRIBED) >= _DESCRIBED_MAX:
                _DESCRIBED.clear()
            _DESCRIBED[key] = found
    if isinstance(found, Unsupported):
        raise Unsupported(str(found))
    if found.name != name:
        kernel, found = found, replace(found, name=name)
        found.__dict__["key"] = kernel.key      # (the name is not part of it)
    return found


# Kernels described, by the structure of the subgraph, the layouts and the batch size: a
# program's kernels repeat (each layer's, each parameter's update), and describing one took
# as long as a pass over its graph (the char transformer's 57 descriptions, 31 different: 20 ms
# of its first call)
_DESCRIBED = {}
_DESCRIBED_MAX = 4096


def _structure(node, graph):
    """A hashable key of all ``describe`` reads of ``graph`` (``node``'s subgraph): its input
    types, its nodes with their Values by position, its outputs; None where a literal has no
    key (compiler/passes/cse.py).  Kept on the node (nodes are not changed once built)."""
    if "_structure" in node.__dict__:
        return node.__dict__["_structure"]
    position = {inp.value: i for i, inp in enumerate(graph.inputs)}
    for n in graph.nodes:
        for v in n.outs:
            position[v] = len(position)
    try:
        key = (tuple(inp.value.type for inp in graph.inputs),
               tuple((n.op, literal_key(n.args, position),
                      tuple((k, literal_key(v, position)) for k, v in sorted(n.attrs.items())),
                      tuple(v.type for v in n.outs)) for n in graph.nodes),
               tuple(position[v] for v in graph.outputs))
    except (TypeError, KeyError):
        key = None
    node.__dict__["_structure"] = key
    return key


class _Describer:
    def __init__(self, graph, name, layouts, batch):
        self.graph = graph
        self.name = name
        self.batch = batch
        self.b = Recorder()
        self.producer = {v: n for n in graph.nodes for v in n.outs}
        self.inputs = {inp.value: i for i, inp in enumerate(graph.inputs)}
        self.layouts = layouts
        self.loads = []
        self.reductions = []
        self.red_of = {}
        self.memo = {}
        self.natural = {}
        self.shapes = {}
        self.pins = {}

    def shape(self, v):
        shape = self.shapes.get(v)
        if shape is None:
            shape = self.shapes[v] = tuple(concrete(v.type.shape, self.batch))
        return shape

    def attrs(self, node):
        return {k: concrete(v, self.batch) for k, v in node.attrs.items()}

    # -- the domain
    def run(self):
        for v in self.graph.inputs:
            if not isinstance(v.value.type, TensorType):
                raise Unsupported("non-tensor input")
        reds = [n for n in self.graph.nodes if REGISTRY[n.op].kind == "reduction"]
        for n in self.graph.nodes:
            if not _has_rule(n):
                raise Unsupported(f"{n.op} has no lowering")
        if reds:
            x = reds[0].args[0]
            self.domain = self.shape(x)
            self.reduce_axes = tuple(sorted(wrap_dims(self.attrs(reds[0]).get("dim"),
                                                      len(self.domain))))
            for r in reds[1:]:
                axes = tuple(sorted(wrap_dims(self.attrs(r).get("dim"), len(self.domain))))
                if self.shape(r.args[0]) != self.domain or axes != self.reduce_axes:
                    raise Unsupported("reductions of different shapes")
        else:
            shapes = [self.shape(v) for v in self.graph.outputs]
            self.domain = max(shapes, key=lambda s: (int(np.prod(s)), len(s)))
            self.reduce_axes = ()
        stores = []
        n_in = len(self.graph.inputs)
        for i, v in enumerate(self.graph.outputs):
            m = self.natural_map(v)
            h = self.emit(v, m)
            out_dt = v.type.dtype
            h = self.b.round_to(h, out_dt) if out_dt.itemsize == 2 and out_dt.is_floating_point \
                else self.b.cast(h, out_dt)
            stores.append(Store(n_in + i, h.index, self.store_strides(v, m)))
        buffers = [(f"in{i}", inp.value.type.dtype, "in") for i, inp in enumerate(self.graph.inputs)]
        buffers += [(f"out{i}", v.type.dtype, "out") for i, v in enumerate(self.graph.outputs)]
        return Kernel(self.name, self.domain, self.reduce_axes, buffers, self.b.exprs, self.loads,
                      self.reductions, stores)

    def store_strides(self, v, m):
        shape = self.shape(v)
        contiguous = [0] * len(shape)
        step = 1
        for k in range(len(shape) - 1, -1, -1):
            contiguous[k] = step
            step *= shape[k]
        strides = [0] * len(self.domain)
        for k, a in enumerate(m):
            if a is None:
                continue
            if strides[a]:
                raise Unsupported("an output reads one domain axis twice")
            strides[a] = contiguous[k]
        return tuple(strides)

    # -- where each value sits in the domain: one domain axis (or None: index 0) per own dim
    def aligned(self, shape):
        """Right-aligned broadcasting to the domain, else each dim on the next domain axis of
        its size (a per-row value, shape (N,), of a kernel over (N, C): a cross-entropy's
        sample weights); None when neither fits.  Inputs are loaded wherever a value is
        placed; a reduction's result read at another position than its own raises
        Unsupported (emit_reduction), so a placement is never silently wrong."""
        off = len(self.domain) - len(shape)
        if off < 0:
            return None
        m = []
        for k, n in enumerate(shape):
            if n == 1:
                m.append(None)
            elif n == self.domain[off + k]:
                m.append(off + k)
            else:
                return self._in_order(shape)
        return tuple(m)

    def _in_order(self, shape):
        m, a = [], 0
        for n in shape:
            if n == 1:
                m.append(None)
                continue
            while a < len(self.domain) and self.domain[a] != n:
                a += 1
            if a == len(self.domain):
                return None
            m.append(a)
            a += 1
        return tuple(m)

    def natural_map(self, v):
        if v in self.natural:
            return self.natural[v]
        m = self._natural(v)
        if m is None:
            raise Unsupported(f"cannot place a value of shape {self.shape(v)} in {self.domain}")
        self.natural[v] = m
        return m

    def _natural(self, v):
        shape = self.shape(v)
        node = self.producer.get(v)
        if node is None or not node.input_values():         # an input, or a constant
            return self.aligned(shape)
        op = REGISTRY[node.op]
        if op.kind == "reduction":
            keep = self.attrs(node).get("keepdim", False)
            return tuple(None if a in self.reduce_axes else a for a in range(len(self.domain))
                         if keep or a not in self.reduce_axes)
        if op.reindex is not None:
            src = node.args[0]
            try:
                src_map = self.natural_map(src)
            except Unsupported:
                return self.aligned(shape)
            m = self.view_to_source(node, shape, self.shape(src))
            aligned = self.aligned(shape)
            if m is None:
                return aligned
            out = []
            for k, j in enumerate(m):
                if shape[k] == 1:
                    out.append(None)
                elif j is not None and src_map[j] is not None:
                    out.append(src_map[j])
                elif aligned is not None and aligned[k] is not None:
                    out.append(aligned[k])      # a dim the view adds (expand): by position
                else:
                    return aligned
            return tuple(out)
        # elementwise and conversions: from the tensor arguments, dim by dim; arguments placed by
        # a reduction first (a kernel input can be loaded at any axis, a reduction's result
        # only where it is computed: a batch norm's running statistics, shape (C,), read the
        # per-channel reduction at axis 1, where right-aligned broadcasting would put (C,) last)
        out = [None] * len(shape)
        args = sorted(node.input_values(), key=lambda a: not self._pinned(a))
        for a in args:
            ashape = self.shape(a)
            off = len(shape) - len(ashape)
            try:
                am = self.natural_map(a)
            except Unsupported:
                continue
            for j, n in enumerate(ashape):
                if n != 1 and n == shape[off + j] and out[off + j] is None:
                    out[off + j] = am[j]
        for k, n in enumerate(shape):
            if n != 1 and out[k] is None:
                return self.aligned(shape)
        return tuple(out)

    def _pinned(self, v):
        """Whether value ``v`` depends on a reduction of the kernel (its placement is then where
        the reduction's result is; other values are loaded wherever they are read)."""
        pinned = self.pins.get(v)
        if pinned is None:
            node = self.producer.get(v)
            pinned = node is not None and (REGISTRY[node.op].kind == "reduction" or
                                           any(self._pinned(a) for a in node.input_values()))
            self.pins[v] = pinned
        return pinned

    def view_to_source(self, node, shape, src_shape):
        """For each output dim of a view op, the source dim it reads (None: a new or
        broadcast dim), or None when the view is not a pure re-indexing of dims."""
        if REGISTRY[node.op].reindex == "reshape":
            src_dims = [j for j, n in enumerate(src_shape) if n != 1]
            out_dims = [k for k, n in enumerate(shape) if n != 1]
            if [src_shape[j] for j in src_dims] != [shape[k] for k in out_dims]:
                return None
            m = [None] * len(shape)
            for k, j in zip(out_dims, src_dims):
                m[k] = j
            return m
        # the other view ops never copy: apply them to a probe whose strides name the dims
        base = np.zeros(1, np.int8)
        marks = tuple(j + 1 for j in range(len(src_shape)))
        probe = np.lib.stride_tricks.as_strided(base, src_shape, marks)
        out = REGISTRY[node.op].impl(probe, **self.attrs(node))
        if tuple(out.shape) != shape:
            return None
        return [None if n == 1 or s == 0 else s - 1 for n, s in zip(shape, out.strides)]

    # -- emitting scalar expressions for a value read under a map
    def emit(self, v, m):
        key = (v, m)
        if key not in self.memo:
            self.memo[key] = self._emit(v, m)
        return self.memo[key]

    def level(self, m):
        return int(any(a in self.reduce_axes for a in m if a is not None))

    def _emit(self, v, m):
        if v in self.inputs:
            i = self.inputs[v]
            strides, offset = self.layouts[i]
            return self.load(i, strides, offset, m, v.type.dtype)
        node = self.producer[v]
        op = REGISTRY[node.op]
        attrs = self.attrs(node)
        shape = self.shape(v)
        if op.reindex is not None:
            return self.emit_view(node, v, m, shape)
        if op.kind == "reduction":
            return self.emit_reduction(node, v, m, attrs)
        args = [self.emit(a, self.arg_map(a, shape, m)) if isinstance(a, Value) else a
                for a in node.args]
        if op.kind == "elementwise":
            for k in op.scalar_attrs:       # a run-time scalar: the 0-d input's expression
                if isinstance(attrs.get(k), Value):
                    attrs[k] = self.emit(attrs[k], ())
            return self.emit_elementwise(op, node, args, attrs)
        # conversions and constants: the rule builds the value, the kernel casts it
        return self.b.cast(op.lowering(self.b, *args, **attrs), v.type.dtype)

    def arg_map(self, a, shape, m):
        ashape = self.shape(a)
        off = len(shape) - len(ashape)
        return tuple(None if n == 1 else m[off + j] for j, n in enumerate(ashape))

    def load(self, i, strides, offset, m, dtype):
        dstrides = [0] * len(self.domain)
        for k, a in enumerate(m):
            if a is not None:
                dstrides[a] += strides[k]
        ld = Load(i, tuple(dstrides), offset)
        if ld not in self.loads:
            self.loads.append(ld)
        return self.b.load(self.loads.index(ld), dtype, self.level(m))

    def emit_view(self, node, v, m, shape):
        src = node.args[0]
        src_shape = self.shape(src)
        dims = self.view_to_source(node, shape, src_shape)
        if dims is not None:
            sm = [None] * len(src_shape)
            for k, j in enumerate(dims):
                if j is not None and src_shape[j] != 1:
                    sm[j] = m[k]
            return self.emit(src, tuple(sm))
        if src in self.inputs:              # a reshape of an input folds into its strides
            i = self.inputs[src]
            strides, offset = self.layouts[i]
            probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), src_shape,
                                                    [max(s, 0) for s in strides])
            if any(s < 0 for s in strides):
                raise Unsupported("reshape of a reversed input")
            try:
                folded = probe.reshape(shape, copy=False)
            except ValueError:
                raise Unsupported("reshape that needs a copy") from None
            return self.load(i, folded.strides, offset, m, src.type.dtype)
        raise Unsupported(f"{node.op} {src_shape} -> {shape} inside a kernel")

    def emit_reduction(self, node, v, m, attrs):
        op = REGISTRY[node.op]
        rule = op.lowering
        x = node.args[0]
        if self.shape(x) != self.domain:
            raise Unsupported("reduction input outside the domain")
        if v not in self.red_of and isinstance(rule, Composite):
            self.red_of[v] = self.emit_composite(rule, x, attrs)
        if v not in self.red_of:
            b = self.b
            identity_map = tuple(range(len(self.domain)))
            item = self.emit(x, identity_map)
            acc_dt = rule.acc_dtype(x.type.dtype, v.type.dtype)
            extra = {k: a for k, a in attrs.items() if k not in ("dim", "keepdim", "dtype")}
            if rule.prepare is not None:
                item = rule.prepare(b, item, **extra)
            item = b.cast(item, acc_dt)
            index = len(self.reductions)
            self.reductions.append(ReductionStep(rule.combine, rule.identity(acc_dt), acc_dt,
                                                 item.index))
            result = b.acc(index, D.int64 if rule.combine.startswith("arg") else acc_dt)
            if rule.finalize is not None:
                count = int(np.prod([self.domain[a] for a in self.reduce_axes]))
                result = rule.finalize(b, result, count, **extra)
            self.red_of[v] = result
        expected = self._natural(v)
        if m != expected and any(a is not None for a in m):
            # (an axis of size 1 is no position: its index is always 0)
            if self._positions(m) != self._positions(expected):
                raise Unsupported("a reduction result read at another position")
        return self.red_of[v]

    def _positions(self, m):
        return [a for a in m if a is not None and self.domain[a] != 1]

    def emit_composite(self, rule, x, attrs):
        b = self.b

        def reduce(combine, identity, value):
            index = len(self.reductions)
            self.reductions.append(ReductionStep(combine, identity, value.dtype, value.index))
            return b.acc(index, value.dtype)
        item = self.emit(x, tuple(range(len(self.domain))))
        count = int(np.prod([self.domain[a] for a in self.reduce_axes]))
        extra = {k: a for k, a in attrs.items() if k not in ("dim", "keepdim", "dtype")}
        return rule.rule(b, item, count, reduce, **extra)

    def emit_elementwise(self, op, node, args, attrs):
        # a number that depends on the batch size (a mean's 1/s0) takes this call's value
        raws = [a if isinstance(a, Value) else concrete(a, self.batch) for a in node.args]
        specs = [TensorSpec(self.shape(a), a.type.dtype) if isinstance(a, Value) else a
                 for a in raws]
        handles = [h if isinstance(raw, Value) else raw for raw, h in zip(raws, args)]
        return apply_elementwise(self.b, op, specs, handles, attrs)

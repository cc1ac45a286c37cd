"""The drawing model every format renders: boxes (nodes) and arrows (edges).

An IR graph becomes a ``VizGraph`` with :func:`from_ir`; the dynamic autograd graph behind a
tensor with :func:`from_autograd`.  Fused kernels either expand into their member ops, drawn
as one group (a cluster in DOT, one color in SVG and HTML), or collapse into one box.
"""
from dataclasses import dataclass, field


@dataclass(eq=False)
class VizNode:
    id: str
    label: str                      # first line: the op; the box shows it
    kind: str = "op"                # op | fused | collective | input kind (param...) | output | update | grad
    types: list = field(default_factory=list)       # "f32[5,16]" per output value
    attrs: dict = field(default_factory=dict)       # literal attributes, as text
    source: str = ""                # "file.py:12 in step": the user's line that created the op
    group: str = ""                 # fusion group ("k3") this node belongs to, "" for none
    detail: str = ""                # longer text: a kernel's subgraph, an autograd node's inputs
    code: str = ""                  # generated code of a kernel, when it exists


@dataclass(eq=False)
class VizGraph:
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)       # (source id, target id, label)
    title: str = ""
    text: str = ""                  # the IR text form of the graph drawn (empty for autograd)

    def node(self, id):
        return next(n for n in self.nodes if n.id == id)

    def groups(self):
        """Fusion group name -> ids of its nodes, in drawing order."""
        out = {}
        for n in self.nodes:
            if n.group:
                out.setdefault(n.group, []).append(n.id)
        return out

    def to_networkx(self):
        """The drawing as a ``networkx.MultiDiGraph`` (node attributes: label, kind, types...)."""
        import networkx as nx
        g = nx.MultiDiGraph(title=self.title)
        for n in self.nodes:
            g.add_node(n.id, label=n.label, kind=n.kind, types=list(n.types), attrs=dict(n.attrs),
                       source=n.source, group=n.group)
        for s, t, label in self.edges:
            g.add_edge(s, t, label=label)
        return g

    def render(self, format="text", **options):
        from .render import render
        return render(self, format, **options)


# ---------------------------------------------------------------- the IR

def _attr_text(x):
    from dynograph.compiler.text import format_literal
    try:
        return format_literal(x)
    except (TypeError, ValueError):
        return repr(x)


def from_ir(graph, title="", expand=True, code=None):
    """The drawing of a ``compiler.ir.Graph``.

    ``expand``: draw each fused kernel's ops inside its group (True) or the kernel as one box
    (False).  ``code``: kernel name -> generated source, shown with the kernel's box."""
    from dynograph.compiler.text import print_graph
    code = code or {}
    out = VizGraph(title=title, text=print_graph(graph))
    producer = {}                   # Value -> (node id, label of the edge)
    for i, inp in enumerate(graph.inputs):
        nid = f"i{i}"
        out.nodes.append(VizNode(nid, inp.name, inp.kind, [str(inp.value.type)]))
        producer[inp.value] = nid
    _add_nodes(out, graph.nodes, producer, "n", "", expand, code)
    for i, v in enumerate(graph.outputs):
        nid = f"o{i}"
        out.nodes.append(VizNode(nid, f"output {i}", "output", [str(v.type)]))
        _edge(out, producer, v, nid)
    for i, (slot, v) in enumerate(graph.updates):
        nid = f"u{i}"
        out.nodes.append(VizNode(nid, f"update {slot}", "update", [str(v.type)]))
        _edge(out, producer, v, nid)
    return out


def _edge(out, producer, value, target):
    src = producer.get(value)
    if src is not None:
        out.edges.append((src, target, str(value.type)))


def _kind(node, sub):
    """'fused' for a kernel, 'collective' for an op that communicates with the other processes
    (DistributedDataParallel's all-reduce: drawn in a color of its own), else 'op'."""
    if sub is not None:
        return "fused"
    from dynograph.compiler.ops import REGISTRY
    op = REGISTRY.get(node.op)
    return "collective" if op is not None and op.kind == "collective" else "op"


def _add_nodes(out, nodes, producer, prefix, group, expand, code):
    from dynograph.compiler.text import print_graph
    for j, node in enumerate(nodes):
        nid = f"{prefix}{j}"
        sub = node.attrs.get("graph")
        attrs = {k: _attr_text(v) for k, v in node.attrs.items() if k != "graph"}
        if sub is not None and expand:
            _expand_kernel(out, node, sub, nid, producer, code)
            continue
        name = node.attrs.get("name", "") if sub is not None else ""
        label = f"{node.op} {name}".strip()
        vn = VizNode(nid, label, _kind(node, sub), [str(v.type) for v in node.outs],
                     attrs, node.source, group)
        if sub is not None:
            vn.detail = print_graph(sub)
            vn.code = code.get(name, "")
            vn.group = name
        elif prefix == "n":             # a single op compiled as a kernel of its own
            vn.code = code.get(f"{node.op}{j}", "")
        out.nodes.append(vn)
        for v in node.input_values():
            _edge(out, producer, v, nid)
        for v in node.outs:
            producer[v] = nid


def _expand_kernel(out, node, sub, nid, producer, code):
    """The kernel's member ops as nodes of group ``name``: its inputs are the outer args."""
    name = node.attrs.get("name") or nid
    outer = node.input_values()
    inner = {}
    for inp, v in zip(sub.inputs, outer):
        if v in producer:
            inner[inp.value] = producer[v]
    start = len(out.nodes)
    _add_nodes(out, sub.nodes, inner, f"{nid}_", name, False, code)
    kernel_code = code.get(name, "")
    for vn in out.nodes[start:]:
        vn.group = name
        vn.code = kernel_code
    for v_out, v_in in zip(node.outs, sub.outputs):
        if v_in in inner:
            producer[v_out] = inner[v_in]


# ---------------------------------------------------------------- the dynamic autograd graph

def from_autograd(tensor, params=None, title=""):
    """The backward graph behind ``tensor``, like torchviz's ``make_dot``.

    Boxes are the ``grad_fn`` nodes (``MulBackward0``...) and one ``AccumulateGrad`` per leaf,
    labelled with the leaf's name from ``params`` (name -> tensor) and its shape."""
    names = {id(t): name for name, t in (params or {}).items()}
    out = VizGraph(title=title or "autograd")
    root = VizNode("t", "tensor", "output", [_tensor_type(tensor)])
    out.nodes.append(root)
    fn = getattr(tensor, "grad_fn", None)
    if fn is None:
        return out
    ids = {}
    stack = [fn]
    ids[id(fn)] = "g0"
    order = []
    while stack:
        f = stack.pop()
        order.append(f)
        for nxt, _ in getattr(f, "next_functions", ()):
            if nxt is not None and id(nxt) not in ids:
                ids[id(nxt)] = f"g{len(ids)}"
                stack.append(nxt)
    for f in order:
        out.nodes.append(_autograd_node(f, ids[id(f)], names))
        for k, (nxt, _) in enumerate(getattr(f, "next_functions", ())):
            if nxt is not None:
                out.edges.append((ids[id(nxt)], ids[id(f)], ""))
    out.edges.append((ids[id(fn)], "t", ""))
    return out


def _tensor_type(t):
    from dynograph.runtime.dtypes import from_numpy_dtype
    data = getattr(t, "_data", None)
    if data is None:
        return ""
    dims = ",".join(str(n) for n in data.shape)
    return f"{from_numpy_dtype(data.dtype).abbr}[{dims}]"


def _autograd_node(f, nid, names):
    name = f.name() if hasattr(f, "name") else type(f).__name__
    var = getattr(f, "variable", None)
    if var is not None:                     # AccumulateGrad: the leaf it feeds
        leaf = names.get(id(var), "")
        label = f"{leaf}" if leaf else "AccumulateGrad"
        return VizNode(nid, label, "param" if leaf else "leaf", [_tensor_type(var)],
                       detail=name)
    types = []
    outs = getattr(f, "_outputs", None)
    for o in (outs if isinstance(outs, tuple) else (outs,)):
        if o is not None and hasattr(o, "shape"):
            from dynograph.runtime.dtypes import from_numpy_dtype
            types.append(f"{from_numpy_dtype(o.dtype).abbr}[{','.join(str(n) for n in o.shape)}]")
    op = getattr(f, "op", None)
    attrs = {k: _attr_text(v) for k, v in (getattr(f, "attrs", None) or {}).items()}
    detail = f"op: {op.name}" if op is not None and hasattr(op, "name") else ""
    return VizNode(nid, name, "grad", types, attrs, detail=detail)


def collapse_sources(viz):
    """One box per user source line: the ops a line of the program created (a layer call, the
    loss, ``loss.backward()``, ``optimizer.step()``) drawn as one node.  Inputs, outputs and ops
    without a source line stay as they are.  An overview of graphs too big to read op by op."""
    out = VizGraph(title=viz.title, text=viz.text)
    owner = {}
    boxes = {}
    for n in viz.nodes:
        if n.kind in ("op", "fused") and n.source:
            box = boxes.get(n.source)
            if box is None:
                box = boxes[n.source] = VizNode(f"s{len(boxes)}", n.source, "source")
                out.nodes.append(box)
            box.detail += f"{n.label}: {', '.join(n.types)}\n"
            owner[n.id] = box.id
        else:
            out.nodes.append(n)
            owner[n.id] = n.id
    for box in out.nodes:
        if box.kind == "source":
            box.types = [f"{box.detail.count(chr(10))} ops"]
    seen = set()
    for s, t, label in viz.edges:
        a, b = owner.get(s), owner.get(t)
        if a is not None and b is not None and a != b and (a, b) not in seen:
            seen.add((a, b))
            out.edges.append((a, b, label))
    return out

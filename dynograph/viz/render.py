"""``render(graph, format)``: one entry point for every format."""
import zlib

FORMATS = ("text", "dot", "svg", "html", "json")
EXTENSIONS = {"text": ".dg", "dot": ".dot", "svg": ".svg", "html": ".html", "json": ".json"}

# fill colors of boxes that are not in a fusion group
KIND_COLORS = {"op": "#ffffff", "fused": "#ffe9a8", "collective": "#ffc9c9", "input": "#d9ecff",
               "param": "#e3f5d8",
               "buffer": "#e8e0f5", "state": "#f2e6d9", "const": "#eeeeee", "scalar": "#eeeeee",
               "rng": "#eeeeee", "output": "#cfe3ff", "update": "#d8f0e0", "grad": "#ffffff",
               "leaf": "#eeeeee", "source": "#fff4d6"}


def _hue(name):
    return zlib.crc32(name.encode()) % 360


def group_color(name):
    """A stable pastel color for a fusion group."""
    return f"hsl({_hue(name)}, 70%, 86%)"


def hex_group_color(name):
    """``group_color`` as #rrggbb (Graphviz does not read hsl())."""
    import colorsys
    hue = _hue(name)
    r, g, b = colorsys.hls_to_rgb(hue / 360, 0.86, 0.70)
    return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))


def fill(node, hexadecimal=False):
    if node.group:
        return hex_group_color(node.group) if hexadecimal else group_color(node.group)
    return KIND_COLORS.get(node.kind, "#ffffff")


EXPAND_LIMIT = 2000      # a graph with more ops draws its kernels as single boxes by default


def op_count(graph):
    """The ops of an IR graph, counting each fused kernel's members."""
    return sum(len(n.attrs["graph"].nodes) if "graph" in n.attrs else 1 for n in graph.nodes)


def to_viz(graph, expand=None, title="", code=None):
    """A ``VizGraph`` for an IR graph (or the drawing itself)."""
    from .model import VizGraph, from_ir
    if isinstance(graph, VizGraph):
        return graph
    if expand is None:
        expand = op_count(graph) <= EXPAND_LIMIT
    return from_ir(graph, title=title, expand=expand, code=code)


def render(graph, format="text", *, title="", expand=None, code=None, engine="auto"):
    """``graph`` (an IR ``Graph`` or a ``VizGraph``) as a string in ``format``.

    * ``text``: the IR's text form (parses back with ``compiler.text.parse_graph``);
    * ``dot``: Graphviz DOT, fusion groups as clusters;
    * ``svg``: drawn by Graphviz's ``dot`` when installed (``engine='dot'``), else by the
      built-in layered layout (``engine='builtin'``);
    * ``html``: one self-contained interactive page;
    * ``json``: nodes and edges with all attributes.

    ``expand``: draw fused kernels' ops (True) or each kernel as one box (False); by default
    kernels expand unless the graph has more than 2000 ops.  ``code``: kernel name ->
    generated source, shown with the kernel."""
    from .model import VizGraph
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    if format == "text":
        if isinstance(graph, VizGraph):
            from .formats.text import viz_text
            return viz_text(graph)
        from dynograph.compiler.text import print_graph
        return print_graph(graph) + "\n"
    if format == "html" and not isinstance(graph, VizGraph):
        from .formats.html import html_for_ir
        return html_for_ir(graph, title=title, code=code, expand=expand)
    viz = to_viz(graph, expand, title, code)
    if format == "dot":
        from .formats.dot import to_dot
        return to_dot(viz)
    if format == "svg":
        from .formats.svg import to_svg
        return to_svg(viz, engine)
    if format == "html":
        from .formats.html import to_html
        return to_html([("graph", viz)], title=title or viz.title)
    from .formats.json import to_json
    return to_json(viz)

"""One self-contained HTML page: the graph drawn by the built-in layered layout, in inline SVG.

No network access: the page's CSS, JavaScript and data are inline.  Boxes are colored by fusion
group; hovering shows the types and source line, clicking opens a side panel with attributes,
the source line, a kernel's subgraph and its generated code when there is some.  The search box
finds ops by name (``page.html#search=mm`` opens at the first match); the wheel zooms,
dragging pans.  A page may hold several views (stages, or
one graph with kernels expanded and collapsed); a selector switches between them.
"""
import json
from html import escape

from ..layout import box_lines, extent, layout
from ..render import EXPAND_LIMIT, fill, op_count
from .html_page import PAGE

SOURCE_VIEW_MIN = 300       # graphs with more ops also get a view with one box per source line


def _view(name, viz):
    boxes = layout(viz)
    index = {n.id: k for k, n in enumerate(viz.nodes)}
    width, height = extent(boxes)
    nodes = []
    for n in viz.nodes:
        b = boxes[n.id]
        nodes.append({"id": n.id, "x": round(b.x, 1), "y": round(b.y, 1), "w": round(b.w, 1),
                      "h": round(b.h, 1), "lines": box_lines(n), "fill": fill(n), "kind": n.kind,
                      "label": n.label, "types": n.types, "attrs": n.attrs, "source": n.source,
                      "group": n.group, "detail": n.detail, "code": n.code})
    edges = [[index[s], index[t], label] for s, t, label in viz.edges if s in index and t in index]
    return {"name": name, "width": round(width), "height": round(height), "nodes": nodes,
            "edges": edges}


def to_html(views, title="dynograph graph"):
    """A page holding ``views``: a list of (name, ``VizGraph``)."""
    data = json.dumps({"title": title, "views": [_view(name, viz) for name, viz in views]},
                      separators=(",", ":"))
    data = data.replace("</", "<\\/")
    return PAGE.replace("__TITLE__", escape(title)).replace("__DATA__", data)


def html_for_ir(graph, title="", code=None, expand=None):
    """An IR graph's page: kernels expanded, plus a view with each kernel as one box."""
    from ..model import collapse_sources, from_ir
    has_kernels = any(n.op == "fused" for n in graph.nodes)
    size = op_count(graph)
    views = []
    if expand is not False:
        if expand or size <= EXPAND_LIMIT or not has_kernels:
            views.append(("ops" if has_kernels else "graph",
                          from_ir(graph, title=title, expand=True, code=code)))
    if has_kernels:
        collapsed = ("kernels", from_ir(graph, title=title, expand=False, code=code))
        # a big graph opens collapsed: one box per kernel
        views.insert(0 if size > EXPAND_LIMIT else len(views), collapsed)
    if size > SOURCE_VIEW_MIN:
        views.append(("source lines", collapse_sources(views[0][1])))
    return to_html(views, title=title or "dynograph graph")

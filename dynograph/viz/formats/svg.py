"""SVG: Graphviz's ``dot`` when it is installed and the graph is not huge, else the built-in
layered layout (``dynograph.viz.layout``), so an SVG can always be made.

Both write one ``<g class="node">`` per node (Graphviz's own convention)."""
import shutil
import subprocess
from xml.sax.saxutils import escape

from ..layout import LINE_H, PAD, box_lines, extent, layout
from ..render import fill

DOT_MAX_NODES = 800         # beyond this Graphviz takes minutes; the built-in layout does not
DOT_TIMEOUT_S = 30


def to_svg(viz, engine="auto"):
    """``engine``: 'dot' (Graphviz, an error when missing), 'builtin', or 'auto'."""
    if engine not in ("auto", "dot", "builtin"):
        raise ValueError(f"unknown SVG engine {engine!r}; choose auto, dot or builtin")
    dot = shutil.which("dot")
    if engine == "dot" and dot is None:
        raise RuntimeError("Graphviz's dot is not installed (apt-get install graphviz)")
    if engine == "dot" or (engine == "auto" and dot and len(viz.nodes) <= DOT_MAX_NODES):
        from .dot import to_dot
        try:
            done = subprocess.run([dot, "-Tsvg"], input=to_dot(viz), capture_output=True,
                                  text=True, timeout=DOT_TIMEOUT_S)
            if done.returncode == 0:
                return done.stdout
            if engine == "dot":
                raise RuntimeError(f"dot failed: {done.stderr.strip()}")
        except subprocess.TimeoutExpired:
            if engine == "dot":
                raise
    return builtin_svg(viz)


def builtin_svg(viz, boxes=None):
    """The drawing laid out by ``layout.layout`` as a standalone SVG document."""
    boxes = boxes or layout(viz)
    width, height = extent(boxes)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="12">',
           f"<title>{escape(viz.title or 'graph')}</title>",
           '<g class="edges" fill="none" stroke="#888" stroke-width="1">']
    for s, t, label in viz.edges:
        if s in boxes and t in boxes:
            out.append(f'<path class="edge" d="{edge_path(boxes[s], boxes[t])}">'
                       f"<title>{escape(label)}</title></path>")
    out.append("</g>")
    for n in viz.nodes:
        b = boxes[n.id]
        tip = "\n".join(x for x in (n.label, ", ".join(n.types), n.source) if x)
        out.append(f'<g class="node" id="node-{escape(n.id)}"><title>{escape(tip)}</title>'
                   f'<rect x="{b.x - b.w / 2:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" '
                   f'rx="4" fill="{fill(n, hexadecimal=True)}" stroke="#555"/>')
        for k, line in enumerate(box_lines(n)):
            out.append(f'<text x="{b.x:.1f}" y="{b.y + PAD / 2 + LINE_H * (k + 0.75):.1f}" '
                       f'text-anchor="middle">{escape(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def edge_path(a, b):
    """A vertical S-curve from the bottom of box ``a`` to the top of box ``b``."""
    y0, y1 = a.y + a.h, b.y
    mid = (y0 + y1) / 2 if y1 > y0 else y0 + 20
    return f"M{a.x:.1f},{y0:.1f} C{a.x:.1f},{mid:.1f} {b.x:.1f},{mid:.1f} {b.x:.1f},{y1:.1f}"

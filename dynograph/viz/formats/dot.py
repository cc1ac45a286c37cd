"""Graphviz DOT, written from the drawing's networkx graph; fusion groups become clusters."""
from ..render import fill


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _node_line(nid, data, color):
    label = data["label"]
    if data["types"]:
        label += "\n" + ", ".join(data["types"][:3])
    tooltip = data["source"] or data["kind"]
    return (f"  {_quote(nid)} [label={_quote(label)}, fillcolor={_quote(color)}, "
            f"tooltip={_quote(tooltip)}];")


def to_dot(viz):
    """DOT text: boxes labelled with op, shapes and dtypes; one ``cluster_kN`` per kernel."""
    g = viz.to_networkx()
    colors = {n.id: fill(n, hexadecimal=True) for n in viz.nodes}
    lines = [f"digraph {_quote(viz.title or 'graph')} {{",
             '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=8, color="#777777"];']
    clusters = {}
    for nid, data in g.nodes(data=True):
        if data["group"]:
            clusters.setdefault(data["group"], []).append(nid)
        else:
            lines.append(_node_line(nid, data, colors[nid]))
    for k, (name, members) in enumerate(clusters.items()):
        lines.append(f"  subgraph {_quote('cluster_' + name)} {{")
        lines.append(f"    label={_quote(name)}; style=dashed; color=\"#999999\";")
        for nid in members:
            lines.append("  " + _node_line(nid, g.nodes[nid], colors[nid]))
        lines.append("  }")
    for s, t, data in g.edges(data=True):
        lines.append(f"  {_quote(s)} -> {_quote(t)} [tooltip={_quote(data['label'])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"

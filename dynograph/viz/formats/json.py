"""JSON: nodes and edges with every attribute, plus the IR text when there is one."""
import json


def to_dict(viz):
    nodes = [{"id": n.id, "label": n.label, "kind": n.kind, "types": n.types, "attrs": n.attrs,
              "source": n.source, "group": n.group, "detail": n.detail, "code": n.code}
             for n in viz.nodes]
    edges = [{"source": s, "target": t, "type": label} for s, t, label in viz.edges]
    return {"format": "dynograph-graph", "version": 1, "title": viz.title, "nodes": nodes,
            "edges": edges, "groups": viz.groups(), "text": viz.text}


def to_json(viz):
    """``viz`` as JSON; ``text`` holds the IR text form (``dynograph-viz show`` reads it)."""
    return json.dumps(to_dict(viz), indent=1) + "\n"

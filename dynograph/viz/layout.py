"""A layered drawing for graphs of any size, without Graphviz.

1. layers by longest path from the sources (a node sits one layer below its lowest input);
   sources (graph inputs) then move down to just above their first reader;
2. order within layers by barycenters: a few sweeps down (mean position of the inputs) and
   up (mean position of the readers);
3. coordinates: each box as close to the mean x of its inputs as overlaps allow.

Linear in nodes and edges per sweep, so a few thousand nodes lay out in well under a second.
"""
from dataclasses import dataclass

CHAR_W = 7.0            # width of one character of the 12px monospace labels
LINE_H = 15.0
PAD = 8.0
GAP_X = 18.0
GAP_Y = 42.0
SWEEPS = 4


@dataclass
class Box:
    x: float            # center
    y: float            # top
    w: float
    h: float
    layer: int


def box_lines(node):
    """The lines of text drawn in a node's box."""
    lines = [node.label]
    if node.types:
        lines.append(", ".join(node.types) if len(node.types) <= 2 else
                     f"{node.types[0]}, ... ({len(node.types)} outputs)")
    return lines


def layout(viz):
    """id -> Box for every node of ``viz`` (a ``VizGraph``)."""
    ids = [n.id for n in viz.nodes]
    preds = {i: [] for i in ids}
    succs = {i: [] for i in ids}
    for s, t, _ in viz.edges:
        if s in preds and t in preds and s != t:
            preds[t].append(s)
            succs[s].append(t)
    layer = _layers(ids, preds, succs)
    rows = {}
    for i in ids:
        rows.setdefault(layer[i], []).append(i)
    order = [rows[k] for k in sorted(rows)]
    _order(order, preds, succs)
    sizes = {}
    for n in viz.nodes:
        lines = box_lines(n)
        sizes[n.id] = (max(len(s) for s in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + PAD)
    return _coordinates(order, preds, sizes)


def _layers(ids, preds, succs):
    indegree = {i: len(preds[i]) for i in ids}
    ready = [i for i in ids if indegree[i] == 0]
    topo = []
    while ready:
        i = ready.pop()
        topo.append(i)
        for t in succs[i]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    seen = set(topo)
    topo += [i for i in ids if i not in seen]       # a cycle (never in an IR graph): put last
    layer = {}
    for i in topo:
        layer[i] = max((layer[p] + 1 for p in preds[i] if p in layer), default=0)
    for i in topo:                  # sources sit just above their first reader
        if not preds[i] and succs[i]:
            layer[i] = max(0, min(layer[t] for t in succs[i]) - 1)
    return layer


def _order(rows, preds, succs):
    pos = {}
    for row in rows:
        for k, i in enumerate(row):
            pos[i] = k
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for row in (rows[1:] if down else rows[-2::-1]):
            links = preds if down else succs

            def key(i):
                near = links[i]
                return sum(pos[j] for j in near) / len(near) if near else pos[i]
            row.sort(key=key)
            for k, i in enumerate(row):
                pos[i] = k


def _coordinates(rows, preds, sizes):
    boxes = {}
    y = 0.0
    for depth, row in enumerate(rows):
        height = max(sizes[i][1] for i in row)
        # graph inputs (sources) neither steer their readers (a chain of ops stays straight,
        # not drifting towards its parameters) nor push the ops aside: they go to the right
        row = [i for i in row if preds[i]] + [i for i in row if not preds[i]]
        wanted = []
        for i in row:
            inner = [p for p in preds[i] if preds[p]] or preds[i]
            xs = [boxes[p].x for p in inner if p in boxes]
            wanted.append(sum(xs) / len(xs) if xs else None)
        # left to right by where each box wants to be (ties keep the barycentric order)
        placed_first = sorted(range(len(row)), key=lambda k: (wanted[k] is None, wanted[k] or 0, k))
        row = [row[k] for k in placed_first]
        wanted = [wanted[k] for k in placed_first]
        # rows without inputs above (the first one, sources) pack from the left
        x = 0.0
        placed = []
        for i, want in zip(row, wanted):
            w = sizes[i][0]
            left = x if want is None else max(x, want - w / 2)
            placed.append(left + w / 2)
            x = left + w + GAP_X
        # centering the row over what it wants keeps it under its inputs
        known = [(p, w) for p, w in zip(placed, wanted) if w is not None]
        shift = sum(w - p for p, w in known) / len(known) if known else -x / 2
        for i, cx in zip(row, placed):
            boxes[i] = Box(cx + shift, y, sizes[i][0], sizes[i][1], depth)
        y += height + GAP_Y
    if boxes:                       # everything in positive coordinates
        left = min(b.x - b.w / 2 for b in boxes.values())
        for b in boxes.values():
            b.x -= left - PAD
            b.y += PAD
    return boxes


def extent(boxes):
    """(width, height) of the drawing."""
    if not boxes:
        return (2 * PAD, 2 * PAD)
    return (max(b.x + b.w / 2 for b in boxes.values()) + PAD,
            max(b.y + b.h for b in boxes.values()) + PAD)

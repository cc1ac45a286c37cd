"""Text of a drawing that has no IR form (the autograd graph): one line per node."""


def viz_text(viz):
    """``name[types] <- inputs`` per node, inputs first (readable, not parsed back)."""
    inputs = {}
    for s, t, _ in viz.edges:
        inputs.setdefault(t, []).append(s)
    label = {n.id: n.label for n in viz.nodes}
    lines = [f"# {viz.title}"] if viz.title else []
    for n in reversed(viz.nodes):
        types = f" {', '.join(n.types)}" if n.types else ""
        src = ", ".join(f"{label[s]}#{s}" for s in inputs.get(n.id, []))
        lines.append(f"{n.label}#{n.id}{types}" + (f" <- {src}" if src else ""))
    return "\n".join(lines) + "\n"

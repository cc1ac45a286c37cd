"""``explain``: what the compiler did with a function, as data and as a readable report."""
from dataclasses import dataclass, field


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)          # optimized graphs
    captured: list = field(default_factory=list)        # graphs as traced
    breaks: list = field(default_factory=list)          # "reason at file:line"
    recompiles: list = field(default_factory=list)      # "guard failed: name: expected .., got .."
    guards: list = field(default_factory=list)          # one text block per graph
    op_counts: list = field(default_factory=list)       # (captured nodes, optimized nodes, kernels)
    dynamic: list = field(default_factory=list)         # batch dimensions made symbolic
    look_ahead: list = field(default_factory=list)      # graphs traced ahead for the next call
    hits: int = 0
    misses: int = 0
    fallback: str = None

    def __str__(self):
        lines = [f"graphs: {len(self.graphs)}, graph breaks: {len(self.breaks)}, "
                 f"recompiles: {len(self.recompiles)}, cache hits: {self.hits}, "
                 f"misses: {self.misses}"]
        for i, (before, after, kernels) in enumerate(self.op_counts):
            lines.append(f"graph {i}: {before} ops captured, {after} after optimization, "
                         f"{kernels} fused kernels")
        for b in self.breaks:
            lines.append(f"graph break: {b}")
        for r in self.recompiles:
            lines.append(f"recompile: {r}")
        for d in self.dynamic:
            lines.append(f"dynamic shapes: {d}")
        for a in self.look_ahead:
            lines.append(f"look-ahead: {a}")
        if self.fallback:
            lines.append(f"runs eagerly: {self.fallback}")
        for i, g in enumerate(self.guards):
            lines.append(f"guards of graph {i}:\n{g}")
        return "\n".join(lines)


def explain_compiled(compiled):
    out = ExplainOutput(hits=compiled.hits, misses=compiled.misses, fallback=compiled.eager_reason)
    for e in compiled.entries:
        out.graphs.append(e.graph)
        out.captured.append(e.captured)
        out.guards.append(e.guards.describe())
        out.op_counts.append((e.stats["captured_nodes"], e.stats["optimized_nodes"],
                              e.stats["kernels"]))
    for kind, text in compiled.events:
        if kind == "break":
            out.breaks.append(text)
        elif kind == "recompile":
            out.recompiles.append(text)
        elif kind == "dynamic":
            out.dynamic.append(text)
        elif kind == "look-ahead":
            out.look_ahead.append(text)
    return out

"""The pass pipeline: a flat list of named passes run in order, each verified in tests.

The order: ``simplify`` first (autograd's ``x * 1``, ``t(t(w))``, copies), so that ``fold``
sees constants without the noise and ``cse`` compares canonical nodes; ``dce`` drops what
those three left unread; ``fusion`` then groups what remains into kernels (shared scalars such as
``-lr`` are copied into each kernel that reads them); the second ``dce`` is a safety net after
the regrouping; ``memory`` plans buffers last, on the final node order.
"""
import time

from dynograph.runtime import config
from .passes.cse import cse
from .passes.dce import dce
from .passes.fold import fold
from .passes.fusion import fusion
from .passes.memory import memory
from .passes.simplify import simplify
from .verify import verify

# (name, pass); a pass is Graph -> Graph
DEFAULT_PASSES = [
    ("simplify", simplify),
    ("fold", fold),
    ("cse", cse),
    ("dce", dce),
    ("fusion", fusion),
    ("dce", dce),
    ("memory", memory),
]


def optimize(graph, passes=None):
    """Run the pipeline; returns (graph, stats) where stats holds node counts and pass timings.
    Passes keep the Input objects of the inputs they keep (the runtime binds them by identity)."""
    passes = DEFAULT_PASSES if passes is None else passes
    check = config.get("VERIFY")
    stats = {"captured_nodes": len(graph.nodes), "timings": {}}
    out = graph
    if check:
        verify(out, "captured graph")
    for name, fn in passes:
        start = time.perf_counter()
        out = fn(out)
        elapsed = time.perf_counter() - start
        stats["timings"][name] = stats["timings"].get(name, 0.0) + elapsed     # dce runs twice
        if check:
            verify(out, f"after {name}")
    stats["optimized_nodes"] = len(out.nodes)
    stats["kernels"] = sum(1 for n in out.nodes if n.op == "fused")
    return out, stats

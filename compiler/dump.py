"""``DYNOGRAPH_DUMP=folder``: write every compiled graph's stages as text files."""
import os


def maybe_dump(compiled, entry):
    folder = os.environ.get("DYNOGRAPH_DUMP")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    base = f"{getattr(compiled, '__name__', 'fn')}.{len(compiled.entries) - 1}"
    for stage, graph in (("captured", entry.captured), ("optimized", entry.graph)):
        with open(os.path.join(folder, f"{base}.{stage}.dg"), "w") as f:
            f.write(str(graph) + "\n")

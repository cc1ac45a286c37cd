"""The op set in numbers, for docs/architecture.md: primitives per op file and per kind.

    python -m tools.op_counts           # print the table
    python -m tools.op_counts --write   # rewrite the table in docs/architecture.md

The table sits between ``<!-- op-counts -->`` and ``<!-- /op-counts -->`` in the doc;
tests/test_docs.py fails when it differs from what this prints."""
import os
import sys
from collections import Counter

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "architecture.md")
START, END = "<!-- op-counts -->", "<!-- /op-counts -->"


def table():
    import dynograph  # noqa: F401  (registers every op module)
    from dynograph.compiler.ops import REGISTRY
    by_file = Counter(op.area for op in REGISTRY.values())
    by_kind = Counter(op.kind for op in REGISTRY.values())
    facets = {"a lowering (fused kernels)": sum(op.lowering is not None for op in REGISTRY.values()),
              "a direct kernel": sum(op.kernel is not None for op in REGISTRY.values()),
              "a derivative rule": sum(op.vjp is not None for op in REGISTRY.values()),
              "view outputs": sum(op.view for op in REGISTRY.values())}
    lines = [f"{len(REGISTRY)} primitives.", "", "| op file (compiler/ops/) | primitives |",
             "|---|---|"]
    lines += [f"| `{name}.py` | {n} |" for name, n in sorted(by_file.items(), key=lambda kv: -kv[1])]
    lines += ["", "| kind | primitives |", "|---|---|"]
    lines += [f"| {kind} | {n} |" for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1])]
    lines += ["", "| with | primitives |", "|---|---|"]
    lines += [f"| {what} | {n} |" for what, n in facets.items()]
    return "\n".join(lines)


def current(text):
    """The table the doc holds now (None when the markers are missing)."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def main(argv):
    new = table()
    if "--write" not in argv:
        print(new)
        return 0
    with open(DOC) as f:
        text = f.read()
    if current(text) is None:
        print(f"{DOC} has no {START} ... {END} block", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w") as f:
        f.write(f"{head}{START}\n{new}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""torch.compile and dynograph.compile on the same soundness cases, side by side.

    python -m tools.compare_compile [--torch eager,inductor] [--dynograph llvm,interpreter]
                                    [--only SUBSTRING] [--markdown]

Every case of tests/test_compile_soundness.py is a small program run twice from its source:
eagerly, and with ``step`` compiled, with ``between(i)`` changing something between calls.
After every call the outputs and ``state()`` of the two runs are compared.  This tool does
that for dynograph (with the test module's own ``run_world``) and for PyTorch (the same source
with ``import torch``), and prints one row per case:

    equal      every call agreed with eager, all of it compiled
    fell back  every call agreed with eager; part or all of it ran eagerly (a graph break,
               or a recompilation limit)
    raised     the compiled run raised where eager did not (or raised something else)
    WRONG      a compiled call returned or left behind something eager did not
    n/a        the case does not run the same way eagerly in both frameworks (the reason
               is given)
"""
import argparse
import collections
import importlib.util
import os
import re
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_FILE = os.path.join(ROOT, "tests", "test_compile_soundness.py")


def load_soundness():
    """The test module, loaded from its file (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("compile_soundness_cases", TEST_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- families

_HEADER = re.compile(r"^# -{8,} (.*)$")


def families(names):
    """case name -> the section header above it in the test file ('1. Python values ...').

    Cases made in a loop are found by their quoted name; a case whose name is not in the
    file as text gets '?'."""
    headers, text = [], open(TEST_FILE).read()
    for m in re.finditer(_HEADER.pattern, text, re.M):
        headers.append((m.start(), m.group(1).strip()))
    out = {}
    for name in names:
        at = text.find(f'"{name}"')
        above = [h for pos, h in headers if pos < at] if at >= 0 else []
        out[name] = above[-1] if above else "?"
    return out


def family_number(family):
    m = re.match(r"(\d+)\.", family)
    return int(m.group(1)) if m else 99


# ---------------------------------------------------------------- one world in PyTorch

def torch_prelude(soundness):
    # the prelude imports dynograph as torch; here the names are PyTorch's own
    return soundness.PRELUDE.replace("dynograph", "torch")


def torch_leaves(x, out):
    """The test module's _leaves, for PyTorch values: the same shape of record."""
    import torch
    if isinstance(x, (tuple, list)):
        for y in x:
            torch_leaves(y, out)
    elif isinstance(x, dict):
        for k in sorted(x, key=repr):
            out.append(("key", k))
            torch_leaves(x[k], out)
    elif isinstance(x, torch.Tensor):
        grad = x.grad if x.is_leaf else None        # .grad of a non-leaf is always None
        out.append(("tensor", x.dtype, tuple(x.shape), x.detach().numpy().copy(),
                    None if grad is None else grad.detach().numpy().copy()))
    else:
        out.append(("value", x))
    return out


def run_torch_world(prelude, src, calls, backend):
    """(trail, counts) for one run; backend None runs eagerly."""
    import torch
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    ns = {"__name__": "case"}
    exec(compile(prelude + src, "<case>", "exec"), ns)
    step = ns["step"] if backend is None else torch.compile(ns["step"], backend=backend)
    trail = []
    for i in range(calls):
        try:
            out = step(*ns["make_args"](i))
            trail.append(("out", torch_leaves(out, []), torch_leaves(ns["state"](), [])))
        except Exception as e:
            trail.append(("raised", type(e).__name__, str(e).split("\n")[0]))
        ns["between"](i)
    counts = {"graphs": counters["stats"]["unique_graphs"],
              "breaks": sum(counters["graph_break"].values()),
              "reasons": sorted(counters["graph_break"])}
    return trail, counts


# ---------------------------------------------------------------- one world in dynograph

def run_dynograph_world(soundness, src, calls, backend, compiled):
    trail, step = soundness.run_world(src, calls, compiled, backend)
    if not compiled:
        return trail, {}
    kinds = collections.Counter(kind for kind, _ in step.events)
    counts = {"graphs": len(step.entries), "breaks": kinds["break"],
              "recompiles": kinds["recompile"], "fallback": step.eager_reason}
    return trail, counts


# ---------------------------------------------------------------- comparing two runs

def first_difference(same, eager, compiled):
    """None when the two trails agree after every call, else (kind, what differed)."""
    for i, (e, c) in enumerate(zip(eager, compiled)):
        if e[0] != c[0]:
            if c[0] == "raised":
                return "raised", f"call {i}: {c[1]}: {c[2][:120]}"
            return "WRONG", f"call {i}: eager raised {e[1]}, compiled returned"
        if e[0] == "raised":
            if e[1:] != c[1:]:
                return "raised", f"call {i}: eager raised {e[1]}, compiled {c[1]}: {c[2][:120]}"
            continue
        for part, a, b in (("outputs", e[1], c[1]), ("state", e[2], c[2])):
            try:
                same(a, b, f"call {i} {part}")
            except AssertionError as err:
                return "WRONG", " ".join(str(err).split())[:240] + type_difference(a, b)
    return None


def type_difference(a, b):
    """' (int vs SizeInt)' when two Python values print alike but differ in type: the
    test's own message then reads '4 vs 4'."""
    for x, y in zip(a, b):
        if x[0] == y[0] == "value" and type(x[1]) is not type(y[1]) and repr(x[1]) == repr(y[1]):
            return f" ({type(x[1]).__name__} vs {type(y[1]).__name__})"
    return ""


def verdict(same, eager, compiled, counts):
    diff = first_difference(same, eager, compiled)
    if diff is not None:
        return diff
    fell_back = counts.get("breaks") or counts.get("fallback")
    return ("fell back" if fell_back else "equal"), ""


def translates(dyno_eager, torch_eager):
    """None when the case runs alike eagerly in both frameworks, else why not."""
    for i, (d, t) in enumerate(zip(dyno_eager, torch_eager)):
        if d[0] != t[0]:
            what = t if t[0] == "raised" else d
            return f"call {i}: only one framework raised ({what[1]}: {what[2][:100]})"
    return None


# ---------------------------------------------------------------- the table

def run_case(soundness, name, torch_backends, dyno_backends):
    """{column: (result, detail, counts, seconds)} for one case."""
    src, calls = soundness.CASES[name]
    row = {}
    prelude = torch_prelude(soundness)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # fallback and deprecation warnings
        dyno_eager, _ = run_dynograph_world(soundness, src, calls, None, False)
        torch_eager, _ = run_torch_world(prelude, src, calls, None)
        why_not = translates(dyno_eager, torch_eager)
        for backend in torch_backends:
            column = f"torch {backend}"
            if why_not is not None:
                row[column] = ("n/a", why_not, {}, 0.0)
                continue
            start = time.time()
            trail, counts = run_torch_world(prelude, src, calls, backend)
            row[column] = (*verdict(soundness._same, torch_eager, trail, counts), counts,
                           time.time() - start)
        for backend in dyno_backends:
            start = time.time()
            trail, counts = run_dynograph_world(soundness, src, calls, backend, True)
            row[f"dynograph {backend}"] = (*verdict(soundness._same, dyno_eager, trail, counts),
                                           counts, time.time() - start)
    return row


def cell(result):
    verdict_, _, counts, _ = result
    if not counts:
        return verdict_
    return f"{verdict_} ({counts['graphs']}g/{counts['breaks']}b)"


def print_table(rows, fams, columns, markdown):
    head = ["family", "case", *columns]
    lines = [[fams[n].split(".")[0] if family_number(fams[n]) < 99 else fams[n], n,
              *(cell(r[c]) for c in columns)] for n, r in rows.items()]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    for line in [head, *lines]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


def print_details(rows, columns):
    """Every result that is not plainly equal, with what differed or why it fell back."""
    print("\nDetails (g = graphs compiled, b = graph-break reasons recorded):")
    for name, row in rows.items():
        for c in columns:
            result, detail, counts, _ = row[c]
            if result == "equal":
                continue
            why = detail or counts.get("fallback") or "; ".join(counts.get("reasons", []))[:200]
            print(f"  {name} [{c}] {result}: {why}")


def print_totals(rows, columns):
    print("\nTotals:")
    for c in columns:
        tally = collections.Counter(row[c][0] for row in rows.values())
        seconds = sum(row[c][3] for row in rows.values())
        text = ", ".join(f"{k} {tally[k]}" for k in ("equal", "fell back", "raised", "WRONG", "n/a")
                         if tally[k])
        print(f"  {c}: {text}  ({seconds:.0f} s)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torch", default="eager,inductor", help="torch.compile backends ('' for none)")
    p.add_argument("--dynograph", default="llvm", help="dynograph.compile backends")
    p.add_argument("--only", default="", help="run the cases whose name contains this")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    soundness = load_soundness()
    torch_backends = [b for b in args.torch.split(",") if b]
    dyno_backends = [b for b in args.dynograph.split(",") if b]
    columns = [f"torch {b}" for b in torch_backends] + [f"dynograph {b}" for b in dyno_backends]
    names = [n for n in soundness.CASES if args.only in n]
    fams = families(names)
    names.sort(key=lambda n: family_number(fams[n]))        # stable: file order within a family
    rows = {}
    for name in names:
        rows[name] = run_case(soundness, name, torch_backends, dyno_backends)
        print(f"# {name}: " + ", ".join(f"{c} {rows[name][c][0]}" for c in columns),
              file=sys.stderr, flush=True)
    print_table(rows, fams, columns, args.markdown)
    print_details(rows, columns)
    print_totals(rows, columns)
    wrong = [n for n, r in rows.items() if any(r[c][0] == "WRONG" for c in columns)]
    return 1 if any(rows[n][c][0] == "WRONG" for n in wrong for c in columns if "dynograph" in c) else 0


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())

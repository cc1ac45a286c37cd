"""``DYNOGRAPH_DUMP=folder``: write every stage of every compilation, in stable file names.

For each compiled function ``fn`` (a second function of the same name becomes ``fn-2``) and
each of its specializations ``i`` (the index in ``fn.entries``), one file per stage and format::

    folder/train_step.0.captured.dg       the graph as traced
    folder/train_step.0.optimized.dg      after the cleanup passes (simplify, fold, cse, dce)
    folder/train_step.0.fused.dg          the graph that runs: fused kernels hold subgraphs
    folder/train_step.0.kernels.txt       loop-level kernel descriptions   } when the entry
    folder/train_step.0.llvm.ll           optimized LLVM IR                } has them
    folder/train_step.0.cuda.cu           CUDA C source                    }
    folder/train_step.0.backward.fused.dg the compiled backward graph of differentiable outputs
    folder/index.json                     what was written, per function and specialization

Graph stages are written in the formats of ``DYNOGRAPH_DUMP_FORMATS`` (comma separated, from
text, json, dot, svg, html; default ``text,json``; ``text`` is the IR text form, ``.dg``);
``DYNOGRAPH_DUMP_STAGES`` picks stages (default all).  Code stages are read from the entry
(``entry.kernels``, ``entry.llvm_ir``, ``entry.cuda_source``) when the code generators
provide them.  Files are written when a function
is traced and again when the program exits (a dynamic-shape merge or code generated at the
first call then shows up too).  Dumping never stops the program: a failure is a warning.
"""
import atexit
import json
import os
import re
import warnings

from dynograph.runtime import config

STAGES = ("captured", "optimized", "fused", "kernels", "llvm", "cuda")
GRAPH_STAGES = ("captured", "optimized", "fused")
DEFAULT_FORMATS = ("text", "json")
CODE_EXTENSIONS = {"kernels": ".txt", "llvm": ".ll", "cuda": ".cu"}
# the entry attribute a code stage may live in (``backward_`` prefixed for the backward graph)
CODE_ATTRS = {"kernels": "kernels", "llvm": "llvm_ir", "cuda": "cuda_source"}


class _State:
    def __init__(self):
        self.compiled = []          # compiled functions seen, in order
        self.names = {}             # id(compiled) -> unique file-name stem
        self.exit_hook = False
        self.finished = False


STATE = _State()


def _setting(name, default, allowed):
    items = config.get(name) or default
    unknown = [s for s in items if s not in allowed]
    if unknown:
        raise ValueError(f"{config.PREFIX}{name}: unknown {', '.join(unknown)}; choose from "
                         f"{', '.join(allowed)}")
    return items


def maybe_dump(compiled, entry):
    """Called after each trace: dump ``entry`` when ``DYNOGRAPH_DUMP`` names a folder."""
    folder = config.get("DUMP")
    if not folder:
        return
    if id(compiled) not in STATE.names:
        _register(compiled)
    if not STATE.exit_hook:
        STATE.exit_hook = True
        atexit.register(_at_exit)
    try:
        index = compiled.entries.index(entry)
        dump_entry(folder, STATE.names[id(compiled)], index, entry)
        write_index(folder)
    except Exception as e:             # a picture must never break the user's program
        warnings.warn(f"DYNOGRAPH_DUMP: could not write {STATE.names[id(compiled)]}: "
                      f"{type(e).__name__}: {e}", stacklevel=2)


def _function_name(compiled):
    """The compiled function's name; ``dynograph.compile(module)`` wraps the module in a lambda:
    its class name then (``Sequential``)."""
    name = getattr(compiled, "__name__", "fn")
    if name == "<lambda>":
        from dynograph.nn import Module
        for cell in getattr(getattr(compiled, "fn", None), "__closure__", None) or ():
            try:
                if isinstance(cell.cell_contents, Module):
                    return type(cell.cell_contents).__name__
            except ValueError:          # an empty cell
                continue
    return name


def _register(compiled):
    stem = re.sub(r"[^\w.\-]+", "_", _function_name(compiled)).strip("_") or "fn"
    taken = set(STATE.names.values())
    name, k = stem, 1
    while name in taken:
        k += 1
        name = f"{stem}-{k}"
    STATE.names[id(compiled)] = name
    STATE.compiled.append(compiled)


def _at_exit():
    folder = config.get("DUMP")
    if folder and not STATE.finished:
        dump_all(folder)


def dump_all(folder):
    """Write every stage of every compiled function seen so far; returns the files written."""
    written = []
    for compiled in STATE.compiled:
        name = STATE.names[id(compiled)]
        for i, entry in enumerate(compiled.entries):
            try:
                written += dump_entry(folder, name, i, entry)
            except Exception as e:
                warnings.warn(f"DYNOGRAPH_DUMP: could not write {name}.{i}: {type(e).__name__}: {e}")
    write_index(folder)
    return written


def finish(folder):
    """The final dump (``dynograph-viz run``): everything, and no second one at exit."""
    written = dump_all(folder)
    STATE.finished = True
    return written


# ---------------------------------------------------------------- stages of one entry

def entry_stages(entry, stages=STAGES):
    """[(file stem suffix, stage, graph or {kernel name: code text})] of the stages ``entry`` has.

    The forward stages come first (``captured``...), then the backward graph's
    (``backward.optimized``...) when the outputs are differentiable."""
    out = []
    parts = [("", entry.graph, entry)]
    if getattr(entry, "backward_graph", None) is not None:
        parts.append(("backward.", entry.backward_graph, None))
    for prefix, graph, owner in parts:
        for stage in stages:
            if stage == "captured":
                if owner is not None:
                    out.append((prefix + stage, stage, entry.captured))
            elif stage == "optimized":
                out.append((prefix + stage, stage, _optimized(entry, graph, owner)))
            elif stage == "fused":
                out.append((prefix + stage, stage, graph))
            else:
                code = code_stage(entry, stage, backward=owner is None)
                if code:
                    out.append((prefix + stage, stage, code))
    return out


def _optimized(entry, graph, owner):
    """The graph after the cleanup passes, before fusion."""
    kept = getattr(entry, "optimized", None) if owner is not None else None
    if kept is not None:
        return kept
    if owner is not None and getattr(entry, "aot", None) is None:
        return cleanup(entry.captured)         # exactly what the pipeline did before fusion
    return cleanup(inline_kernels(graph))


def cleanup(graph):
    """The pipeline's passes that run before fusion."""
    from .pipeline import DEFAULT_PASSES
    for name, fn in DEFAULT_PASSES:
        if name == "fusion":
            break
        graph = fn(graph)
    return graph


def inline_kernels(graph):
    """``graph`` with every fused node replaced by the nodes of its subgraph."""
    from .ir import Node
    if not any("graph" in n.attrs for n in graph.nodes):
        return graph
    env = {}
    nodes = []

    def remap(x):
        if isinstance(x, (tuple, list)):
            return type(x)(remap(a) for a in x)
        try:
            return env.get(x, x)
        except TypeError:               # unhashable literal
            return x

    for node in graph.nodes:
        sub = node.attrs.get("graph")
        if sub is None:
            nodes.append(Node(node.op, remap(node.args), {k: remap(v) for k, v in node.attrs.items()},
                              node.outs, node.source))
            continue
        for inp, v in zip(sub.inputs, node.input_values()):
            env[inp.value] = remap(v)
        inner = inline_kernels(sub)
        for n in inner.nodes:
            nodes.append(Node(n.op, remap(n.args), {k: remap(v) for k, v in n.attrs.items()},
                              n.outs, n.source))
        for v_out, v_in in zip(node.outs, inner.outputs):
            env[v_out] = remap(v_in)
    return graph.replace(nodes=nodes, outputs=[remap(v) for v in graph.outputs],
                         updates=[(s, remap(v)) for s, v in graph.updates], memory_plan=None)


def code_stage(entry, stage, backward=False):
    """{kernel name: text} of a code stage (kernels, llvm, cuda), {} when the entry has none.

    Looked up on the entry first; otherwise, for ``kernels`` and
    ``llvm``, among the kernels the LLVM backend compiled for the entry's nodes (they exist once
    the graph has run on ``backend="llvm"``)."""
    value = getattr(entry, ("backward_" if backward else "") + CODE_ATTRS[stage], None)
    if value is not None and not callable(value):
        return _as_code(value)
    if stage in ("kernels", "llvm"):
        graph = entry.backward_graph if backward else entry.graph
        return _llvm_backend_code(graph, stage) if graph is not None else {}
    return {}


def _llvm_backend_code(graph, stage):
    """Kernel descriptions or optimized LLVM IR of the kernels the LLVM backend compiled for
    ``graph``'s nodes; {} when it compiled none (or its internals are not what this expects)."""
    try:
        from .llvm.backend import LLVM
        from .lowering.program import PLANS as plans
    except Exception:                   # no LLVM backend in this build
        return {}
    out = {}
    for j, node in enumerate(graph.nodes):
        try:
            per_layout = plans.get(node)
        except TypeError:
            continue
        kernels = [p.kernel for p in (per_layout or {}).values() if p is not None]
        name = node.attrs.get("name") or f"{node.op}{j}"
        texts = []
        for kernel in kernels:
            try:
                if stage == "kernels":
                    texts.append(str(kernel))
                else:
                    texts.append(LLVM.optimized_source(kernel))
            except Exception as e:
                texts.append(f"; could not render: {type(e).__name__}: {e}")
        if texts:
            out[name] = "\n\n".join(texts)
    return out


def _as_code(value):
    if isinstance(value, (str, bytes)):
        return {"": value.decode() if isinstance(value, bytes) else value}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return {str(getattr(v, "name", i)): str(v) for i, v in enumerate(value)}
    return {"": str(value)}


def code_text(code):
    """A code stage's kernels as one text, each under a ``// kernel NAME`` line."""
    if list(code) == [""]:
        return code[""].rstrip() + "\n"
    return "\n".join(f"// kernel {name}\n{text.rstrip()}\n" for name, text in code.items())


# ---------------------------------------------------------------- writing

def dump_entry(folder, name, index, entry, stages=None, formats=None):
    """Write the stages of one specialization; returns the paths written."""
    # (the renderers load only where something is dumped: every first call imports this module)
    from dynograph.viz.render import EXTENSIONS     # graph format -> file extension
    stages = stages or _setting("DUMP_STAGES", STAGES, STAGES)
    formats = formats or _setting("DUMP_FORMATS", DEFAULT_FORMATS, tuple(EXTENSIONS))
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, f"{name}.{index}.")
    written = []
    found = entry_stages(entry, stages)
    code = {"": {}, "backward.": {}}   # per graph: kernel name -> its code, for the HTML panel
    for suffix, stage, content in found:
        if stage in CODE_EXTENSIONS:
            part = code["backward." if suffix.startswith("backward.") else ""]
            for k, text in content.items():
                part[k] = (part[k] + "\n\n" if k in part else "") + text
    for suffix, stage, content in found:
        if stage in CODE_EXTENSIONS:
            written.append(_write(base + suffix + CODE_EXTENSIONS[stage], code_text(content)))
            continue
        from dynograph.viz import render
        title = f"{name}.{index}.{suffix}"
        part = code["backward." if suffix.startswith("backward.") else ""]
        for fmt in formats:
            text = render(content, fmt, title=title, code=part)
            written.append(_write(base + suffix + EXTENSIONS[fmt], text))
    return written


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def write_index(folder):
    """``index.json``: function -> specialization -> stage -> files, for tools and tests."""
    index = {}
    for compiled in STATE.compiled:
        name = STATE.names[id(compiled)]
        entries = []
        for i, entry in enumerate(compiled.entries):
            files = {}
            prefix = f"{name}.{i}."
            for fname in sorted(os.listdir(folder)):
                if fname.startswith(prefix):
                    stage = fname[len(prefix):].rsplit(".", 1)[0]
                    files.setdefault(stage, []).append(fname)
            files = dict(sorted(files.items(), key=lambda kv: _stage_order(kv[0])))
            entries.append({"index": i, "files": files,
                            "nodes": len(entry.graph.nodes),
                            "kernels": sum(1 for n in entry.graph.nodes if n.op == "fused")})
        index[name] = entries
    os.makedirs(folder, exist_ok=True)
    _write(os.path.join(folder, "index.json"), json.dumps({"functions": index}, indent=1) + "\n")
    if any(f.endswith(".html") for entries in index.values() for e in entries
           for files in e["files"].values() for f in files):
        _write(os.path.join(folder, "index.html"), _index_page(index))


def _stage_order(stage):
    last = stage.rsplit(".", 1)[-1]
    return stage.startswith("backward."), STAGES.index(last) if last in STAGES else len(STAGES)


def _index_page(index):
    """index.html: a link to every page and file of the dump."""
    from html import escape
    rows = []
    for name, entries in index.items():
        for e in entries:
            links = []
            for stage, files in e["files"].items():
                page = next((f for f in files if f.endswith(".html")), files[0])
                others = " ".join(f'<a href="{escape(f)}">{escape(f.rsplit(".", 1)[1])}</a>'
                                  for f in files if f != page)
                links.append(f'<li><a href="{escape(page)}">{escape(stage)}</a> {others}</li>')
            rows.append(f"<h2>{escape(name)} [{e['index']}]: {e['nodes']} nodes, "
                        f"{e['kernels']} kernels</h2><ul>{''.join(links)}</ul>")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            "<title>dynograph dump</title><style>body{font:14px system-ui,sans-serif;margin:2em}"
            "</style></head><body><h1>dynograph dump</h1>" + "".join(rows) + "</body></html>\n")

"""``dynograph-viz``: see every stage of compilation, and the autograd graph behind a tensor."""
import argparse
import builtins
import json
import os
import sys
import traceback
import types
import zipfile

from dynograph.compiler.dump import DEFAULT_FORMATS, STAGES

from .render import EXTENSIONS, FORMATS

DESCRIPTION = """\
See every stage of dynograph's compilation, and the autograd graph behind a tensor.

commands:
  run SCRIPT.py [args...]   run a script with dumping switched on: for each compiled function
                            and each of its specializations write every stage
  show FILE                 render a dumped graph file (.dg IR text or .json written by a dump)
                            or a program saved by dynograph.export.save
  autograd SCRIPT.py --tensor NAME
                            run a script, then draw the dynamic autograd graph behind its global
                            variable NAME (like torchviz's make_dot); leaves are named after the
                            parameters of the script's nn.Module globals

stages (run --stage, default: all that exist):
  captured    the graph as traced
  optimized   after the cleanup passes (simplify, fold, cse, dce)
  fused       the graph that runs: fused kernel nodes with their subgraphs
  kernels     loop-level kernel descriptions   } written when the compiled entry
  llvm        optimized LLVM IR (.ll)          } has them (entry.kernels, entry.llvm_ir,
  cuda        CUDA C source (.cu)              } entry.cuda_source); skipped otherwise
  Differentiable outputs add the backward graph's stages (NAME.I.backward.STAGE).

formats (--format):
  text   the IR's own text form (.dg; parses back)       dot    Graphviz DOT, kernels as clusters
  svg    drawn by Graphviz's dot when installed, else by the built-in layered layout
  html   one self-contained interactive page: zoom, pan, search, click for details and code
  json   nodes and edges with every attribute (and the IR text)

examples:
  dynograph-viz run examples/demo.py -o dump                 # .dg + .json of every stage
  dynograph-viz run train.py --stage fused --format html -o dump
  dynograph-viz run train.py --format text,svg -- --epochs 1 # arguments after -- go to the script
  dynograph-viz show dump/train_step.0.fused.dg -o step.html
  dynograph-viz show dump/train_step.0.fused.json --format dot
  dynograph-viz autograd train.py --tensor loss -o loss.svg

The environment variable DYNOGRAPH_DUMP=folder dumps every compilation of any program
(DYNOGRAPH_DUMP_STAGES and DYNOGRAPH_DUMP_FORMATS pick stages and formats, comma separated).
"""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):               # one line, not the usage block
        raise UsageError(message)


def _parser():
    p = _Parser(prog="dynograph-viz", description=DESCRIPTION,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{run,show,autograd}")
    run = sub.add_parser("run", help="run a script and dump every compilation",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("script", help="the Python script to run")
    run.add_argument("args", nargs="*", help="arguments passed to the script (after -- when they "
                     "look like options)")
    run.add_argument("--stage", action="append", default=None,
                     help=f"stages to write, comma separated or repeated: {', '.join(STAGES)} "
                          "(default: all that exist)")
    run.add_argument("--format", action="append", default=None,
                     help=f"formats to write, comma separated or repeated: {', '.join(FORMATS)} "
                          "(default: text,json)")
    run.add_argument("-o", "--output", default="dynograph-dump",
                     help="folder to write into (default: dynograph-dump)")
    show = sub.add_parser("show", help="render a dumped graph file or an exported program")
    show.add_argument("file", help="a .dg or .json file, or a program saved by dynograph.export.save")
    _output_options(show)
    show.add_argument("--collapse", action="store_true",
                      help="draw each fused kernel as one box (default: only for graphs over "
                           "2000 ops)")
    ag = sub.add_parser("autograd", help="draw the autograd graph behind a tensor of a script")
    ag.add_argument("script", help="the Python script to run")
    ag.add_argument("args", nargs="*", help="arguments passed to the script")
    ag.add_argument("--tensor", required=True,
                    help="name of the script's global variable holding the tensor (a.b for an "
                         "attribute)")
    _output_options(ag)
    return p


def _output_options(p):
    p.add_argument("--format", default=None,
                   help=f"one of {', '.join(FORMATS)} (default: from the -o extension, else text)")
    p.add_argument("-o", "--output", default=None,
                   help="file to write; default stdout")


def _split(values, allowed, what):
    items = []
    for v in values or ():
        items += [s.strip() for s in v.split(",") if s.strip()]
    for s in items:
        if s not in allowed:
            raise UsageError(f"unknown {what} {s!r}; choose from {', '.join(allowed)}")
    return tuple(items)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parse(argv)
        if args.command == "run":
            return _run(args)
        if args.command == "show":
            return _show(args)
        if args.command == "autograd":
            return _autograd(args)
        _parser().print_help()
        return 2
    except UsageError as e:
        print(f"dynograph-viz: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"dynograph-viz: error: {e}", file=sys.stderr)
        return 1


def _parse(argv):
    # options may follow the script; what is not ours (after the script) goes to the script
    parser = _parser()
    if argv and argv[0] in ("run", "autograd"):
        ours, rest = _take_own_options(argv)
        args = parser.parse_args(ours)
        args.args = [a for a in args.args if a != "--"] + rest
        return args
    return parser.parse_args(argv)


def _take_own_options(argv):
    """Split ``run SCRIPT a b --stage x -- c`` into our options and the script's arguments."""
    with_value = {"--stage", "--format", "-o", "--output", "--tensor"}
    ours, rest = [argv[0]], []
    i = 1
    script_seen = False
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest += argv[i + 1:]
            break
        if a in with_value and i + 1 < len(argv):
            ours += [a, argv[i + 1]]
            i += 2
            continue
        if a.split("=", 1)[0] in with_value or a in ("-h", "--help"):
            ours.append(a)
        elif not script_seen:
            ours.append(a)
            script_seen = True
        else:
            rest.append(a)
        i += 1
    return ours, rest


# ---------------------------------------------------------------- running a script

def _exec_script(path, args):
    """Run ``path`` as ``__main__``; returns (its globals, exit status).  A script that raises
    prints its traceback (status 1); what it did before the error stays done."""
    if not os.path.isfile(path):
        raise UsageError(f"no such script: {path}")
    with open(path, "rb") as f:
        source = f.read()
    try:
        code = compile(source, path, "exec")
    except SyntaxError:
        traceback.print_exc(limit=0)
        return {}, 1
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=os.path.abspath(path), __builtins__=builtins)
    saved = sys.argv, list(sys.path), sys.modules.get("__main__")
    sys.argv = [path] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    sys.modules["__main__"] = module
    status = 0
    try:
        exec(code, module.__dict__)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        etype, value, tb = sys.exc_info()
        traceback.print_exception(etype, value, tb.tb_next)     # the script's frames only
        status = 1
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
    return module.__dict__, status


def _run(args):
    stages = _split(args.stage, STAGES, "stage") or STAGES
    formats = _split(args.format, FORMATS, "format") or DEFAULT_FORMATS
    folder = args.output
    if not os.path.isfile(args.script):
        raise UsageError(f"no such script: {args.script}")
    os.makedirs(folder, exist_ok=True)
    settings = {"DYNOGRAPH_DUMP": folder, "DYNOGRAPH_DUMP_STAGES": ",".join(stages),
                "DYNOGRAPH_DUMP_FORMATS": ",".join(formats)}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        _, status = _exec_script(args.script, args.args)
        from dynograph.compiler import dump
        written = dump.finish(folder)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    functions = len(dump.STATE.compiled)
    print(f"dynograph-viz: wrote {len(written)} files for {functions} compiled "
          f"function{'s' if functions != 1 else ''} to {folder}", file=sys.stderr)
    return status


# ---------------------------------------------------------------- rendering files

def _format(args):
    if args.format is not None:
        _split([args.format], FORMATS, "format")
        return args.format
    if args.output:
        ext = os.path.splitext(args.output)[1]
        for fmt, e in EXTENSIONS.items():
            if ext == e or ext == f".{fmt}":
                return fmt
    return "text"


def _emit(text, output):
    if output is None:
        sys.stdout.write(text)
        return
    parent = os.path.dirname(output)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)


def load_graphs(path):
    """[(name, graph)] read from a .dg/.json file or a program saved by dynograph.export.save."""
    if not os.path.exists(path):
        raise OSError(f"no such file: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a folder; show reads one graph file (.dg, .json) or an "
                         "exported program")
    if zipfile.is_zipfile(path):
        return [_exported_graph(path)]
    with open(path, "rb") as f:
        data = f.read()
    graph = _parse_file(os.path.basename(path), data)
    if graph is None:
        raise ValueError(f"{path}: not a dynograph graph (IR text starting with 'graph {{', "
                         "JSON written by dynograph-viz, or a program saved by "
                         "dynograph.export.save)")
    return [(os.path.splitext(os.path.basename(path))[0], graph)]


def _exported_graph(path):
    """The graph of an exported program file (loaded as dynograph.export.load does: checked,
    nothing in it executed)."""
    from dynograph.export import load
    from dynograph.serialization import CheckpointError
    try:
        program = load(path)
    except CheckpointError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    return program.name, program.graph


def _parse_file(name, data, quiet=False):
    from dynograph.compiler.text import ParseError, parse_graph
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if quiet:
            return None
        raise ValueError(f"{name}: not a text file") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            obj = json.loads(text)
            if not isinstance(obj, dict) or obj.get("format") != "dynograph-graph":
                return None
            if obj.get("text"):
                return parse_graph(obj["text"])
            return _viz_from_json(obj)
        if stripped.startswith("graph {"):
            return parse_graph(text)
    except (ParseError, json.JSONDecodeError) as e:
        if quiet:
            return None
        raise ValueError(f"{name}: {str(e).splitlines()[0]}") from None
    return None


def _viz_from_json(obj):
    from .model import VizGraph, VizNode
    viz = VizGraph(title=obj.get("title", ""))
    for n in obj["nodes"]:
        viz.nodes.append(VizNode(n["id"], n["label"], n.get("kind", "op"), n.get("types", []),
                                 n.get("attrs", {}), n.get("source", ""), n.get("group", ""),
                                 n.get("detail", ""), n.get("code", "")))
    viz.edges = [(e["source"], e["target"], e.get("type", "")) for e in obj["edges"]]
    return viz


def _show(args):
    from . import render
    fmt = _format(args)
    (name, g), = load_graphs(args.file)
    expand = False if args.collapse else None
    _emit(render(g, fmt, title=name, expand=expand), args.output)
    return 0


# ---------------------------------------------------------------- autograd

def _autograd(args):
    fmt = _format(args)
    env, status = _exec_script(args.script, args.args)
    tensor = _lookup(env, args.tensor)
    if tensor is None:
        if status:
            return status
        raise UsageError(f"{args.script} has no global variable {args.tensor!r}")
    from dynograph._tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise UsageError(f"{args.tensor} is a {type(tensor).__name__}, not a tensor")
    from .model import from_autograd
    viz = from_autograd(tensor, _parameters(env), title=args.tensor)
    _emit(viz.render(fmt), args.output)
    return status


def _lookup(env, dotted):
    head, *rest = dotted.split(".")
    obj = env.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


def _parameters(env):
    """Parameter name -> tensor from every nn.Module among the script's globals."""
    from dynograph.nn import Module
    params = {}
    for var, obj in env.items():
        if isinstance(obj, Module) and not var.startswith("_"):
            for name, p in obj.named_parameters():
                params.setdefault(f"{var}.{name}", p)
    return params


if __name__ == "__main__":
    sys.exit(main())

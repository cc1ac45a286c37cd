"""The layers of dynograph hold: every import points down the dependency order.

The order, from the ground up (docs/architecture.md, "Layers"); a module imports only
modules of its own layer or below:

    0 runtime        dynograph.runtime.*: dtypes, devices, the executor and its backend interface
    1 op set         dynograph.compiler.ops.*, and the lowering vocabulary op definitions use
                     (compiler.lowering.scalar, description, conv, pool, padding, launch,
                     direct)
    2 eager core     dynograph._* (Tensor, dispatcher, math, ...), the trace hook (_trace_hook),
                     autograd, random, linalg, special, fft, backends, cuda, version
    3 library        nn, optim, utils.data, serialization, safetensors, vision, distributed,
                     futures, signal, masked, _stft
    4 IR             compiler.symbolic, ir, text, verify, interpreter
    5 front-end      compiler.tracer, watch, guards, guard_code, aot, binding, passes, lowering
    6 backends       compiler.llvm.* (and cuda)
    7 entry points   compiler.compiled (compile()), backends, explain, dump, logs, pipeline;
                     dynograph.viz, export, onnx, utils.tensorboard (add_graph traces)
    8 facade         the package ``dynograph`` itself (dynograph/__init__.py) and
                     _functional_exports (its re-exports of nn.functional)

The facade imports everything; nobody imports it to reach a higher layer.  A module that
writes ``import dynograph`` and calls ``dynograph.matmul`` depends on the module the facade
took ``matmul`` from (here ``dynograph._linalg``): the test resolves every ``dynograph.NAME``
through the facade's own imports, so the facade is transparent, never a back door; handing
the package itself around (``return dynograph``, ``getattr(dynograph, name)``) is a use of
the facade, layer 8, and points up from everywhere.

The walk reads every module of the installed package with ``ast``: module-level and
function-level imports, relative imports, ``from pkg import submodule`` and attribute
chains through an imported module (``tracer.Tracer``, ``dynograph.nn.functional.relu``).
It fails on

  (a) an import that points to a higher layer;
  (b) an underscore name of another module (``from dynograph._math import _helper``,
      ``_math._helper``) outside ALLOWED_PRIVATE (PENDING lists modules still being
      reworked; names PyTorch itself has at the same place keep torch's spelling);
  (c) an import cycle between modules of different layers (the cycle is printed);
  (d) a module no layer claims (a new file must land in a layer: add its prefix below).

Run ``python tests/test_layers.py`` for the whole report.
"""
import ast
import importlib
import importlib.util
import os

import pytest

# (pattern, layer): the longest dotted prefix of a module that matches decides its layer;
# ``dynograph._*`` matches the eager core's underscore modules directly under dynograph.
LAYERS = ["runtime", "op set", "eager core", "library", "IR", "front-end", "backends",
          "entry points", "facade"]
RULES = {
    "dynograph.runtime": 0,
    "dynograph.compiler.ops": 1,
    # the vocabulary op definitions use for their lowering facets: scalar expressions, kernel
    # descriptions, and the direct kernels' descriptions with their numpy preparation
    "dynograph.compiler.lowering.scalar": 1,
    "dynograph.compiler.lowering.description": 1,
    "dynograph.compiler.lowering.conv": 1,
    "dynograph.compiler.lowering.pool": 1,
    "dynograph.compiler.lowering.padding": 1,
    "dynograph.compiler.lowering.launch": 1,
    "dynograph.compiler.lowering.direct": 1,
    "dynograph._*": 2,
    "dynograph.autograd": 2,
    "dynograph.random": 2,
    "dynograph.linalg": 2,
    "dynograph.backends": 2,
    "dynograph.cuda": 2,
    "dynograph.version": 2,
    "dynograph.special": 2,
    "dynograph.fft": 2,
    "dynograph._functional_exports": 8,     # the facade's re-exports of nn.functional (torch.conv2d)
    "dynograph._aten_forms": 8,             # the facade's top-level forms of nn.functional (torch.layer_norm)
    "dynograph.nn": 3,
    "dynograph.optim": 3,
    "dynograph.utils": 3,
    "dynograph.serialization": 3,
    "dynograph.safetensors": 3,
    "dynograph.vision": 3,
    "dynograph.distributed": 3,
    "dynograph.futures": 3,             # the Futures of async collectives and DDP comm hooks
    "dynograph.signal": 3,
    "dynograph.masked": 3,              # masked softmax builds on nn.functional
    "dynograph._stft": 3,               # torch.stft pads with nn.functional.pad
    "dynograph.compiler": 4,            # the package's __init__ (it imports nothing)
    "dynograph.compiler.symbolic": 4,
    "dynograph.compiler.ir": 4,
    "dynograph.compiler.text": 4,
    "dynograph.compiler.verify": 4,
    "dynograph.compiler.interpreter": 4,
    "dynograph.compiler.tracer": 5,
    "dynograph.compiler.watch": 5,
    "dynograph.compiler.guards": 5,
    "dynograph.compiler.guard_code": 5,
    "dynograph.compiler.aot": 5,
    "dynograph.compiler.binding": 5,
    "dynograph.compiler.passes": 5,
    "dynograph.compiler.lowering": 5,
    "dynograph.compiler.llvm": 6,
    "dynograph.compiler.cuda": 6,
    "dynograph.compiler.compiled": 7,
    "dynograph.compiler.backends": 7,
    "dynograph.compiler.explain": 7,
    "dynograph.compiler.dump": 7,
    "dynograph.compiler.logs": 7,
    "dynograph.compiler.pipeline": 7,
    "dynograph.compiler.export": 7,
    "dynograph.compiler.onnx": 7,
    "dynograph.viz": 7,
    "dynograph.utils.tensorboard": 7,   # add_graph traces the model with compile's tracer
    "dynograph.export": 7,
    "dynograph.onnx": 7,
    "dynograph": 8,
}

# Underscore names used across a module boundary on purpose: (importer, provider, name) -> why.
# (Names PyTorch keeps private at the same place, such as nn.init._calculate_fan_in_and_fan_out,
# need no entry: user code imports them from torch, so they keep torch's spelling.)
ALLOWED_PRIVATE = {
}

# Modules whose underscore names other modules still use, while their owners rework them; remove
# an entry when its crossings are gone (test_pending_entries_are_still_needed says when).
PENDING = {}

FACADE = "dynograph"


def layer_of(module):
    """The layer of a module: its longest dotted prefix in RULES decides."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate == FACADE and n < len(parts):
            return None     # the facade is one module, not a prefix: a new dynograph.x needs a rule
        if candidate in RULES:
            return RULES[candidate]
        if n == len(parts) == 2 and candidate.startswith(FACADE + "._"):
            return RULES["dynograph._*"]
    return None


def package_files():
    """{module name: source path} for every module of the installed package."""
    files = {}
    for package in (FACADE, "dynograph.compiler", "dynograph.runtime"):
        root = list(importlib.util.find_spec(package).submodule_search_locations)[0]
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py")))
            rel = os.path.relpath(folder, root)
            prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            for name in sorted(names):
                if name.endswith(".py"):
                    stem = name[:-3]
                    files[prefix if stem == "__init__" else f"{prefix}.{stem}"] = os.path.join(folder, name)
    return files


class Use:
    """One dependency of ``importer`` on ``provider`` (a module), through ``name`` if given."""

    def __init__(self, importer, provider, name, line, lazy):
        self.importer, self.provider, self.name, self.line, self.lazy = importer, provider, name, line, lazy

    def __str__(self):
        name = f".{self.name}" if self.name else ""
        return (f"{self.importer}:{self.line}{' (in a function)' if self.lazy else ''} "
                f"[{_layer_name(self.importer)}] -> {self.provider}{name} [{_layer_name(self.provider)}]")


def _layer_name(module):
    layer = layer_of(module)
    return "no layer" if layer is None else LAYERS[layer]


def _absolute(module, is_package, level, name):
    if not level:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _facade_table(files):
    """{public name of dynograph: the module it comes from}, read from dynograph/__init__.py."""
    with open(files[FACADE]) as f:
        tree = ast.parse(f.read())
    table = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(FACADE, True, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    module = importlib.import_module(source)
                    for n in getattr(module, "__all__", None) or [n for n in vars(module) if n[0] != "_"]:
                        table[n] = source
                elif f"{source}.{alias.name}" in files:
                    table[alias.asname or alias.name] = f"{source}.{alias.name}"
                else:
                    table[alias.asname or alias.name] = source
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Name) and node.value.id in table:
                    table[target.id] = table[node.value.id]
    return table


class _Walk(ast.NodeVisitor):
    """The imports of one module, and the attribute chains read through the modules they bind."""

    def __init__(self, module, is_package, files, facade):
        self.module, self.is_package, self.files, self.facade = module, is_package, files, facade
        self.bound = {}     # local name -> module (scopes merged: a name means one module per file)
        self.chains = []    # (local name, [attr, ...], line, lazy)
        self.names = []     # (local name, line, lazy): names read whole (``return dynograph``)
        self.uses = []
        self.depth = 0

    def use(self, provider, name, line):
        if provider == FACADE and name is not None:
            if f"{FACADE}.{name}" in self.files:
                provider, name = f"{FACADE}.{name}", None
            elif name in self.facade:
                provider = self.facade[name]
            elif name.startswith("__"):
                return      # the package's metadata (__path__, __file__): no code behind it
        if provider != self.module:
            self.uses.append(Use(self.module, provider, name, line, self.depth > 0))

    def longest_module(self, dotted):
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in self.files:
                return ".".join(parts[:n])
        return None

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.split(".")[0] != FACADE:
                continue
            target = self.longest_module(alias.name)
            # ``import dynograph.a.b`` binds ``dynograph``: later chains say which module is read
            self.bound[alias.asname or FACADE] = target if alias.asname else FACADE
            if target != FACADE:
                self.use(target, None, node.lineno)

    def visit_ImportFrom(self, node):
        source = _absolute(self.module, self.is_package, node.level, node.module)
        if source.split(".")[0] != FACADE:
            return
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            if sub in self.files:
                self.bound[alias.asname or alias.name] = sub
                self.use(sub, None, node.lineno)
            else:
                self.use(source, None if alias.name == "*" else alias.name, node.lineno)

    def visit_Attribute(self, node):
        chain, inner = [], node
        while isinstance(inner, ast.Attribute):
            chain.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name):
            self.chains.append((inner.id, chain[::-1], node.lineno, self.depth > 0))
        else:
            self.visit(inner)   # a call or subscript inside the chain has chains of its own

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self.names.append((node.id, node.lineno, self.depth > 0))

    def resolve_chains(self):
        # after the walk, so that an import further down binds names read above it
        depth = self.depth
        for name, line, lazy in self.names:
            if self.bound.get(name) == FACADE:     # the whole package handed around: all of it
                self.depth = int(lazy)
                self.use(FACADE, None, line)
        for name, chain, line, lazy in self.chains:
            if name not in self.bound:
                continue
            self.depth = int(lazy)
            current = self.bound[name]
            for attr in chain:
                if f"{current}.{attr}" not in self.files:
                    self.use(current, attr, line)
                    break
                current = f"{current}.{attr}"
            else:
                self.use(current, None, line)
        self.depth = depth


def uses_of(module, path, files, facade):
    """Every dependency of ``module`` on another module of the package."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    walk = _Walk(module, path.endswith("__init__.py"), files, facade)
    walk.visit(tree)
    walk.resolve_chains()
    return walk.uses


def analyse():
    files = package_files()
    facade = _facade_table(files)
    uses = []
    for module, path in sorted(files.items()):
        uses.extend(uses_of(module, path, files, facade))
    return files, uses


def unclassified(files):
    return sorted(m for m in files if layer_of(m) is None)


def upward(uses):
    return [u for u in uses if None not in (layer_of(u.importer), layer_of(u.provider))
            and layer_of(u.provider) > layer_of(u.importer)]


def _is_private(name):
    return name is not None and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def torch_has(provider, name):
    """Whether PyTorch has the private ``name`` at the same place (``torch.nn.init.
    _calculate_fan_in_and_fan_out``): user code imports those from torch, so the name stays."""
    try:
        module = importlib.import_module("torch" + provider[len(FACADE):])
    except Exception:
        return False
    return hasattr(module, name)


def private_crossings(uses, pending=True):
    """Uses of another module's underscore name, less the allowed ones (and the PENDING ones)."""
    return [u for u in uses if _is_private(u.name) and (u.importer, u.provider, u.name) not in ALLOWED_PRIVATE
            and not torch_has(u.provider, u.name) and (pending or u.provider not in PENDING)]


def cross_layer_cycles(uses):
    """For every import that points up and closes a circle, the shortest such circle."""
    graph = {}
    for u in uses:
        graph.setdefault(u.importer, set()).add(u.provider)

    def shortest_path(start, goal):
        parents, frontier = {start: None}, [start]
        while frontier and goal not in parents:
            grown = []
            for v in frontier:
                for w in sorted(graph.get(v, ())):
                    if w not in parents:
                        parents[w] = v
                        grown.append(w)
            frontier = grown
        if goal not in parents:
            return None
        path = [goal]
        while parents[path[-1]] is not None:
            path.append(parents[path[-1]])
        return path[::-1]

    cycles = []
    for importer, provider in sorted({(u.importer, u.provider) for u in upward(uses)}):
        back = shortest_path(provider, importer)
        if back:
            cycles.append([importer] + back)
    return cycles


@pytest.fixture(scope="module")
def graph():
    return analyse()


def test_every_module_has_a_layer(graph):
    files, _ = graph
    assert len(files) > 150
    assert unclassified(files) == [], "give these modules a layer in RULES"


def test_imports_point_down(graph):
    _, uses = graph
    assert [str(u) for u in upward(uses)] == []


def test_no_private_names_across_modules(graph):
    pytest.importorskip("torch")       # the oracle for the private names PyTorch itself has
    _, uses = graph
    assert [str(u) for u in private_crossings(uses, pending=False)] == []


def test_pending_entries_are_still_needed(graph):
    pytest.importorskip("torch")
    _, uses = graph
    still = {u.provider for u in private_crossings(uses)}
    assert [m for m in PENDING if m not in still] == [], "fixed: remove these from PENDING"


def test_allow_list_is_short_and_used(graph):
    _, uses = graph
    assert len(ALLOWED_PRIVATE) <= 8
    used = {(u.importer, u.provider, u.name) for u in uses}
    assert [k for k in ALLOWED_PRIVATE if k not in used] == []


def test_no_cycles_across_layers(graph):
    _, uses = graph
    assert [" -> ".join(c) for c in cross_layer_cycles(uses)] == []


def test_the_walk_sees_each_kind_of_import(graph):
    """Relative, function-level, attribute-chain and facade imports all count."""
    _, uses = graph
    seen = {(u.importer, u.provider, u.name, u.lazy) for u in uses}
    assert ("dynograph.nn.modules.linear", "dynograph.nn.modules.module", "Module", False) in seen
    assert ("dynograph", "dynograph.compiler.compiled", "compile", False) in seen
    assert ("dynograph.compiler.tracer", "dynograph._random", "generator_of", True) in seen
    # ``import dynograph`` then ``dynograph.zeros(...)``: a use of the module zeros comes from
    assert any(i == "dynograph.nn.init" and p == "dynograph._creation" for i, p, _, _ in seen)


def test_layers_by_prefix():
    """New files land in a layer by where they are; an unknown top-level module has none."""
    assert layer_of("dynograph.runtime.executor") == 0
    assert layer_of("dynograph.compiler.lowering.scalar") == 1
    assert layer_of("dynograph._math") == 2
    assert layer_of("dynograph.nn._functional.conv") == 3
    assert layer_of("dynograph.compiler.lowering.schedule") == 5
    assert layer_of("dynograph.compiler.llvm.kernels") == 6
    assert layer_of("dynograph") == 8
    assert layer_of("dynograph.brand_new") is None


def test_the_checks_fail_on_bad_imports():
    """Each check catches the shape of mistake it is for."""
    files = {m: "" for m in ("dynograph", "dynograph._math", "dynograph._tensor",
                             "dynograph.nn", "dynograph.compiler.tracer")}
    bad_up = Use("dynograph._tensor", "dynograph.compiler.tracer", "TRACE", 3, False)
    back = Use("dynograph.compiler.tracer", "dynograph._tensor", "Tensor", 9, True)
    private = Use("dynograph.nn", "dynograph._math", "_helper", 4, False)
    assert upward([bad_up, back, private]) == [bad_up]
    assert private_crossings([bad_up, back, private]) == [private]
    assert cross_layer_cycles([bad_up, back]) == [
        ["dynograph._tensor", "dynograph.compiler.tracer", "dynograph._tensor"]]
    assert cross_layer_cycles([bad_up]) == []
    assert files


if __name__ == "__main__":
    files, uses = analyse()
    print("unclassified:", unclassified(files))
    for title, found in (("upward", upward(uses)), ("private (PENDING included)", private_crossings(uses))):
        print(f"== {title}: {len(found)}")
        for u in found:
            print("  ", u)
    print("== cycles across layers")
    for c in cross_layer_cycles(uses):
        print("  ", " -> ".join(c))

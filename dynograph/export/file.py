"""Exported programs in a file: the checkpoint container, with nothing executable inside.

The file is a dynograph checkpoint (``dynograph.save``'s own format: a zip of a JSON header
and raw tensor bytes, see dynograph/serialization/format.py) holding one dict::

    {"format": "dynograph.export", "version": 1, "dynograph": "0.1.0", "extra_files": {},
     "program": {"name", "graph": <IR text>, "sources": [user line per node],
                 "inputs": [{"name", "kind"[, "arg": leaf index]}],
                 "in_spec", "out_spec", "outputs", "args", "arg_names",
                 "batch": null | {"dims", "min", "max", "checks"},
                 "clears", "training", "rngs": {name: numpy bit generator state}},
     "state": {name: tensor}}

Loading reads it with ``dynograph.load`` (which never runs code from a file), then checks
every field, parses the IR text and verifies the graph (known ops, types that agree with each
op's meta rule at the symbolic size's smallest value, inputs that match the state and the
preconditions) before anything runs.  Every problem raises ``CheckpointError`` naming the file.

Versions: 1 is the first.  A later dynograph reads every earlier version; a file of a later
version than this dynograph knows is refused, naming both versions.
"""
from dynograph.serialization import CheckpointError

from . import _pytree
from .program import ExportedProgram

FORMAT = "dynograph.export"
VERSION = 1
_INPUT_KINDS = ("input", "param", "buffer", "state", "const", "scalar", "rng")
_CHECK_OPS = ("eq", "ne", "lt", "le", "gt", "ge")


def save(ep, f, *, extra_files=None):
    """Write exported program ``ep`` to ``f`` (a path, written atomically, or a binary file).
    ``extra_files``: {name: str or bytes} stored with it (``load`` hands them back)."""
    import dynograph
    from ._compiler import print_graph
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"dynograph.export.save expects an ExportedProgram, got {type(ep).__name__}")
    program = {
        "name": ep.name, "graph": print_graph(ep.graph), "sources": list(ep.sources),
        "inputs": ep.inputs, "in_spec": ep.in_spec, "out_spec": ep.out_spec,
        "outputs": ep.outputs, "args": ep.args, "arg_names": ep.arg_names, "batch": ep.batch,
        "clears": ep.clears, "training": ep.training, "rngs": ep.rng_states}
    extra = {}
    for name, data in (extra_files or {}).items():
        if not isinstance(name, str) or not isinstance(data, (str, bytes)):
            raise TypeError("extra_files maps names (str) to contents (str or bytes)")
        extra[name] = data
    dynograph.save({"format": FORMAT, "version": VERSION, "dynograph": dynograph.__version__,
                    "program": program, "state": dict(ep.state), "extra_files": extra}, f)


def load(f, *, extra_files=None):
    """Read an exported program written by ``save``; it runs without the source that made it.
    ``extra_files``: a dict whose keys name extra files to read; their contents are filled in
    (None for a name the file does not hold), as torch.export.load does."""
    from dynograph.serialization import load as load_checkpoint
    name = str(f) if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__") else \
        getattr(f, "name", "<file object>")
    obj = load_checkpoint(f)
    reader = _Reader(name)
    program = reader.program(obj)
    if extra_files is not None:
        stored = obj.get("extra_files", {})
        if not isinstance(stored, dict):
            reader.fail("the exported program's extra files are not a dict")
        for key in extra_files:
            value = stored.get(key)
            if value is not None and not isinstance(value, (str, bytes)):
                reader.fail(f"the exported program's extra file {key!r} is a {type(value).__name__}")
            extra_files[key] = value
    return program


class _Reader:
    def __init__(self, name):
        self.name = name

    def fail(self, what):
        raise CheckpointError(f"{self.name}: {what}")

    def field(self, d, key, types, where="program"):
        if not isinstance(d, dict) or key not in d:
            self.fail(f"the exported program has no {where} field {key!r}")
        v = d[key]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in _tuple(types)):
            self.fail(f"the exported program's {where} field {key!r} is a {type(v).__name__}")
        return v

    def program(self, obj):
        import dynograph
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            what = f"a {type(obj).__name__}" if not isinstance(obj, dict) else \
                "a dict without format 'dynograph.export'"
            self.fail(f"not an exported program (the checkpoint holds {what}); write one with "
                      "dynograph.export.save")
        version = self.field(obj, "version", int, "file")
        if version > VERSION or version < 1:
            by = obj.get("dynograph")
            by = f" by dynograph {by}" if isinstance(by, str) else ""
            self.fail(f"the exported program has format version {version} (written{by}); this "
                      f"dynograph ({dynograph.__version__}) reads export format versions 1 to "
                      f"{VERSION}: load it with a dynograph at least as new as the one that "
                      "saved it")
        p = self.field(obj, "program", dict, "file")
        state = self.field(obj, "state", dict, "file")
        graph = self.graph(p)
        parts = dict(
            graph=graph, name=self.field(p, "name", str), state={},
            sources=self.field(p, "sources", list), inputs=self.field(p, "inputs", list),
            in_spec=p.get("in_spec"), out_spec=p.get("out_spec"),
            outputs=self.field(p, "outputs", list), args=self.field(p, "args", list),
            arg_names=self.field(p, "arg_names", list), batch=p.get("batch"),
            clears=self.field(p, "clears", list), training=self.field(p, "training", bool),
            rngs=self.field(p, "rngs", dict))
        self.check_structure(parts)
        if len(parts["sources"]) != len(graph.nodes):
            self.fail(f"the program lists {len(parts['sources'])} source lines for "
                      f"{len(graph.nodes)} nodes")
        self.check_inputs(parts, graph, state)
        self.check_graph(parts, graph)
        return ExportedProgram(**parts)

    def graph(self, p):
        from ._compiler import ParseError, parse_graph
        text = self.field(p, "graph", str)
        try:
            return parse_graph(text)
        except ParseError as e:
            self.fail(f"the program's IR text does not parse: {e}")
        except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError) as e:
            self.fail(f"the program's IR text does not parse: {type(e).__name__}: {e}")

    def check_structure(self, parts):
        for key in ("in_spec", "out_spec"):
            if not _pytree.validate(parts[key]):
                self.fail(f"the program's {key} is not a valid structure")
        args, names = parts["args"], parts["arg_names"]
        if _pytree.count(parts["in_spec"]) != len(args) or len(names) != len(args):
            self.fail("the program's input structure, input specs and input names disagree")
        if not all(isinstance(n, str) for n in names):
            self.fail("the program's input names are not strings")
        from dynograph.runtime import dtypes as D
        for a in args:
            kind = a.get("kind") if isinstance(a, dict) else None
            if kind == "tensor":
                shape = a.get("shape")
                if a.get("dtype") not in D.BY_NAME or not isinstance(shape, list) or not all(
                        n is None or (type(n) is int and n >= 0) for n in shape):
                    self.fail(f"the program's input spec {a!r} is malformed")
            elif kind != "value" or not _pytree.is_constant(a.get("value")):
                self.fail(f"the program's input spec {a!r} is malformed")
        if _pytree.count(parts["out_spec"]) != len(parts["outputs"]):
            self.fail("the program's output structure and outputs disagree")
        if not all(isinstance(s, str) for s in parts["sources"]) or \
                not all(isinstance(s, str) for s in parts["clears"]):
            self.fail("the program's sources or cleared slots are not strings")
        batch = parts["batch"]
        if batch is not None:
            ok = isinstance(batch, dict) and set(batch) == {"dims", "min", "max", "checks"} \
                and isinstance(batch["dims"], list) and batch["dims"] \
                and type(batch.get("min")) is int and batch["min"] >= 2 \
                and (batch.get("max") is None or (type(batch["max"]) is int
                                                  and batch["max"] >= batch["min"])) \
                and isinstance(batch.get("checks"), list)
            if not ok:
                self.fail("the program's symbolic size description is malformed")
            for c in batch["checks"]:
                if not (isinstance(c, list) and len(c) == 3 and c[0] in _CHECK_OPS
                        and (c[1] == "s0" or type(c[1]) in (int, float)) and type(c[2]) is bool):
                    self.fail(f"the program's size check {c!r} is malformed")
            for d in batch["dims"]:
                if not (isinstance(d, list) and len(d) == 2 and type(d[0]) is int
                        and 0 <= d[0] < len(args) and args[d[0]]["kind"] == "tensor"
                        and type(d[1]) is int and 0 <= d[1] < len(args[d[0]]["shape"])
                        and args[d[0]]["shape"][d[1]] is None):
                    self.fail(f"the program's symbolic dimension {d!r} is malformed")
        symbolic = {(i, d) for i, a in enumerate(args) if a["kind"] == "tensor"
                    for d, n in enumerate(a["shape"]) if n is None}
        if symbolic and (batch is None or symbolic != {tuple(d) for d in batch["dims"]}):
            self.fail("the program's symbolic dimensions and its input specs disagree")

    def check_inputs(self, parts, graph, state):
        from dynograph._tensor import Tensor
        from ._compiler import RNG, Sym, TensorType
        inputs = parts["inputs"]
        if len(inputs) != len(graph.inputs):
            self.fail(f"the program lists {len(inputs)} inputs, its graph has {len(graph.inputs)}")
        args = parts["args"]
        for spec, inp in zip(inputs, graph.inputs):
            if not isinstance(spec, dict) or spec.get("name") != inp.name or \
                    spec.get("kind") != inp.kind or inp.kind not in _INPUT_KINDS:
                self.fail(f"the program's input {spec!r} does not match its graph's input "
                          f"{inp.kind} {inp.name}")
            if "arg" in spec:
                i = spec["arg"]
                if type(i) is not int or not 0 <= i < len(args) or args[i]["kind"] != "tensor":
                    self.fail(f"the program's input {inp.name} names no tensor input")
                a = args[i]
                want = tuple(Sym(1, 0) if n is None else n for n in a["shape"])
                t = inp.value.type
                if not isinstance(t, TensorType) or t.dtype.name != a["dtype"] or t.shape != want:
                    self.fail(f"the program's input {inp.name} has type {t} in the graph, its "
                              f"spec says {a['dtype']}{a['shape']}")
            elif inp.kind == "rng":
                if inp.value.type != RNG:
                    self.fail(f"the program's generator {inp.name} is not of type rng")
                self.rng(parts["rngs"].get(inp.name), inp.name)
            else:
                t = state.get(inp.name)
                want = inp.value.type
                if not isinstance(t, Tensor) or not isinstance(want, TensorType) or \
                        tuple(t.shape) != want.shape or t.dtype is not want.dtype:
                    got = "nothing" if not isinstance(t, Tensor) else f"{t.dtype.name}{list(t.shape)}"
                    self.fail(f"the program's state {inp.name!r} must be a tensor of type {want}, "
                              f"the file holds {got}")
                parts["state"][inp.name] = t
        if len(parts["rngs"]) != sum(1 for i in graph.inputs if i.kind == "rng"):
            self.fail("the program's generator states do not match its generator inputs")
        for k, out in enumerate(parts["outputs"]):
            if not (isinstance(out, list) and len(out) == 2):
                self.fail(f"the program's output {k} is malformed")
            kind, what = out
            if kind == "tensor":
                if type(what) is not int or not 0 <= what < len(graph.outputs):
                    self.fail(f"the program's output {k} names no graph output")
            elif kind != "const" or not _pytree.is_constant(what):
                self.fail(f"the program's output {k} is malformed")

    def rng(self, state, name):
        import numpy as np
        if not isinstance(state, dict) or state.get("bit_generator") != "PCG64":
            self.fail(f"the program's generator {name} has no PCG64 state")
        try:
            np.random.PCG64().state = state
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            self.fail(f"the program's generator {name} has a malformed state ({e})")

    def check_graph(self, parts, graph):
        from ._compiler import VerifyError, check_graph
        batch = parts["batch"]
        try:
            check_graph(graph, None if batch is None else batch["min"])
        except VerifyError as e:
            self.fail(f"the program's graph is invalid: {e}")
        except (ValueError, TypeError, ArithmeticError, IndexError, KeyError, AttributeError,
                RecursionError) as e:
            self.fail(f"the program's graph is invalid: {type(e).__name__}: {e}")
        for slot, _ in graph.updates:
            if not isinstance(slot, str):
                self.fail("the program's graph updates a slot without a name")


def _tuple(types):
    return types if isinstance(types, tuple) else (types,)

"""``ExportedProgram``: a traced graph with its state, its call structure and its preconditions.

It holds no reference to the Python code that produced it: calling it checks the inputs
against the preconditions the trace was specialized on, binds them and the saved state to
the graph's inputs, and runs the graph on a backend (``llvm``, or the ``interpreter``).  A
program with a symbolic batch size is instantiated, optimized and compiled once per batch
size it meets.
"""
import math

import numpy as np

from . import _pytree
from .errors import ExportError

_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_CACHE_SIZES = 8            # graphs kept per program (one per batch size met)


class ExportedProgram:
    """A program exported by ``dynograph.export.export`` or read by ``dynograph.export.load``.

    * ``graph``: the IR (``str(ep.graph)`` is its text form, which parses back);
    * ``state``: every tensor the graph reads besides the inputs, by name (parameters, buffers,
      captured constants, optimizer state of a training step); ``state_dict`` the parameters
      and buffers only;
    * ``preconditions()``: what the inputs must be (structure, dtypes, shapes, the range of the
      symbolic size ``s0``);
    * ``module()``: a callable that runs the program.
    """

    def __init__(self, graph, inputs, state, rngs, in_spec, out_spec, outputs, args, arg_names,
                 batch=None, clears=(), sources=None, training=False, name="program"):
        self.graph = graph
        self.inputs = inputs            # per graph input: {"name", "kind"[, "arg"]}
        self.state = state              # name -> Tensor
        self.rng_states = rngs          # name -> numpy bit generator state
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.outputs = outputs          # per output leaf: ["tensor", k] or ["const", value]
        self.args = args                # per input leaf: {"kind": "tensor", "dtype", "shape"}
        self.arg_names = arg_names      # or {"kind": "value", "value"}
        self.batch = batch              # None, or {"dims", "min", "max", "checks"}
        self.clears = list(clears)
        self.sources = sources or [""] * len(graph.nodes)
        self.training = training
        self.name = name
        self._rngs = None
        self._graphs = {}

    # ------------------------------------------------------------ inspection

    @property
    def state_dict(self):
        kinds = {i["name"]: i["kind"] for i in self.inputs}
        return {k: v for k, v in self.state.items() if kinds.get(k) in ("param", "buffer")}

    @property
    def constants(self):
        """The captured constant tensors and Python numbers the program reads (by name)."""
        kinds = {i["name"]: i["kind"] for i in self.inputs}
        return {k: v for k, v in self.state.items() if kinds.get(k) in ("const", "scalar")}

    @property
    def dynamic(self):
        return self.batch is not None

    def preconditions(self):
        """The preconditions as readable lines."""
        lines = [f"inputs: {_pytree.describe(self.in_spec)}"]
        for name, a in zip(self.arg_names, self.args):
            if a["kind"] == "tensor":
                dims = ", ".join("s0" if n is None else str(n) for n in a["shape"])
                lines.append(f"{name}: {a['dtype']}[{dims}]")
            else:
                lines.append(f"{name} == {a['value']!r}")
        if self.batch is not None:
            hi = "inf" if self.batch["max"] is None else self.batch["max"]
            lines.append(f"s0 in [{self.batch['min']}, {hi}]")
            for op, other, result in self.batch["checks"]:
                lines.append(f"(s0 {_OPS[op]} {other}) is {result}")
        return lines

    def __str__(self):
        from ._compiler import print_graph
        return "\n".join([f"ExportedProgram {self.name}" + (" (training step)" if self.training
                                                            else ""),
                          print_graph(self.graph), "Preconditions:",
                          *("  " + ln for ln in self.preconditions())])

    def __repr__(self):
        return str(self)

    def module(self, backend="llvm"):
        """A callable ``nn.Module`` running the program on ``backend`` (``"llvm"`` or
        ``"interpreter"``).  A training step updates ``self.state`` at each call."""
        from ._compiler import BACKENDS
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
        return _module_class()(self, backend)

    # ------------------------------------------------------------ calling

    def check_inputs(self, flat, spec):
        """Raise a RuntimeError naming the first precondition the call breaks; returns the
        batch size (None for a program without a symbolic size)."""
        from dynograph._tensor import Tensor
        if spec != self.in_spec:
            raise RuntimeError(f"exported program {self.name}: the inputs have the structure "
                               f"{_pytree.describe(spec)}, the program takes "
                               f"{_pytree.describe(self.in_spec)}")
        batch = None
        for name, x, want in zip(self.arg_names, flat, self.args):
            if want["kind"] == "value":
                if not _same_value(x, want["value"]):
                    raise RuntimeError(f"exported program {self.name}: input {name} must be "
                                       f"{want['value']!r} (the program was specialized on it), "
                                       f"got {x!r}")
                continue
            if not isinstance(x, Tensor):
                raise RuntimeError(f"exported program {self.name}: input {name} must be a tensor, "
                                   f"got {type(x).__name__}")
            if x.dtype.name != want["dtype"]:
                raise RuntimeError(f"exported program {self.name}: input {name} must have dtype "
                                   f"{want['dtype']}, got {x.dtype.name}")
            if x.device.type != "cpu":
                raise RuntimeError(f"exported program {self.name}: input {name} is on {x.device}; "
                                   "the program runs on the CPU")
            shape = tuple(x.shape)
            if len(shape) != len(want["shape"]):
                raise RuntimeError(f"exported program {self.name}: input {name} must have "
                                   f"{len(want['shape'])} dimensions ({_shape(want['shape'])}), "
                                   f"got shape {list(shape)}")
            for d, (n, w) in enumerate(zip(shape, want["shape"])):
                if w is None:
                    if batch is not None and n != batch:
                        raise RuntimeError(
                            f"exported program {self.name}: input {name}.shape[{d}] is {n}, but "
                            f"s0 is {batch} from an earlier input (the program's symbolic size "
                            f"is one size)")
                    batch = n
                elif n != w:
                    raise RuntimeError(f"exported program {self.name}: expected input "
                                       f"{name}.shape[{d}] to be equal to {w}, but got {n} "
                                       f"(input shape {_shape(want['shape'])})")
        if self.batch is not None:
            lo, hi = self.batch["min"], self.batch["max"]
            if batch < lo or (hi is not None and batch > hi):
                raise RuntimeError(f"exported program {self.name}: the symbolic size s0 is "
                                   f"{batch}, outside its range [{lo}, "
                                   f"{'inf' if hi is None else hi}]")
            for op, other, result in self.batch["checks"]:
                o = batch if other == "s0" else other
                if _COMPARE[op](batch, o) != result:
                    raise RuntimeError(f"exported program {self.name}: the program was traced "
                                       f"where (s0 {_OPS[op]} {other}) is {result}; with s0 = "
                                       f"{batch} it is not")
        return batch

    def call(self, args, kwargs, backend="llvm"):
        from dynograph._tensor import Tensor
        flat, spec = _pytree.flatten((tuple(args), dict(kwargs)))
        batch = self.check_inputs(flat, spec)
        arrays = []
        for inp in self.inputs:
            if "arg" in inp:
                arrays.append(np.ascontiguousarray(flat[inp["arg"]]._data))
            elif inp["kind"] == "rng":
                arrays.append(self._generators()[inp["name"]])
            else:
                arrays.append(self.state[inp["name"]]._data)
        from ._compiler import run
        outs, updates = run(backend, self._runnable(batch), arrays)
        inputs = [a for a in arrays if isinstance(a, np.ndarray)]
        args_by_name = {inp["name"]: flat[inp["arg"]] for inp in self.inputs if "arg" in inp}
        for slot, value in updates.items():
            value = _fresh(value, inputs)
            if slot in args_by_name:        # the function wrote into its input
                t = args_by_name[slot]
                np.copyto(t._data, value, casting="unsafe")
                t._bump_version()
            else:
                self.state[slot] = Tensor._wrap(value)
        for slot in self.clears:
            self.state.pop(slot, None)
        result = []
        for kind, what in self.outputs:
            result.append(Tensor._wrap(_fresh(outs[what], inputs)) if kind == "tensor" else what)
        return _pytree.unflatten(self.out_spec, result)

    def _generators(self):
        if self._rngs is None:
            self._rngs = {}
            for name, state in self.rng_states.items():
                gen = np.random.Generator(np.random.PCG64())
                gen.bit_generator.state = state
                self._rngs[name] = gen
        return self._rngs

    def _runnable(self, batch):
        """The graph optimized for this batch size (the passes work on concrete sizes)."""
        g = self._graphs.get(batch)
        if g is None:
            from ._compiler import runnable
            g = runnable(self.graph, batch)
            if len(self._graphs) >= _CACHE_SIZES:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[batch] = g
        return g


def _fresh(a, inputs):
    """``a`` as a new array when it may share memory with an input (an output that is a
    parameter or an argument itself)."""
    a = np.asarray(a)
    if any(np.may_share_memory(a, x) for x in inputs):
        a = a.copy()
    return a


def _same_value(x, want):
    if isinstance(x, float) and isinstance(want, float) and math.isnan(x) and math.isnan(want):
        return True
    return type(x) is type(want) and x == want


def _shape(dims):
    return "[" + ", ".join("s0" if n is None else str(n) for n in dims) + "]"


_MODULE_CLASS = []


def _module_class():
    """``ExportedModule``, an nn.Module (defined on first use: nn imports after this layer)."""
    if _MODULE_CLASS:
        return _MODULE_CLASS[0]
    from dynograph.nn import Module

    class ExportedModule(Module):
        """Runs an exported program; holds no parameters of its own (they are the program's)."""

        def __init__(self, program, backend):
            super().__init__()
            self.__dict__["program"] = program
            self.__dict__["backend"] = backend

        def forward(self, *args, **kwargs):
            return self.program.call(args, kwargs, self.backend)

        def state_dict(self, *args, **kwargs):
            return dict(self.program.state_dict)

        def __repr__(self):
            return f"ExportedModule({self.program.name}, backend={self.backend!r})"

    _MODULE_CLASS.append(ExportedModule)
    return ExportedModule


def build(parts):
    """An ExportedProgram from the dict ``_capture.capture`` returns."""
    parts = dict(parts)
    parts.pop("renames", None)
    return ExportedProgram(**parts)


__all__ = ["ExportedProgram", "ExportError"]

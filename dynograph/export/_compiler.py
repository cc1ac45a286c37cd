"""What dynograph.export and dynograph.onnx use of the compiler, in one place.

Tracing is ``dynograph.compile``'s own (a ``CompiledFunction``); running is the compiler's
pass pipeline and backend runners; the IR's types and text form are the compiler's.  Nothing
else in the two packages imports the compiler.
"""
from dynograph.compiler.backends import BACKENDS, get_runner
from dynograph.compiler.compiled import CompiledFunction
from dynograph.compiler.interpreter import evaluate as _evaluate
from dynograph.compiler.ir import RNG, Input, TensorType, Value
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.ops.core import TensorSpec
from dynograph.compiler.pipeline import DEFAULT_PASSES, optimize
from dynograph.compiler.symbolic import Sym, instantiate
from dynograph.compiler.text import ParseError, parse_graph, print_graph
from dynograph.compiler.tracer import storage_root
from dynograph.compiler.verify import VerifyError, verify

__all__ = ["BACKENDS", "RNG", "Input", "ParseError", "Sym", "TensorType", "Value", "VerifyError",
           "check_graph", "dtype_rule", "evaluate", "has_sym", "parse_graph", "print_graph", "run",
           "runnable", "storage_root", "tensor_spec", "tracer"]

# the passes that keep primitive nodes: what a saved program holds and ONNX maps
_CLEANUP = ("simplify", "fold", "cse", "dce")


def tracer(fn):
    """A compiled function that traces ``fn`` (the whole graph required) and keeps the traced
    graphs after the cleanup passes; calling it twice at two batch sizes generalizes them."""
    cleanup = [p for p in DEFAULT_PASSES if p[0] in _CLEANUP]
    return CompiledFunction(fn, backend="interpreter", fullgraph=True, passes=cleanup)


def runnable(graph, batch):
    """``graph`` at batch size ``batch`` (None: a graph without symbolic sizes), through the
    whole pass pipeline: the graph a backend runs."""
    concrete = graph if batch is None else instantiate(graph, batch)
    return optimize(concrete)[0]


def run(backend, graph, inputs):
    """Run a runnable graph: (outputs, {updated slot: new value})."""
    return get_runner(backend)(graph, inputs, None, ())


def check_graph(graph, batch):
    """Raise VerifyError where ``graph`` (at batch size ``batch``) breaks the IR's rules."""
    verify(graph if batch is None else instantiate(graph, batch), "the graph")


def dtype_rule(op_name, specs, attrs):
    """(compute dtype, result dtype) of an elementwise op on these operands."""
    return REGISTRY[op_name].dtype_rule(*specs, **attrs)


def has_sym(items):
    """Whether a size that depends on the batch size is among ``items`` (nested)."""
    return any(isinstance(a, Sym) or (isinstance(a, (tuple, list)) and has_sym(a)) for a in items)


def evaluate(op_name, args, attrs):
    """One primitive applied to literal arguments, as the interpreter applies it."""
    return _evaluate(REGISTRY[op_name], args, attrs)


def tensor_spec(shape, dtype):
    """The meta rules' description of an operand."""
    return TensorSpec(shape, dtype)

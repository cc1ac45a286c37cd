"""The IR verifier: SSA, topological order, known ops, and types that agree with each op's
meta rule.  Tests run it after every pass; ``DYNOGRAPH_VERIFY=1`` runs it in the compiler."""
from .ir import RNG, TensorType, Value
from .ops import REGISTRY
from .ops.core import TensorSpec


class VerifyError(AssertionError):
    pass


def verify(graph, where="graph"):
    """Raise VerifyError naming the first broken rule; returns the graph for chaining."""
    defined = set()
    names = set()
    for inp in graph.inputs:
        _define(inp.value, defined, where)
        if inp.name in names:
            raise VerifyError(f"{where}: two inputs named {inp.name!r}")
        names.add(inp.name)
        if (inp.kind == "rng") != (inp.value.type == RNG):
            raise VerifyError(f"{where}: input {inp.name!r} of kind {inp.kind} has type {inp.value.type}")
    for i, node in enumerate(graph.nodes):
        for v in node.input_values():
            if v not in defined:
                raise VerifyError(f"{where}: node {i} ({node.op}) reads a value defined later or never")
        if node.op == "fused":
            sub = node.attrs.get("graph")
            if sub is None:
                raise VerifyError(f"{where}: fused node {i} has no subgraph")
            verify(sub, f"{where} / node {i}")
            _check_fused_types(node, sub, where, i)
        else:
            _check_meta(node, where, i)
        for v in node.outs:
            _define(v, defined, where)
    for v in graph.outputs:
        if v not in defined:
            raise VerifyError(f"{where}: an output is not defined")
    inputs = {inp.name: inp for inp in graph.inputs}
    for slot, v in graph.updates:
        if v not in defined:
            raise VerifyError(f"{where}: the update of {slot!r} is not defined")
        inp = inputs.get(slot)
        if inp is not None and inp.value.type != v.type:
            raise VerifyError(f"{where}: update of {slot!r} has type {v.type}, the slot {inp.value.type}")
    return graph


def _define(v, defined, where):
    if not isinstance(v, Value):
        raise VerifyError(f"{where}: {v!r} is not a Value")
    if v in defined:
        raise VerifyError(f"{where}: a value is defined twice (not SSA)")
    defined.add(v)


def _spec(x):
    if isinstance(x, Value):
        if isinstance(x.type, TensorType):
            return TensorSpec(x.type.shape, x.type.dtype)
        return x                        # an rng value: meta rules ignore the generator
    if isinstance(x, tuple):
        return tuple(_spec(a) for a in x)
    if isinstance(x, list):
        return [_spec(a) for a in x]
    return x


def _check_meta(node, where, i):
    op = REGISTRY.get(node.op)
    if op is None:
        raise VerifyError(f"{where}: node {i} uses unknown op {node.op!r}")
    try:
        spec = op.meta(*_spec(node.args), **{k: _spec(v) for k, v in node.attrs.items()})
    except Exception as e:  # noqa: BLE001 - any meta failure is a broken node
        raise VerifyError(f"{where}: node {i} ({node.op}): its meta rule rejects the inputs: {e}") from None
    specs = spec if isinstance(spec, (tuple, list)) else (spec,)
    want = [(tuple(s.shape), s.dtype) for s in specs]
    got = [(tuple(v.type.shape), v.type.dtype) for v in node.outs]
    if want != got:
        raise VerifyError(f"{where}: node {i} ({node.op}) declares {_fmt(got)}, its meta rule "
                          f"gives {_fmt(want)}")


def _check_fused_types(node, sub, where, i):
    if len(sub.inputs) != len(node.args):
        raise VerifyError(f"{where}: fused node {i} passes {len(node.args)} values to a subgraph "
                          f"of {len(sub.inputs)} inputs")
    for a, inp in zip(node.args, sub.inputs):
        if a.type != inp.value.type:
            raise VerifyError(f"{where}: fused node {i}: argument type {a.type} != {inp.value.type}")
    if [v.type for v in node.outs] != [v.type for v in sub.outputs]:
        raise VerifyError(f"{where}: fused node {i}: outputs differ from its subgraph's")


def _fmt(types):
    return ", ".join(f"{d.abbr}{list(s)}" for s, d in types)

"""A model's traced IR as a TensorFlow ``GraphDef``, the format of TensorBoard's graph tab.

Nodes are named ``<scope>/<op>_<n>`` where the scope is the module path the op ran in, written
as torch writes it (``Sequential/Linear[3]``), so TensorBoard folds each module into one box.
Every node carries its output shapes (``_output_shapes``) and its attributes as text (``attr``).
"""
import contextlib

from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.step_stats_pb2 import DeviceStepStats, StepStats
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef

from dynograph.compiler.ir import TensorType, Value


def graph(model, args, verbose=False):
    """``(GraphDef, RunMetadata)`` of ``model(*args)``, traced in eval mode as torch does."""
    import dynograph
    if not isinstance(args, (tuple, list)):
        args = () if args is None else (args,)
    scopes = _module_scopes(model)
    with _eval_mode(model), _recording_scopes(model, scopes) as node_scopes:
        ir = dynograph.trace(model, *args)
    if verbose:
        print(ir)
    return _graph_def(ir, node_scopes, scopes), RunMetadata(
        step_stats=StepStats(dev_stats=[DeviceStepStats(device="/device:CPU:0")]))


def _module_scopes(model):
    """Module path ('' for the model, '3', 'encoder.0') -> scope ('Sequential/Linear[3]')."""
    scopes = {"": type(model).__name__}
    for path, module in model.named_modules():
        if path:
            parent, _, name = path.rpartition(".")
            scopes[path] = f"{scopes[parent]}/{type(module).__name__}[{name}]"
    return scopes


@contextlib.contextmanager
def _eval_mode(model):
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)


@contextlib.contextmanager
def _recording_scopes(model, scopes):
    """Fill a list with the scope of each node the tracer appends, by hooks around every module."""
    from dynograph._trace_hook import TRACE
    node_scopes, stack = [], [scopes[""]]

    def claim():      # the nodes appended since the last hook ran inside the innermost module
        n = len(TRACE.tracer.graph.nodes) if TRACE.tracer is not None else len(node_scopes)
        node_scopes.extend([stack[-1]] * (n - len(node_scopes)))

    def enter(scope):
        def hook(module, args):
            claim()
            stack.append(scope)
        return hook

    def leave(module, args, output):
        claim()
        stack.pop()

    handles = []
    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(scopes[path])))
        handles.append(module.register_forward_hook(leave))
    try:
        yield node_scopes
    finally:
        for h in handles:
            h.remove()


def _graph_def(ir, node_scopes, scopes):
    names, nodes = {}, []          # Value -> its node's name ("name:k" for the k-th output)
    for inp in ir.inputs:
        names[inp.value] = _input_name(inp, scopes)
        nodes.append(_node(names[inp.value], "IO Node" if inp.kind == "input" else inp.kind.capitalize(),
                           [], [inp.value], ""))
    for i, node in enumerate(ir.nodes):
        scope = node_scopes[i] if i < len(node_scopes) else scopes[""]
        name = f"{scope}/{node.op}_{i}"
        for k, v in enumerate(node.outs):
            names[v] = name if k == 0 else f"{name}:{k}"
        literals = {f"arg{j}": a for j, a in enumerate(node.args) if not _has_value(a)}
        text = ", ".join(f"{k} : {v}" for k, v in {**literals, **node.attrs}.items() if not _has_value(v))
        nodes.append(_node(name, node.op, [names[v] for v in node.input_values()], node.outs,
                           "{" + text + "}"))
    for i, v in enumerate(ir.outputs):
        nodes.append(_node(f"output/output.{i}", "IO Node", [names[v]], [v], ""))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))


def _input_name(inp, scopes):
    """'input/x' for an argument; a parameter or buffer inside its module's scope."""
    if inp.kind == "input":
        return f"input/{inp.name}"
    path, _, leaf = inp.name.rpartition(".")
    if inp.kind in ("param", "buffer") and path in scopes:
        return f"{scopes[path]}/{leaf}"
    return f"{inp.kind}/{inp.name}"


def _has_value(x):
    if isinstance(x, (tuple, list)):
        return any(_has_value(a) for a in x)
    return isinstance(x, Value)


def _node(name, op, inputs, outs, attr_text):
    shapes = [TensorShapeProto(dim=[TensorShapeProto.Dim(size=d) for d in v.type.shape])
              for v in outs if isinstance(v.type, TensorType)]
    attr = {"attr": AttrValue(s=attr_text.encode("utf_8"))}
    if shapes:
        attr["_output_shapes"] = AttrValue(list=AttrValue.ListValue(shape=shapes))
    return NodeDef(name=name, op=op, input=inputs, attr=attr)

"""An ONNX model from an exported program: inputs, initializers, nodes, outputs, checks."""
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import EXTERNAL_DATA_AT, UnsupportedOperatorError
from .convert import RULES, Converter, UnsupportedOp, model_proto, value_info


def build_model(ep, opset, input_names=None, output_names=None, dynamic_axes=None):
    from dynograph.export._compiler import Value
    graph = ep.graph
    if ep.training or graph.updates:
        what = "is a training step" if ep.training else \
            f"updates its state ({', '.join(sorted(s for s, _ in graph.updates))})"
        raise UnsupportedOperatorError(
            f"ONNX export: the program {what}; ONNX models are stateless: export the model for "
            "inference (model.eval(): BatchNorm then reads its running statistics)")
    axis = _axis_name(dynamic_axes)
    tensor_leaves = [i for i, a in enumerate(ep.args) if a["kind"] == "tensor"]
    given = list(input_names or [])
    if len(given) > len(tensor_leaves):
        raise ValueError(f"dynograph.onnx.export: {len(given)} input_names for "
                         f"{len(tensor_leaves)} tensor inputs")
    leaf_name = {i: (given[k] if k < len(given) else ep.arg_names[i])
                 for k, i in enumerate(tensor_leaves)}
    s0_source = None
    if ep.batch is not None:
        leaf, dim = ep.batch["dims"][0]
        s0_source = (leaf_name[leaf], dim)
    cv = Converter(opset, s0_source)
    names = {}
    inputs, initializers = [], []
    for spec, inp in zip(ep.inputs, graph.inputs):
        if "arg" in spec:
            names[inp.value] = leaf_name[spec["arg"]]
            continue
        if inp.kind == "rng":
            raise UnsupportedOperatorError(
                "ONNX export: the model draws random numbers (dropout or another random op in "
                "training mode); call model.eval() before exporting")
        names[inp.value] = inp.name
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(ep.state[inp.name]._data),
                                                    inp.name))
    for i in tensor_leaves:
        a = ep.args[i]
        value = next((inp.value for spec, inp in zip(ep.inputs, graph.inputs)
                      if spec.get("arg") == i), None)
        if value is not None:
            inputs.append(value_info(leaf_name[i], value.type, axis))
        else:                           # an input the program never reads: still an input
            from dynograph.export._compiler import Sym, TensorType
            from dynograph.runtime import dtypes as D
            t = TensorType(tuple(Sym(1, 0) if n is None else n for n in a["shape"]),
                           D.BY_NAME[a["dtype"]])
            inputs.append(value_info(leaf_name[i], t, axis))
    cv.used = {v for n in graph.nodes for v in n.input_values()} | set(graph.outputs)
    missing = {}
    for node, source in zip(graph.nodes, ep.sources):
        fn = RULES.get(node.op)
        if fn is None:
            raise UnsupportedOperatorError(
                f"ONNX export: the primitive {node.op!r} has no ONNX mapping (called at "
                f"{source or 'an unknown line'})")
        for v in node.input_values():
            if v in missing:
                raise UnsupportedOperatorError(
                    f"ONNX export: {node.op!r} (at {source or 'an unknown line'}) reads the "
                    f"{missing[v]}, which has no ONNX counterpart")
        args = _names(node.args, names)
        attrs = {k: _names(v, names) for k, v in node.attrs.items()}
        try:
            outs = fn(cv, node, args, attrs)
        except UnsupportedOp as e:
            raise UnsupportedOperatorError(
                f"ONNX export: the primitive {node.op!r} cannot be mapped here: {e} (called at "
                f"{source or 'an unknown line'})") from None
        outs = outs if isinstance(outs, list) else [outs]
        for v, name in zip(node.outs, outs):
            if name is None:
                missing[v] = f"indices output of {node.op}"
            else:
                names[v] = name
    outputs = []
    tensor_outputs = [what for kind, what in ep.outputs if kind == "tensor"]
    given_out = list(output_names or [])
    for k, index in enumerate(tensor_outputs):
        v = graph.outputs[index]
        if v in missing:
            raise UnsupportedOperatorError(f"ONNX export: the model returns the {missing[v]}, "
                                           "which has no ONNX counterpart")
        name = given_out[k] if k < len(given_out) else ("output" if k == 0 else f"output_{k}")
        src = names[v] if isinstance(v, Value) else None
        cv.nodes.append(helper.make_node("Identity", [src], [name]))
        outputs.append(value_info(name, v.type, axis))
    read = {name for n in cv.nodes for name in n.input}
    constants = [t for t in cv.initializers if t.name in read]      # rules may make spares
    onnx_graph = helper.make_graph(cv.nodes, ep.name, inputs, outputs,
                                   initializer=initializers + constants)
    model = model_proto(onnx_graph, opset)
    return model


def _axis_name(dynamic_axes):
    for axes in (dynamic_axes or {}).values():
        if isinstance(axes, dict):
            for name in axes.values():
                return str(name)
    return "batch"


def _names(x, names):
    from dynograph.export._compiler import Value
    if isinstance(x, Value):
        return names[x]
    if isinstance(x, tuple):
        return tuple(_names(a, names) for a in x)
    if isinstance(x, list):
        return [_names(a, names) for a in x]
    return x


def _initializer_bytes(model):
    return sum(t.ByteSize() for t in model.graph.initializer)


def check(model):
    """onnx.checker's full check and strict shape inference (a model under 2 GB)."""
    if _initializer_bytes(model) < EXTERNAL_DATA_AT:
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def write(model, f, external_data=None):
    """Check ``model`` and write it to ``f``: initializers in ``<f>.data`` when the model is
    over 2 GB (or ``external_data=True``)."""
    big = _initializer_bytes(model) >= EXTERNAL_DATA_AT
    external = big if external_data is None else bool(external_data)
    if not external:
        check(model)
        data = model.SerializeToString()
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as fp:
                fp.write(data)
        else:
            f.write(data)
        return
    if not isinstance(f, (str, os.PathLike)):
        raise ValueError("dynograph.onnx.export: a model whose weights go to an external data file "
                         "(over 2 GB) must be written to a path, not a file object")
    path = os.fspath(f)
    location = os.path.basename(path) + ".data"
    if os.path.exists(os.path.join(os.path.dirname(path) or ".", location)):
        os.remove(os.path.join(os.path.dirname(path) or ".", location))
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=1024)
    onnx.checker.check_model(path, full_check=True)

"""dynograph.onnx: models as ONNX files, from the same exported graph ``dynograph.export`` makes.

    dynograph.onnx.export(model, (x,), "model.onnx", input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})

Needs the ``onnx`` package (``pip install "dynograph[onnx]"``); ``import dynograph`` never
imports it.  See docs/export.md.
"""
DEFAULT_OPSET = 18
OPSETS = range(17, 22)          # what the rules are written for; onnxruntime reads them all
# initializers beyond this many bytes go to an external data file (protobuf's 2 GB limit)
EXTERNAL_DATA_AT = (1 << 31) - (1 << 24)

__all__ = ["export", "UnsupportedOperatorError", "DEFAULT_OPSET"]


class UnsupportedOperatorError(RuntimeError):
    """A primitive of the graph has no ONNX mapping (the message names it and the user line)."""


def export(model, args, f=None, kwargs=None, export_params=True, verbose=None, input_names=None,
           output_names=None, opset_version=None, dynamic_axes=None, keep_initializers_as_inputs=False,
           external_data=None, do_constant_folding=True):
    """Export ``model`` (an nn.Module, a function or an ``ExportedProgram``) called on ``args``
    to ONNX, in torch.onnx.export's shape.  ``f``: a path or binary file object to write, or
    None.  Returns the ``onnx.ModelProto``.

    ``input_names`` name the tensor inputs (default: the forward's parameter names),
    ``output_names`` the tensor outputs (default ``output``, ``output_1``...).
    ``dynamic_axes`` (``{name: {dim: "axis name"}}`` or ``{name: [dims]}``) makes input
    dimensions symbolic: they share one size (the batch size), which ONNX names after the
    axis.  ``opset_version``: 17 to 21 (default 18).  Weights are initializers; models over
    2 GB store them in ``<f>.data`` next to ``f`` (``external_data=True`` forces that).
    ``keep_initializers_as_inputs=True`` also lists the weights as graph inputs (with their
    values as defaults).  Constants are always folded (the exported graph went through the
    compiler's folding pass), so ``do_constant_folding`` only exists for torch's signature.
    The model is checked with ``onnx.checker`` (full check) and strict shape inference.
    """
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError('dynograph.onnx.export needs the onnx package: pip install '
                          '"dynograph[onnx]"') from None
    from dynograph._tensor import Tensor
    from dynograph.export import Dim, ExportedProgram
    from dynograph.export import export as export_program
    if not export_params:
        raise ValueError("dynograph.onnx.export: export_params=False is not supported; the "
                         "weights are always stored as initializers")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if opset not in OPSETS:
        raise ValueError(f"dynograph.onnx.export: opset_version {opset} is not supported; "
                         f"choose one of {OPSETS.start} to {OPSETS.stop - 1}")
    if isinstance(args, Tensor):
        args = (args,)
    args = tuple(args)
    if kwargs is None and args and isinstance(args[-1], dict):
        args, kwargs = args[:-1], args[-1]
    kwargs = dict(kwargs or {})
    if isinstance(model, ExportedProgram):
        ep = model
    else:
        dims = _input_dims(model, args, kwargs, input_names, dynamic_axes)
        shapes = None
        if dims:
            counter = [0]
            shapes = tuple(_mirror(a, dims, counter, Dim("batch")) for a in args) + \
                tuple(_mirror(v, dims, counter, Dim("batch")) for v in kwargs.values())
        ep = export_program(model, args, kwargs, dynamic_shapes=shapes)
    from .build import build_model, check, write
    proto = build_model(ep, opset, input_names, output_names, dynamic_axes)
    if keep_initializers_as_inputs:
        from onnx import helper
        proto.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                 for t in proto.graph.initializer)
    if verbose:
        import onnx
        print(onnx.helper.printable_graph(proto.graph))
    if f is not None:
        write(proto, f, external_data)
    else:
        check(proto)
    return proto


def _input_dims(model, args, kwargs, input_names, dynamic_axes):
    """{flat leaf index: [dims]} from dynamic_axes keyed by input name."""
    if not dynamic_axes:
        return {}
    from dynograph._tensor import Tensor
    from dynograph.export import _pytree
    from dynograph.export._capture import callable_target
    flat, _ = _pytree.flatten((tuple(args), dict(kwargs)))
    _, names = callable_target(model, args, kwargs)
    tensor_leaves = [i for i, x in enumerate(flat) if isinstance(x, Tensor)]
    given = list(input_names or [])
    by_name = {}
    for k, i in enumerate(tensor_leaves):
        by_name[given[k] if k < len(given) else names[i]] = i
    dims, axis_names = {}, set()
    for name, axes in dynamic_axes.items():
        if name not in by_name:
            continue                    # an output's axis: named from the symbolic sizes
        if isinstance(axes, dict):
            axis_names.update(axes.values())
            axes = list(axes)
        dims[by_name[name]] = [int(d) for d in axes]
    if len(axis_names) > 1:
        raise ValueError(f"dynograph.onnx.export: dynamic_axes names {sorted(axis_names)}; "
                         "dynograph exports one symbolic size (the batch size), shared by every "
                         "dynamic input axis")
    return dims


def _mirror(tree, dims, counter, dim):
    if isinstance(tree, (tuple, list)):
        return type(tree)(_mirror(x, dims, counter, dim) for x in tree)
    if isinstance(tree, dict):
        return {k: _mirror(v, dims, counter, dim) for k, v in tree.items()}
    leaf = counter[0]
    counter[0] += 1
    return {d: dim for d in dims[leaf]} if leaf in dims else None

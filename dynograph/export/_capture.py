"""Tracing a function or module into an exported program.

The trace is the one ``dynograph.compile`` makes (``fullgraph=True``: a graph break is an
error naming the user's line), with the cleanup passes (simplify, fold, cse, dce) but neither
fusion nor memory planning: the program keeps primitive nodes, which every later version can
optimize for itself and which map to ONNX.  With ``dynamic_shapes``, the function is traced at
a second batch size and the compiler's own generalization turns the batch size into ``s0``.
"""
import inspect

import numpy as np

from . import _pytree
from .errors import ExportError


def capture(fn, args, kwargs, dynamic_shapes, training):
    """Trace ``fn(*args, **kwargs)``; returns the pieces of an ExportedProgram (a dict)."""
    from dynograph._tensor import Tensor
    from dynograph.autograd.grad_mode import enable_grad, no_grad
    from dynograph.nn import Module
    from ._compiler import tracer

    target, names = callable_target(fn, args, kwargs)
    flat, in_spec = _pytree.flatten((tuple(args), dict(kwargs)))
    for i, x in enumerate(flat):
        if isinstance(x, Tensor):
            if x.device.type != "cpu":
                raise ExportError(f"input {names[i]} is on {x.device}: export traces on the CPU")
            # a private copy: the traced calls must not write into the caller's tensors
            flat[i] = _own_copy(x)
        elif not _pytree.is_constant(x):
            raise ExportError(f"input {names[i]} is a {type(x).__name__}: an exported program "
                              "takes tensors, numbers, strings, None and tuples, lists and "
                              "dicts of them")
    dims, bounds = _dynamic_dims(dynamic_shapes, args, kwargs, flat, names, fn)
    compiled = tracer(target)
    mode = enable_grad() if training else no_grad()
    a, k = _pytree.unflatten(in_spec, flat)
    with mode:
        compiled(*a, **k)
        if training:
            _settle(compiled, a, k)
        if dims:
            other = _resized(flat, dims)
            a2, k2 = _pytree.unflatten(in_spec, other)
            compiled(*a2, **k2)
    entry = _pick_entry(compiled, dims, names)
    if entry.aot is not None:
        raise ExportError("the function's outputs require grad: export the forward pass for "
                          "inference with training=False, or, with training=True, a whole "
                          "training step that calls backward() itself")
    graph, renames = _named_inputs(entry.graph, entry.bindings, names)
    inputs, state, rngs = [], {}, {}
    for inp, b in zip(graph.inputs, entry.bindings):
        kind = b[0] if isinstance(b, tuple) else "slot"
        if kind == "arg":
            inputs.append({"name": inp.name, "kind": inp.kind, "arg": b[1]})
            continue
        if kind == "arg_grad":
            raise ExportError(f"the function reads the .grad of input {names[b[1]]}: an exported "
                              "program cannot hold the gradients of its inputs")
        inputs.append({"name": inp.name, "kind": inp.kind})
        if kind == "rng":
            rngs[inp.name] = b[1]._np.bit_generator.state
        elif kind == "scalar":
            state[inp.name] = Tensor._wrap(np.array(b[1](), dtype=np.float64))
        else:
            state[inp.name] = Tensor._wrap(np.array(_slot_buffer(b)))
    for slot, (b, how) in entry.effects.items():
        if isinstance(b, tuple) and b[0] == "arg_grad":
            raise ExportError(f"the function sets the .grad of input {names[b[1]]}: an exported "
                              "program cannot hand gradients back to its caller")
    guards = entry.guards
    return dict(
        graph=graph, inputs=inputs, state=state, rngs=rngs, in_spec=in_spec,
        out_spec=_pytree.from_compiler_spec(entry.out_spec),
        outputs=[["tensor", k[1]] if k[0] == "tensor" else ["const", _constant(k[1])]
                 for k in entry.out_kinds],
        args=[_arg_spec(x, i, dims) for i, x in enumerate(flat)],
        arg_names=names,
        batch=None if not dims else {
            "dims": [list(d) for d in guards.dynamic], "min": bounds[0], "max": bounds[1],
            "checks": [list(c) for c in guards.size_checks]},
        clears=[s.name for s in entry.clears],
        sources=[n.source for n in graph.nodes],
        training=bool(training),
        name=getattr(fn, "__name__", type(fn).__name__) if not isinstance(fn, Module)
        else type(fn).__name__,
        renames=renames)


def _slot_buffer(slot):
    """The whole buffer behind a parameter, buffer or state slot: the graph input is the
    buffer, and a tensor that views part of it is read through a strided_view."""
    from ._compiler import storage_root
    return storage_root(slot.get()._data)


def _own_copy(x):
    from dynograph._tensor import Tensor
    t = Tensor._wrap(np.array(x._data, order="C"))
    if x.requires_grad:
        t.requires_grad_(True)
    return t


def callable_target(fn, args, kwargs):
    """The function to trace and a name for each leaf of (args, kwargs)."""
    from dynograph.nn import Module
    if isinstance(fn, Module):
        module = fn

        def forward(*a, **k):
            return module(*a, **k)
        forward.__name__ = forward.__qualname__ = type(module).__name__
        sig_of = module.forward
        target = forward
    elif callable(fn):
        target = sig_of = fn
    else:
        raise ExportError(f"export expects a function or an nn.Module, got {type(fn).__name__}")
    if not isinstance(args, tuple):
        raise ExportError(f"args must be a tuple of example inputs, got {type(args).__name__}")
    return target, _leaf_names(sig_of, args, kwargs)


def _leaf_names(fn, args, kwargs):
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        _names_of(a, params[i] if i < len(params) else f"arg{i}", names)
    for k, v in kwargs.items():
        _names_of(v, str(k), names)
    return names


def _names_of(tree, name, out):
    if isinstance(tree, (tuple, list)):
        for j, x in enumerate(tree):
            _names_of(x, f"{name}_{j}", out)
    elif isinstance(tree, dict):
        for k, x in tree.items():
            _names_of(x, f"{name}_{k}", out)
    else:
        out.append(name)


def _dynamic_dims(dynamic_shapes, args, kwargs, flat, names, fn):
    """[(leaf index, dim)] made symbolic, and the (min, max) of the size they share."""
    from .dims import dims_from_spec
    found = dims_from_spec(dynamic_shapes, args, kwargs, fn)
    if not found:
        return [], (2, None)
    dims, bound_list = [], []
    sizes = set()
    for (leaf, d, dim) in found:
        x = flat[leaf]
        if not hasattr(x, "_data"):
            raise ExportError(f"dynamic_shapes marks dimension {d} of input {names[leaf]}, which "
                              "is not a tensor")
        if not -x.dim() <= d < x.dim():
            raise ExportError(f"dynamic_shapes marks dimension {d} of input {names[leaf]}, "
                              f"which has {x.dim()} dimensions")
        d = d % x.dim()
        dims.append((leaf, d))
        sizes.add(x.shape[d])
        bound_list.append(dim)
    if len({b.name for b in bound_list}) > 1:
        raise ExportError("dynograph exports one symbolic size (the batch size); dynamic_shapes "
                          f"names several: {', '.join(sorted({b.name for b in bound_list}))}")
    if len(sizes) > 1:
        raise ExportError(f"the dimensions dynamic_shapes marks have different sizes in the "
                          f"example inputs ({sorted(sizes)}); they must be one size")
    size = sizes.pop()
    lo, hi = bound_list[0].min, bound_list[0].max
    if size < 2:
        raise ExportError(f"the example inputs have size {size} in a dimension dynamic_shapes "
                          "marks: sizes 0 and 1 are specialized, trace with a size of at least 2")
    if size < lo or (hi is not None and size > hi):
        raise ExportError(f"the example size {size} lies outside the range of "
                          f"{bound_list[0].name} [{lo}, {hi}]")
    return dims, (lo, hi)


def _resized(flat, dims):
    """The example leaves with the dynamic dimensions one larger (rows repeated)."""
    from dynograph._tensor import Tensor
    out = list(flat)
    for leaf, d in dims:
        a = flat[leaf]._data
        n = a.shape[d]
        t = Tensor._wrap(np.ascontiguousarray(np.take(a, np.arange(n + 1) % n, axis=d)))
        if flat[leaf].requires_grad:
            t.requires_grad_(True)
        out[leaf] = t
    return out


def _settle(compiled, args, kwargs):
    """Call a training step until a call replays its last trace: the first step changes what
    the next one sees (an optimizer creates its state), so only a later trace is the program
    every step runs."""
    for _ in range(4):
        hits = compiled.hits
        compiled(*args, **kwargs)
        if compiled.hits > hits:
            return
    raise ExportError("the training step traces differently at every call (see "
                      "dynograph.compile's explain() for the guard that keeps failing)")


def _pick_entry(compiled, dims, names):
    """The traced entry to export: the one generalized over ``dims`` (or the one the calls
    replay)."""
    entries = compiled.entries
    if dims:
        for e in entries:
            if sorted(e.guards.dynamic) == sorted(dims):
                return e
        reasons = [text for kind, text in compiled.events if kind in ("dynamic", "recompile")]
        marked = ", ".join(f"{names[i]}.shape[{d}]" for i, d in dims)
        reason = reasons[-1] if reasons else "the two traces differ"
        raise ExportError(f"the dimensions dynamic_shapes marks ({marked}) cannot share one "
                          f"symbolic size: {reason}")
    used = [e for e in entries if e.calls]
    return used[-1] if used else entries[-1]


def _named_inputs(graph, bindings, names):
    """The graph with its argument inputs named after the function's parameters."""
    from ._compiler import Input
    renames = {}
    inputs = []
    taken = {inp.name for inp, b in zip(graph.inputs, bindings)
             if not (isinstance(b, tuple) and b[0] == "arg")}
    for inp, b in zip(graph.inputs, bindings):
        if isinstance(b, tuple) and b[0] == "arg" and inp.name != names[b[1]]:
            new = names[b[1]]
            while new in taken:
                new += "_"
            renames[inp.name] = new
            taken.add(new)
            inp = Input(inp.value, inp.kind, new)
        inputs.append(inp)
    updates = [(renames.get(slot, slot), v) for slot, v in graph.updates]
    return graph.replace(inputs=inputs, updates=updates), renames


def _arg_spec(x, i, dims):
    if hasattr(x, "_data"):
        shape = [None if (i, d) in dims else n for d, n in enumerate(x._data.shape)]
        return {"kind": "tensor", "dtype": x.dtype.name, "shape": shape}
    return {"kind": "value", "value": x}


def _constant(v):
    if not _pytree.is_constant(v):
        raise ExportError(f"the function returns a {type(v).__name__}: an exported program "
                          "returns tensors, numbers, strings, None and containers of them")
    return v

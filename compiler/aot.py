"""Compiled functions whose outputs need gradients (``dynograph.compile(model)`` in training).

When a traced function returns tensors that require grad, the tracer also runs autograd over
what it recorded, with placeholder output gradients, so the backward pass becomes IR too.  The
joint graph is then split: the forward graph returns the outputs plus the values the backward
needs ("saved"), and the backward graph maps (saved values, output gradients) to the gradients
of the leaves (parameters and arguments that require grad).  At run time the forward graph
runs inside an ``autograd.Function`` whose backward runs the backward graph, so
``loss.backward()`` outside the compiled function works as in eager mode.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.cuda_memory import DeviceArray
from .ir import Graph, Input, TensorType
from .passes.dce import dce


class AotPlan:
    """What the tracer learned for the backward pass."""

    def __init__(self, leaves, grad_inputs, grads, diff_outputs):
        self.leaves = leaves                # [(binding, Tensor at trace time)]
        self.grad_inputs = grad_inputs      # Input per differentiable output: its gradient
        self.grads = grads                  # per leaf: Value of its gradient, or None
        self.diff_outputs = diff_outputs    # indices (among tensor outputs) that get gradients


def trace_backward(tracer, out_tensors):
    """Record the backward of ``out_tensors`` into the tracer's graph; None if none needs it."""
    from dynograph._tensor import Tensor
    from dynograph.autograd import grad as autograd_grad
    # (outputs that need gradients can come from an enable_grad() block inside a function
    # called under no_grad(): grad mode now says nothing about them)
    # outputs whose graph was already used, even in part, by a backward() inside the function
    # (a training step returning its loss) are returned as plain values
    diff = [i for i, t in enumerate(out_tensors) if t.requires_grad and t.grad_fn is not None
            and not _graph_freed(t.grad_fn)]
    if not diff:
        return None
    leaves = []
    for inp, b in zip(tracer.graph.inputs, tracer.bindings):
        t = _leaf_tensor(b, tracer)
        # parameters are leaves; an argument may be the result of earlier operations, whose
        # gradient then flows on into the caller's graph
        if t is not None and t.requires_grad and (t.grad_fn is None or isinstance(b, tuple)):
            leaves.append((b, t))
    if not leaves:
        return None
    grad_inputs, placeholders = [], []
    for k in diff:
        t = out_tensors[k]
        value_type = TensorType(t._data.shape, t.dtype)
        ph = Tensor._wrap(np.ones(t._data.shape, t._data.dtype))
        if t.is_cuda:
            ph = ph.to(t.device)
        v = tracer.add_input("input", f"grad_output{k}", value_type, ("grad_output", k))
        tracer.bind_placeholder(ph, v)
        grad_inputs.append(tracer.graph.inputs[-1])
        placeholders.append(ph)
    try:
        grads = autograd_grad([out_tensors[k] for k in diff], [t for _, t in leaves],
                              grad_outputs=placeholders, retain_graph=True, allow_unused=True)
    except RuntimeError as e:
        # a value the backward needs was overwritten in place: a backward() through the
        # outputs raises in eager mode too, so the function runs eagerly and raises there
        tracer.graph_break(f"the backward of the outputs cannot be traced: {e}")
        return None
    values = [None if g is None else tracer.value_of(g) for g in grads]
    return AotPlan(leaves, grad_inputs, values, diff)


def _array(a):
    """A result of a program as a tensor's array: a host or a device array."""
    return a if type(a) is DeviceArray else np.asarray(a)


def _graph_freed(grad_fn):
    """Whether a node reachable from ``grad_fn`` was freed by a backward() (a backward through
    it would raise in eager mode too)."""
    seen, todo = set(), [grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "_freed", False):
            return True
        todo.extend(fn for fn, _ in getattr(node, "next_functions", ()))
    return False


def _leaf_tensor(binding, tracer):
    if isinstance(binding, tuple):
        if binding[0] == "arg":
            return tracer.arg_tensors.get(binding[1])
        return None
    return binding.get()


def split(graph, plan):
    """(forward graph, backward graph, number of saved values) from the joint graph."""
    grad_values = [v for v in plan.grads if v is not None]
    inputs = [i for i in graph.inputs if i not in plan.grad_inputs]
    forward = dce(graph.replace(inputs=inputs))
    fwd_nodes = {id(n) for n in forward.nodes}
    joint = dce(graph.replace(outputs=grad_values, updates=[]))
    back_nodes = [n for n in joint.nodes if id(n) not in fwd_nodes]
    # inputs only the backward reads (a constant of a derivative rule) stay forward inputs,
    # handed over with the saved values
    read = {v for n in back_nodes for v in n.input_values()} | set(grad_values)
    kept = {i.value for i in forward.inputs}
    forward = forward.replace(inputs=[i for i in inputs if i.value in kept or i.value in read])
    available = {i.value for i in forward.inputs} | {v for n in forward.nodes for v in n.outs}
    saved, seen = [], set()
    for v in [*[x for n in back_nodes for x in n.input_values()], *grad_values]:
        if v in available and v not in seen:
            seen.add(v)
            saved.append(v)
    saved_inputs = [Input(v, "state", f"saved{i}") for i, v in enumerate(saved)]
    backward = Graph(inputs=saved_inputs + list(plan.grad_inputs), nodes=back_nodes,
                     outputs=grad_values)
    forward = forward.replace(outputs=list(forward.outputs) + saved)
    return forward, backward, len(saved)


def eager_replay(graph, inputs, batch=None):
    """Run ``graph`` with eager dynograph ops on ``inputs`` (tensors; numpy Generators for
    rng inputs): the outputs carry autograd history."""
    from dynograph._dispatch import call
    from .interpreter import resolve
    from .ops import REGISTRY
    from .symbolic import Sym
    env = {inp.value: x for inp, x in zip(graph.inputs, inputs)}
    env[Sym] = batch
    for node in graph.nodes:
        out = call(REGISTRY[node.op], *resolve(node.args, env),
                   **{k: resolve(v, env) for k, v in node.attrs.items()})
        for v, t in zip(node.outs, out if isinstance(out, tuple) else (out,)):
            env[v] = t
    return [env[v] for v in graph.outputs]


def differentiable_grads(entry, replay, grad_outputs):
    """The gradients of the leaves, with autograd history (for create_graph=True)."""
    from dynograph.autograd import grad as autograd_grad
    flat, leaves, rng_states = replay
    inputs = entry.forward_inputs(flat, leaves, rng_states)
    batch = entry.guards.batch_size(flat) if entry.guards.dynamic else None
    outs = eager_replay(entry.aot_forward, inputs, batch)
    plan = entry.aot
    diff = [outs[k] for k in plan.diff_outputs]
    grads = [grad_outputs[k] for k in plan.diff_outputs]
    found = autograd_grad(diff, list(leaves), grad_outputs=grads, create_graph=True,
                          allow_unused=True)
    return tuple(found[i] if v is not None else None for i, v in enumerate(plan.grads))


def make_function(entry, run_forward, run_backward):
    """An autograd.Function class that runs ``entry``'s forward and backward graphs."""
    from dynograph._tensor import Tensor
    from dynograph.autograd.function import Function

    plan = entry.aot

    class CompiledFunction(Function):        # grad_fn: CompiledFunctionBackward, as torch
        @staticmethod
        def forward(ctx, flat, *leaf_tensors):
            ctx.replay = (flat, leaf_tensors, entry.rng_states(flat))     # for create_graph
            tensors, ctx.saved_arrays = run_forward(flat)
            ctx.flat = flat
            ctx.out_meta = [(t._data.shape, t._data.dtype) for t in tensors]
            nondiff = [t for i, t in enumerate(tensors) if i not in plan.diff_outputs]
            ctx.mark_non_differentiable(*nondiff)
            return tuple(tensors)

        @staticmethod
        def backward(ctx, *grad_outputs):
            from dynograph.autograd.grad_mode import STATE
            if STATE.grad_enabled:
                # create_graph=True: gradients that are differentiable themselves come from the
                # forward graph replayed with eager ops (their autograd history included)
                return (None, *differentiable_grads(entry, ctx.replay, grad_outputs))
            feeds = list(ctx.saved_arrays)
            for k in plan.diff_outputs:
                g = grad_outputs[k]
                shape, dtype = ctx.out_meta[k]
                if g is not None and g.is_cuda:     # contiguous, of the output's dtype, by kernels
                    from dynograph.runtime.dtypes import from_numpy_dtype
                    g = g.to(from_numpy_dtype(dtype)).contiguous()
                    feeds.append(g._data)
                else:
                    feeds.append(np.zeros(shape, dtype) if g is None else
                                 np.ascontiguousarray(g._data, dtype=dtype))
            feeds = [feeds[i] for i in entry.backward_feeds]
            grads = iter(run_backward(feeds, ctx.flat))
            result = [None]
            for v in plan.grads:
                result.append(None if v is None else Tensor._wrap(_array(next(grads))))
            return tuple(result)

    return CompiledFunction


del D

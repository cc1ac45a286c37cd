"""dynograph.autograd: grad modes, backward, grad, and the dynamic graph's nodes."""
import numpy as np

from .grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                        is_grad_enabled, is_inference_mode_enabled)
from .graph import Node  # noqa: F401
from .engine import run_backward
from . import functional  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .gradcheck import gradcheck, gradgradcheck, GradcheckError  # noqa: F401
from . import profiler  # noqa: F401
from .anomaly_mode import (detect_anomaly, set_detect_anomaly, is_anomaly_enabled,  # noqa: F401
                           is_anomaly_check_nan_enabled)
from .._tensor import Tensor
from .._trace_hook import TRACE


def _make_grads(outputs, grad_outputs):
    grads = []
    for out, g in zip(outputs, grad_outputs):
        if g is None:
            if out._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not out.is_floating_point():
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {out.dtype}")
            data = out._data
            if TRACE.tracer is None and profiler.RECORDER.active is None and \
                    type(data) is np.ndarray:
                g = Tensor._wrap(np.ones(data.shape, data.dtype))   # (new_ones, 5 us less)
            else:
                g = out.new_ones(out.shape)
        elif not isinstance(g, Tensor):
            g = out.new_full(out.shape, g)
        elif g.shape != out.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[0] has a shape of {g.shape} and output[0] has "
                f"a shape of {out.shape}.")
        grads.append(g)
    return grads


def _as_tuple(x):
    if x is None:
        return ()
    return (x,) if isinstance(x, Tensor) else tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors) or (None,) * len(tensors)
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(tensors, grad_tensors)
    inputs = _as_tuple(inputs)
    if not inputs:
        run_backward(tensors, grads, retain_graph=retain_graph, create_graph=create_graph)
        return
    # only the given inputs (leaves or not) accumulate: capture their gradients, then add them
    from .engine import accumulate_grad
    edges = [_edge(x) for x in inputs]
    results = run_backward(tensors, grads, retain_graph=retain_graph, create_graph=create_graph,
                           capture={node: None for node, _ in edges})
    for x, (node, nr) in zip(inputs, edges):
        g = results.get(node)
        if g is not None and not isinstance(g, Tensor):
            g = g[nr]
        if g is not None and not x._retains_grad:     # retain_grad already stored it
            accumulate_grad(x, g, create_graph)


def _edge(x):
    """The graph edge that carries ``x``'s gradient."""
    from .graph import accumulator
    if not x.requires_grad:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return (accumulator(x), 0) if x.grad_fn is None else (x.grad_fn, x._output_nr)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` is touched)."""
    outputs = _as_tuple(outputs)
    inputs_t = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    for t in outputs:
        if not t.requires_grad:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn")
    if retain_graph is None:
        retain_graph = create_graph
    edges = [_edge(x) for x in inputs_t]
    capture = {e[0]: None for e in edges}
    results = run_backward(outputs, _make_grads(outputs, grad_outputs), retain_graph=retain_graph,
                           create_graph=create_graph, capture=capture)
    out = []
    for i, (x, (node, nr)) in enumerate(zip(inputs_t, edges)):
        g = results.get(node)
        if g is not None and not isinstance(g, Tensor):
            g = g[nr]
        if g is None:
            if materialize_grads:
                g = x.new_zeros(x.shape)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior.")
        out.append(g)
    return tuple(out)

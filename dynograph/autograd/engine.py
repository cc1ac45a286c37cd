"""The backward engine: iterative, dependency-counted, deterministic."""
import sys

import numpy as np

from dynograph.compiler.ops.movement import sum_to_shape
from .._tensor import Tensor
from .graph import AccumulateGrad, OpNode
from dynograph._trace_hook import TRACE
from .grad_mode import STATE, no_grad
from .anomaly_mode import ANOMALY, check_node, warn_forward_trace
from .profiler import RECORDER


def _dependencies(roots):
    """Count, for every node reachable from ``roots``, how many edges point at it."""
    deps = {}
    seen = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.next_functions:
            nxt = edge[0]
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if id(nxt) not in seen:
                stack.append(nxt)
    return deps


def run_backward(roots, grads, *, retain_graph=False, create_graph=False, capture=None):
    """Propagate ``grads`` from ``roots`` (tensors) to the leaves.

    With ``capture`` (a dict node-edge -> None) gradients for those edges are returned
    instead of accumulated into ``.grad`` (autograd.grad).
    """
    if TRACE.tracer is not None:
        TRACE.tracer.ran_backward = True
    prev = STATE.grad_enabled
    STATE.grad_enabled = bool(create_graph)
    try:
        if TRACE.tracer is not None:
            return TRACE.tracer.run_backward(_run, roots, grads, retain_graph, create_graph,
                                             capture)
        return _run(roots, grads, retain_graph, create_graph, capture)
    finally:
        STATE.grad_enabled = prev


def own_code_only(roots):
    """Whether a backward pass from tensors ``roots`` runs dynograph's code alone: every node it
    reaches is a recorded op (an ``OpNode`` itself, not a user's Function) or the accumulator
    of one of dynograph's tensors, and no node, leaf or tensor holds a hook (``register_hook``,
    ``retain_grad``, a node's pre- or post-hooks, a post-accumulate-grad hook)."""
    # (loops, not generators: this runs under the watcher's hooks, which see every generator
    # step as a frame that starts)
    stack = []
    for t in roots:
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif not _own_leaf(t):
            return False
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kind = type(node)
        if kind is AccumulateGrad:
            if not _own_leaf(node.variable):
                return False
        elif kind is not OpNode or not _PRE_HOOKS.isdisjoint(node.__dict__) or \
                "_post_hooks" in node.__dict__:
            return False
        for edge in node.next_functions:
            if edge[0] is not None:
                stack.append(edge[0])
    return True


def _own_leaf(leaf):
    return not leaf._hooks and not leaf._post_accumulate_grad_hooks and \
        type(leaf).__module__.startswith("dynograph.")


def _run(roots, grads, retain_graph, create_graph, capture):
    buffers = {}                 # node -> list of output grads
    root_nodes = []
    for t, g in zip(roots, grads):
        edge = t.grad_fn and (t.grad_fn, t._output_nr)
        if edge is None:
            from .graph import accumulator
            edge = (accumulator(t), 0)
        node, nr = edge
        _add_grad(buffers, node, nr, g)
        if node not in root_nodes:
            root_nodes.append(node)
    deps = _dependencies(root_nodes)
    ready = [n for n in root_nodes if deps.get(n, 0) == 0]
    results = {}
    prof = RECORDER.active
    while ready:
        node = ready.pop()
        node_grads = buffers.pop(node, None)
        if isinstance(node, AccumulateGrad):
            g = _leaf_hooks(node.variable, node_grads[0])
            node_grads = None       # g's last holder here: accumulate_grad may take its buffer
            if capture is not None:
                if node in capture:
                    results[node] = g
            else:
                accumulate_grad(node.variable, g, create_graph)
                if node.variable._post_accumulate_grad_hooks:
                    _post_accumulate_hooks(node.variable)
            continue
        if not _PRE_HOOKS.isdisjoint(node.__dict__):
            node_grads = _node_pre_hooks(node, node_grads)
        if capture is not None and node in capture:
            results[node] = node_grads
        try:
            if prof is None:
                in_grads = _apply(node, node_grads)
            else:
                in_grads = prof.run(node.name(), _apply, node, node_grads)
            if "_post_hooks" in node.__dict__:
                in_grads = _node_post_hooks(node, in_grads, node_grads)
            if ANOMALY.enabled and ANOMALY.check_nan:
                check_node(node, in_grads)
        except Exception:
            if ANOMALY.enabled:
                warn_forward_trace(node)
            raise
        if not retain_graph:
            node.release()
        for i, edge in enumerate(node.next_functions):
            nxt, nr = edge
            if nxt is None:
                continue
            g = in_grads[i] if i < len(in_grads) else None
            if g is not None:
                _add_grad(buffers, nxt, nr, g)
            deps[nxt] -= 1
            if deps[nxt] == 0:
                if nxt in buffers:
                    ready.append(nxt)
                else:
                    _skip(nxt, deps, ready, buffers)
        in_grads = g = node_grads = None     # the buffers hold what is still needed (see accumulate_grad)
    return results


def _skip(node, deps, ready, buffers):
    """A node that received no gradient still releases its dependents."""
    stack = [node]
    while stack:
        n = stack.pop()
        for edge in n.next_functions:
            nxt = edge[0]
            if nxt is None:
                continue
            deps[nxt] -= 1
            if deps[nxt] == 0:
                (ready.append(nxt) if nxt in buffers else stack.append(nxt))


def _apply(node, grads):
    if isinstance(node, OpNode):
        inputs = node._inputs
        if inputs is None:
            node.apply(*grads)      # raises the freed-graph error
        out = node._outputs
        nout = len(out) if isinstance(out, tuple) else 1
        full = [None] * nout
        for i, g in enumerate(grads or ()):
            full[i] = g
        if nout == 1 and full[0] is None:
            return ()
        raw = node.apply(*full) if TRACE.tracer is None else TRACE.tracer.run_rule(node, full)
        fixed = []
        for x, g in zip(inputs, raw):
            if g is None or not isinstance(x, Tensor):
                fixed.append(None)
                continue
            if not isinstance(g, Tensor):
                g = Tensor._wrap(g)
            if g._data.shape != x._data.shape:
                g = sum_to_shape(g, x._data.shape)
            if g._data.dtype != x._data.dtype:
                g = g.to(x.dtype)
            fixed.append(g)
        return fixed
    return node.apply(*grads)


def _add_grad(buffers, node, nr, g):
    slot = buffers.get(node)
    if slot is None:
        out = getattr(node, "_outputs", None)
        n = len(out) if isinstance(out, tuple) else 1
        slot = buffers[node] = [None] * n
    slot[nr] = g if slot[nr] is None else slot[nr] + g


def _leaf_hooks(leaf, g):
    for hook in leaf._hooks or ():
        r = hook(g)
        if r is not None:
            g = r
    return g


# what a node may hold that must see its output gradients before it runs
_PRE_HOOKS = frozenset(("_tensor_hooks", "_retained", "_pre_hooks"))


def _node_pre_hooks(node, grads):
    """Hooks of the tensors this node produced (register_hook, retain_grad), then the node's
    own pre-hooks; each may replace the gradient."""
    grads = list(grads)
    for nr, hooks in node.__dict__.get("_tensor_hooks", {}).items():
        for hook in hooks:
            if grads[nr] is not None:
                r = hook(grads[nr])
                if r is not None:
                    grads[nr] = r
    for nr, ref in node.__dict__.get("_retained", {}).items():
        t = ref()
        if t is not None and grads[nr] is not None:
            # PyTorch's retains_grad hook: a fresh tensor each time, which keeps its history
            # under create_graph (grad mode is on then, and only then)
            t._grad = grads[nr].clone() if t._grad is None else t._grad + grads[nr]
    for hook in node.__dict__.get("_pre_hooks", ()):
        r = hook(tuple(grads))
        if r is not None:
            grads = list(r)
    return grads


def _node_post_hooks(node, grad_inputs, grad_outputs):
    for hook in node._post_hooks:
        r = hook(tuple(grad_inputs), tuple(grad_outputs))
        if r is not None:
            grad_inputs = list(r)
    return grad_inputs


def _post_accumulate_hooks(leaf):
    hooks = list(leaf._post_accumulate_grad_hooks)
    for hook in hooks:
        hook(leaf)
    # after the hooks, so a hook's own reason is reported first; a hook marked ``traceable``
    # does its work with dynograph ops, which the trace records (DistributedDataParallel's)
    if TRACE.tracer is not None and not all(getattr(h, "traceable", False) for h in hooks):
        TRACE.tracer.graph_break("a post-accumulate-grad hook (register_post_accumulate_grad_hook) "
                                 "runs Python code during backward, which the graph does not replay")


def _holders(g):
    """``sys.getrefcount`` of gradient ``g``, of its array, of the array's base (0 without; not
    counting the base tensor a view's ``_base`` links to) and of that base tensor (0 without)."""
    a = g._data
    base = a.base
    base_tensor = g._base
    own = base_tensor is not None and base_tensor._data is base
    return (sys.getrefcount(g), sys.getrefcount(a),
            0 if base is None else sys.getrefcount(base) - own,
            0 if base_tensor is None else sys.getrefcount(base_tensor))


def _sole_owner(g, sole=None):
    """Whether nothing but the engine holds gradient ``g`` and its memory (no other tensor, view
    or hook kept it) and it is laid out as the copy would be (C-contiguous): then a leaf may
    take its buffer instead of a copy, as PyTorch's AccumulateGrad steals a gradient nobody
    else references.  ``sole``: the holders counted for such a gradient (``_SOLE``); None
    returns the counts."""
    a = g._data
    if type(a) is not np.ndarray or not a.flags.c_contiguous or not a.flags.writeable:
        return False
    counts = _holders(g)
    if sole is None:
        return counts
    if counts[0] > sole[0] or counts[1] > sole[1]:
        return False
    base, base_tensor = a.base, g._base
    if base_tensor is not None and (base_tensor._data is not base or counts[3] > sole[3]):
        return False
    # a reshaped or transposed-back result is a view of a whole buffer only it holds
    return base is None or (type(base) is np.ndarray and base.base is None
                            and base.nbytes == a.nbytes and counts[2] <= sole[2])


def _calibrate():
    """The holders of a gradient only its caller's variable holds, counted through the same
    calls as in the engine (_run -> accumulate_grad -> _sole_owner): a view (through its
    ``_base``) of a tensor nothing else holds."""
    def accumulate(g):
        return _sole_owner(g)

    g = Tensor._wrap(np.empty((1, 1)))
    g = Tensor._wrap(g._data.reshape(1))
    g._base = Tensor._wrap(g._data.base)
    return accumulate(g)


_SOLE = _calibrate()


def accumulate_grad(leaf, g, create_graph):
    tracer = TRACE.tracer
    if tracer is not None:
        tracer.grad_read(leaf)      # created or added to: it depends on the .grad there
    if leaf._grad is None:
        # the incoming buffer may be shared with other gradients: the leaf gets its own
        if create_graph:
            leaf._grad = g
        elif tracer is None and _sole_owner(g, _SOLE):
            leaf._grad = Tensor._wrap(g._data)
        elif g.is_cuda:                             # a cuda gradient: a copy by a kernel
            leaf._grad = g.clone()
        else:
            leaf._grad = Tensor._wrap(g._data.copy())
        if tracer is not None and not create_graph:
            tracer.alias(leaf._grad, g)
            tracer.grad_made(leaf)
    elif create_graph:
        leaf._grad = leaf._grad + g
    elif tracer is not None:
        with no_grad():
            leaf._grad.add_(g)
    elif g.is_cuda:
        with no_grad():
            leaf._grad.add_(g)
    else:
        leaf._grad._data += g._data

"""autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp built on autograd.grad."""
from .._tensor import Tensor
from .grad_mode import enable_grad


def _tuple(x):
    return (tuple(x), True) if isinstance(x, (tuple, list)) else ((x,), False)


def _prepare(inputs, create_graph):
    """Fresh leaves (or differentiable aliases with create_graph) that require grad."""
    out = []
    for x in inputs:
        if not isinstance(x, Tensor):
            raise TypeError(f"The inputs given to the function must be Tensors, got {type(x).__name__}")
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, what):
    from . import grad
    needed = [o for o in outputs if o.requires_grad]
    if not needed:
        if strict:
            raise RuntimeError("The output of the user-provided function is independent of input 0. "
                               "This is not allowed in strict mode.")
        return tuple(x.new_zeros(x.shape) for x in inputs)
    gos = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    res = grad(needed, inputs, gos, retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for i, (x, g) in enumerate(zip(inputs, res)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"The output of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode.")
            g = x.new_zeros(x.shape)
        out.append(g if create_graph else g.detach())
    return tuple(out)


def _finish(values, is_tuple):
    return values if is_tuple else values[0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T · J)."""
    with enable_grad():
        inputs, in_tuple = _tuple(inputs)
        inputs = _prepare(inputs, create_graph)
        outputs, out_tuple = _tuple(func(*inputs))
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")
            v = (outputs[0].new_ones(outputs[0].shape),)
        else:
            v, _ = _tuple(v)
        grads = _grads(outputs, inputs, v, create_graph, strict, "vjp")
    outs = tuple(o if create_graph else o.detach() for o in outputs)
    return _finish(outs, out_tuple), _finish(grads, in_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J · v), by the double-backward trick."""
    with enable_grad():
        inputs, in_tuple = _tuple(inputs)
        inputs = _prepare(inputs, create_graph)
        if v is None:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single element.")
            v = (inputs[0].new_ones(inputs[0].shape),)
        else:
            v, _ = _tuple(v)
        outputs, out_tuple = _tuple(func(*inputs))
        dummies = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        g = _grads(outputs, inputs, dummies, True, strict, "jvp")
        res = _grads(g, dummies, v, create_graph, strict, "jvp")
    outs = tuple(o if create_graph else o.detach() for o in outputs)
    return _finish(outs, out_tuple), _finish(res, out_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func``: for one input and one output, shape output.shape + input.shape."""
    from . import grad
    with enable_grad():
        inputs, in_tuple = _tuple(inputs)
        inputs = _prepare(inputs, create_graph)
        outputs, out_tuple = _tuple(func(*inputs))
        rows = []
        for o in outputs:
            per_input = [[] for _ in inputs]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                if o.requires_grad:
                    gs = grad(flat[k], inputs, retain_graph=True, create_graph=create_graph,
                              allow_unused=True)
                else:
                    gs = (None,) * len(inputs)
                for i, (x, g) in enumerate(zip(inputs, gs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(
                                f"Output {len(rows)} of the user-provided function is independent "
                                f"of input {i}. This is not allowed in strict mode.")
                        g = x.new_zeros(x.shape)
                    per_input[i].append(g if create_graph else g.detach())
            blocks = []
            for x, gs in zip(inputs, per_input):
                from .._shape import stack
                j = stack(gs) if gs else x.new_zeros((0,) + tuple(x.shape))
                blocks.append(j.reshape(tuple(o.shape) + tuple(x.shape)))
            rows.append(_finish(tuple(blocks), in_tuple))
    return _finish(tuple(rows), out_tuple)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function."""
    inputs_t, in_tuple = _tuple(inputs)

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "containing a single element")
        return jacobian(func, xs if in_tuple else xs[0], create_graph=True, strict=strict)

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T · H)."""
    with enable_grad():
        inputs_t, in_tuple = _tuple(inputs)
        xs = _prepare(inputs_t, create_graph)
        out = func(*xs)
        g = _grads((out,), xs, (out.new_ones(out.shape),), True, strict, "vhp")
        v, _ = _tuple(v if v is not None else tuple(x.new_ones(x.shape) for x in xs))
        res = _grads(g, xs, v, create_graph, strict, "vhp")
    return (out if create_graph else out.detach()), _finish(res, in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H · v); the Hessian is symmetric, so this equals vhp."""
    return vhp(func, inputs, v, create_graph, strict)

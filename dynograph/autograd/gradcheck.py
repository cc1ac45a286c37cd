"""gradcheck / gradgradcheck: compare autograd's Jacobians with central finite differences."""
import warnings

import numpy as np

from .._tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when a check fails."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]


def _outputs(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def _numerical_jacobians(func, inputs, eps):
    """For each differentiable input: a (numel(input), numel(output)) matrix per output."""
    # not under no_grad: gradgradcheck's function itself calls autograd.grad
    outs = _outputs(func, inputs)
    result = []
    for i in _differentiable(inputs):
        x = inputs[i]
        flat = x._data.reshape(-1) if x._data.flags.c_contiguous else None
        if flat is None:
            raise GradcheckError(f"gradcheck expects contiguous inputs; input {i} is not")
        jac = [np.zeros((x._data.size, o._data.size)) for o in outs]
        for k in range(flat.size):
            orig = flat[k].copy()
            flat[k] = orig + eps
            plus = [np.array(o._data, dtype=np.float64).reshape(-1) for o in _outputs(func, inputs)]
            flat[k] = orig - eps
            minus = [np.array(o._data, dtype=np.float64).reshape(-1) for o in _outputs(func, inputs)]
            flat[k] = orig
            for j in range(len(outs)):
                jac[j][k] = (plus[j] - minus[j]) / (2 * eps)
        result.append(jac)
    return result, outs


def _analytical_jacobians(func, inputs):
    from . import grad
    outs = _outputs(func, inputs)
    diff = [inputs[i] for i in _differentiable(inputs)]
    result = [[np.zeros((x._data.size, o._data.size)) for o in outs] for x in diff]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for k in range(o._data.size):
            seed = np.zeros(o._data.size, dtype=o._data.dtype)
            seed[k] = 1
            gs = grad((o,), diff, (Tensor._wrap(seed.reshape(o._data.shape)),),
                      retain_graph=True, allow_unused=True)
            for n, g in enumerate(gs):
                if g is not None:
                    result[n][j][:, k] = np.asarray(g._data, dtype=np.float64).reshape(-1)
    return result


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check gradients computed by autograd against finite differences (torch.autograd.gradcheck).

    Example::

        x = dynograph.rand(3, dtype=dynograph.float64, requires_grad=True)
        assert dynograph.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    """
    inputs = _as_tuple(inputs)
    diff = _differentiable(inputs)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    for i in diff:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point or "
                "complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ")
    numerical, outs = _numerical_jacobians(func, inputs, eps)
    analytical = _analytical_jacobians(func, inputs)
    for n, i in enumerate(diff):
        for j in range(len(outs)):
            a, num = analytical[n][j], numerical[n][j]
            if not np.allclose(a, num, rtol=rtol, atol=atol):
                return _fail(raise_exception,
                             f"Jacobian mismatch for output {j} with respect to input {i},\n"
                             f"numerical:{_show(num, inputs[i])}\nanalytical:{_show(a, inputs[i])}\n")
    return True


def _show(matrix, like):
    return repr(Tensor._wrap(matrix.astype(like._data.dtype)))


def _fail(raise_exception, message):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """Check second derivatives: gradcheck applied to the function that computes gradients."""
    from . import grad
    inputs = _as_tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._wrap(rng.standard_normal(o._data.shape).astype(o._data.dtype)).requires_grad_()
            for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)
    diff = _differentiable(inputs)

    def first_derivatives(*args):
        xs, gos = args[:n], args[n:]
        grads = grad(_outputs(func, xs), [xs[i] for i in diff], gos, create_graph=True,
                     allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)

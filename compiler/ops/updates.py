"""Optimizer updates recorded as one node: Adam's step on a parameter.

A compiled training step records its optimizer's update op by op.  Adam's update of one
parameter is twenty-one primitives, seventeen of them the decoupled weight decay, the bias
corrections from the step counter (scalar float64 work) and the step itself: the char
transformer's AdamW made 630 of its step's 1125 nodes, and tracing, optimizing and describing
them took about a fifth of its first call.  ``adam_param`` records that part as one
elementwise node, which fuses with the moment updates before it as those primitives did.

Its values and its kernel code come from one recipe written with the primitives it stands
for, so it computes what they compute, in their order and dtypes: on numpy arrays through the
primitives' own evaluation (ops/evaluate.py), in a kernel through their lowering rules
(lowering/description.py's ``apply_elementwise``).
"""
import numpy as np

from dynograph.runtime import dtypes as D
from ..lowering.description import apply_elementwise
from .core import REGISTRY, TensorSpec, type_name
from .elementwise import define_elementwise
from .evaluate import elementwise


def adam_step(o, p, exp_avg, denom_source, step, lr, beta1, beta2, eps, weight_decay):
    """Adam's step on parameter ``p`` once its moments are updated, as optim/adam.py's tensor
    methods compute it: the decoupled weight decay (AdamW; 0 for none), the bias corrections
    from the step counter in float64, then ``p - lr / bias_correction1 * exp_avg / denom``.
    ``denom_source`` is ``exp_avg_sq``, or its running maximum under AMSGrad.  ``o(name,
    *args)`` applies a primitive, ``o.float64(x)`` converts a value."""
    if weight_decay != 0:
        p = o("mul", p, o("sub", 1, o("mul", lr, weight_decay)))
    step = o.float64(step)
    bias_correction1 = o("sub", 1, o("pow", beta1, step))
    bias_correction2_sqrt = o("pow", o("sub", 1, o("pow", beta2, step)), 0.5)
    step_size = o("div", lr, bias_correction1)
    denom = o("add", o("div", o("sqrt", denom_source), bias_correction2_sqrt), eps)
    return o("add", p, o("div", o("mul", o("neg", step_size), exp_avg), denom))


class _OnArrays:
    """The recipe's primitives on numpy arrays and Python numbers, as eager ops run them."""

    def __call__(self, name, *args):
        operands = [TensorSpec(a.shape, D.from_numpy_dtype(a.dtype)) if isinstance(a, np.ndarray)
                    else a for a in args]
        return elementwise(REGISTRY[name], operands, args, {})

    def float64(self, x):
        return x.astype(np.float64)


class _Scalar:
    """A handle of the kernel's builder with the spec its dtype rules read (rank 1 for the
    parameter's elements, 0 for the scalars)."""
    __slots__ = ("handle", "spec")

    def __init__(self, handle, rank):
        self.handle = handle
        self.spec = TensorSpec((1,) * rank, handle.dtype)


class _OnScalars:
    """The recipe's primitives on a kernel's scalar builder."""

    def __init__(self, b):
        self.b = b

    def __call__(self, name, *args):
        specs = [a.spec if isinstance(a, _Scalar) else a for a in args]
        handles = [a.handle if isinstance(a, _Scalar) else a for a in args]
        handle = apply_elementwise(self.b, REGISTRY[name], specs, handles, {})
        return _Scalar(handle, max(len(s.shape) for s in specs if isinstance(s, TensorSpec)))

    def float64(self, x):
        return _Scalar(self.b.cast(x.handle, D.float64), len(x.spec.shape))


def _adam_param(p, exp_avg, denom_source, step, lr, *, beta1, beta2, eps, weight_decay):
    return adam_step(_OnArrays(), p, exp_avg, denom_source, step, lr, beta1, beta2, eps,
                     weight_decay)


def _lower_adam_param(b, p, exp_avg, denom_source, step, lr, *, beta1, beta2, eps,
                      weight_decay):
    o = _OnScalars(b)
    tensors = [_Scalar(h, 1) for h in (p, exp_avg, denom_source)]
    return adam_step(o, *tensors, _Scalar(step, 0), _Scalar(lr, 0), beta1, beta2, eps,
                     weight_decay).handle


def _adam_param_rule(p, exp_avg, denom_source, step, lr, **attrs):
    """The parameter's dtype; the operands keep their own (the recipe converts them)."""
    if not p.dtype.is_floating_point or len(p.shape) == 0:
        raise RuntimeError(f"adam_param: expected a floating-point parameter with dims, got a "
                           f"{len(p.shape)}-dim {type_name(p.dtype)} one")
    for what, x in (("exp_avg", exp_avg), ("the denominator's source", denom_source)):
        if x.dtype is not p.dtype or tuple(x.shape) != tuple(p.shape):
            raise RuntimeError(f"adam_param: expected {what} of the parameter's dtype and shape "
                               f"{type_name(p.dtype)}{list(p.shape)}, got "
                               f"{type_name(x.dtype)}{list(x.shape)}")
    for what, x in (("step", step), ("lr", lr)):
        if not hasattr(x, "shape") or len(x.shape) != 0:
            raise RuntimeError(f"adam_param: {what} must be a 0-dim tensor")
    return p.dtype, p.dtype


adam_param = define_elementwise(
    "adam_param", _adam_param, _adam_param_rule, lowering=_lower_adam_param,
    differentiable=False, cast_inputs=False,
    doc="Adam's step on a parameter from its updated moments (optim/adam.py, while compiled).")

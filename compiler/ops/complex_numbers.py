"""Complex numbers in the op set: the primitives that build and take apart complex tensors
(``view_as_real``, ``view_as_complex``, ``real``, ``imag``, ``conj_physical``, ``complex``,
``polar``) and the one table that says what every other primitive does with complex input.

docs/complex.md gives the policy.  In short: complex64/complex128 tensors flow through the
ops in ``GRADIENT`` (values and derivatives, PyTorch's convention: the gradient of a real
loss L with respect to z = x + iy is dL/dx + i dL/dy), through the ops in ``VALUES`` (values
only: their derivative rules are written for real numbers, so backpropagating a complex
gradient through them raises instead of being silently wrong), and every other primitive
raises PyTorch's "not implemented for 'ComplexFloat'" error.  ``install()`` applies the
table to the registry once every op module is loaded.
"""
import numpy as np

from dynograph.runtime import dtypes as D
from . import eager
from .core import REGISTRY, TensorSpec, define, type_name
from .elementwise import define_elementwise, not_implemented


def is_complex_array(a):
    return type(a) is np.ndarray and a.dtype.kind == "c"


# ---------------------------------------------------------------- views of the parts

def _need_complex(x, fn):
    if not x.dtype.is_complex:
        raise RuntimeError(f"{fn} is only supported for complex tensors.")


def _view_as_real_meta(x):
    _need_complex(x, "view_as_real")
    return TensorSpec(tuple(x.shape) + (2,), x.dtype.to_real())


def _view_as_real(x):
    if x.dtype.kind != "c":
        raise ValueError("view_as_real")
    re = x.real
    half = re.itemsize
    return np.lib.stride_tricks.as_strided(re, x.shape + (2,), re.strides + (half,))


view_as_real = define(
    "view_as_real", "movement", _view_as_real, meta=_view_as_real_meta, view=True,
    vjp=lambda ctx, g: (eager.call(view_as_complex, g.contiguous()),),
    doc="A complex tensor's memory seen as pairs of reals: (..., 2).")


def _view_as_complex_meta(x):
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but "
                           f"got a tensor of scalar type: {type_name(x.dtype)}")
    if not x.shape or x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return TensorSpec(tuple(x.shape[:-1]), x.dtype.to_complex())


def _view_as_complex(x):
    if x.dtype.kind != "f" or x.itemsize not in (4, 8) or not x.ndim or x.shape[-1] != 2:
        raise ValueError("view_as_complex")
    item = x.itemsize
    if x.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s in x.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if x.__array_interface__["data"][0] % (2 * item):
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    cdt = np.complex64 if item == 4 else np.complex128
    return x.view(cdt)[..., 0]          # numpy needs only the last axis contiguous


view_as_complex = define(
    "view_as_complex", "movement", _view_as_complex, meta=_view_as_complex_meta, view=True,
    vjp=lambda ctx, g: (eager.call(view_as_real, g.contiguous()),),
    doc="Pairs of reals (last dim of size 2) seen as complex numbers, sharing memory.")


def _part_meta(fn):
    def meta(x):
        _need_complex(x, fn)
        return TensorSpec(tuple(x.shape), x.dtype.to_real())
    return meta


def _real(x):
    if x.dtype.kind != "c":
        raise ValueError("real")
    return x.real


def _imag(x):
    if x.dtype.kind != "c":
        raise ValueError("imag")
    return x.imag


real = define("real", "movement", _real, meta=_part_meta("real"), view=True,
              vjp=lambda ctx, g: (g,), doc="The real parts of a complex tensor, as a view.")
imag = define("imag", "movement", _imag, meta=_part_meta("imag"), view=True,
              vjp=lambda ctx, g: (g * 1j,), doc="The imaginary parts of a complex tensor, as a view.")


def _exact(x, **_):
    return x.dtype, x.dtype


conj_physical = define_elementwise("conj_physical", np.conj, _exact, lambda ctx, g: (g.conj_physical(),),
                             doc="The complex conjugate, computed into new memory.")


# ---------------------------------------------------------------- complex(), polar()

def _pair_rule(fn):
    def rule(a, b):
        if a.dtype is not b.dtype:
            raise RuntimeError(f"Expected object of scalar type {type_name(a.dtype)} but got scalar "
                               f"type {type_name(b.dtype)} for second argument")
        if a.dtype not in (D.float32, D.float64):
            raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                               f"{type_name(a.dtype)} and {type_name(b.dtype)}")
        return a.dtype, a.dtype.to_complex()
    return rule


def _assemble(re, im):
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.complex64 if re.dtype == np.float32 else np.complex128)
    out.real = re
    out.imag = im
    return out


def _complex_vjp(ctx, g):
    return ctx.needs(0) and g.real, ctx.needs(1) and g.imag


make_complex = define_elementwise("complex", _assemble, _pair_rule("complex"), _complex_vjp,
                            doc="real + i imag, from two real tensors of one dtype.")


def _polar(r, theta):
    return _assemble(r * np.cos(theta), r * np.sin(theta))


def _polar_vjp(ctx, g):
    r, theta = ctx.inputs
    z = ctx.output
    unit = eager.call(polar, r.new_ones(()), theta)       # e^{i theta}
    gr = ctx.needs(0) and (g.conj_physical() * unit).real
    gt = ctx.needs(1) and -(g.conj_physical() * z).imag
    return gr, gt


polar = define_elementwise("polar", _polar, _pair_rule("polar"), _polar_vjp,
                     doc="abs (cos(angle) + i sin(angle)), from two real tensors of one dtype.")


# ---------------------------------------------------------------- what every op does with complex

# analytic ops whose real derivative rules hold for complex numbers on conjugated values
ANALYTIC = frozenset({"mm", "bmm", "mv", "dot", "matmul", "exp", "log", "sqrt", "sin", "cos",
                      "tan", "sinh", "cosh", "tanh", "reciprocal", "pow", "cumsum", "prod",
                      "linalg_solve", "linalg_inv"})
# values and derivatives (the derivative rules hold for complex numbers as written, or
# have the complex forms below)
GRADIENT = frozenset({
    "add", "sub", "neg", "mul", "div", "abs", "angle", "where", "masked_fill", "sum", "mean",
    "clone", "copy",
    "to_copy", "real", "imag", "view_as_real", "view_as_complex", "conj_physical", "complex",
    "polar", "fft_r2c", "fft_c2c", "fft_c2r", "linalg_eig",
}) | ANALYTIC
# values only
VALUES = frozenset({
    "sgn", "eq", "ne", "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or",
    "logical_xor", "cumprod", "vdot", "all", "any", "count_nonzero", "nonzero", "masked_select",
    "unique", "bincount",
})
# every op of these kinds moves or selects elements without arithmetic: values and derivatives
MOVING_KINDS = frozenset({"movement", "index", "creation"})


def _complex_mul_vjp(ctx, g):
    a, b = ctx.inputs
    return ctx.needs(0) and g * _conj(b), ctx.needs(1) and g * _conj(a)


def _complex_div_vjp(ctx, g):
    a, b = ctx.inputs
    if ctx.attrs.get("rounding_mode") is not None:
        raise RuntimeError("div with a rounding mode is not implemented for complex tensors")
    gb = ctx.needs(1) and -g * _conj(ctx.output / b)
    return ctx.needs(0) and g / _conj(b), gb


def _complex_angle_vjp(ctx, g):
    z = ctx.inputs[0]
    d = g * z / (z.abs() ** 2) * 1j
    return (d.masked_fill(z == 0, 0),)


def _conj(x):
    if type(x) is complex:
        return x.conjugate()
    return x.conj_physical() if getattr(x, "dtype", None) is not None and x.dtype.is_complex else x


class _Conjugated:
    """A backward context whose inputs and outputs are conjugated.  For an op analytic in its
    inputs with real coefficients (exp, sin, a product ...) the real derivative rule run on it
    gives PyTorch's complex one: grad * conj(f'(z)) = grad * f'(conj(z))."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.attrs = ctx.attrs

    @property
    def inputs(self):
        return tuple(_conj(x) for x in self._ctx.inputs)

    @property
    def output(self):
        out = self._ctx.output
        return tuple(_conj(o) for o in out) if isinstance(out, tuple) else _conj(out)

    def needs(self, i):
        return self._ctx.needs(i)


def _on_conjugates(vjp):
    return lambda ctx, *grads: vjp(_Conjugated(ctx), *grads)

COMPLEX_VJPS = {"mul": _complex_mul_vjp, "div": _complex_div_vjp, "angle": _complex_angle_vjp}

# ops whose result is real for complex input (and their numpy form for it)
TO_REAL = {"abs": np.abs, "angle": np.angle}


def _complex_input(args):
    for a in args:
        dt = getattr(a, "dtype", None)
        if isinstance(dt, D.dtype) and dt.is_complex:
            return dt
        if type(a) is np.ndarray and a.dtype.kind == "c":
            return D.from_numpy_dtype(a.dtype)
        if type(a) is complex:
            return D.get_default_dtype().to_complex()
    return None


def _rejecting_rule(op, rule):
    def checked(*xs, **attrs):
        ct, odt = rule(*xs, **attrs)
        if ct.is_complex or odt.is_complex:
            raise not_implemented(f"{op.name}_cpu", ct if ct.is_complex else odt)
        return ct, odt
    return checked


def _rejecting_impl(op, impl):
    def checked(*args, **attrs):
        dt = _complex_input(args)
        if dt is not None:
            raise not_implemented(f"{op.name}_cpu", dt)
        return impl(*args, **attrs)
    return checked


def _real_valued(op, rule, fn):
    """abs, angle: a real result for complex input."""
    def typed(*xs, **attrs):
        ct, odt = rule(*xs, **attrs)
        if ct.is_complex:
            return ct, ct.to_real()
        return ct, odt
    impl = op.impl

    def computed(x, *args, **attrs):
        return fn(x) if type(x) is np.ndarray and x.dtype.kind == "c" else impl(x, *args, **attrs)
    return typed, computed


def _raw_inputs(ctx):
    """The inputs of a backward context for a dtype look only: the eager node's own tuple, so
    that reading them does not count as the rule reading them (in-place checks)."""
    raw = getattr(ctx, "_inputs", None)
    return ctx.inputs if raw is None else raw


def _values_only(op, vjp):
    def guarded(ctx, *grads):
        if _complex_input(_raw_inputs(ctx)) is not None or _complex_input(grads):
            raise RuntimeError(f"the derivative of {op.name} for complex tensors is not implemented")
        return vjp(ctx, *grads)
    return guarded


def _with_complex_vjp(vjp, complex_vjp):
    def chosen(ctx, *grads):
        if _complex_input(_raw_inputs(ctx)) is not None:
            return complex_vjp(ctx, *grads)
        return vjp(ctx, *grads)
    return chosen


def install():
    """Apply the table to every registered primitive (once, after all op modules loaded)."""
    for op in REGISTRY.values():
        if op.name in _INSTALLED:
            continue
        name = op.name
        if name in TO_REAL:
            op.dtype_rule, op.impl = _real_valued(op, op.dtype_rule, TO_REAL[name])
        if name in COMPLEX_VJPS:
            op.vjp = _with_complex_vjp(op.vjp, COMPLEX_VJPS[name])
        elif name in ANALYTIC:
            op.vjp = _with_complex_vjp(op.vjp, _on_conjugates(op.vjp))
        if name in GRADIENT or op.kind in MOVING_KINDS:
            _INSTALLED.add(name)
            continue
        if name in VALUES:
            if op.vjp is not None:
                op.vjp = _values_only(op, op.vjp)
        elif op.kind == "elementwise":
            op.dtype_rule = _rejecting_rule(op, op.dtype_rule)
        else:
            op.impl = _rejecting_impl(op, op.impl)
        _INSTALLED.add(name)


_INSTALLED = set()      # the ops the table has been applied to

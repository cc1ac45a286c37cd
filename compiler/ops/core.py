"""What an op definition is, the registry that holds them, and the shared meta helpers.

An ``OpDef`` carries every fact about one primitive:

* ``impl``       the numpy reference implementation (eager execution, IR interpreter);
* ``dtype_rule`` the result dtype from the input dtypes (PyTorch's promotion);
* ``meta``       output shapes and dtypes from input specs; raises the user-facing error
                 for bad input.  Eager execution calls it only to explain a failure, the
                 tracer calls it for every node;
* ``vjp``        the derivative rule, written with tensor methods (so the same rule runs
                 on eager tensors and on traced values);
* ``lowering``   the scalar code-generation rule (compiler/lowering/scalar.py's builder), for
                 elementwise ops, reductions and conversions that a fused kernel computes;

and the category facts passes and backends ask about (never lists of op names):

* ``view``          the output aliases input 0 (the dispatcher links base and version counter);
* ``reindex``       the output is input 0's elements re-indexed, nothing computed: "reshape",
                    "permute", "expand", "squeeze", "unsqueeze" or "alias" (in a kernel, index
                    arithmetic; for the simplifier, which rewrite rules apply);
* ``reads_layout``  the result depends on the input's strides, not only its elements
                    (``view``, ``as_strided``...): passes must not change that input's layout;
* ``constant``      the output depends on attributes only (``full``, ``arange``...): constant
                    folding may evaluate it;
* ``data_dependent`` an output size depends on the input values (``nonzero``): a graph break;
* ``effect``        the op acts beyond its results: a random draw advances its generator, a
                    collective communicates with the other processes.  Passes never drop, merge,
                    fold or fuse it, and effects keep their order (every random op and every
                    collective has it);
* ``kernel``        a generated-kernel rule for an op that is not a fused loop nest
                    (convolution, pooling): compiler/lowering's description plus preparation.
"""
import sys
from dataclasses import dataclass

from dynograph.runtime import dtypes as D

REGISTRY = {}


@dataclass(frozen=True)
class TensorSpec:
    """The static facts of a tensor: what meta rules consume and produce."""
    shape: tuple
    dtype: D.dtype


class OpDef:
    __slots__ = ("name", "kind", "impl", "dtype_rule", "meta", "vjp", "lowering",
                 "grad_name", "view", "differentiable", "cast_inputs", "doc",
                 "reindex", "reads_layout", "constant", "data_dependent", "kernel", "effect", "area",
                 "scalar_attrs")

    def __init__(self, name, kind, impl, dtype_rule, meta, vjp, lowering, grad_name, view,
                 differentiable, cast_inputs, doc, reindex=None, reads_layout=False,
                 constant=False, data_dependent=False, kernel=None, effect=False, scalar_attrs=()):
        self.name = name
        self.kind = kind
        self.impl = impl
        self.dtype_rule = dtype_rule
        self.meta = meta
        self.vjp = vjp
        self.lowering = lowering
        self.grad_name = grad_name
        self.view = view
        self.differentiable = differentiable
        self.cast_inputs = cast_inputs      # elementwise: convert tensor inputs to the compute dtype
        self.doc = doc
        self.reindex = reindex
        self.reads_layout = reads_layout
        self.constant = constant
        self.data_dependent = data_dependent
        self.kernel = kernel
        self.effect = effect
        # float attributes (``alpha``, ``value``) the lowering also takes as a run-time scalar
        # (an expression read from a 0-d operand): a new value then needs no new kernel
        self.scalar_attrs = scalar_attrs
        self.area = None        # the op file that defines it ("elementwise"), set by define()

    def __repr__(self):
        return f"<op {self.name} ({self.kind})>"


# reduction: one result per kept index, combining the reduced dims (sum, amax, var...);
# scan: a running combination along a dim (cumsum); sort: order statistics (sort, topk,
# median); pooling: windows over spatial dims; collective: combines the op's input on every
# process of a group (all_reduce).
KINDS = ("elementwise", "reduction", "scan", "sort", "pooling", "movement", "index", "linalg",
         "random", "creation", "collective", "other")
EFFECT_KINDS = ("random", "collective")     # their ops act beyond their results (``effect``)
REINDEX = ("reshape", "permute", "expand", "squeeze", "unsqueeze", "alias")


def define(name, kind, impl, *, meta, dtype_rule=None, vjp=None, lowering=None,
           grad_name=None, view=False, differentiable=True, cast_inputs=True, doc="",
           reindex=None, reads_layout=False, constant=False, data_dependent=False, kernel=None,
           scalar_attrs=()):
    """Register one primitive.  ``grad_name`` defaults to PyTorch's ``<Name>Backward0``."""
    assert kind in KINDS, kind
    assert reindex is None or reindex in REINDEX, reindex
    assert name not in REGISTRY, f"op {name} defined twice"
    if grad_name is None:
        grad_name = "".join(p.capitalize() for p in name.split("_")) + "Backward0"
    op = OpDef(name, kind, impl, dtype_rule, meta, vjp, lowering, grad_name, view,
               differentiable, cast_inputs, doc, reindex, reads_layout, constant,
               data_dependent, kernel, effect=kind in EFFECT_KINDS, scalar_attrs=scalar_attrs)
    # the op file: the module whose top level is running (through any helpers it calls)
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    op.area = frame.f_globals.get("__name__", "").rsplit(".", 1)[-1]
    REGISTRY[name] = op
    return op


# ---------------------------------------------------------------- shapes

def broadcast_shapes(*shapes):
    """PyTorch's broadcasting of several shapes, with its error text on a mismatch."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i in range(len(s) - 1, -1, -1):     # from the last dim, as PyTorch's infer_size
            n = s[i]
            j = off + i
            if n == out[j] or n == 1:
                continue
            if out[j] == 1:
                out[j] = n
                continue
            raise RuntimeError(
                f"The size of tensor a ({out[j]}) must match the size of tensor b ({n}) "
                f"at non-singleton dimension {j}")
    return tuple(out)


def check_broadcast(a, b):
    """broadcast two shapes with PyTorch's message (a is the first operand, b the second)."""
    if a == b:
        return a
    ndim = max(len(a), len(b))
    pa = (1,) * (ndim - len(a)) + tuple(a)
    pb = (1,) * (ndim - len(b)) + tuple(b)
    out = [0] * ndim
    for i in range(ndim - 1, -1, -1):           # from the last dim, as PyTorch's infer_size
        x, y = pa[i], pb[i]
        if x == y or y == 1:
            out[i] = x
        elif x == 1:
            out[i] = y
        else:
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                f"at non-singleton dimension {i}")
    return tuple(out)


def wrap_dim(dim, ndim, name="dim"):
    """A dim in [-ndim, ndim) made non-negative, with PyTorch's IndexError otherwise."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def wrap_dims(dims, ndim):
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        for d in out:
            if out.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


# ---------------------------------------------------------------- dtypes

def _category_type(x):
    """(kind, dtype) of one operand for result_type: 'dim', 'zero' or 'wrapped'."""
    dt = getattr(x, "dtype", None)
    if dt is not None and isinstance(dt, D.dtype):
        return ("dim" if len(x.shape) else "zero"), dt
    if isinstance(x, bool):
        return "wrapped", D.bool
    if isinstance(x, int):
        return "wrapped", D.int64
    if isinstance(x, float):
        return "wrapped", D.get_default_dtype()
    if isinstance(x, complex):
        return "wrapped", D.get_default_dtype().to_complex()
    raise TypeError(f"expected a Tensor or a Python number, got {type(x).__name__}")


def _combine_categories(higher, lower):
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:                       # float32 tensor + complex128 scalar: complex64
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is D.bool or lower.is_floating_point:
        return D.promote_types(higher, lower)
    return higher


def result_type(*operands):
    """torch.result_type over tensors (with dims or zero-dim) and Python scalars."""
    # fast paths for the common eager cases; each gives what the general rule below gives
    if len(operands) == 1:
        return _category_type(operands[0])[1]
    if len(operands) == 2:
        a, b = operands
        da = getattr(a, "dtype", None)
        if isinstance(da, D.dtype):
            if da is getattr(b, "dtype", None):             # two tensors of one dtype
                return da
            tb = type(b)
            if tb is float:                                 # tensor op Python float
                return da if da.is_floating_point else _combine_categories(da, D.get_default_dtype())
            if tb is int or tb is bool:                     # tensor op Python int / bool
                return _combine_categories(da, D.int64 if tb is int else D.bool)
    state = {"dim": None, "zero": None, "wrapped": None}
    for x in operands:
        kind, dt = _category_type(x)
        cur = state[kind]
        state[kind] = dt if cur is None else D.promote_types(cur, dt)
    return _combine_categories(state["dim"], _combine_categories(state["zero"], state["wrapped"]))


def to_float(dt):
    """Integer and bool dtypes compute floating ops in the default dtype."""
    return dt if dt.is_floating_point or dt.is_complex else D.get_default_dtype()


def can_cast(src, dst):
    """PyTorch's rule for writing a result into an existing tensor (in-place ops, out=)."""
    if src.is_complex and not dst.is_complex:
        return False
    if src.is_floating_point and not (dst.is_floating_point or dst.is_complex):
        return False
    if src is not D.bool and dst is D.bool:
        return False
    return True


def type_name(dt):
    """'Float', 'Long', ... as PyTorch names dtypes in kernel errors."""
    return dt.scalar_type_name

"""An exported program's graph as an ONNX graph: one rule per primitive.

Each rule receives the node's arguments (ONNX value names for tensors, Python literals for
the rest, ``Sym`` for sizes that depend on the batch size) and returns the ONNX names of the
node's results.  Elementwise ops follow the op set's own dtype rule: operands are cast to the
compute dtype and the result to the result dtype, as the interpreter does.  Sizes that depend
on the batch size are computed in the ONNX graph from the shape of the input that carries it.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dynograph.runtime import dtypes as D

ONNX_DTYPE = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
              "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
              "int64": TensorProto.INT64, "int32": TensorProto.INT32, "int16": TensorProto.INT16,
              "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


class UnsupportedOp(RuntimeError):
    pass


class Converter:
    def __init__(self, opset, s0_source=None):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self.counter = 0
        self.s0_source = s0_source       # (onnx input name, dim) carrying the batch size
        self._s0 = None
        self.used = set()                # the Values some node or output reads

    # ------------------------------------------------------------ building blocks

    def fresh(self, hint="t"):
        self.counter += 1
        return f"{hint}_{self.counter}"

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
        return outs if n_out != 1 else outs[0]

    def const(self, array, hint="const"):
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def scalar(self, value, dtype):
        return self.const(np.array(value, dtype=dtype.np), "scalar")

    def s0(self):
        """The batch size as an int64 tensor of shape [1]."""
        if self._s0 is None:
            name, dim = self.s0_source
            self._s0 = self.node("Shape", [name], start=dim, end=dim + 1)
        return self._s0

    def ints(self, values):
        """A 1-d int64 tensor of ``values`` (ints and Syms of the batch size)."""
        from dynograph.export._compiler import Sym
        values = list(values)
        if not any(isinstance(v, Sym) for v in values):
            return self.const(np.array(values, dtype=np.int64), "ints")
        parts = []
        for v in values:
            if isinstance(v, Sym):
                parts.append(self.sym(v))
            else:
                parts.append(self.const(np.array([v], dtype=np.int64), "ints"))
        return self.node("Concat", parts, axis=0)

    def sym(self, v):
        """A Sym of kind 'int' as an int64 [1] tensor."""
        if v.kind != "int":
            raise UnsupportedOp(f"a size {v} that is not an integer")
        out = self.s0()
        if v.a != 1:
            out = self.node("Mul", [out, self.const(np.array([v.a], np.int64))])
        if v.b:
            out = self.node("Add", [out, self.const(np.array([v.b], np.int64))])
        return out

    def number(self, value, dtype):
        """A Python number or a Sym as a 0-d tensor of ``dtype``."""
        from dynograph.export._compiler import Sym
        if not isinstance(value, Sym):
            return self.scalar(value, dtype)
        s = self.node("Cast", [self.node("Squeeze", [self.s0(), self.ints([0])])],
                      to=ONNX_DTYPE[dtype.name])
        if value.kind == "int":
            return self.sym_scalar(value, s, dtype)
        if value.kind == "mul":
            return self.node("Mul", [s, self.scalar(value.a, dtype)])
        return self.node("Div", [self.scalar(value.a, dtype), s])

    def sym_scalar(self, value, s, dtype):
        out = self.node("Mul", [s, self.scalar(value.a, dtype)])
        return self.node("Add", [out, self.scalar(value.b, dtype)]) if value.b else out

    def cast(self, name, src, dst):
        return name if src is dst else self.node("Cast", [name], to=ONNX_DTYPE[dst.name])

    def reduce(self, op, x, dims, keepdim):
        """Reduce over ``dims`` (None: all) with the axes as an input or attribute by opset."""
        if dims is None:
            return self.node(op, [x], keepdims=int(keepdim))
        dims = list(dims) if isinstance(dims, (tuple, list)) else [dims]
        if op == "ReduceSum" or self.opset >= 18:
            return self.node(op, [x, self.ints(dims)], keepdims=int(keepdim))
        return self.node(op, [x], axes=dims, keepdims=int(keepdim))


def value_info(name, type, axis_name="batch"):
    """An ONNX ValueInfo for a dynograph TensorType (symbolic sizes named)."""
    from dynograph.export._compiler import Sym
    dims = []
    for n in type.shape:
        if isinstance(n, Sym):
            dims.append(axis_name if (n.a, n.b) == (1, 0) else str(n).replace("s0", axis_name))
        else:
            dims.append(int(n))
    return helper.make_tensor_value_info(name, ONNX_DTYPE[type.dtype.name], dims)


# ---------------------------------------------------------------- the rules

RULES = {}


def rule(*names):
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


def _elementwise_operands(cv, node, args, attrs):
    """The tensor operands cast to the op's compute dtype, numbers as constants of it; and
    (compute dtype, result dtype)."""
    from dynograph.export._compiler import Value
    from dynograph.export._compiler import dtype_rule, tensor_spec
    specs = [tensor_spec(a.type.shape, a.type.dtype) if isinstance(a, Value) else a
             for a in node.args]
    ct, odt = dtype_rule(node.op, specs, attrs)
    out = []
    for raw, name in zip(node.args, args):
        if isinstance(raw, Value):
            out.append(cv.cast(name, raw.type.dtype, ct))
        elif raw is None:
            out.append(None)
        else:
            out.append(cv.number(raw, ct))
    return out, ct, odt


def _simple(onnx_op):
    def convert(cv, node, args, attrs):
        ops, ct, odt = _elementwise_operands(cv, node, args, attrs)
        return cv.cast(cv.node(onnx_op, ops), ct if onnx_op not in _BOOL_OPS else D.bool, odt)
    return convert


_BOOL_OPS = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not",
             "IsNaN", "IsInf"}

for _name, _onnx in {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
                     "reciprocal": "Reciprocal", "sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu",
                     "erf": "Erf", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
                     "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
                     "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "floor": "Floor",
                     "ceil": "Ceil", "sign": "Sign", "sgn": "Sign", "isnan": "IsNaN",
                     "logical_not": "Not", "mul": "Mul", "pow": "Pow", "maximum": "Max",
                     "minimum": "Min", "fmax": "Max", "fmin": "Min", "eq": "Equal", "lt": "Less",
                     "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
                     "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}.items():
    RULES[_name] = _simple(_onnx)


def _unary(fn):
    def convert(cv, node, args, attrs):
        (x, *_), ct, odt = _elementwise_operands(cv, node, args, attrs)
        return cv.cast(fn(cv, x, ct), ct, odt)
    return convert


RULES["rsqrt"] = _unary(lambda cv, x, ct: cv.node("Reciprocal", [cv.node("Sqrt", [x])]))
RULES["expm1"] = _unary(lambda cv, x, ct: cv.node("Sub", [cv.node("Exp", [x]), cv.scalar(1, ct)]))
RULES["log1p"] = _unary(lambda cv, x, ct: cv.node("Log", [cv.node("Add", [x, cv.scalar(1, ct)])]))
RULES["log2"] = _unary(lambda cv, x, ct: cv.node("Div", [cv.node("Log", [x]),
                                                         cv.scalar(math.log(2), ct)]))
RULES["log10"] = _unary(lambda cv, x, ct: cv.node("Div", [cv.node("Log", [x]),
                                                          cv.scalar(math.log(10), ct)]))
RULES["exp2"] = _unary(lambda cv, x, ct: cv.node("Pow", [cv.scalar(2, ct), x]))
RULES["erfc"] = _unary(lambda cv, x, ct: cv.node("Sub", [cv.scalar(1, ct), cv.node("Erf", [x])]))
def _trunc(cv, x, ct):
    return cv.node("Mul", [cv.node("Sign", [x]), cv.node("Floor", [cv.node("Abs", [x])])])


RULES["trunc"] = _unary(_trunc)
RULES["isinf"] = _unary(lambda cv, x, ct: cv.node("IsInf", [x]) if ct.is_floating_point else
                        cv.node("Equal", [x, cv.node("Add", [x, cv.scalar(1, ct)])]))


RULES["isfinite"] = _unary(lambda cv, x, ct: cv.node("Not", [cv.node("Or", [
    cv.node("IsInf", [x]), cv.node("IsNaN", [x])])]) if ct.is_floating_point else
    cv.node("Equal", [x, x]))
RULES["frac"] = _unary(lambda cv, x, ct: cv.node("Sub", [x, _trunc(cv, x, ct)]))
RULES["deg2rad"] = _unary(lambda cv, x, ct: cv.node("Mul", [x, cv.scalar(math.pi / 180, ct)]))
RULES["rad2deg"] = _unary(lambda cv, x, ct: cv.node("Mul", [x, cv.scalar(180 / math.pi, ct)]))


@rule("logaddexp", "hypot", "heaviside")
def _binary_composites(cv, node, args, attrs):
    (a, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    if node.op == "logaddexp":
        m = cv.node("Max", [a, b])
        d = cv.node("Neg", [cv.node("Abs", [cv.node("Sub", [a, b])])])
        out = cv.node("Add", [m, cv.node("Log", [cv.node("Add", [cv.scalar(1, ct),
                                                                 cv.node("Exp", [d])])])])
    elif node.op == "hypot":
        out = cv.node("Sqrt", [cv.node("Add", [cv.node("Mul", [a, a]), cv.node("Mul", [b, b])])])
    else:
        zero = cv.scalar(0, ct)
        step = cv.cast(cv.node("Greater", [a, zero]), D.bool, ct)
        out = cv.node("Where", [cv.node("Equal", [a, zero]), b, step])
    return cv.cast(out, ct, odt)


@rule("nan_to_num")
def _nan_to_num(cv, node, args, attrs):
    (x,), ct, odt = _elementwise_operands(cv, node, args[:1], {})
    if not ct.is_floating_point:
        return cv.cast(x, ct, odt)
    info = np.finfo(ct.np)
    nan = attrs.get("nan", 0.0)
    posinf = attrs.get("posinf")
    neginf = attrs.get("neginf")
    x = cv.node("Where", [cv.node("IsNaN", [x]), cv.scalar(0.0 if nan is None else nan, ct), x])
    x = cv.node("Where", [cv.node("IsInf", [x], detect_negative=0),
                          cv.scalar(info.max if posinf is None else posinf, ct), x])
    x = cv.node("Where", [cv.node("IsInf", [x], detect_positive=0),
                          cv.scalar(info.min if neginf is None else neginf, ct), x])
    return cv.cast(x, ct, odt)


@rule("atan2")
def _atan2(cv, node, args, attrs):
    (y, x), ct, odt = _elementwise_operands(cv, node, args, attrs)
    zero = cv.scalar(0, ct)
    base = cv.node("Atan", [cv.node("Div", [y, x])])
    turn = cv.node("Where", [cv.node("GreaterOrEqual", [y, zero]), cv.scalar(math.pi, ct),
                             cv.scalar(-math.pi, ct)])
    out = cv.node("Add", [base, cv.node("Where", [cv.node("Less", [x, zero]), turn, zero])])
    vertical = cv.node("Where", [cv.node("Greater", [y, zero]), cv.scalar(math.pi / 2, ct),
                                 cv.node("Where", [cv.node("Less", [y, zero]),
                                                   cv.scalar(-math.pi / 2, ct), zero])])
    return cv.cast(cv.node("Where", [cv.node("Equal", [x, zero]), vertical, out]), ct, odt)


@rule("logaddexp2")
def _logaddexp2(cv, node, args, attrs):
    (a, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    m = cv.node("Max", [a, b])
    d = cv.node("Neg", [cv.node("Abs", [cv.node("Sub", [a, b])])])
    s = cv.node("Log", [cv.node("Add", [cv.scalar(1, ct), cv.node("Pow", [cv.scalar(2, ct), d])])])
    return cv.cast(cv.node("Add", [m, cv.node("Div", [s, cv.scalar(math.log(2), ct)])]), ct, odt)


@rule("logit")
def _logit(cv, node, args, attrs):
    (x,), ct, odt = _elementwise_operands(cv, node, args[:1], {})
    eps = attrs.get("eps")
    if eps is not None:
        x = cv.node("Min", [cv.node("Max", [x, cv.scalar(eps, ct)]), cv.scalar(1 - eps, ct)])
    return cv.cast(cv.node("Log", [cv.node("Div", [x, cv.node("Sub", [cv.scalar(1, ct), x])])]),
                   ct, odt)


@rule("sinc")
def _sinc(cv, node, args, attrs):
    (x,), ct, odt = _elementwise_operands(cv, node, args, attrs)
    px = cv.node("Mul", [x, cv.scalar(math.pi, ct)])
    out = cv.node("Where", [cv.node("Equal", [x, cv.scalar(0, ct)]), cv.scalar(1, ct),
                            cv.node("Div", [cv.node("Sin", [px]), px])])
    return cv.cast(out, ct, odt)


@rule("round")
def _round(cv, node, args, attrs):
    (x,), ct, odt = _elementwise_operands(cv, node, args[:1], {})
    if attrs.get("decimals", 0):
        k = cv.scalar(10.0 ** attrs["decimals"], ct)
        return cv.cast(cv.node("Div", [cv.node("Round", [cv.node("Mul", [x, k])]), k]), ct, odt)
    return cv.cast(cv.node("Round", [x]), ct, odt)


@rule("ne")
def _ne(cv, node, args, attrs):
    (a, b), _, odt = _elementwise_operands(cv, node, args, attrs)
    return cv.cast(cv.node("Not", [cv.node("Equal", [a, b])]), D.bool, odt)


@rule("add", "sub")
def _add(cv, node, args, attrs):
    (a, b), ct, odt = _elementwise_operands(cv, node, args, {})
    alpha = attrs.get("alpha", 1)
    if alpha != 1:
        b = cv.node("Mul", [b, cv.number(alpha, ct)])
    if ct is D.bool:
        out = cv.node("Or" if node.op == "add" else "Xor", [a, b])
    else:
        out = cv.node("Add" if node.op == "add" else "Sub", [a, b])
    return cv.cast(out, ct, odt)


@rule("div")
def _div(cv, node, args, attrs):
    (a, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    mode = attrs.get("rounding_mode")
    if mode is None or not ct.is_floating_point:
        out = cv.node("Div", [a, b])
        if mode == "floor" and not ct.is_floating_point:
            raise UnsupportedOp("integer floor division")
    else:
        q = cv.node("Div", [a, b])
        out = cv.node("Floor", [q]) if mode == "floor" else \
            cv.node("Mul", [cv.node("Sign", [q]), cv.node("Floor", [cv.node("Abs", [q])])])
    return cv.cast(out, ct, odt)


@rule("remainder", "fmod")
def _remainder(cv, node, args, attrs):
    (a, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    if ct.is_floating_point:
        if node.op == "fmod":
            return cv.cast(cv.node("Mod", [a, b], fmod=1), ct, odt)
        q = cv.node("Floor", [cv.node("Div", [a, b])])
        return cv.cast(cv.node("Sub", [a, cv.node("Mul", [q, b])]), ct, odt)
    return cv.cast(cv.node("Mod", [a, b], fmod=int(node.op == "fmod")), ct, odt)


@rule("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _bitwise(cv, node, args, attrs):
    ops, ct, odt = _elementwise_operands(cv, node, args, attrs)
    name = node.op.split("_")[1]
    if ct is D.bool:
        onnx_op = {"and": "And", "or": "Or", "xor": "Xor", "not": "Not"}[name]
    else:
        onnx_op = {"and": "BitwiseAnd", "or": "BitwiseOr", "xor": "BitwiseXor",
                   "not": "BitwiseNot"}[name]
    return cv.cast(cv.node(onnx_op, ops), ct, odt)


@rule("where")
def _where(cv, node, args, attrs):
    from dynograph.export._compiler import Value
    cond_raw = node.args[0]
    cond = cv.cast(args[0], cond_raw.type.dtype, D.bool) if isinstance(cond_raw, Value) else \
        cv.scalar(bool(cond_raw), D.bool)
    (_, a, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    return cv.cast(cv.node("Where", [cond, a, b]), ct, odt)


@rule("masked_fill")
def _masked_fill(cv, node, args, attrs):
    from dynograph.export._compiler import Value
    x_raw, mask_raw, value_raw = node.args
    dt = x_raw.type.dtype
    mask = cv.cast(args[1], mask_raw.type.dtype, D.bool)
    value = cv.cast(args[2], value_raw.type.dtype, dt) if isinstance(value_raw, Value) else \
        cv.number(value_raw, dt)
    return cv.node("Where", [mask, value, args[0]])


@rule("clamp")
def _clamp(cv, node, args, attrs):
    padded = list(args) + [None] * (3 - len(args))
    raw = list(node.args) + [None] * (3 - len(node.args))
    (x, lo, hi), ct, odt = _elementwise_operands(cv, _Args(node.op, raw), padded, attrs)
    if lo is not None:
        x = cv.node("Max", [x, lo])
    if hi is not None:
        x = cv.node("Min", [x, hi])
    return cv.cast(x, ct, odt)


class _Args:
    """A node with other arguments (the rules read op, args, attrs and outs)."""

    def __init__(self, op, args, attrs=None, outs=()):
        self.op, self.args, self.attrs, self.outs = op, tuple(args), attrs or {}, outs


@rule("prelu")
def _prelu(cv, node, args, attrs):
    (x, w), ct, odt = _elementwise_operands(cv, node, args, attrs)
    pos = cv.node("Greater", [x, cv.scalar(0, ct)])
    return cv.cast(cv.node("Where", [pos, x, cv.node("Mul", [w, x])]), ct, odt)


@rule("xlogy")
def _xlogy(cv, node, args, attrs):
    (x, y), ct, odt = _elementwise_operands(cv, node, args, attrs)
    zero = cv.scalar(0, ct)
    prod = cv.node("Mul", [x, cv.node("Log", [y])])
    out = cv.node("Where", [cv.node("And", [cv.node("Equal", [x, zero]),
                                            cv.node("Not", [cv.node("IsNaN", [y])])]), zero, prod])
    return cv.cast(out, ct, odt)


@rule("addcmul", "addcdiv")
def _addc(cv, node, args, attrs):
    (x, a, b), ct, odt = _elementwise_operands(cv, node, args, {})
    t = cv.node("Mul" if node.op == "addcmul" else "Div", [a, b])
    value = attrs.get("value", 1)
    if value != 1:
        t = cv.node("Mul", [t, cv.number(value, ct)])
    return cv.cast(cv.node("Add", [x, t]), ct, odt)


@rule("lerp")
def _lerp(cv, node, args, attrs):
    (a, b, w), ct, odt = _elementwise_operands(cv, node, args, attrs)
    return cv.cast(cv.node("Add", [a, cv.node("Mul", [w, cv.node("Sub", [b, a])])]), ct, odt)


@rule("affine_normalize")
def _affine_normalize(cv, node, args, attrs):
    (x, mean, var, w, b), ct, odt = _elementwise_operands(cv, node, args, attrs)
    rstd = cv.node("Reciprocal", [cv.node("Sqrt", [cv.node("Add", [var, cv.number(attrs["eps"], ct)])])])
    out = cv.node("Mul", [cv.node("Sub", [x, mean]), rstd])
    if not (isinstance(node.args[3], (int, float)) and node.args[3] == 1):
        out = cv.node("Mul", [out, w])
    if not (isinstance(node.args[4], (int, float)) and node.args[4] == 0):
        out = cv.node("Add", [out, b])
    return cv.cast(out, ct, odt)


# ---------------------------------------------------------------- reductions

def _reduction_input(cv, node, x):
    """The operand cast to the result's dtype (a sum's dtype=, an integer mean)."""
    src = node.args[0].type.dtype
    out = node.outs[0].type.dtype
    return cv.cast(x, src, out), out


@rule("sum", "mean", "amax", "amin", "prod")
def _reduce(cv, node, args, attrs):
    x, dt = _reduction_input(cv, node, args[0])
    op = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
          "prod": "ReduceProd"}[node.op]
    if dt is D.bool and op in ("ReduceMax", "ReduceMin"):
        x = cv.cast(x, D.bool, D.int32)
        return cv.cast(cv.reduce(op, x, attrs.get("dim"), attrs.get("keepdim", False)), D.int32, D.bool)
    return cv.reduce(op, x, attrs.get("dim"), attrs.get("keepdim", False))


@rule("max", "min")
def _max_all(cv, node, args, attrs):
    return cv.reduce("ReduceMax" if node.op == "max" else "ReduceMin", args[0], None, False)


@rule("max_dim", "min_dim")
def _max_dim(cv, node, args, attrs):
    dim, keep = attrs["dim"], attrs.get("keepdim", False)
    values = cv.reduce("ReduceMax" if node.op == "max_dim" else "ReduceMin", args[0], [dim], keep)
    indices = cv.node("ArgMax" if node.op == "max_dim" else "ArgMin", [args[0]], axis=dim,
                      keepdims=int(keep))
    return [values, indices]


@rule("argmax", "argmin")
def _argmax(cv, node, args, attrs):
    op = "ArgMax" if node.op == "argmax" else "ArgMin"
    dim, keep = attrs.get("dim"), attrs.get("keepdim", False)
    x = args[0]
    if dim is None:
        x = cv.node("Reshape", [x, cv.ints([-1])])
        out = cv.node(op, [x], axis=0, keepdims=0)
        if keep:
            out = cv.node("Reshape", [out, cv.ints([1] * len(node.args[0].type.shape))])
        return out
    return cv.node(op, [x], axis=dim, keepdims=int(keep))


@rule("var", "std", "var_mean", "std_mean")
def _var(cv, node, args, attrs):
    x = args[0]
    dims = attrs.get("dim")
    shape = node.args[0].type.shape
    dims_list = list(range(len(shape))) if dims is None else \
        [d % len(shape) for d in (dims if isinstance(dims, (tuple, list)) else [dims])]
    dt = node.outs[0].type.dtype
    keep = attrs.get("keepdim", False)
    mean = cv.reduce("ReduceMean", x, dims_list, True)
    sq = cv.node("Mul", [cv.node("Sub", [x, mean])] * 2)
    total = cv.reduce("ReduceSum", sq, dims_list, keep)
    n = 1
    for d in dims_list:
        if not isinstance(shape[d], int):
            raise UnsupportedOp("a variance over the symbolic batch dimension")
        n *= shape[d]
    out = cv.node("Div", [total, cv.scalar(max(n - attrs.get("correction", 1), 0), dt)])
    if node.op.startswith("std"):
        out = cv.node("Sqrt", [out])
    if node.op.endswith("_mean"):
        return [out, mean if keep else cv.reduce("ReduceMean", x, dims_list, False)]
    return out


@rule("aminmax")
def _aminmax(cv, node, args, attrs):
    dim, keep = attrs.get("dim"), attrs.get("keepdim", False)
    dims = None if dim is None else [dim]
    return [cv.reduce("ReduceMin", args[0], dims, keep), cv.reduce("ReduceMax", args[0], dims, keep)]


@rule("nansum")
def _nansum(cv, node, args, attrs):
    x, dt = _reduction_input(cv, node, args[0])
    if dt.is_floating_point:
        x = cv.node("Where", [cv.node("IsNaN", [x]), cv.scalar(0, dt), x])
    return cv.reduce("ReduceSum", x, attrs.get("dim"), attrs.get("keepdim", False))


@rule("count_nonzero")
def _count_nonzero(cv, node, args, attrs):
    src = node.args[0].type.dtype
    nonzero = cv.node("Not", [cv.node("Equal", [args[0], cv.scalar(0, src)])]) \
        if src is not D.bool else args[0]
    dim = attrs.get("dim")
    dims = None if dim is None else (list(dim) if isinstance(dim, (tuple, list)) else [dim])
    return cv.reduce("ReduceSum", cv.cast(nonzero, D.bool, D.int64), dims, False)


@rule("logsumexp")
def _logsumexp(cv, node, args, attrs):
    dims, keep = attrs.get("dim"), attrs.get("keepdim", False)
    m = cv.reduce("ReduceMax", args[0], dims, True)
    s = cv.reduce("ReduceSum", cv.node("Exp", [cv.node("Sub", [args[0], m])]), dims, keep)
    m2 = m if keep else cv.reduce("ReduceMax", args[0], dims, False)
    return cv.node("Add", [cv.node("Log", [s]), m2])


@rule("linalg_vector_norm")
def _norm(cv, node, args, attrs):
    x, dt = _reduction_input(cv, node, args[0])
    dims, keep, ord = attrs.get("dim"), attrs.get("keepdim", False), attrs.get("ord", 2)
    if ord == 2:
        return cv.reduce("ReduceL2", x, dims, keep)
    if ord == 1:
        return cv.reduce("ReduceL1", x, dims, keep)
    if ord == math.inf:
        return cv.reduce("ReduceMax", cv.node("Abs", [x]), dims, keep)
    p = cv.scalar(ord, dt)
    s = cv.reduce("ReduceSum", cv.node("Pow", [cv.node("Abs", [x]), p]), dims, keep)
    return cv.node("Pow", [s, cv.scalar(1.0 / ord, dt)])


@rule("all", "any")
def _all(cv, node, args, attrs):
    x = cv.cast(args[0], node.args[0].type.dtype, D.bool)
    x = cv.cast(x, D.bool, D.int32)
    out = cv.reduce("ReduceMin" if node.op == "all" else "ReduceMax", x, attrs.get("dim"),
                    attrs.get("keepdim", False))
    return cv.cast(out, D.int32, node.outs[0].type.dtype)


# ---------------------------------------------------------------- shapes and movement

@rule("view", "unsafe_view")
def _view(cv, node, args, attrs):
    return cv.node("Reshape", [args[0], cv.ints(node.outs[0].type.shape)])


@rule("clone", "alias", "copy")
def _identity(cv, node, args, attrs):
    src = args[-1] if node.op == "copy" else args[0]
    raw = node.args[-1] if node.op == "copy" else node.args[0]
    from dynograph.export._compiler import Value
    if not isinstance(raw, Value):
        return cv.node("Expand", [cv.number(raw, node.outs[0].type.dtype),
                                  cv.ints(node.outs[0].type.shape)])
    src = cv.cast(src, raw.type.dtype, node.outs[0].type.dtype)
    if tuple(raw.type.shape) != tuple(node.outs[0].type.shape):
        return cv.node("Expand", [src, cv.ints(node.outs[0].type.shape)])
    return cv.node("Identity", [src])


@rule("to_copy")
def _to_copy(cv, node, args, attrs):
    return cv.node("Identity", [cv.cast(args[0], node.args[0].type.dtype, node.outs[0].type.dtype)])


@rule("t")
def _t(cv, node, args, attrs):
    if len(node.args[0].type.shape) < 2:
        return cv.node("Identity", [args[0]])
    return cv.node("Transpose", [args[0]], perm=[1, 0])


@rule("transpose")
def _transpose(cv, node, args, attrs):
    n = len(node.args[0].type.shape)
    perm = list(range(n))
    a, b = attrs["dim0"] % max(n, 1), attrs["dim1"] % max(n, 1)
    perm[a], perm[b] = perm[b], perm[a]
    return cv.node("Transpose", [args[0]], perm=perm)


@rule("permute")
def _permute(cv, node, args, attrs):
    n = len(node.args[0].type.shape)
    return cv.node("Transpose", [args[0]], perm=[d % n for d in attrs["dims"]])


@rule("expand")
def _expand(cv, node, args, attrs):
    return cv.node("Expand", [args[0], cv.ints(node.outs[0].type.shape)])


@rule("unsqueeze")
def _unsqueeze(cv, node, args, attrs):
    n = len(node.outs[0].type.shape)
    return cv.node("Unsqueeze", [args[0], cv.ints([attrs["dim"] % n])])


@rule("squeeze", "squeeze_dim", "squeeze_dims")
def _squeeze(cv, node, args, attrs):
    # the result's shape says which dims went (a dim of size other than 1 stays)
    return cv.node("Reshape", [args[0], cv.ints(node.outs[0].type.shape)])


@rule("cat", "stack")
def _cat(cv, node, args, attrs):
    out_dt = node.outs[0].type.dtype
    parts = [cv.cast(a, v.type.dtype, out_dt) for a, v in zip(args, node.args)]
    dim = attrs["dim"]
    if node.op == "stack":
        n = len(node.outs[0].type.shape)
        dim %= n
        parts = [cv.node("Unsqueeze", [p, cv.ints([dim])]) for p in parts]
    else:
        dim %= len(node.outs[0].type.shape)
    return cv.node("Concat", parts, axis=dim)


@rule("split", "split_with_sizes", "unbind")
def _split(cv, node, args, attrs):
    n = len(node.args[0].type.shape)
    dim = attrs.get("dim", 0) % n
    sizes = [v.type.shape[dim] for v in node.outs] if node.op != "unbind" else [1] * len(node.outs)
    outs = cv.node("Split", [args[0], cv.ints(sizes)], n_out=len(node.outs), axis=dim)
    outs = outs if isinstance(outs, list) else [outs]
    if node.op == "unbind":
        outs = [cv.node("Squeeze", [o, cv.ints([dim])]) for o in outs]
    return outs


@rule("slice")
def _slice(cv, node, args, attrs):
    shape = node.args[0].type.shape
    dim = attrs["dim"] % len(shape)
    start, end, step = attrs["start"], attrs["end"], attrs["step"]
    size = shape[dim]
    if isinstance(end, int) and end >= 2 ** 62:
        end = 2 ** 62
    if isinstance(start, int) and not isinstance(size, int) and start < 0:
        raise UnsupportedOp("a negative slice start on the symbolic batch dimension")
    return cv.node("Slice", [args[0], cv.ints([start if start is not None else 0]),
                             cv.ints([end]), cv.ints([dim]), cv.ints([step])])


@rule("narrow_copy")
def _narrow(cv, node, args, attrs):
    from dynograph.export._compiler import Sym
    start, length = attrs["start"], attrs["length"]
    end = Sym(start.a, start.b + length) if isinstance(start, Sym) else start + length
    return cv.node("Slice", [args[0], cv.ints([start]), cv.ints([end]), cv.ints([attrs["dim"]])])


@rule("select")
def _select(cv, node, args, attrs):
    shape = node.args[0].type.shape
    dim = attrs["dim"] % len(shape)
    index = attrs["index"]
    if isinstance(index, int) and index < 0:
        size = shape[dim]
        if not isinstance(size, int):
            from dynograph.export._compiler import Sym
            index = Sym(1, index)
        else:
            index = index + size
    idx = cv.ints([index])
    return cv.node("Squeeze", [cv.node("Gather", [args[0], idx], axis=dim), cv.ints([dim])])


@rule("index_select")
def _index_select(cv, node, args, attrs):
    idx = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    return cv.node("Gather", [args[0], idx], axis=attrs["dim"] % len(node.args[0].type.shape))


@rule("embedding")
def _embedding(cv, node, args, attrs):
    idx = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    return cv.node("Gather", [args[0], idx], axis=0)


@rule("gather")
def _gather(cv, node, args, attrs):
    idx = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    return cv.node("GatherElements", [args[0], idx], axis=attrs["dim"] % len(node.args[0].type.shape))


@rule("flip")
def _flip(cv, node, args, attrs):
    n = len(node.args[0].type.shape)
    dims = [d % n for d in attrs["dims"]]
    big = 2 ** 62
    return cv.node("Slice", [args[0], cv.ints([-1] * len(dims)), cv.ints([-big] * len(dims)),
                             cv.ints(dims), cv.ints([-1] * len(dims))])


@rule("repeat")
def _repeat(cv, node, args, attrs):
    reps = list(attrs["repeats"])
    x = args[0]
    extra = len(reps) - len(node.args[0].type.shape)
    if extra:
        x = cv.node("Reshape", [x, cv.ints([1] * extra + list(node.args[0].type.shape))])
    return cv.node("Tile", [x, cv.ints(reps)])


def _strided_index(cv, size, stride, offset):
    """The flat element index of each element of a strided window: a constant when every size
    is known, else computed from the batch size."""
    from dynograph.export._compiler import Sym
    if any(isinstance(v, Sym) for v in stride):
        raise UnsupportedOp("a strided window whose strides depend on the batch size")
    if not any(isinstance(n, Sym) for n in tuple(size) + (offset,)):
        index = np.full(tuple(size), offset, dtype=np.int64)
        for d, (n, st) in enumerate(zip(size, stride)):
            r = [1] * len(size)
            r[d] = n
            index = index + (np.arange(n, dtype=np.int64) * st).reshape(r)
        return cv.const(index, "index")
    index = cv.node("Squeeze", [cv.ints([offset]), cv.ints([0])])
    for d, (n, st) in enumerate(zip(size, stride)):
        r = [1] * len(size)
        r[d] = -1
        steps = cv.node("Range", [cv.const(np.array(0, np.int64)),
                                  cv.node("Squeeze", [cv.ints([n]), cv.ints([0])]),
                                  cv.const(np.array(1, np.int64))])
        steps = cv.node("Reshape", [cv.node("Mul", [steps, cv.const(np.array(st, np.int64))]),
                                    cv.ints(r)])
        index = cv.node("Add", [index, steps])
    return index


@rule("strided_view")
def _strided_view(cv, node, args, attrs):
    index = _strided_index(cv, attrs["size"], attrs["stride"], attrs["offset"])
    flat = cv.node("Reshape", [args[0], cv.ints([-1])])
    return cv.node("Gather", [flat, index], axis=0)


@rule("strided_scatter")
def _strided_scatter(cv, node, args, attrs):
    """The window's elements replaced: a scatter into the flattened buffer."""
    dt = node.outs[0].type.dtype
    index = _strided_index(cv, attrs["size"], attrs["stride"], attrs["offset"])
    src = cv.cast(args[1], node.args[1].type.dtype, dt)
    src = cv.node("Expand", [src, cv.ints(attrs["size"])])
    flat = cv.node("ScatterElements", [cv.node("Reshape", [args[0], cv.ints([-1])]),
                                       cv.node("Reshape", [index, cv.ints([-1])]),
                                       cv.node("Reshape", [src, cv.ints([-1])])], axis=0)
    return cv.node("Reshape", [flat, cv.ints(node.outs[0].type.shape)])


def _positions(cv, node, dim, positions, like):
    """int64 indices holding ``positions`` along ``dim``, broadcast to the shape of ``like``."""
    rank = len(node.outs[0].type.shape)
    r = [1] * rank
    r[dim] = -1
    idx = cv.node("Reshape", [positions, cv.ints(r)])
    return cv.node("Expand", [idx, cv.node("Shape", [like])])


@rule("slice_scatter", "select_scatter")
def _slice_scatter(cv, node, args, attrs):
    shape = node.outs[0].type.shape
    dim = attrs["dim"] % len(shape)
    dt = node.outs[0].type.dtype
    src = cv.cast(args[1], node.args[1].type.dtype, dt)
    if node.op == "select_scatter":
        index = attrs["index"]
        if index < 0:
            if not isinstance(shape[dim], int):
                raise UnsupportedOp("a negative index into the symbolic batch dimension")
            index += shape[dim]
        src = cv.node("Unsqueeze", [src, cv.ints([dim])])
        positions = cv.const(np.array([index], np.int64))
    else:
        start, step = attrs["start"] or 0, attrs["step"]
        n = node.args[1].type.shape[dim]
        if not all(isinstance(v, int) for v in (start, n, step)):
            raise UnsupportedOp("a slice write whose bounds depend on the batch size")
        if start < 0:
            if not isinstance(shape[dim], int):
                raise UnsupportedOp("a negative slice start in the symbolic batch dimension")
            start += shape[dim]
        positions = cv.const(start + step * np.arange(n, dtype=np.int64))
    return cv.node("ScatterElements", [args[0], _positions(cv, node, dim, positions, src), src],
                   axis=dim)


@rule("scatter", "scatter_add", "scatter_value", "scatter_reduce")
def _scatter(cv, node, args, attrs):
    from dynograph.export._compiler import Value
    dt = node.outs[0].type.dtype
    dim = attrs["dim"] % len(node.outs[0].type.shape)
    index = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    if node.op == "scatter_value":
        src = cv.node("Expand", [cv.number(attrs["value"], dt), cv.node("Shape", [index])])
    else:
        raw = node.args[2]
        src = cv.cast(args[2], raw.type.dtype, dt) if isinstance(raw, Value) else \
            cv.node("Expand", [cv.number(raw, dt), cv.node("Shape", [index])])
    # the index may cover only part of src: the scatter reads src's matching corner
    src = cv.node("Slice", [src, cv.ints([0] * len(node.args[1].type.shape)),
                            cv.node("Shape", [index])])
    reduce = {"scatter_add": "add"}.get(node.op, attrs.get("reduce"))
    if node.op == "scatter_reduce":
        if not attrs.get("include_self", True):
            raise UnsupportedOp("scatter_reduce with include_self=False")
        reduce = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(reduce)
        if reduce is None:
            raise UnsupportedOp(f"scatter_reduce with reduce={attrs.get('reduce')!r}")
    else:
        reduce = {None: "none", "add": "add", "multiply": "mul"}[reduce]
    return cv.node("ScatterElements", [args[0], index, src], axis=dim, reduction=reduce)


@rule("index_add", "index_copy")
def _index_add(cv, node, args, attrs):
    dt = node.outs[0].type.dtype
    dim = attrs["dim"] % len(node.outs[0].type.shape)
    src = cv.cast(args[2], node.args[2].type.dtype, dt)
    alpha = attrs.get("alpha", 1)
    if alpha != 1:
        src = cv.node("Mul", [src, cv.number(alpha, dt)])
    index = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    return cv.node("ScatterElements", [args[0], _positions(cv, node, dim, index, src), src],
                   axis=dim, reduction="add" if node.op == "index_add" else "none")


@rule("roll")
def _roll(cv, node, args, attrs):
    shape = node.args[0].type.shape
    shifts, dims = list(attrs["shifts"]), list(attrs["dims"])
    x = args[0]
    if not dims:                     # roll of the flattened tensor
        x = cv.node("Reshape", [x, cv.ints([-1])])
        n = 1
        for k in shape:
            n *= k if isinstance(k, int) else 0
        if not n:
            raise UnsupportedOp("roll over the symbolic batch dimension")
        x = _roll_axis(cv, x, 0, n, shifts[0])
        return cv.node("Reshape", [x, cv.ints(shape)])
    for shift, d in zip(shifts, dims):
        d %= len(shape)
        if not isinstance(shape[d], int):
            raise UnsupportedOp("roll over the symbolic batch dimension")
        x = _roll_axis(cv, x, d, shape[d], shift)
    return x


def _roll_axis(cv, x, axis, n, shift):
    shift %= max(n, 1)
    if not shift:
        return x
    tail = cv.node("Slice", [x, cv.ints([n - shift]), cv.ints([n]), cv.ints([axis])])
    head = cv.node("Slice", [x, cv.ints([0]), cv.ints([n - shift]), cv.ints([axis])])
    return cv.node("Concat", [tail, head], axis=axis)


def _contiguous_strides(shape):
    """Element strides of a contiguous tensor (only its first size may be symbolic)."""
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        if not isinstance(shape[d], int):
            if d:
                raise UnsupportedOp("a strided view across the symbolic batch dimension")
            break
        step *= shape[d]
    return strides


def _view_of(cv, x, size, stride, offset):
    index = _strided_index(cv, size, stride, offset)
    return cv.node("Gather", [cv.node("Reshape", [x, cv.ints([-1])]), index], axis=0)


@rule("diagonal", "diagonal_copy")
def _diagonal(cv, node, args, attrs):
    shape = node.args[0].type.shape
    st = _contiguous_strides(shape)
    d1, d2, k = attrs["dim1"] % len(shape), attrs["dim2"] % len(shape), attrs["offset"]
    rest = [d for d in range(len(shape)) if d not in (d1, d2)]
    offset = k * st[d2] if k >= 0 else -k * st[d1]
    size = list(node.outs[0].type.shape)
    return _view_of(cv, args[0], size, [st[d] for d in rest] + [st[d1] + st[d2]], offset)


@rule("unfold")
def _tensor_unfold(cv, node, args, attrs):
    shape = node.args[0].type.shape
    st = _contiguous_strides(shape)
    d = attrs["dimension"] % max(len(shape), 1)
    stride = list(st)
    stride[d] = st[d] * attrs["step"]
    return _view_of(cv, args[0], list(node.outs[0].type.shape), stride + [st[d]], 0)


@rule("trace")
def _trace(cv, node, args, attrs):
    n, m = node.args[0].type.shape
    diag = _view_of(cv, args[0], [min(n, m)], [m + 1], 0)
    x = cv.cast(diag, node.args[0].type.dtype, node.outs[0].type.dtype)
    return cv.node("ReduceSum", [x], keepdims=0)


@rule("take")
def _take(cv, node, args, attrs):
    n = 1
    for k in node.args[0].type.shape:
        if not isinstance(k, int):
            raise UnsupportedOp("take from a tensor with a symbolic size")
        n *= k
    idx = cv.cast(args[1], node.args[1].type.dtype, D.int64)
    idx = cv.node("Where", [cv.node("Less", [idx, cv.scalar(0, D.int64)]),
                            cv.node("Add", [idx, cv.scalar(n, D.int64)]), idx])
    return cv.node("Gather", [cv.node("Reshape", [args[0], cv.ints([-1])]), idx], axis=0)


@rule("rot90")
def _rot90(cv, node, args, attrs):
    shape = node.args[0].type.shape
    a, b = (d % len(shape) for d in attrs["dims"])
    k = attrs["k"] % 4
    x = args[0]
    big = 2 ** 62

    def flip(t, d):
        return cv.node("Slice", [t, cv.ints([-1]), cv.ints([-big]), cv.ints([d]), cv.ints([-1])])
    perm = list(range(len(shape)))
    perm[a], perm[b] = perm[b], perm[a]
    if k == 1:
        return cv.node("Transpose", [flip(x, b)], perm=perm)
    if k == 2:
        return flip(flip(x, a), b)
    if k == 3:
        return cv.node("Transpose", [flip(x, a)], perm=perm)
    return cv.node("Identity", [x])


@rule("full")
def _full(cv, node, args, attrs):
    dt = node.outs[0].type.dtype
    value = cv.number(attrs["fill_value"], dt)
    return cv.node("Expand", [value, cv.ints(node.outs[0].type.shape)])


@rule("arange")
def _arange(cv, node, args, attrs):
    dt = node.outs[0].type.dtype
    return cv.node("Range", [cv.number(attrs["start"], dt), cv.number(attrs["end"], dt),
                             cv.number(attrs["step"], dt)])


@rule("linspace", "logspace", "eye", "empty")
def _constant(cv, node, args, attrs):
    """Creation ops with literal arguments: their values, computed by the op's own code."""
    from dynograph.export._compiler import evaluate, has_sym
    if has_sym(node.args) or has_sym(tuple(attrs.values())):
        raise UnsupportedOp("a tensor created with a size that depends on the batch size")
    return cv.const(np.asarray(evaluate(node.op, node.args, attrs)), node.op)


@rule("tril", "triu")
def _tri(cv, node, args, attrs):
    return cv.node("Trilu", [args[0], cv.const(np.array(attrs.get("diagonal", 0), np.int64))],
                   upper=int(node.op == "triu"))


@rule("cumsum")
def _cumsum(cv, node, args, attrs):
    x = cv.cast(args[0], node.args[0].type.dtype, node.outs[0].type.dtype)
    return cv.node("CumSum", [x, cv.const(np.array(attrs["dim"], np.int64))])


# ---------------------------------------------------------------- linear algebra

@rule("mm", "bmm", "matmul", "mv")
def _matmul(cv, node, args, attrs):
    return cv.node("MatMul", list(args))


@rule("dot", "vdot")
def _dot(cv, node, args, attrs):
    return cv.node("ReduceSum", [cv.node("Mul", list(args))], keepdims=0)


@rule("addmm", "baddbmm", "addmv", "addbmm", "addr")
def _addmm(cv, node, args, attrs):
    dt = node.outs[0].type.dtype
    if node.op == "addr":
        prod = cv.node("Mul", [cv.node("Unsqueeze", [args[1], cv.ints([1])]),
                               cv.node("Unsqueeze", [args[2], cv.ints([0])])])
    else:
        prod = cv.node("MatMul", [args[1], args[2]])
    if node.op == "addbmm":
        prod = cv.node("ReduceSum", [prod, cv.ints([0])], keepdims=0)
    alpha, beta = attrs.get("alpha", 1), attrs.get("beta", 1)
    if alpha != 1:
        prod = cv.node("Mul", [prod, cv.scalar(alpha, dt)])
    if beta == 0:
        return prod
    bias = args[0] if beta == 1 else cv.node("Mul", [args[0], cv.scalar(beta, dt)])
    return cv.node("Add", [bias, prod])


@rule("convolution")
def _convolution(cv, node, args, attrs):
    x, w, b = args[0], args[1], args[2] if len(args) > 2 else None
    nd = len(node.args[0].type.shape) - 2
    stride, padding, dilation = (list(attrs[k]) for k in ("stride", "padding", "dilation"))
    stride, padding, dilation = (v * nd if len(v) == 1 else v for v in (stride, padding, dilation))
    inputs = [x, w] + ([b] if b is not None and node.args[2] is not None else [])
    if attrs["transposed"]:
        extra = list(attrs["output_padding"])
        return cv.node("ConvTranspose", inputs, strides=stride, pads=padding + padding,
                       dilations=dilation, group=attrs["groups"],
                       output_padding=extra * nd if len(extra) == 1 else extra)
    return cv.node("Conv", inputs, strides=stride, pads=padding + padding, dilations=dilation,
                   group=attrs["groups"])


# ---------------------------------------------------------------- pooling

def _pool_geometry(attrs, nd):
    k = list(attrs["kernel_size"])
    s = list(attrs["stride"]) or k
    p = list(attrs["padding"])
    return (k * nd if len(k) == 1 else k), (s * nd if len(s) == 1 else s), \
        (p * nd if len(p) == 1 else p)


@rule("max_pool2d_with_indices", "max_pool3d_with_indices")
def _max_pool(cv, node, args, attrs):
    nd = len(node.args[0].type.shape) - 2
    k, s, p = _pool_geometry(attrs, nd)
    d = list(attrs.get("dilation", (1,) * nd))
    if node.outs[1] not in cv.used:
        return [cv.node("MaxPool", [args[0]], kernel_shape=k, strides=s, pads=p + p,
                        dilations=d * nd if len(d) == 1 else d,
                        ceil_mode=int(attrs["ceil_mode"])), None]
    values, flat = cv.node("MaxPool", [args[0]], n_out=2, kernel_shape=k, strides=s, pads=p + p,
                           dilations=d * nd if len(d) == 1 else d,
                           ceil_mode=int(attrs["ceil_mode"]))
    # ONNX numbers the elements of the whole input, torch those of each plane
    plane = 1
    for n in node.args[0].type.shape[-nd:]:
        if not isinstance(n, int):
            return [values, None]
        plane *= n
    return [values, cv.node("Mod", [flat, cv.scalar(plane, D.int64)])]


@rule("max_unpool2d", "max_unpool3d")
def _max_unpool(cv, node, args, attrs):
    """Scatter each plane's values to their (torch-numbered) positions in a zero plane."""
    size = 1
    for n in attrs["output_size"]:
        size *= n
    window = node.args[0].type.shape[-len(attrs["output_size"]):]
    per_plane = 1
    for n in window:
        per_plane *= n
    x = cv.node("Reshape", [args[0], cv.ints([-1, per_plane])])
    idx = cv.node("Reshape", [cv.cast(args[1], node.args[1].type.dtype, D.int64),
                              cv.ints([-1, per_plane])])
    planes = cv.node("Shape", [x], start=0, end=1)
    zeros = cv.node("Expand", [cv.scalar(0, node.outs[0].type.dtype),
                               cv.node("Concat", [planes, cv.ints([size])], axis=0)])
    out = cv.node("ScatterElements", [zeros, idx, x], axis=1)
    return cv.node("Reshape", [out, cv.ints(node.outs[0].type.shape)])


@rule("avg_pool2d", "avg_pool3d")
def _avg_pool(cv, node, args, attrs):
    if attrs.get("divisor_override"):
        raise UnsupportedOp("average pooling with divisor_override")
    nd = len(node.args[0].type.shape) - 2
    k, s, p = _pool_geometry(attrs, nd)
    return cv.node("AveragePool", [args[0]], kernel_shape=k, strides=s, pads=p + p,
                   ceil_mode=int(attrs["ceil_mode"]),
                   count_include_pad=int(attrs["count_include_pad"]))


@rule("adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive(cv, node, args, attrs):
    shape = node.args[0].type.shape
    out = node.outs[0].type.shape
    nd = 2 if node.op.endswith("2d") else 3
    is_max = "max" in node.op
    ins, outs = list(shape[-nd:]), list(out[-nd:])
    if all(o == 1 for o in outs):
        r = cv.node("GlobalMaxPool" if is_max else "GlobalAveragePool", [args[0]])
    elif all(isinstance(i, int) and i % o == 0 for i, o in zip(ins, outs)):
        k = [i // o for i, o in zip(ins, outs)]
        r = cv.node("MaxPool" if is_max else "AveragePool", [args[0]], kernel_shape=k, strides=k)
    elif all(isinstance(i, int) for i in ins):
        # windows [floor(j*n/m), ceil((j+1)*n/m)) per dimension: a mean (or max) over a box is
        # the mean of the means along each of its dimensions, so the dimensions go one by one
        r = args[0]
        rank = len(shape)
        for k, (n, m) in enumerate(zip(ins, outs)):
            axis = rank - nd + k
            parts = []
            for j in range(m):
                lo, hi = (j * n) // m, -((-(j + 1) * n) // m)
                window = cv.node("Slice", [r, cv.ints([lo]), cv.ints([hi]), cv.ints([axis])])
                parts.append(cv.reduce("ReduceMax" if is_max else "ReduceMean", window, [axis], True))
            r = cv.node("Concat", parts, axis=axis)
    else:
        raise UnsupportedOp(f"adaptive pooling of a symbolic size {ins}")
    return [r, None] if is_max else r


@rule("resample")
def _resample(cv, node, args, attrs):
    x, index, weight = args
    dim = attrs["dim"] % len(node.args[0].type.shape)
    k = node.args[1].type.shape[0]
    dt = node.outs[0].type.dtype
    n_out = node.args[1].type.shape[1]
    bshape = [1] * len(node.args[0].type.shape)
    bshape[dim] = n_out
    out = None
    for i in range(k):
        row = cv.ints([i])
        idx = cv.node("Squeeze", [cv.node("Gather", [index, row], axis=0), cv.ints([0])])
        w = cv.node("Reshape", [cv.node("Gather", [weight, row], axis=0), cv.ints(bshape)])
        w = cv.cast(w, node.args[2].type.dtype, dt)
        term = cv.node("Mul", [cv.node("Gather", [x, cv.cast(idx, node.args[1].type.dtype, D.int64)],
                                       axis=dim), w])
        out = term if out is None else cv.node("Add", [out, term])
    return out


@rule("index")
def _index(cv, node, args, attrs):
    from dynograph.export._compiler import Value
    tensors = [(d, a, raw) for d, (a, raw) in enumerate(zip(args[1:], node.args[1:]))
               if raw is not None]
    if len(tensors) != 1 or not isinstance(tensors[0][2], Value):
        raise UnsupportedOp("advanced indexing with more than one index tensor")
    d, name, raw = tensors[0]
    if raw.type.dtype is D.bool:
        raise UnsupportedOp("indexing with a boolean mask (its size depends on the data)")
    idx = cv.cast(name, raw.type.dtype, D.int64)
    size = node.args[0].type.shape[d]
    if isinstance(size, int):       # negative indices count from the end
        idx = cv.node("Where", [cv.node("Less", [idx, cv.scalar(0, D.int64)]),
                                cv.node("Add", [idx, cv.scalar(size, D.int64)]), idx])
    return cv.node("Gather", [args[0], idx], axis=d)


@rule("index_fill", "index_fill_tensor")
def _index_fill(cv, node, args, attrs):
    from dynograph.export._compiler import Value
    x_raw, index_raw = node.args[0], node.args[1]
    if node.op == "index_fill_tensor":
        attrs = dict(attrs, value=args[2])
        node = _Args(node.op, node.args, dict(node.attrs, value=node.args[2]), node.outs)
    shape = x_raw.type.shape
    dim = attrs["dim"] % max(len(shape), 1)
    size = shape[dim]
    if not isinstance(size, int):
        raise UnsupportedOp("index_fill along the symbolic batch dimension")
    idx = cv.node("Reshape", [cv.cast(args[1], index_raw.type.dtype, D.int64), cv.ints([1, -1])])
    idx = cv.node("Where", [cv.node("Less", [idx, cv.scalar(0, D.int64)]),
                            cv.node("Add", [idx, cv.scalar(size, D.int64)]), idx])
    positions = cv.const(np.arange(size, dtype=np.int64).reshape(size, 1))
    hit = cv.cast(cv.node("Equal", [positions, idx]), D.bool, D.int32)
    mask = cv.cast(cv.reduce("ReduceMax", hit, [1], False), D.int32, D.bool)
    bshape = [1] * len(shape)
    bshape[dim] = size
    mask = cv.node("Reshape", [mask, cv.ints(bshape)])
    value = attrs["value"]
    dt = x_raw.type.dtype
    value = cv.cast(value, node.attrs["value"].type.dtype, dt) \
        if isinstance(node.attrs["value"], Value) else cv.number(value, dt)
    return cv.node("Where", [mask, value, args[0]])


@rule("index_put")
def _index_put(cv, node, args, attrs):
    """x[i0, i1, ...] = values: a ScatterND over x with the indexed dimensions moved first."""
    from dynograph.export._compiler import Value
    shape = list(node.args[0].type.shape)
    raw = node.args[2:]
    indexed = [d for d, r in enumerate(raw) if r is not None]
    if not indexed or any(not isinstance(raw[d], Value) or raw[d].type.dtype is D.bool
                          for d in indexed):
        raise UnsupportedOp("an index assignment with boolean masks")
    index_shapes = [raw[d].type.shape for d in indexed]
    if any(not isinstance(n, int) for sh in index_shapes for n in sh):
        raise UnsupportedOp("index tensors whose sizes depend on the batch size")
    b = list(np.broadcast_shapes(*index_shapes))
    parts = []
    for d in indexed:
        i = cv.cast(args[2 + d], raw[d].type.dtype, D.int64)
        if isinstance(shape[d], int):
            i = cv.node("Where", [cv.node("Less", [i, cv.scalar(0, D.int64)]),
                                  cv.node("Add", [i, cv.scalar(shape[d], D.int64)]), i])
        i = cv.node("Expand", [i, cv.ints(b)])
        parts.append(cv.node("Unsqueeze", [i, cv.ints([len(b)])]))
    index = cv.node("Concat", parts, axis=len(b)) if len(parts) > 1 else parts[0]
    rest = [d for d in range(len(shape)) if d not in indexed]
    perm = indexed + rest
    xt = cv.node("Transpose", [args[0]], perm=perm) if perm != list(range(len(shape))) else args[0]
    dt = node.outs[0].type.dtype
    values = cv.cast(args[1], node.args[1].type.dtype, dt) if isinstance(node.args[1], Value) \
        else cv.number(node.args[1], dt)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    p = indexed[0]
    if adjacent and p > 0:
        # torch lays the result out as x's leading dims, the index shape, x's trailing dims
        pre = shape[:p]
        full = pre + b + shape[indexed[-1] + 1:]
        values = cv.node("Expand", [values, cv.ints(full)])
        order = list(range(p, p + len(b))) + list(range(p)) + \
            list(range(p + len(b), len(full)))
        values = cv.node("Transpose", [values], perm=order)
    else:
        values = cv.node("Expand", [values, cv.ints(b + [shape[d] for d in rest])])
    out = cv.node("ScatterND", [xt, index, values],
                  reduction="add" if attrs.get("accumulate") else "none")
    if perm == list(range(len(shape))):
        return out
    inverse = [perm.index(d) for d in range(len(shape))]
    return cv.node("Transpose", [out], perm=inverse)


@rule("topk", "sort")
def _topk(cv, node, args, attrs):
    shape = node.args[0].type.shape
    dim = attrs.get("dim", -1) % len(shape)
    if node.op == "sort":
        k, largest = shape[dim], attrs.get("descending", False)
    else:
        k, largest = (args[1] if len(args) > 1 else attrs["k"]), attrs.get("largest", True)
    values, indices = cv.node("TopK", [args[0], cv.ints([k])], n_out=2, axis=dim,
                              largest=int(bool(largest)), sorted=1)
    return [values, indices]


@rule("im2col")
def _im2col(cv, node, args, attrs):
    """torch's unfold: a grouped convolution with one-hot kernels picks each window element
    (channel c's block of kh*kw outputs, in torch's order), then the spatial dims flatten."""
    n, c, h, w = node.args[0].type.shape
    kh, kw = attrs["kernel_size"]
    dt = node.outs[0].type.dtype
    eye = np.eye(kh * kw, dtype=dt.np).reshape(kh * kw, 1, kh, kw)
    weight = cv.const(np.tile(eye, (c, 1, 1, 1)), "onehot")
    ph, pw = attrs["padding"]
    conv = cv.node("Conv", [args[0], weight], strides=list(attrs["stride"]),
                   dilations=list(attrs["dilation"]), pads=[ph, pw, ph, pw], group=c)
    out = node.outs[0].type.shape
    return cv.node("Reshape", [conv, cv.ints([out[0], out[1], -1])])


@rule("col2im")
def _col2im(cv, node, args, attrs):
    if cv.opset < 18:
        raise UnsupportedOp("nn.Fold needs ONNX's Col2Im, from opset 18")
    ph, pw = attrs["padding"]
    return cv.node("Col2Im", [args[0], cv.ints(attrs["output_size"]), cv.ints(attrs["kernel_size"])],
                   dilations=list(attrs["dilation"]), pads=[ph, pw, ph, pw],
                   strides=list(attrs["stride"]))


def model_proto(graph, opset):
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="dynograph")

"""Single-op kernels for eager ops on CUDA tensors, lent to the eager core through
runtime/device_kernels.py.

An op call on device arrays becomes a one-node graph node (its operands' types, its literal
scalars and attributes), cached per call signature; the node runs as compiled programs run their
nodes (compiler/lowering/program.py): a kernel description for the operands' layouts, rendered
as CUDA C and compiled once (``Plan``), launched on the device arrays; ops with a direct rule
(the matrix products) run their rule with the backend's GEMM.  ``run`` answers None for ops
without a lowering or a covered direct rule: the eager core then runs them on the host.
"""
import threading
from collections import OrderedDict

from dynograph.compiler.ops.core import TensorSpec
from dynograph.runtime import dtypes as D
from dynograph.runtime.cuda_memory import DeviceArray
from ..ir import Node, TensorType, Value
from ..lowering.kernel import lowerable
from ..lowering.program import kernel_inputs, kernel_plan
from ..lowering.scalar import Unsupported
from .backend import backend

# the distinct call signatures whose nodes (and compiled plans) are kept
MAX_CALLS = 4096
# the matrix products, run by the backend's GEMM (the other direct rules prepare their operands
# with numpy on the host)
DEVICE_RULES = ("mm", "addmm", "bmm")
_GEMM_TYPES = ("float32", "float64", "float16", "bfloat16")


class _Call:
    """A call signature's node, the Values its kernel reads and its results' types."""
    __slots__ = ("node", "values", "positions", "types", "__weakref__")


class DeviceOps:
    def __init__(self):
        self.calls = OrderedDict()
        self.lock = threading.Lock()

    def run(self, op, arrays, attrs, index):
        if not (lowerable_op(op) or op.name in DEVICE_RULES):
            return None
        call = self._call(op, arrays, attrs)
        if call is None:
            return None
        be = backend(index)
        if op.name in DEVICE_RULES:
            return self._direct(op, call, arrays, attrs, be)
        inputs = [arrays[p] for p in call.positions]
        plan = kernel_plan(call.node, inputs, call.values, None, be)
        if plan is None:
            return None
        outs = [be.allocate(shape, dt) for (shape, _), dt in zip(call.types, plan.outputs)]
        plan([be.address(a) for a in inputs] + [be.address(o) for o in outs])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _direct(self, op, call, arrays, attrs, be):
        """A matrix product by the backend's GEMM kernel (None: the host runs it)."""
        (shape, dtype), = call.types
        out = be.allocate(shape, dtype.np)
        if op.name == "addmm":
            bias, a, b = arrays
            alpha, beta = attrs.get("alpha", 1), attrs.get("beta", 1)
            if not all(type(v) in (int, float) for v in (alpha, beta)):
                return None
            return be.matmul(a, b, out, bias, alpha, beta) if _floats(out, bias, a, b) else None
        a, b = arrays
        return be.matmul(a, b, out) if _floats(out, a, b) else None

    def _call(self, op, arrays, attrs):
        key = (op.name, tuple(_signature(a) for a in arrays), tuple(sorted(attrs.items())))
        try:
            call = self.calls.get(key)
        except TypeError:               # an unhashable attribute (a list): no kernel
            return None
        if call is not None:
            self.calls.move_to_end(key, last=True)
            return call
        try:
            call = _make_call(op, arrays, attrs)
        except Unsupported:
            call = None
        with self.lock:
            self.calls[key] = call
            if len(self.calls) > MAX_CALLS:
                self.calls.popitem(last=False)
        return call


def _floats(out, *arrays):
    return out.dtype.name in _GEMM_TYPES and all(a.dtype == out.dtype for a in arrays)


def lowerable_op(op):
    return op.lowering is not None and op.reindex is None


def _signature(a):
    if isinstance(a, DeviceArray):
        return ("array", a.shape, a.dtype)
    return (type(a), a)


def _make_call(op, arrays, attrs):
    args, values, positions = [], [], []
    for i, a in enumerate(arrays):
        if isinstance(a, DeviceArray):
            v = Value(TensorType(a.shape, D.from_numpy_dtype(a.dtype), "cuda"))
            args.append(v)
            values.append(v)
            positions.append(i)
        elif isinstance(a, (list, tuple)):
            raise Unsupported(f"{op.name}: a list operand")
        else:
            args.append(a)
    specs = [TensorSpec(a.shape, D.from_numpy_dtype(a.dtype)) if isinstance(a, DeviceArray) else a
             for a in arrays]
    result = op.meta(*specs, **attrs)
    results = result if isinstance(result, (tuple, list)) else (result,)
    call = _Call()
    call.types = [(tuple(s.shape), s.dtype) for s in results]
    call.node = Node(op.name, tuple(args), dict(attrs),
                     tuple(Value(TensorType(shape, dt, "cuda")) for shape, dt in call.types))
    if op.name not in DEVICE_RULES:
        if not lowerable(call.node) or kernel_inputs(call.node) != values:
            raise Unsupported(f"{op.name}: operands a kernel cannot read")
    call.values, call.positions = values, positions
    return call


def device_ops():
    """The executor the eager core gets (runtime/device_kernels.py)."""
    return DeviceOps()

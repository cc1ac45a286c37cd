"""autograd.Function: user-defined ops with a hand-written backward."""
import functools

from .._tensor import Tensor
from .grad_mode import STATE, no_grad
from .graph import Node, edge_of, modified_error


class FunctionCtx:
    """The ``ctx`` handed to a custom Function's forward/setup_context and backward."""

    def __init__(self):
        self.to_save = ()
        self._saved_versions = ()
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.dirty = set()
        self.materialize_grads = True
        self._freed = False

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors
        self._saved_versions = tuple(t._version if t is not None else None for t in tensors)

    save_for_forward = save_for_backward

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or "
                "if you need to access saved tensors after calling backward.")
        for t, v in zip(self.to_save, self._saved_versions):
            if t is not None and t._version != v:
                raise modified_error(t._data, t.grad_fn, t._output_nr, t._version, v)
        return self.to_save

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(Node):
    """The graph node of one custom Function call."""

    def __init__(self, fn_cls, ctx, inputs, outputs):
        self._cls = fn_cls
        self.ctx = ctx
        self._tensor_positions = [i for i, x in enumerate(inputs) if isinstance(x, Tensor)]
        self._inputs = [inputs[i] for i in self._tensor_positions]
        self.next_functions = tuple(edge_of(x) for x in self._inputs)
        self._outputs = tuple(o._data for o in outputs) if len(outputs) > 1 else outputs[0]._data
        self._n_args = len(inputs)

    def name(self):
        return f"{self._cls.__name__}Backward"

    def __repr__(self):
        return f"<dynograph.autograd.function.{self.name()} object at {hex(id(self))}>"

    def release(self):
        self.ctx._freed = True

    def apply(self, *grads):
        if self.ctx.materialize_grads:
            outs = self._outputs if isinstance(self._outputs, tuple) else (self._outputs,)
            grads = tuple(Tensor._wrap(o * 0) if g is None else g for g, o in zip(grads, outs))
        result = self._cls.backward(self.ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != self._n_args:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {self._n_args}, got {len(result)})")
        out = []
        for pos, x in zip(self._tensor_positions, self._inputs):
            g = result[pos]
            if g is not None and tuple(g.shape) != tuple(x.shape):
                from dynograph.compiler.ops.movement import sum_to_shape
                try:
                    g = sum_to_shape(g, x._data.shape)
                except Exception:
                    g = None
                if g is None or tuple(g.shape) != tuple(x.shape):
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {pos} - "
                        f"got {list(result[pos].shape)} but expected shape compatible with "
                        f"{list(x.shape)}")
            out.append(g)
        return tuple(out)


class _FunctionMeta(type):
    pass


class Function(metaclass=_FunctionMeta):
    """Base class for custom differentiable ops; call them with ``MyFn.apply(*args)``.

    Example::

        class Exp(dynograph.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        separate = cls.setup_context is not Function.setup_context
        with no_grad():
            output = cls.forward(*args, **kwargs) if separate else cls.forward(ctx, *args, **kwargs)
        if separate:
            cls.setup_context(ctx, args, output)
        is_tuple = isinstance(output, tuple)
        outputs = output if is_tuple else (output,)
        outputs = tuple(_fresh(o, args, ctx) for o in outputs)
        if STATE.grad_enabled and any(ctx.needs_input_grad):
            node = BackwardCFunction(cls, ctx, args, [o for o in outputs if isinstance(o, Tensor)])
            nr = 0
            for o in outputs:
                if not isinstance(o, Tensor):
                    continue
                if id(o) not in ctx.non_differentiable and o.is_floating_point():
                    o.requires_grad = True
                    o.grad_fn = node
                    o._output_nr = nr
                nr += 1
        return outputs if is_tuple else outputs[0]


def _fresh(o, args, ctx):
    """An output that is one of the inputs becomes a new tensor sharing its data (as torch does)."""
    if isinstance(o, Tensor) and any(o is a for a in args) and id(o) not in ctx.dirty:
        t = Tensor._wrap(o._data)
        if id(o) in ctx.non_differentiable:
            ctx.non_differentiable.add(id(t))
        return t
    return o


def once_differentiable(fn):
    """Run a backward without recording it (its result cannot be differentiated again)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper


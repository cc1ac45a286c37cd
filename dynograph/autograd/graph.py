"""Nodes of the dynamic autograd graph: one ``OpNode`` per recorded op, ``AccumulateGrad`` per leaf.

A node saves the op's inputs, attributes and output buffers; its derivative rule comes
from the op set (``op.vjp``), so eager autograd and traced autodiff share one source.
"""
import weakref

from .._tensor import Tensor
from .anomaly_mode import ANOMALY


class Node:
    """Base of backward nodes; mirrors torch.autograd.graph.Node's public surface."""

    next_functions = ()
    metadata = None

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    def register_hook(self, fn):
        self.__dict__.setdefault("_post_hooks", []).append(fn)
        return _Handle(self._post_hooks, fn)

    def register_prehook(self, fn):
        self.__dict__.setdefault("_pre_hooks", []).append(fn)
        return _Handle(self._pre_hooks, fn)


class _Handle:
    def __init__(self, lst, item):
        self._lst, self._item = lst, item

    def remove(self):
        if self._item in self._lst:
            self._lst.remove(self._item)


class AccumulateGrad(Node):
    """Adds the incoming gradient into a leaf's ``.grad``."""

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


def shown_as(t, name):
    """``t``, the result of a composite (a loss written with primitives), whose grad_fn prints
    as the single node PyTorch records for it (``NllLossBackward0``): what users print.  The
    gradient itself is the composite's."""
    fn = t.grad_fn
    if isinstance(fn, OpNode):
        fn._shown_as = name
    return t


def accumulator(leaf):
    """The one AccumulateGrad node of a leaf (created on first use, like torch)."""
    acc = leaf.__dict__.get("_accumulator")
    if acc is None:
        acc = leaf._accumulator = AccumulateGrad(leaf)
    return acc


def retain_at_grad_fn(t):
    """Have backward store in ``t.grad`` the gradient reaching ``t``'s ``grad_fn`` output."""
    t.grad_fn.__dict__.setdefault("_retained", {})[t._output_nr] = weakref.ref(t)


def drop_retained(t):
    """Undo ``retain_at_grad_fn`` (``t``'s ``grad_fn`` is about to change)."""
    t.grad_fn.__dict__.get("_retained", {}).pop(t._output_nr, None)


# torch lists an input that gets no gradient (a constant, a Python scalar) as (None, 0)
NO_EDGE = (None, 0)


def edge_of(t):
    if not t.requires_grad:
        return NO_EDGE
    fn = t.grad_fn
    if fn is None:
        return (accumulator(t), 0)
    return (fn, t._output_nr)


class OpNode(Node):
    """The backward of one recorded op.  Acts as the ``ctx`` its derivative rule reads."""

    _saved_out = None        # per output: (version box, version when recorded)

    def __init__(self, op, inputs, attrs, outputs):
        self.op = op
        self._inputs = inputs
        self.attrs = attrs
        self._outputs = outputs                 # the output buffers, not the tensors (no cycle)
        self._freed = False
        if len(inputs) == 2:                    # a binary op (the most common), without lists
            x, y = inputs
            if isinstance(x, Tensor) and isinstance(y, Tensor):
                vx, vy = x._vc, y._vc
                self._versions = (0 if vx is None else vx[0], 0 if vy is None else vy[0])
                self.next_functions = (
                    NO_EDGE if not x._rg else (accumulator(x), 0) if x.grad_fn is None
                    else (x.grad_fn, x._output_nr),
                    NO_EDGE if not y._rg else (accumulator(y), 0) if y.grad_fn is None
                    else (y.grad_fn, y._output_nr))
                return
        versions, edges = [], []
        for x in inputs:
            if isinstance(x, Tensor):
                # x._version and edge_of(x), inline: this runs for every recorded op
                vc = x._vc
                versions.append(0 if vc is None else vc[0])
                if not x._rg:
                    edges.append(NO_EDGE)
                elif x.grad_fn is None:
                    edges.append((accumulator(x), 0))
                else:
                    edges.append((x.grad_fn, x._output_nr))
            else:
                versions.append(None)
                edges.append(NO_EDGE)
        self._versions = tuple(versions)
        self.next_functions = tuple(edges)

    _shown_as = None         # the name of the PyTorch primitive a composite stands for

    def name(self):
        if self._shown_as is not None:
            return self._shown_as
        n = self.op.grad_name
        if type(n) is str:
            return n
        # ops whose PyTorch overloads differ in name (x ** 2 vs x ** y) choose by operands
        return n(tuple(v is not None for v in self._versions), self.attrs)

    @property
    def _name(self):
        return self.name()

    def needs(self, i):
        """Whether input ``i`` needs a gradient (rules skip work for the others)."""
        return self.next_functions[i][0] is not None

    @property
    def needs_input_grad(self):
        return tuple(e[0] is not None for e in self.next_functions)

    @property
    def output(self):
        out = self._outputs
        if isinstance(out, tuple):
            return tuple(self._saved_output(o, i) for i, o in enumerate(out))
        return self._saved_output(out, 0)

    def _saved_output(self, array, nr):
        saved = self._saved_out
        if saved is not None:               # the output buffer must not have been overwritten
            box, v = saved[nr]
            if box[0] != v:
                raise modified_error(array, self, nr, box[0], v)
        t = Tensor._wrap(array)
        from .grad_mode import STATE
        # create_graph: a floating output keeps its history (integer outputs, such as the
        # indices of sort or max, never carry one)
        if STATE.grad_enabled and (t.is_floating_point() or t.is_complex()):
            t._rg = True
            t.grad_fn = self
            t._output_nr = nr
        return t

    @property
    def inputs(self):
        """The op's inputs as the derivative rule reads them: each tensor is checked for
        in-place changes when the rule reads it, so an input the rule never reads (the ``x``
        of ``x * 3``) may be overwritten freely, as in PyTorch."""
        return None if self._inputs is None else _SavedInputs(self)

    @inputs.setter
    def inputs(self, value):
        self._inputs = value

    def release(self):
        self._inputs = None
        self._outputs = None
        self._freed = True

    def apply(self, *grads):
        if self._freed:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or "
                "if you need to access saved tensors after calling backward.")
        grads = self.op.vjp(self, *grads)
        return tuple(g if g is not False else None for g in grads)


class _SavedInputs:
    """A node's inputs, version-checked one by one as a derivative rule reads them."""

    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    def __len__(self):
        return len(self._node._inputs)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        node = self._node
        x, v = node._inputs[i], node._versions[i]
        if v is not None and x._version != v:
            raise modified_error(x._data, x.grad_fn, x._output_nr, x._version, v)
        return x

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def modified_error(array, producer, output_nr, version, expected):
    """PyTorch's error for a saved tensor that was overwritten by an in-place op."""
    from dynograph.runtime.dtypes import from_numpy_dtype
    shape = ", ".join(str(n) for n in array.shape)
    which = ""
    if producer is not None:
        name = producer.name()
        if name.endswith("Backward0") or name.endswith("Backward1"):
            name = name[:-len("Backward0")]
        which = f", which is output {output_nr} of {name},"
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [dynograph.{from_numpy_dtype(array.dtype).tensor_type} [{shape}]]{which} "
        f"is at version {version}; expected version {expected} instead. Hint: " + (
            "the backtrace further above shows the operation that failed to compute its gradient. "
            "The variable in question was changed in there or anywhere later. Good luck!"
            if ANOMALY.enabled else
            "enable anomaly detection to find the operation that failed to compute its gradient, "
            "with dynograph.autograd.set_detect_anomaly(True, check_nan=False)."))


Tensor._output_nr = 0


class FunctionNode(Node):
    """The backward of an eager step that is not an op of the op set (a copy between devices):
    ``backward(grad)`` gives the input's gradient."""

    _inputs = _outputs = None

    def __init__(self, name, source, backward):
        self._name_, self.backward = name, backward
        self.next_functions = (edge_of(source),)

    def name(self):
        return self._name_

    def apply(self, grad):
        return (None if grad is None else self.backward(grad),)

    def release(self):
        pass


def record_function(source, out, name, backward):
    """``out``, computed from ``source`` by a step outside the op set, with its backward node
    when ``source`` needs a gradient."""
    from .grad_mode import STATE
    if source.requires_grad and STATE.grad_enabled:
        out._rg = True
        out.grad_fn = FunctionNode(name, source, backward)
    return out

"""The hook through which the eager core tells an active trace what it does.

The tracer (``dynograph.compiler.tracer``) sits layers above the eager core, so the core
never imports it.  Instead the core owns this hook: ``TRACE.tracer`` is the trace in progress
on this thread, or None.  ``compile()`` installs its ``Tracer`` (a ``TraceHook``) there when a
trace starts and removes it when the trace ends.  Eager code pays one attribute read per
call when no trace is on::

    if TRACE.tracer is not None:
        TRACE.tracer.write(self, src)

``TraceHook`` lists everything the eager core, nn and optim call on the installed tracer.
``SizeInt`` lives here too: the sizes a trace hands to user code report their uses through
the same hook.
"""
import abc
import operator
import sys
import threading


class _Active(threading.local):
    """The trace in progress on this thread: another thread's eager work is never recorded
    into it, and its graph breaks are charged to its own function."""
    tracer = None


TRACE = _Active()


def is_tracing():
    """Whether a function is being traced for compilation right now."""
    return TRACE.tracer is not None


class TraceHook(abc.ABC):
    """What the eager layers call on the installed trace (``TRACE.tracer``)."""

    ran_backward = False    # set by the autograd engine when a backward pass runs in the trace
    undo = None             # while tracing ahead (a run that is put back afterwards): its journal

    @abc.abstractmethod
    def run_op(self, run, op, args, attrs):
        """Return ``run(op, args, attrs)``: the dispatcher running and recording an op."""

    @abc.abstractmethod
    def run_rule(self, node, grads):
        """Return ``node.apply(*grads)``: the autograd engine applying an op's derivative rule."""

    @abc.abstractmethod
    def run_step(self, opt, closure):
        """Return ``opt._step(closure)``: an optimizer's update inside ``step()``."""

    @abc.abstractmethod
    def record(self, op, args, attrs, result, outs):
        """The dispatcher ran ``op`` (result: numpy values, outs: the tensors it returns)."""

    @abc.abstractmethod
    def write(self, dst, src):
        """``dst``'s memory now holds ``src`` (a tensor or a number): an in-place write."""

    @abc.abstractmethod
    def alias(self, new, old):
        """``new`` is a tensor whose contents are ``old``'s (a snapshot, an accumulated grad)."""

    @abc.abstractmethod
    def graph_break(self, reason, where=None):
        """The code does something a graph cannot hold; ``reason`` says what."""

    @abc.abstractmethod
    def sizes(self, shape, frame):
        """``shape`` as the code running in ``frame`` should see it (SizeInts for user code)."""

    @abc.abstractmethod
    def size_used(self, value, kind, detail, frame):
        """User code in ``frame`` used a size: compared it (kind "compare") or read its value."""

    @abc.abstractmethod
    def size_consumed(self, value, what):
        """An op received a size of the user's code as a number to compute with."""

    @abc.abstractmethod
    def announce_module(self, module):
        """An nn.Module is called: its parameters and buffers become graph inputs by name."""

    @abc.abstractmethod
    def announce_optimizer(self, opt):
        """An optimizer steps or zeroes grads: its state becomes graph state."""

    @abc.abstractmethod
    def optimizer_name(self, opt):
        """The name the trace gives ``opt`` in its inputs."""

    @abc.abstractmethod
    def fact(self, name, get):
        """The graph depends on the Python value ``get()`` returns now (a guard named ``name``)."""

    @abc.abstractmethod
    def at_end(self, check):
        """Call ``check()`` when the traced call has returned, before its graph is made: state
        the call left behind may still make it a graph break."""

    @abc.abstractmethod
    def scalar_input(self, name, value, get):
        """A Python number read each call (a learning rate): a graph input, not a constant."""


# ---------------------------------------------------------------- sizes seen by Python code

COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
            "gt": operator.gt, "ge": operator.ge}


class SizeInt(int):
    """A tensor size handed to the user's code during a trace (``x.shape[0]``, ``x.size(1)``).

    It is an int, so everything works as before; but each use the user's code makes of it is
    recorded on the tracer: comparisons (with their result) and every other use that turns it
    into a plain number (arithmetic, ``int()``, ``range()``, printing).  Ops that receive it as
    a size are not a use: the graph holds the number and ``compiler.symbolic.generalize`` finds
    how it depends on the batch size; ``symbolic.size_guards`` then decides whether one graph
    can serve every batch size.
    """
    __slots__ = ()

    def _use(self, kind, detail=None):
        tracer = TRACE.tracer
        if tracer is not None:
            tracer.size_used(int.__int__(self), kind, detail, sys._getframe(2))

    def __hash__(self):
        self._use("value")
        return int.__hash__(self)

    def __bool__(self):
        result = int.__bool__(self)
        self._use("compare", ("ne", 0, result))
        return result


def _comparison(name):
    def compare(self, other):
        if isinstance(other, SizeInt):
            other = int.__int__(other)
        result = COMPARE[name](int.__int__(self), other)     # floats compare as numbers
        self._use("compare", (name, other, result))
        return result
    compare.__name__ = f"__{name}__"
    return compare


def _plain(name):
    base = getattr(int, name)

    def use(self, *args):
        self._use("value")
        return base(self, *args)
    use.__name__ = name
    return use


for _name in COMPARE:
    setattr(SizeInt, f"__{_name}__", _comparison(_name))
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
              "__rfloordiv__", "__truediv__", "__rtruediv__", "__mod__", "__rmod__", "__divmod__",
              "__rdivmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__", "__invert__",
              "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__and__", "__rand__",
              "__or__", "__ror__", "__xor__", "__rxor__", "__index__", "__int__", "__float__",
              "__round__", "__trunc__", "__floor__", "__ceil__", "__str__", "__repr__",
              "__format__"):
    setattr(SizeInt, _name, _plain(_name))


def plain(x):
    """``x`` with SizeInts (in it, or in a tuple or list) as plain ints: what ops receive."""
    t = type(x)
    if t is SizeInt:
        return int.__int__(x)
    if (t is tuple or t is list) and any(type(a) is SizeInt or type(a) in (tuple, list) for a in x):
        return t(plain(a) for a in x)
    return x

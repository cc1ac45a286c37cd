"""Guards: what a traced graph was specialized on, checked before each replay.

Arguments: their structure (containers, dict keys, keyword names), tensors by shape, dtype,
requires_grad, layout, their .grad's shape and which of them share memory; Python values by
value (``watch.value_key``: -0.0 is not 0.0); other objects by identity.  The world: grad
mode and the default dtype; every Python value the traced code read in any frame, at its
source (``watch.Watcher``); every module's ``training`` flag, which gradients exist, the
parameters' requires_grad and hooks, the shape of every state tensor the graph reads, and
optimizer hyper-parameters other than the learning rate (a graph input, so schedulers do not
force a retrace) and parameter groups.
"""
import numbers

from dynograph.runtime.cuda_memory import DeviceArray

from dynograph.runtime import dtypes as D
from .tracer import storage_root
from .guard_code import compile_checks
from .symbolic import sizes_hold
from .watch import value_key


def _arg_key(x):
    from dynograph._tensor import Tensor
    if isinstance(x, Tensor):
        a = x._data
        # whether a leaf argument holds a .grad decides what backward() does with it
        grad = x._grad if x.requires_grad else None
        layout = "C" if a.flags.c_contiguous else a.strides
        if type(a) is DeviceArray:          # a cuda tensor: the device is part of its layout
            layout = (str(a.device), layout)
        return ("tensor", a.shape, x.dtype, x.requires_grad,
                None if grad is None else (grad._data.shape, grad.dtype), layout, bool(x._hooks))
    if x is None or isinstance(x, (numbers.Number, str, bytes)):
        return ("value", value_key(x))
    return ("object", id(x))


def _sharing(flat):
    """For each tensor argument, the position (among the tensor arguments) of the first one
    sharing its memory."""
    from dynograph._tensor import Tensor
    first, out = {}, []
    for x in flat:
        if isinstance(x, Tensor):
            out.append(first.setdefault(id(storage_root(x._data)), len(out)))
    return tuple(out)


class Guards:
    def __init__(self, fn, flat, spec):
        from dynograph.autograd.grad_mode import STATE
        self.args = [_arg_key(x) for x in flat]
        self.spec = spec
        self.sharing = _sharing(flat)
        self.keep = [x for x in flat if _arg_key(x)[0] == "object"]   # ids stay unique
        self.keep.append(getattr(fn, "__self__", None))
        self.checks = [
            ("grad mode", lambda: STATE.grad_enabled, STATE.grad_enabled),
            ("default dtype", D.get_default_dtype, D.get_default_dtype()),
        ]
        self.dynamic = []               # (argument, dim) pairs that are the batch size
        self.sources = []
        self.world_check = lambda: -1   # every fact and source at once (guard_code.py)
        self.size_uses = []             # how the code used sizes (set after the trace)
        self.size_checks = []           # comparisons of the symbolic batch size to recheck

    def overlapping_arguments(self, flat):
        """Whether two tensor arguments share memory without being the same array."""
        from dynograph._tensor import Tensor
        arrays = [x._data for x in flat if isinstance(x, Tensor)]
        return any(s != i and arrays[s] is not arrays[i] for i, s in enumerate(self.sharing))

    def add_sources(self, guarded):
        """Guards on the Python values the traced code read: [(Source, mode)] as
        ``Watcher.guarded_sources()`` gives them, checked by one generated function."""
        self.sources = guarded
        self.world_check = compile_checks(self.checks, guarded)

    def _failed_world(self):
        """(name, expected, actual) of the first fact or source guard that fails."""
        for name, get, want in self.checks:
            got = get()
            if got != want:
                return (name, want, got)
        for s, mode in self.sources:
            got = value_key(s.read(), tensors=mode == "value")
            want = s.want if mode == "value" else s.state
            if got != want:
                return (_source_name(s), _show_value(s.value), _show_value(s.read()))
        # the generated check is stricter than the readers here (a value found elsewhere
        # than the trace found it): a retrace, never a stale replay
        return ("a guarded value", "found where the trace found it", "found elsewhere")

    def capture_world(self, tracer):
        """Guards on the modules, parameters, optimizers and state the trace touched, with the
        values they had when the trace first saw them (before the call changed them)."""
        self.checks.extend(tracer.facts)

    def check(self, flat, spec):
        """None when every guard holds, else (guard name, expected, actual)."""
        if spec != self.spec:
            return ("the structure of the arguments", _show_spec(self.spec), _show_spec(spec))
        batch = None
        for i, (x, want) in enumerate(zip(flat, self.args)):
            got = _arg_key(x)
            if got != want:
                if want[0] == "tensor" and got[0] == "tensor" and self.dynamic:
                    batch, ok = _matches_dynamic(want, got, batch)
                    if ok:
                        continue
                return (f"argument {i}", _show(want), _show(got))
        if batch is not None and self.size_checks and not sizes_hold(self.size_checks, batch):
            return ("comparisons the code made of the batch size", _show_sizes(self.size_checks),
                    f"batch size {batch}")
        sharing = _sharing(flat)
        if sharing != self.sharing:
            return ("which tensor arguments share memory", self.sharing, sharing)
        if self.world_check() != -1:
            return self._failed_world()
        return None

    def dynamic_batch(self, other):
        """(s1, s2, [(argument, dim)]) when ``other`` differs from these guards only in one
        batch size (s1 here, s2 there) of some tensor arguments; else None."""
        if len(self.args) != len(other.args) or self.dynamic or other.dynamic:
            return None
        if [(n, w) for n, _, w in self.checks] != [(n, w) for n, _, w in other.checks]:
            return None
        pair, dims = None, []
        for i, (a, b) in enumerate(zip(self.args, other.args)):
            if a == b:
                continue
            if a[0] != "tensor" or b[0] != "tensor" or a[2:] != b[2:] or len(a[1]) != len(b[1]):
                return None
            for d, (x, y) in enumerate(zip(a[1], b[1])):
                if x != y:
                    if pair not in (None, (x, y)) or min(x, y) < 2:
                        return None
                    pair = (x, y)
                    dims.append((i, d))
        return None if pair is None else (*pair, dims)

    def make_dynamic(self, dims, sizes=()):
        """Let these dims of the arguments take any size >= 2 (the same one) for which the
        comparisons ``sizes`` the code made of it (``symbolic.size_guards``) still hold."""
        self.dynamic = list(dims)
        self.size_checks = list(sizes)
        for i, d in dims:
            kind, shape, *rest = self.args[i]
            shape = tuple(None if k == d else n for k, n in enumerate(shape))
            self.args[i] = (kind, shape, *rest)

    def batch_size(self, flat):
        i, d = self.dynamic[0]
        return flat[i]._data.shape[d]

    def describe(self):
        lines = [f"  argument {i}: {_show(k)}" for i, k in enumerate(self.args)]
        lines += [f"  {name} == {want!r}" for name, _, want in self.checks]
        lines += [f"  {_source_name(s)} " + ("is " + _show_value(s.value) if mode == "value" else
                                             "holds a tensor") for s, mode in self.sources]
        if self.size_checks:
            lines.append(f"  batch size s0: {_show_sizes(self.size_checks)}")
        return "\n".join(lines)


def _show_sizes(checks):
    ops = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    return " and ".join(f"(s0 {ops[op]} {other}) is {result}" for op, other, result in checks)


def _source_name(s):
    return f"{s.name} (read at {s.where})"


def _show_value(v):
    text = repr(v) if isinstance(v, (int, float, str, bytes, bool, type(None), tuple, list, dict)) \
        else f"<{type(v).__name__} at {id(v):#x}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _matches_dynamic(want, got, batch):
    """Whether tensor key ``got`` fits ``want`` whose None dims are the batch size."""
    if want[2:] != got[2:] or len(want[1]) != len(got[1]):
        return batch, False
    for w, g in zip(want[1], got[1]):
        if w is None:
            if g < 2 or (batch is not None and g != batch):
                return batch, False
            batch = g
        elif w != g:
            return batch, False
    return batch, True


def _show_layout(layout):
    on = ""
    if type(layout) is tuple and layout and type(layout[0]) is str:
        on, layout = f" on {layout[0]}", layout[1]
    return on + ("" if layout == "C" else f" strides {layout}")


def _show(key):
    kind = key[0]
    if kind == "tensor":
        _, shape, dtype, rg, grad, layout, hooks = key
        dims = ", ".join("s0" if n is None else str(n) for n in shape)
        return f"tensor {dtype.name}[{dims}]" + (" requires_grad" if rg else "") + \
            ("" if grad is None else " with .grad") + \
            _show_layout(layout) + (" with hooks" if hooks else "")
    if kind == "value":
        return key[-1][-1]
    return "an object"


def _show_spec(spec):
    """The argument structure as readable text: (tuple, [leaf, (dict, [('k', leaf)])])."""
    if spec is None:
        return "*"
    kind, items = spec
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {_show_spec(v)}" for k, v in items) + "}"
    inner = ", ".join(_show_spec(v) for v in items)
    return f"[{inner}]" if kind is list else f"({inner})"



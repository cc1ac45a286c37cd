"""Guards: what a traced graph was specialized on, checked before each replay.

Arguments: tensors by shape, dtype, requires_grad and their .grad's shape; Python values by
equality; other objects by identity.  The world: grad mode and the default dtype, the globals
and closure variables the function names, every module's ``training`` flag, which gradients
exist, the shape of every state tensor the graph reads, and optimizer hyper-parameters other
than the learning rate (a graph input, so schedulers do not force a retrace).
"""
import dis
import numbers
import types

from dynograph.runtime import dtypes as D
from .tracer import _value_key

_SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _arg_key(x):
    from dynograph._tensor import Tensor
    if isinstance(x, Tensor):
        # whether a leaf argument holds a .grad decides what backward() does with it
        grad = x._grad if x.requires_grad else None
        return ("tensor", x._data.shape, x.dtype, x.requires_grad,
                None if grad is None else (grad._data.shape, grad.dtype))
    if x is None or isinstance(x, (numbers.Number, str, bytes)):
        return ("value", type(x), x)
    return ("object", id(x))




class Guards:
    def __init__(self, fn, flat):
        from dynograph.autograd.grad_mode import STATE
        self.args = [_arg_key(x) for x in flat]
        self.keep = [x for x in flat if _arg_key(x)[0] == "object"]   # ids stay unique
        self.checks = [
            ("grad mode", lambda: STATE.grad_enabled, STATE.grad_enabled),
            ("default dtype", D.get_default_dtype, D.get_default_dtype()),
        ]
        self.dynamic = []               # (argument, dim) pairs that are the batch size
        self._referenced(fn)

    def _referenced(self, fn):
        """Globals and closure variables the function's code names."""
        self_obj = getattr(fn, "__self__", None)
        if self_obj is not None:
            self.keep.append(self_obj)
        f = getattr(fn, "__func__", fn)
        code = getattr(f, "__code__", None)
        if code is None:
            return
        glb = getattr(f, "__globals__", {})
        # names the code loads as globals (co_names also holds attribute names)
        loaded = dict.fromkeys(i.argval for i in dis.get_instructions(code)
                               if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        for name in loaded:
            if name in glb and not isinstance(glb[name], _SKIP):
                self._add_ref(f"global {name}", lambda g=glb, n=name: g.get(n), glb[name])
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if not isinstance(value, _SKIP):
                self._add_ref(f"closure variable {name}", lambda c=cell: c.cell_contents, value)

    def _add_ref(self, name, get, value):
        self.keep.append(value)
        self.checks.append((name, lambda: _value_key(get()), _value_key(value)))

    def capture_world(self, tracer):
        """Guards on the modules, parameters, optimizers and state the trace touched, with the
        values they had when the trace first saw them (before the call changed them)."""
        self.checks.extend(tracer.facts)

    def check(self, flat):
        """None when every guard holds, else (guard name, expected, actual)."""
        if len(flat) != len(self.args):
            return ("number of arguments", len(self.args), len(flat))
        batch = None
        for i, (x, want) in enumerate(zip(flat, self.args)):
            got = _arg_key(x)
            if got != want:
                if want[0] == "tensor" and got[0] == "tensor" and self.dynamic:
                    batch, ok = _matches_dynamic(want, got, batch)
                    if ok:
                        continue
                return (f"argument {i}", _show(want), _show(got))
        for name, get, want in self.checks:
            got = get()
            if got != want:
                return (name, want, got)
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

    def make_dynamic(self, dims):
        """Let these dims of the arguments take any size >= 2 (the same one)."""
        self.dynamic = list(dims)
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
        return "\n".join(lines)


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


def _show(key):
    kind = key[0]
    if kind == "tensor":
        _, shape, dtype, rg, grad = key
        dims = ", ".join("s0" if n is None else str(n) for n in shape)
        return f"tensor {dtype.name}[{dims}]" + (" requires_grad" if rg else "") + \
            ("" if grad is None else " with .grad")
    if kind == "value":
        return key[-1]
    return "an object"



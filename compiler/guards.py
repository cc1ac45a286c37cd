"""Guards: what a traced graph was specialized on, checked before each replay.

Arguments: tensors by shape, dtype and requires_grad; Python values by equality; other objects
by identity.  The world: grad mode and the default dtype, the globals and closure variables the
function names, every module's ``training`` flag, which gradients exist, the shape of every
state tensor the graph reads, and optimizer hyper-parameters other than the learning rate (a
graph input, so schedulers do not force a retrace).
"""
import numbers
import types

from dynograph.runtime import dtypes as D
from .tracer import _value_key

_SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _arg_key(x):
    from dynograph._tensor import Tensor
    if isinstance(x, Tensor):
        return ("tensor", x._data.shape, x.dtype, x.requires_grad)
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
        for name in code.co_names:
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
        for i, (x, want) in enumerate(zip(flat, self.args)):
            got = _arg_key(x)
            if got != want:
                return (f"argument {i}", _show(want), _show(got))
        for name, get, want in self.checks:
            got = get()
            if got != want:
                return (name, want, got)
        return None

    def describe(self):
        lines = [f"  argument {i}: {_show(k)}" for i, k in enumerate(self.args)]
        lines += [f"  {name} == {want!r}" for name, _, want in self.checks]
        return "\n".join(lines)


def _show(key):
    kind = key[0]
    if kind == "tensor":
        _, shape, dtype, rg = key
        return f"tensor {dtype.name}{list(shape)}" + (" requires_grad" if rg else "")
    if kind == "value":
        return key[-1]
    return "an object"



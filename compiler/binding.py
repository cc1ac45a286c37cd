"""Bindings: where each input of a compiled graph comes from in a call, and where its effects go.

A binding is ``("arg", i)`` (argument i), ``("arg_grad", i)`` (its ``.grad``), ``("scalar", get)``
(a Python number read each call), ``("rng", generator)`` or a tracer ``Slot`` (a parameter, a
buffer, optimizer state: ``get()``/``set(t)``).  The tracer makes them; the compiled function
reads inputs through them and the backends write the graph's state updates back through them.
"""
import weakref

import numpy as np

from .tracer import address, storage_root


def binding_tensor(b, flat_args):
    """The tensor behind binding ``b`` in this call: an argument, an argument's ``.grad``
    (``("arg_grad", i)``) or a slot's tensor."""
    if isinstance(b, tuple):
        t = flat_args[b[1]]
        return t._grad if b[0] == "arg_grad" else t
    return b.get()


def assign_binding(b, flat_args, t):
    """Put tensor ``t`` (or None) in the place of binding ``b`` (an 'assign' effect)."""
    if isinstance(b, tuple):
        flat_args[b[1]]._grad = t
    else:
        b.set(t)


def read_binding(b, flat_args):
    """What binding ``b`` feeds the graph in this call: an array, a number or a generator."""
    if isinstance(b, tuple):
        kind, what = b
        if kind == "arg":
            return flat_args[what]._data
        if kind == "arg_grad":
            return storage_root(flat_args[what]._grad._data)
        if kind == "scalar":
            return scalar_array(what)
        if kind == "rng":
            return what._np
        raise AssertionError(kind)
    t = b.get()
    return storage_root(t._data)


_scalars = weakref.WeakKeyDictionary()     # a scalar binding's getter -> (number, 0-d array)


def scalar_array(get):
    """The number ``get()`` reads, as a 0-d float64 array: the same array while ``get()`` gives
    the same float object (so the same value), so that the kernels reading a learning rate stay
    bound to it (a new array each call made every such kernel of a step bind anew).  Read-only:
    nothing may change a value another call may be given."""
    value = get()
    last = _scalars.get(get)
    if last is not None and last[0] is value:
        return last[1]
    array = np.array(value, dtype=np.float64)
    array.flags.writeable = False
    _scalars[get] = (value, array)
    return array


def write_binding(b, flat_args, array):
    """Write ``array`` into the buffer behind binding ``b`` (an in-place state update)."""
    t = binding_tensor(b, flat_args)
    root = t._data if isinstance(b, tuple) and b[0] == "arg" else storage_root(t._data)
    if not _same_memory(root, array):           # else the backend updated it in place
        from dynograph._inplace import writable, write
        write(writable(root), array)
    t._bump_version()


def _same_memory(a, b):
    return a is b or (type(a) is type(b) and address(a) == address(b) and
                      a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)

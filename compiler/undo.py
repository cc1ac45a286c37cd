"""Undoing a trace: what a traced call changed, put back as it was.

A compiled training step changes the state its graph depends on: its first call creates the
parameters' ``.grad`` and the optimizer's state, so the graph traced on that call no longer
fits the second call.  Rather than trace again on the second call (which runs it eagerly), the
first call traces the function a second time right away, on the state it left (a *look-ahead
trace*), and then undoes everything that second run changed.  The second call then replays.

A trace that completes without a graph break changes only what the tracer sees (compiler/
tracer.py; the watcher turns any other Python side effect into a graph break): tensors written
in place (each write goes through ``Tracer.write`` before it happens), the slots it assigns or
clears (``.grad``, optimizer state, module parameters and buffers) and random generators.
``Undo`` keeps, for one trace: a copy of each tensor's elements before the trace's first write
to them (and its version counter), each optimizer's state entries, each module's parameter
and buffer tables and each generator's state; ``rollback()`` restores them in reverse order.
"""
import copy

from dynograph.runtime.executor import address


class Undo:
    def __init__(self, params=()):
        """``params``: tensors whose ``.grad`` the trace may change before the tracer meets
        them (``model.zero_grad()`` before the forward)."""
        from dynograph._random import live_generators
        self.writes = []            # (tensor, its array, copy of the elements, version before)
        self.seen = set()           # (address, shape, strides) of the views journaled
        self.tables = []            # (dict, its items before): module tables, optimizer state
        self.optimizers = []        # (optimizer, its state dict object, {param: its dict})
        self.grads = [(p, p._grad) for p in params]     # (tensor, its .grad before)
        self.rngs = [(g, copy.deepcopy(g._np.bit_generator.state)) for g in live_generators()]

    def before_write(self, tensor):
        """``tensor``'s memory is about to be written: keep its elements (once per view)."""
        a = tensor._data
        key = (address(a), a.shape, a.strides)
        if key in self.seen:
            return
        self.seen.add(key)
        self.writes.append((tensor, a, a.copy(), tensor._version))

    def grad(self, tensor):
        """``tensor``'s ``.grad`` may be assigned by the trace."""
        self.grads.append((tensor, tensor._grad))

    def module(self, module):
        """Calls may assign parameters and buffers of ``module`` (not its submodules)."""
        for store in ("_parameters", "_buffers"):
            table = module.__dict__.get(store)
            if table is not None:
                self.tables.append((table, dict(table)))

    def optimizer(self, opt):
        """``opt.step()`` may create, replace and update per-parameter state."""
        self.optimizers.append((opt, opt.state, {p: (st, dict(st)) for p, st in opt.state.items()}))

    def rollback(self):
        from dynograph._inplace import write
        for tensor, a, saved, version in reversed(self.writes):
            write(a, saved)
            tensor._data = a                # (an op may have given it a new array since)
            if tensor._vc is not None:
                tensor._vc[0] = version
        for table, items in reversed(self.tables):
            table.clear()
            table.update(items)
        for opt, state, entries in reversed(self.optimizers):
            opt.state = state
            for p in [p for p in state if p not in entries]:
                del state[p]
            for p, (st, items) in entries.items():
                st.clear()
                st.update(items)
                state[p] = st
        for tensor, grad in reversed(self.grads):
            tensor._grad = grad
        for g, state in self.rngs:
            g._np.bit_generator.state = state

"""``dynograph.compile``: trace a function into graphs, guard them, and replay them.

A ``CompiledFunction`` keeps a small cache of entries.  Each entry holds one traced graph
(optimized by the pass pipeline), the bindings of its inputs to the user's tensors, the
effects to apply after a call (state written in place, slots given new tensors) and the guards
it was specialized on.  A call whose guards hold runs the graph on the chosen backend; a miss
traces again (the traced call itself runs eagerly, so it is always exact); a traced call that
changed state its graph is guarded on (a training step's first call) also traces the state it
left and undoes that run (``_look_ahead``, compiler/undo.py), so the next call replays.  A
function that cannot be captured (a graph break) runs eagerly from then on, with one warning.
"""
import contextlib
import copy
import functools
import gc
import types
import warnings

import numpy as np

from dynograph._trace_hook import TRACE, SizeInt, plain
from dynograph.runtime import config, dtypes as D
from . import logs
from .backends import DEFAULT_BACKEND, get_runner, run_entry
from .binding import assign_binding, binding_tensor, read_binding
from .explain import explain_compiled
from .guards import Guards
from .aot import make_function, split, trace_backward
from .symbolic import generalize, holds_at_other_sizes, size_guards
from .tracer import GraphBreak, Tracer, address, storage_root
from .undo import Undo
from .watch import Watcher

DEFAULT_CACHE_LIMIT = 8


def _enabled():
    return config.get("COMPILE")


class CompileError(RuntimeError):
    """A user-facing compiler error: title, explanation, hint and the user's line."""

    def __init__(self, title, explanation, hint, where):
        self.title, self.explanation, self.hint, self.where = title, explanation, hint, where
        super().__init__(f"{title}\n  {explanation}\n  hint: {hint}\n  at {where}")


# ---------------------------------------------------------------- pytrees

def flatten(tree, out):
    """Append the leaves of nested tuples/lists/dicts to ``out``; return the structure."""
    if isinstance(tree, (tuple, list)):
        kind = type(tree)
        return (kind, [flatten(x, out) for x in tree])
    if isinstance(tree, dict):
        return (dict, [(k, flatten(v, out)) for k, v in tree.items()])
    out.append(tree)
    return None


def unflatten(spec, leaves):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, items = spec
    if kind is dict:
        return {k: _unflatten(s, it) for k, s in items}
    vals = [_unflatten(s, it) for s in items]
    if kind in (tuple, list):
        return kind(vals)
    if hasattr(kind, "_fields"):
        return kind(*vals)
    return kind(vals)


# ---------------------------------------------------------------- one specialization

def _part(name):
    """An Entry attribute that is one of its optimized parts (``Entry.parts()``); settable, as
    when two batch sizes merge into one general graph."""
    return property(lambda entry: entry.parts().get(name),
                    lambda entry, value: entry.parts().__setitem__(name, value))


@contextlib.contextmanager
def _collector_off():
    """Python's cyclic garbage collector off while a call traces and compiles: a trace makes
    tens of thousands of objects that live on (its graph), which set off full collections
    (20-40 ms of a transformer's first call), and a collection's finalizers and callbacks,
    which belong to no one in particular, would run inside the trace, where the watcher would
    take what they do for the function's side effects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Entry:
    """One traced graph with everything needed to replay it.  The pass pipeline runs on the
    entry's first use (``parts()``): a training step's first graph, traced before its .grad and
    optimizer state existed, is usually never replayed, and optimizing it was a tenth of a
    large model's first call."""

    def __init__(self, captured, effects, clears, guards, out_spec, out_kinds, optimize):
        self.captured = captured            # as traced (before the passes)
        self._optimize = optimize           # () -> the optimized parts (see ``parts()``)
        self._parts = None
        self.effects = effects              # slot name -> (binding, 'write' | 'assign')
        # the slots written back into the same tensors: a backend may update them in place
        self.writable = frozenset(slot for slot, (_, kind) in effects.items() if kind == "write")
        self.clears = clears
        self.guards = guards
        self.out_spec = out_spec
        self.out_kinds = out_kinds          # per flat output: ('tensor', i) or ('const', value)
        self.calls = 0
        self.aliases = []                   # per flat output: how it aliases the caller's tensors
        self.params = []                    # the parameters the trace met (their .grad is state)
        self.aot = None                     # AotPlan when the outputs need gradients
        self.aot_saved = 0
        self.function = None                # the autograd.Function running both graphs

    def parts(self):
        """{"graph": the optimized graph that runs, "bindings": its inputs' bindings, "stats":
        the pipeline's, and with ``aot`` "backward_graph", "backward_feeds"}: optimized now if
        not yet."""
        if self._parts is None:
            self._parts = self._optimize()
        return self._parts

    graph = _part("graph")                      # the optimized graph that runs
    bindings = _part("bindings")
    stats = _part("stats")
    backward_graph = _part("backward_graph")    # None without ``aot``
    backward_feeds = _part("backward_feeds")

    def rng_states(self, flat_args):
        """Copies of the generators' states before a call (a create_graph backward replays
        the forward graph and must draw the same numbers)."""
        return [(b[1], copy.deepcopy(b[1]._np.bit_generator.state)) for b in self.aot_bindings
                if isinstance(b, tuple) and b[0] == "rng"]

    def forward_inputs(self, flat_args, leaves, rng_states):
        """Tensors for the inputs of the unoptimized forward graph: the leaves themselves (so
        gradients reach them), the other inputs as they are now, generators as they were."""
        from dynograph._tensor import Tensor
        leaf_of = {id(b): t for (b, _), t in zip(self.aot.leaves, leaves)}
        gens = dict((id(g), state) for g, state in rng_states)
        out = []
        for b in self.aot_bindings:
            if id(b) in leaf_of:
                out.append(leaf_of[id(b)])
            elif isinstance(b, tuple) and b[0] == "rng":
                gen = np.random.Generator(type(b[1]._np.bit_generator)())
                gen.bit_generator.state = gens[id(b[1])]
                out.append(gen)
            else:
                out.append(Tensor._wrap(read_binding(b, flat_args)))
        return out

    def read_inputs(self, flat_args):
        arrays = []
        for b in self.bindings:
            arrays.append(read_binding(b, flat_args))
        return arrays


def _is_const(x):
    from dynograph._tensor import Tensor
    return not isinstance(x, Tensor)


# ---------------------------------------------------------------- outputs that alias

def output_aliases(tracer, flat, out_flat):
    """How each output of the traced call aliases what the caller holds, so a replay returns
    the same objects and views eager execution does: None (a new tensor), ("arg", i) (argument
    i itself), ("same", j) (the object of output j), ("slot", slot) (a parameter or buffer
    itself), ("view", i, shape, strides, offset) (a view of argument i).  Other aliasing (a
    view of module state, a view of an argument that requires grad) is a graph break."""
    from dynograph._tensor import Tensor
    from .tracer import is_inside
    args = {id(x): i for i, x in enumerate(flat) if isinstance(x, Tensor)}
    seen, out = {}, []
    for j, x in enumerate(out_flat):
        if not isinstance(x, Tensor):
            out.append(None)
            continue
        slot = tracer.known.get(id(x))
        if id(x) in seen:
            out.append(("same", seen[id(x)]))
        elif id(x) in args:
            out.append(("arg", args[id(x)]))
        elif slot is not None and getattr(slot, "get", None) is not None and slot.get() is x:
            out.append(("slot", slot))
        else:
            out.append(_view_of_argument(tracer, flat, x, is_inside))
        seen.setdefault(id(x), j)
    return out


def _view_of_argument(tracer, flat, x, inside):
    from dynograph._tensor import Tensor
    a = x._data
    root = storage_root(a)
    for i, arg in enumerate(flat):
        if isinstance(arg, Tensor) and storage_root(arg._data) is root and inside(a, arg._data):
            if x.requires_grad:
                tracer.graph_break("the function returns a view of an argument that requires grad")
                return None
            offset = address(a) - address(arg._data)
            return ("view", i, a.shape, a.strides, offset)
    if root is not None and id(root) in tracer.storages and tracer.storages[id(root)].slot:
        tracer.graph_break("the function returns a view of a parameter, buffer or other state")
    return None


def restore_aliases(aliases, outs, flat):
    """The replay's outputs with each alias the traced call had put back."""
    if not any(aliases):
        return outs
    from dynograph._tensor import Tensor
    from dynograph._dispatch import mark_view
    outs = list(outs)
    for j, alias in enumerate(aliases):
        if alias is None:
            continue
        kind = alias[0]
        if kind == "arg":
            outs[j] = flat[alias[1]]
        elif kind == "same":
            outs[j] = outs[alias[1]]
        elif kind == "slot":
            outs[j] = alias[1].get()
        else:
            _, i, shape, strides, offset = alias
            base = flat[i]
            root = storage_root(base._data)
            start = address(base._data) - address(root)
            if type(root) is np.ndarray:
                view = Tensor._wrap(np.ndarray(shape, base._data.dtype, root, start + offset, strides))
            else:                       # a device array's view
                view = Tensor._wrap(root.view(shape, strides, root.offset + start + offset))
            mark_view(view, base)
            outs[j] = view
    return outs


# ---------------------------------------------------------------- verify=True

def _snapshot(entry, flat):
    """Copies of every buffer and slot a replay may change, and the generators' states."""
    arrays = [None if isinstance(b, tuple) and b[0] in ("scalar", "rng") else
              read_binding(b, flat).copy() for b in entry.bindings]
    slots = {name: binding_tensor(b, flat) for name, (b, kind) in entry.effects.items()
             if kind == "assign"}
    slots.update({s.name: s.get() for s in entry.clears})
    rngs = [(b[1], b[1]._np.bit_generator.state) for b in entry.bindings
            if isinstance(b, tuple) and b[0] == "rng"]
    return arrays, slots, rngs


def _restore(entry, flat, snapshot):
    arrays, slots, rngs = snapshot
    for b, a in zip(entry.bindings, arrays):
        if a is not None:
            np.copyto(read_binding(b, flat), a)
    setters = {name: b for name, (b, kind) in entry.effects.items() if kind == "assign"}
    setters.update({s.name: s for s in entry.clears})
    for name, t in slots.items():
        assign_binding(setters[name], flat, t)
    for gen, state in rngs:
        gen._np.bit_generator.state = state


def _slot_values(entry, flat):
    out = {}
    for name, (b, kind) in entry.effects.items():
        t = binding_tensor(b, flat)
        out[name] = None if t is None else t._data.copy()
    for s in entry.clears:
        out[s.name] = None if s.get() is None else s.get()._data.copy()
    return out


def _compare(what, compiled, eager, rtol=1e-5, atol=1e-6):
    c = getattr(compiled, "_data", compiled)
    e = getattr(eager, "_data", eager)
    if c is None or e is None or not isinstance(c, np.ndarray):
        if (c is None) != (e is None) or (not isinstance(c, np.ndarray) and c != e):
            raise VerifyMismatch(what, f"compiled gave {c!r}, eager {e!r}")
        return
    if c.shape != e.shape or c.dtype != e.dtype:
        raise VerifyMismatch(what, f"compiled gave {c.dtype}{list(c.shape)}, eager "
                                   f"{e.dtype}{list(e.shape)}")
    if c.dtype.kind in "fc" and not np.allclose(c, e, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.nanmax(np.abs(c.astype(np.float64) - e.astype(np.float64)))
        raise VerifyMismatch(what, f"values differ by up to {diff:.3g}")
    if c.dtype.kind not in "fc" and not np.array_equal(c, e):
        raise VerifyMismatch(what, "values differ")


class VerifyMismatch(AssertionError):
    def __init__(self, what, detail):
        super().__init__(f"dynograph.compile(verify=True): compiled and eager execution "
                         f"disagree on {what}: {detail}")


# ---------------------------------------------------------------- the compiled function

class CompiledFunction:
    def __init__(self, fn, backend="llvm", fullgraph=False, dynamic=None, mode=None,
                 verify=False, cache_limit=None, passes=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode
        self.verify = verify
        self.cache_limit = cache_limit or DEFAULT_CACHE_LIMIT
        self.passes = passes
        self.entries = []
        self.eager_reason = None            # set once the function fell back to eager
        self.events = []                    # explain(): traces, recompiles, breaks, hits
        self.hits = 0
        self.misses = 0
        self.last_hit = None                # the entry the last replay ran: checked first

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        bound = self.__dict__.setdefault("_bound", {})
        c = bound.get(id(obj))
        if c is None:
            c = CompiledFunction(types.MethodType(self.fn, obj), self.backend, self.fullgraph,
                                 self.dynamic, self.mode, self.verify, self.cache_limit, self.passes)
            bound[id(obj)] = c
        return c

    # ------------------------------------------------------------ calling

    def __call__(self, *args, **kwargs):
        if not _enabled() or self.eager_reason is not None or TRACE.tracer is not None:
            return self.fn(*args, **kwargs)
        flat = []
        spec = flatten((args, kwargs), flat)
        # a training step's first entry (traced before any .grad existed) fails every later
        # call: the entry that ran last is checked first, the others in their order
        last = self.last_hit
        if last is not None and last.guards.check(flat, spec) is None:
            self.hits += 1
            last.calls += 1
            return self._run(last, flat, args, kwargs)
        failures = []
        for entry in self.entries:
            failed = entry.guards.check(flat, spec)
            if failed is None:
                self.hits += 1
                entry.calls += 1
                self.last_hit = entry
                return self._run(entry, flat, args, kwargs)
            failures.append(failed)
        self.misses += 1
        if len(self.entries) >= self.cache_limit:
            return self._give_up(failures, args, kwargs)
        if failures:
            name, expected, actual = failures[-1]
            self._event("recompile", f"guard failed: {name}: expected {expected!r}, got {actual!r}")
            logs.log("recompiles", f"{self.__name__}: recompiling because {name} changed "
                                   f"(expected {expected!r}, got {actual!r})")
        with _collector_off():
            return self._compile_call(args, kwargs, flat, spec)

    def _compile_call(self, args, kwargs, flat, spec):
        """A call no entry covers: trace it, trace ahead where it changed the state its graph
        is specialized on, and start compiling what the next call will run."""
        n = len(self.entries)
        if self.backend == "llvm":
            from .llvm.pool import warm_up
            warm_up()       # the kernels' thread pool builds while this call traces
        with self._tracing_blas():
            result = self._trace(args, kwargs, flat, spec)
        if self.dynamic is not False and len(self.entries) > 1 and self.eager_reason is None:
            self._try_dynamic()
        if len(self.entries) > n and self.eager_reason is None:
            with self._tracing_blas():
                self._look_ahead(args, kwargs, flat, spec)
            # the graph the next call will most likely run is optimized now (a pass that fails
            # fails this call), and its kernels start compiling; one the trace ahead replaced
            # waits until some call needs it
            self.entries[-1].parts()
            self._compile_ahead(self.entries[-1], flat)
        if len(self.entries) > n:
            self.last_hit = self.entries[-1]    # what the next call most likely replays
        return result

    def _tracing_blas(self):
        """numpy's BLAS while a call traces: as while a program runs (the LLVM backend's
        ``running``: one thread where the kernels have a pool of several), for its products go
        to the pool once it is built, and before that (llvm/pool.building) OpenBLAS's own
        threads would spin on against the pool's."""
        if self.backend != "llvm":
            return contextlib.nullcontext()
        from .llvm.backend import LLVM
        return LLVM.running()

    def _compile_ahead(self, entry, flat):
        """Start compiling the kernels of the graph the next call will run, on a few threads
        (compiler/lowering/ahead.py): they compile while this call returns and the caller
        prepares the next."""
        if self.backend != "llvm" or entry.aot is not None or self.verify:
            return
        from .llvm.backend import prepare
        try:
            inputs = entry.read_inputs(flat)
            batch = entry.guards.batch_size(flat) if entry.guards.dynamic else None
        except Exception:       # noqa: BLE001  (the next call meets it, if it is real)
            return
        prepare(entry.graph, inputs, batch, entry.writable)

    def _look_ahead(self, args, kwargs, flat, spec):
        """The call just traced may have changed state its graph is specialized on (a training
        step's first call creates the .grad and the optimizer state): then trace the function
        again now, on the state the call left, and undo everything that second run changed
        (compiler/undo.py), so that the next call replays instead of tracing."""
        entry = self.entries[-1]
        failed = entry.guards.check(flat, spec)
        if failed is None or len(self.entries) >= self.cache_limit:
            return
        n = len(self.entries)
        undo = Undo(entry.params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # the user saw this call's warnings once
                self._trace(args, kwargs, flat, spec, undo=undo)
        except Exception as e:          # the next call traces and meets it for real
            self._event("look-ahead", f"tracing ahead raised {type(e).__name__}: "
                                      f"{str(e).splitlines()[0] if str(e) else ''}")
        finally:
            undo.rollback()
        if len(self.entries) == n:
            return
        missed = self.entries[-1].guards.check(flat, spec)
        if missed is not None:          # the state put back is not the one traced: not usable
            del self.entries[n:]
            self._event("look-ahead", f"graph {n} traced ahead was dropped: its guard "
                                      f"{missed[0]} does not hold on the state the call left")
            return
        name, expected, actual = failed
        self._event("look-ahead", f"graph {n} traced ahead for the next call, because this call "
                                  f"changed {name} (was {expected!r}, now {actual!r})")

    def _try_dynamic(self):
        """A second batch size: merge the new entry with the matching one into a general graph."""
        new = self.entries[-1]
        for old in self.entries[:-1]:
            found = old.guards.dynamic_batch(new.guards)
            if found is None:
                continue
            s1, s2, dims = found
            if any(a is not None and a[0] == "view" for a in old.aliases):
                self._event("dynamic", f"batch sizes {s1} and {s2}: the function returns a view of "
                                       "an argument, whose layout is fixed: one graph per batch size")
                return
            if not _same_constants(old, new):
                self._event("dynamic", f"batch sizes {s1} and {s2}: a constant tensor of the program "
                                       "depends on the batch size: one graph per batch size")
                return
            sizes = size_guards(old.guards.size_uses, new.guards.size_uses, s1, s2)
            if sizes is None:
                uses = [u for u in old.guards.size_uses if u[0] == s1] or old.guards.size_uses
                where = uses[0][3] if uses else "?"
                self._event("dynamic", f"batch sizes {s1} and {s2}: the code uses the batch size "
                                       f"as a number (at {where}): one graph per batch size")
                return
            graph = generalize(old.graph, new.graph, s1, s2)
            backward = None
            if graph is not None and old.backward_graph is not None:
                backward = generalize(old.backward_graph, new.backward_graph, s1, s2)
                if backward is None:
                    graph = None
            if graph is not None and not holds_at_other_sizes(old.captured, new.captured, s1, s2):
                self._event("dynamic", f"batch sizes {s1} and {s2}: a size in the program is not "
                                       "a linear function of the batch size: one graph per size")
                return
            if graph is None:
                self._event("dynamic", f"batch sizes {s1} and {s2} trace to different programs: "
                                       "one graph per batch size")
                return
            old.graph, old.backward_graph = graph, backward or old.backward_graph
            old.guards.make_dynamic(dims, sizes)
            self.entries.pop()
            self._event("dynamic", f"batch sizes {s1} and {s2}: the batch dimension is symbolic "
                                   f"(s0); one graph serves every batch size >= 2")
            logs.log("recompiles", f"{self.__name__}: batch dimension made symbolic "
                                   f"({s1} and {s2} seen)")
            return

    def _give_up(self, failures, args, kwargs):
        name, expected, actual = failures[-1]
        self.eager_reason = (f"{self.cache_limit} recompilations (cache_limit); the guard that "
                             f"keeps failing is {name}: expected {expected!r}, got {actual!r}")
        warnings.warn(f"dynograph.compile: {self.__name__} fell back to eager execution after "
                      f"{self.eager_reason}", stacklevel=3)
        self._event("fallback", self.eager_reason)
        return self.fn(*args, **kwargs)

    def _run(self, entry, flat, args, kwargs):
        if self.verify:
            return self._run_verified(entry, flat, args, kwargs)
        try:
            if entry.aot is not None:
                outs = self._run_differentiable(entry, flat)
            else:
                outs = run_entry(self.backend, entry, flat)
        except Exception as e:
            if entry.writable and self.backend != "interpreter":
                raise       # kernels may have updated state in place already: no clean rerun
            # nothing was written back yet: running the call eagerly gives eager's exception
            # (type and message) and leaves eager's state
            self._event("raised", f"a replay raised {type(e).__name__}: {e}; the call ran eagerly")
            return self.fn(*args, **kwargs)
        return unflatten(entry.out_spec, restore_aliases(entry.aliases, outs, flat))

    def _run_differentiable(self, entry, flat):
        """Outputs that carry a grad_fn running the compiled backward graph."""
        if entry.function is None:
            def run_forward(f):
                outs = run_entry(self.backend, entry, f)
                n = len(outs) - entry.aot_saved
                return [x for x in outs[:n] if not _is_const(x)], outs[n:]

            def run_backward(feeds, f):
                batch = entry.guards.batch_size(f) if entry.guards.dynamic else None
                return get_runner(self.backend)(entry.backward_graph, feeds, batch)[0]
            entry.function = make_function(entry, run_forward, run_backward)
        leaves = [binding_tensor(b, flat) for b, _ in entry.aot.leaves]
        from dynograph.autograd.grad_mode import enable_grad
        with enable_grad():         # the outputs needed gradients when traced (maybe inside enable_grad)
            tensors = iter(entry.function.apply(flat, *leaves))
        n = len(entry.out_kinds) - entry.aot_saved
        return [next(tensors) if k[0] == "tensor" else k[1] for k in entry.out_kinds[:n]]

    def _run_verified(self, entry, flat, args, kwargs):
        """verify=True: run compiled, put the state back, run eagerly, compare everything."""
        before = _snapshot(entry, flat)
        compiled_out = run_entry(self.backend, entry, flat)
        compiled_state = _slot_values(entry, flat)
        _restore(entry, flat, before)
        TRACE.tracer = None
        eager = self.fn(*args, **kwargs)
        eager_out = []
        flatten(eager, eager_out)
        for i, (c, e) in enumerate(zip(compiled_out, eager_out)):
            _compare(f"output {i}", c, e)
        for name, value in _slot_values(entry, flat).items():
            _compare(name, compiled_state.get(name), value)
        return eager

    # ------------------------------------------------------------ tracing

    def _trace(self, args, kwargs, flat, spec, undo=None):
        """Trace a call (it runs eagerly) into a new entry.  With ``undo`` (a look-ahead
        trace, undone by the caller) a graph break leaves no entry and no fallback: the next
        call traces again and meets it."""
        from dynograph._tensor import Tensor
        from .pipeline import optimize
        tracer = Tracer(fullgraph=self.fullgraph and undo is None)
        tracer.undo = undo
        for i, x in enumerate(flat):
            if isinstance(x, Tensor):
                tracer.bind_argument(x, i, _arg_name(self.fn, i))
        guards = Guards(self.fn, flat, spec)
        if guards.overlapping_arguments(flat):
            # the graph takes each argument as its own buffer: a write through one would not
            # reach the other
            tracer.graph_break("two tensor arguments are different views of the same memory")
        histories = [(x, x.requires_grad, x.grad_fn) for x in flat if isinstance(x, Tensor)]
        TRACE.tracer = tracer
        try:
            with Watcher(tracer, self.fn) as watcher:
                result = self.fn(*args, **kwargs)
            if any(x.requires_grad != rg or x.grad_fn is not fn for x, rg, fn in histories):
                # (a1.copy_(a0) with a0 requiring grad): the graph writes values back, not
                # autograd history
                tracer.graph_break("an in-place op gives a tensor argument a new gradient history")
            for reason, where in watcher.side_effects():
                tracer.graph_break(reason, where)
            for check in tracer.end_checks:
                check()
            if tracer.ran_backward and any(isinstance(x, Tensor) and x.requires_grad and
                                           x.grad_fn is not None for x in flat):
                # its gradient flows on into a graph built outside the call
                tracer.graph_break("backward() inside the function reaches an argument that is "
                                   "the result of earlier operations (not a leaf)")
            out_flat = []
            out_spec = flatten(result, out_flat)
            out_tensors = [x for x in out_flat if isinstance(x, Tensor)]
            aliases = output_aliases(tracer, flat, out_flat)
            plan = None if tracer.breaks else trace_backward(tracer, out_tensors)
            effects, clears = tracer.finish(out_tensors) if not tracer.breaks else ([], [])
        except GraphBreak as e:
            where = str(e).split("\n  at ")[-1].split("\n")[0]
            err = CompileError("dynograph.compile: graph break under fullgraph=True",
                               str(e).split("\n")[0], "move the call out of the compiled function, "
                               "or compile without fullgraph=True", where)
            if config.debug("tracebacks"):
                raise err from e            # the compiler's own frames, for its developers
            raise err.with_traceback(None) from None
        finally:
            TRACE.tracer = None
            tracer.forget()
        if tracer.breaks:
            if undo is not None:
                self._event("look-ahead", f"tracing ahead met a graph break: {tracer.breaks[0][0]}")
                return result
            return self._fall_back(tracer, result)
        guards.capture_world(tracer)
        guards.size_uses = tracer.size_uses
        guards.add_sources(watcher.guarded_sources())
        out_kinds = []
        k = 0
        for x in out_flat:
            if isinstance(x, Tensor):
                out_kinds.append(("tensor", k, x.dtype, x.requires_grad))
                k += 1
            else:
                if type(x) is SizeInt:      # a size returned to the caller: its value counts
                    tracer.size_uses.append((int.__int__(x), "value", "returned", "the return value"))
                out_kinds.append(("const", plain(x)))
        captured = tracer.graph
        binding_of = {id(inp): b for inp, b in zip(captured.inputs, tracer.bindings)}
        forward = backward = None
        if plan is not None:
            forward, backward, n_saved = split(captured, plan)
            out_kinds += [("saved", i) for i in range(n_saved)]
        passes = self.passes

        def optimized():
            graph, stats = optimize(captured if plan is None else forward, passes)
            parts = {"graph": graph, "stats": stats,
                     "bindings": [binding_of[id(inp)] for inp in graph.inputs]}
            if plan is not None:
                position = {id(inp): i for i, inp in enumerate(backward.inputs)}
                back, _ = optimize(backward, passes)
                parts["backward_graph"] = back
                parts["backward_feeds"] = [position[id(inp)] for inp in back.inputs]
            return parts

        effect_map = {}
        for slot_or_binding, kind in effects:
            name = getattr(slot_or_binding, "name", None)
            if kind == "assign" and isinstance(slot_or_binding, tuple):     # an argument's .grad
                name = tracer.arg_grads[slot_or_binding[1]][1]
            if name is None:
                name = next(inp.name for inp, b in zip(captured.inputs, tracer.bindings)
                            if b is slot_or_binding)
            effect_map[name] = (slot_or_binding, kind)
        entry = Entry(captured, effect_map, clears, guards, out_spec, out_kinds, optimized)
        entry.captured_bindings = tracer.bindings
        entry.params = [p for p, _, _ in tracer.params.values()]
        entry.aliases = aliases
        if plan is not None:
            entry.aot, entry.aot_saved = plan, n_saved
            entry.aot_forward = forward         # unoptimized: replayed eagerly for create_graph
            entry.aot_bindings = [binding_of[id(inp)] for inp in forward.inputs]
        self.entries.append(entry)
        self._event("trace", f"graph {len(self.entries) - 1}: {len(captured.nodes)} nodes captured")
        if config.debug("guards"):      # (describing every guard takes a millisecond)
            logs.log("guards", f"{self.__name__}: graph {len(self.entries) - 1} guards:\n"
                               + guards.describe())
        from . import dump
        dump.maybe_dump(self, entry)
        if any(type(x) is SizeInt for x in out_flat):   # the caller gets plain ints, as eagerly
            return unflatten(out_spec, [plain(x) for x in out_flat])
        return result

    def _fall_back(self, tracer, result):
        reason, where = tracer.breaks[0]
        self.eager_reason = f"graph break: {reason} at {where}"
        warnings.warn(f"dynograph.compile: {self.__name__} runs eagerly: graph break at {where}: "
                      f"{reason}", stacklevel=3)
        for r, w in tracer.breaks:
            self._event("break", f"{r} at {w}")
            logs.log("breaks", f"{self.__name__}: graph break at {w}: {r}")
        return result

    def _event(self, kind, text):
        self.events.append((kind, text))

    # ------------------------------------------------------------ inspection

    def graphs(self):
        """The optimized graph of every cached specialization."""
        return [e.graph for e in self.entries]

    def explain(self):
        return explain_compiled(self)


def _same_constants(old, new):
    """Whether two traces captured constant tensors with the same values: a constant made from
    a size (the position x[-1] writes to) differs between batch sizes, and a graph serving
    every batch size would keep the first trace's."""
    pairs = zip(zip(old.captured.inputs, old.captured_bindings),
                zip(new.captured.inputs, new.captured_bindings))
    for (inp1, b1), (inp2, b2) in pairs:
        if inp1.kind != "const":
            continue
        if not (hasattr(b1, "get") and hasattr(b2, "get")):
            return False            # bound differently in the two traces: not one program
        a1, a2 = b1.get()._data, b2.get()._data
        if a1.shape != a2.shape or not np.array_equal(a1, a2, equal_nan=a1.dtype.kind in "fc"):
            return False
    return True


def _arg_name(fn, i):
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        names = code.co_varnames[:code.co_argcount]
        if getattr(fn, "__self__", None) is not None:
            names = names[1:]
        if i < len(names):
            return names[i]
    return f"arg{i}"


# ---------------------------------------------------------------- public entry points

def compile(fn=None, *, backend=None, fullgraph=False, dynamic=None, mode=None, verify=False,
            cache_limit=None, options=None):
    """Compile a function, a bound method or a module for faster repeated calls.

    ``@dynograph.compile`` (with or without arguments) traces the function on its first call
    into one graph (forward, ``backward()`` and optimizer updates alike), optimizes it and
    replays it on later calls whose guards hold.  ``dynograph.compile(model)`` returns a module
    that shares ``model``'s parameters and runs its forward compiled.  ``backend``: ``"llvm"``
    (the default: native kernels compiled with LLVM) or ``"interpreter"`` (numpy, node by node).

    Example::

        @dynograph.compile
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
    """
    options = dict(options or {})
    backend = backend or options.pop("backend", None) or DEFAULT_BACKEND
    get_runner(backend)                 # an unknown backend is an error now, not at the first call

    def wrap(f):
        from dynograph.nn import Module
        if isinstance(f, Module):
            return _compiled_module(f, backend, fullgraph, dynamic, mode, verify, cache_limit)
        if not callable(f):
            raise TypeError(f"dynograph.compile expects a function or a module, got "
                            f"{type(f).__name__}")
        return CompiledFunction(f, backend, fullgraph, dynamic, mode, verify, cache_limit)

    if fn is None:
        return wrap
    return wrap(fn)


def _compiled_module(module, *options):
    from dynograph.nn import Module

    class OptimizedModule(Module):
        """``module`` with its forward compiled; parameters and buffers are the module's own."""

        def __init__(self, mod):
            super().__init__()
            self._orig_mod = mod
            self._compiled_call = CompiledFunction(lambda *a, **k: mod(*a, **k), *options)

        def forward(self, *args, **kwargs):
            return self._compiled_call(*args, **kwargs)

        def __repr__(self):
            return f"OptimizedModule(\n  (_orig_mod): {_indent(repr(self._orig_mod))}\n)"

    return OptimizedModule(module)


def _indent(text):
    return text.replace("\n", "\n  ")


def trace(fn, *example_args, **example_kwargs):
    """The graph ``fn`` produces on these arguments, as captured (before optimization).

    The function runs once for real on the arguments (its side effects happen).
    ``trace(tensor)`` is PyTorch's ``torch.trace``: the sum of a matrix's diagonal."""
    from dynograph._tensor import Tensor
    if isinstance(fn, Tensor) or not callable(fn):
        from dynograph._linalg import trace as matrix_trace
        return matrix_trace(fn, *example_args, **example_kwargs)
    tracer = Tracer(fullgraph=True)
    flat = []
    flatten((example_args, example_kwargs), flat)
    for i, x in enumerate(flat):
        if isinstance(x, Tensor):
            tracer.bind_argument(x, i, _arg_name(fn, i))
    TRACE.tracer = tracer
    try:
        result = fn(*example_args, **example_kwargs)
        out = []
        flatten(result, out)
        tracer.finish([x for x in out if isinstance(x, Tensor)])
    finally:
        TRACE.tracer = None
    return tracer.graph


del D


def explain(fn, *args, **kwargs):
    """Compile ``fn`` (unless it already is compiled), call it on ``args`` and report.

    The call really runs (its side effects happen).  Calling ``explain`` on an already compiled
    function reports its whole history so far, including this call."""
    compiled = fn if isinstance(fn, CompiledFunction) else CompiledFunction(fn)
    if args or kwargs:
        compiled(*args, **kwargs)
    return explain_compiled(compiled)

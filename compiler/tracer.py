"""The tracer: run a Python function once and record what it did as a graph.

Tracing executes the function for real (eager tensors, real numbers) while the dispatcher
appends one IR node per op call.  Executing rather than only propagating shapes keeps the
first call's side effects exact (parameters are updated, gradients set) and lets a graph break
(``.item()`` steering control flow) fall back to plain eager execution mid-function.

Functionalization: the tracer keeps, for every buffer (numpy storage root) it has seen, the IR
value of its current contents.  A read of a tensor is its cached value when the buffer has not
been written since; otherwise a ``strided_view`` of the buffer's value.  A write (an in-place
op, ``copy_``, ``x[...] = v``, ``.grad`` accumulation) makes the buffer's value a new one:
the source itself when the write covers the whole buffer, else a ``strided_scatter``.  After
the call, every state buffer whose value changed becomes an ``update`` of the graph.

Tensors the function reads but did not create are graph inputs, classified by what they are:
user arguments, parameters and buffers of modules that were called, gradients, optimizer
state, or captured constants.  Python numbers are specialized (the caller guards them), except
learning rates, which optimizers hand over as ``scalar`` inputs so that a scheduler does not
force a retrace.
"""
import functools
import os
import sys
import weakref

import numpy as np

# the eager core's hook: a trace installs its Tracer in TRACE.tracer (compiled.py does)
from dynograph._trace_hook import TRACE, SizeInt, TraceHook, is_tracing  # noqa: F401
from dynograph._tensor import Tensor
from dynograph.autograd.engine import own_code_only
from dynograph.autograd.graph import OpNode
from dynograph.runtime import dtypes as D
from dynograph.runtime.backend import unwatched
from dynograph.runtime.executor import address, storage_root  # noqa: F401  (importers use it)
from dynograph.runtime.cuda_memory import DeviceArray
from .ir import RNG, Graph, Input, Node, TensorType, Value
from .watch import value_key

_PKG_DIRS = tuple(os.path.dirname(os.path.abspath(p)) + os.sep for p in (
    __file__, os.path.join(os.path.dirname(__file__), "..", "runtime", "x"),
    os.path.join(os.path.dirname(__file__), "..", "dynograph", "x")))


class GraphBreak(RuntimeError):
    """Raised under ``fullgraph=True`` where the function cannot be captured in one graph."""


def user_frame(depth=2):
    """'file:line in function' of the innermost frame outside dynograph, and the frame."""
    f = sys._getframe(depth)
    while f is not None:
        code = f.f_code
        filename = code.co_filename
        inside = _INSIDE.get(filename)
        if inside is None:
            inside = _INSIDE[filename] = _inside_dynograph(filename)
        if not inside:
            return f"{filename}:{f.f_lineno} in {code.co_name}", f
        f = f.f_back
    return "<unknown>", None


# file -> whether it is dynograph's: every recorded op asks, for each frame (by file name, a
# string whose hash is kept, where a code object's hash is computed again at every lookup)
_INSIDE = {}


def _inside_dynograph(filename):
    return filename.startswith(_PKG_DIRS) or "dynograph" + os.sep in filename


def _extent(a):
    """The first and one-past-last byte addresses of array ``a``'s elements."""
    lo = hi = address(a)
    for n, st in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.itemsize


def is_inside(a, b):
    """Whether every element of array ``a`` lies in the memory span of array ``b``."""
    (alo, ahi), (blo, bhi) = _extent(a), _extent(b)
    return blo <= alo and ahi <= bhi


def _geometry(a, root):
    off = 0 if a is root else address(a) - address(root)
    return (a.shape, a.strides, off)


class _Storage:
    """What the tracer knows of one buffer: the IR value of its contents (for the geometry
    ``geom``), a write counter, and the state slot it came from (None: made in the graph)."""
    __slots__ = ("root", "value", "version", "geom", "slot", "input_value")

    def __init__(self, root, value, geom, slot=None):
        self.root = root
        self.value = value
        self.input_value = value
        self.version = 0
        self.geom = geom
        self.slot = slot


class _ResultStorage(_Storage):
    """The storage of an array an op made during the trace, holding it weakly and forgotten
    (``storages`` loses its entry) when the array dies: a trace that kept every intermediate
    alive ran on fresh memory, a page fault every 4 KB (47k in the first trace of a transformer
    step, about 2 µs each).  Anyone who looks it up holds a view of the array, so it is alive
    then."""
    __slots__ = ("_ref",)

    def __init__(self, root, value, geom, storages):
        self._ref = weakref.ref(root, _popping(storages, id(root)))
        self.value = value
        self.input_value = value
        self.version = 0
        self.geom = geom
        self.slot = None

    @property
    def root(self):
        return self._ref()


def _forgetting(t, cache):
    """A weak reference to tensor ``t`` that drops its entry of ``cache`` when ``t`` dies (an
    entry for another tensor can only take its id after that)."""
    return weakref.ref(t, _popping(cache, id(t)))


def _popping(table, key):
    """A weak reference's callback removing ``key`` from ``table``: ``table.pop(key, ref)``, the
    dying reference being the default.  No Python frame runs, so the watcher's trace hook
    (compiler/watch.py) is not called for it: lambdas started 570 of the 8700 hooked frames of a
    transformer step's first call."""
    return functools.partial(table.pop, key)


class Slot:
    """A place in the user's program that holds a tensor: how to read and replace it."""
    __slots__ = ("name", "kind", "get", "set", "code")

    def __init__(self, name, kind, get, set=None, code=None):
        self.name = name
        self.kind = kind
        self.get = get            # () -> Tensor or None
        self.set = set            # (Tensor or None) -> None
        # (bind) -> a Python expression of ``get()`` for the generated guard function
        # (guard_code.py; ``bind`` names an object there), or None
        self.code = code


class Tracer(TraceHook):
    def __init__(self, fullgraph=False):
        self.graph = Graph()
        self.fullgraph = fullgraph
        self.storages = {}          # id(root array) -> _Storage
        # id(tensor) -> (weak reference to it, array, value, storage, version); the entry goes
        # when the tensor dies, and an op's result is held by nothing of the tracer's
        self.cache = {}
        self.known = {}             # id(tensor) -> Slot: tensors whose place is known
        self.bindings = []          # parallel to graph.inputs: Slot, or ("arg", i), or scalar getter
        self.breaks = []            # (reason, "file:line")
        self.keep = []              # strong references: ids must stay unique while tracing
        #                             (the tensors and arrays from outside the call)
        self.modules = []           # modules called (announced by Module.__call__)
        self.announced = set()      # ids of those modules and of their submodules then
        self.optimizers = []        # optimizers used (announced by step/zero_grad)
        self.opt_before = {}        # id(optimizer) -> {(id(param), key): state value before}
        self.opt_names = {}         # id(optimizer) -> its name in the graph ('opt', 'opt1'...)
        self.params = {}            # id(param) -> (param, name, grad object before tracing)
        self.rngs = {}              # id(numpy Generator) -> Value
        self.scalars = {}           # slot name -> 0-d tensor handed to the program
        self.n_const = 0
        self.arg_storages = {}      # id(argument array) -> _Storage
        self.arg_roots = {}         # id(buffer of an argument) -> [its arguments' _Storage]
        self.param_slots = set()    # slot names whose layout a parameter's fact guards
        self.arg_tensors = {}       # argument position -> Tensor
        self.arg_grads = {}         # argument position -> (Tensor, slot name, .grad before)
        # guard facts, recorded when first seen (before the call changes them):
        # (name, getter, value then)
        self.facts = []
        self.watcher = None         # the watch.Watcher of this trace, when there is one
        self.size_uses = []         # (size, kind, detail, "file:line") by the user's code
        self.ran_backward = False   # a backward pass ran during the call (the engine says so)
        self.undo = None            # an undo.Undo when the call's changes are to be put back
        self.end_checks = []        # at_end: called when the traced call returned
        # id(tensor) -> (tensor, 'read' | 'replaced'): the first thing the call did with the
        # tensor's .grad (see grad_read); the tensor is held so that its id stays its own
        self.grad_access = {}
        self.grads_made = {}        # id(tensor) -> the .grad backward() made for it

    # ------------------------------------------------------------ sizes

    def sizes(self, shape, frame):
        """A tensor's shape as the code in ``frame`` sees it while tracing: for the user's
        code, SizeInts that report how the code uses them (``symbolic.SizeInt``); dynograph's
        own code gets plain ints."""
        if self.watcher is None or not self.watcher.user_code(frame):
            return shape
        return tuple(SizeInt(n) for n in shape)

    def size_consumed(self, value, what):
        """An op received a size of the user's code as a number to compute with (not as a
        size): a use of its value."""
        self.size_uses.append((value, "value", what, user_frame(3)[0]))

    def size_used(self, value, kind, detail, frame):
        watcher = self.watcher
        if watcher is not None and watcher.user_code(frame):
            where = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
            self.size_uses.append((value, kind, detail, where))

    # ------------------------------------------------------------ inputs

    def add_input(self, kind, name, type, binding):
        value = Value(type)
        self.graph.inputs.append(Input(value, kind, name))
        self.bindings.append(binding)
        return value

    def bind_argument(self, tensor, index, name):
        """A user argument: its own array (not the buffer it may be a window of: a batch sliced
        from a dataset tensor is a different window each call) becomes an ``input``."""
        a = tensor._data
        if id(a) in self.arg_storages:
            return
        v = self.add_input("input", name, TensorType(a.shape, D.from_numpy_dtype(a.dtype)),
                           ("arg", index))
        self.arg_storages[id(a)] = _Storage(a, v, (a.shape, a.strides, 0), slot=name)
        # views of the argument made during the call are found through its buffer
        self.arg_roots.setdefault(id(storage_root(a)), []).append(self.arg_storages[id(a)])
        self.arg_tensors[index] = tensor
        self.keep.extend((tensor, a))
        if tensor.requires_grad:
            if self.undo is not None:
                self.undo.grad(tensor)
            # backward() accumulates into (or creates) the argument's .grad: state of the call
            self.arg_grads[index] = (tensor, f"{name}.grad", tensor._grad)
            if tensor._grad is not None:
                self._external(tensor._grad, ("arg_grad", index), "state", f"{name}.grad")

    def bind_placeholder(self, tensor, value):
        """A tensor made by the compiler that stands for input ``value`` (an output gradient)."""
        a = tensor._data
        self.arg_storages[id(a)] = _Storage(a, value, (a.shape, a.strides, 0))
        self.keep.extend((tensor, a))

    def scalar_input(self, name, value, get):
        """A Python number the program reads each call (a learning rate): a 0-d float64 input."""
        t = self.scalars.get(name)
        if t is None:
            t = Tensor._wrap(np.array(value, dtype=np.float64))
            v = self.add_input("scalar", name, TensorType((), D.float64), ("scalar", get))
            root = storage_root(t._data)
            self.storages[id(root)] = _Storage(root, v, _geometry(t._data, root))
            self.keep.append(t)
            self.scalars[name] = t
        return t

    def _external(self, tensor, binding, kind, name):
        a = tensor._data
        root = storage_root(a)
        if id(root) in self.storages:
            return self.storages[id(root)]
        v = self.add_input(kind, name, TensorType(root.shape, D.from_numpy_dtype(root.dtype)), binding)
        if hasattr(binding, "get") and name not in self.param_slots:   # (else its parameter's fact)
            self.fact(name, LayoutFact(binding))
        s = _Storage(root, v, (root.shape, root.strides, 0), slot=name)
        self.storages[id(root)] = s
        self.keep.append(root)
        return s

    def _classify(self, tensor):
        """An unknown tensor read by the program: a parameter, a gradient, state or a constant."""
        slot = self.known.get(id(tensor))
        if slot is None:
            slot = self._find_grad_slot(tensor)
        if slot is None:
            from dynograph.nn import Parameter
            kind = "param" if isinstance(tensor, Parameter) else "const"
            if self.undo is not None and tensor.requires_grad:
                self.undo.grad(tensor)      # backward() may give it a .grad
            name = f"{kind}{self.n_const}"
            self.n_const += 1
            ref = tensor
            slot = Slot(name, kind, lambda: ref, code=lambda bind: bind(ref))
            self.known[id(tensor)] = slot
        self.keep.append(tensor)
        return self._external(tensor, slot, slot.kind if slot.kind != "grad" else "state", slot.name)

    def _find_grad_slot(self, tensor):
        for p, name, _ in self.params.values():
            if p._grad is tensor:
                return self._grad_slot(p, name)
        return None

    def _grad_slot(self, p, name):
        def get():
            return p._grad

        def set(t):
            p._grad = t
        return Slot(f"{name}.grad", "grad", get, set)

    # ------------------------------------------------------------ announcements

    def announce_module(self, module):
        """A module is being called: name its parameters and buffers, note their grads."""
        if id(module) in self.announced:       # (every submodule call of a model asks)
            return
        with unwatched():             # the tracer's own walk over the module is not the program's
            self._announce_module(module)

    def _announce_module(self, module):
        prefix = "" if not self.modules else f"m{len(self.modules)}."
        self.modules.append(module)
        subs = list(module.modules())
        self.keep.extend(subs)                      # (their ids stay theirs)
        self.announced.update(map(id, subs))
        for name, sub in module.named_modules(prefix=prefix.rstrip(".")):
            self.fact(f"{name or type(module).__name__}.training", AttributeFact(sub, "training"))
            if self.undo is not None:
                self.undo.module(sub)
        for name, p in module.named_parameters(prefix=prefix.rstrip("."), remove_duplicate=True):
            if id(p) in self.params and self.params[id(p)][1].startswith("opt"):
                # named by an optimizer first (zero_grad before forward): the module's name
                # is the readable one, as long as the parameter was not read yet
                if not self._unread(p):
                    continue
                _, _, before = self.params.pop(id(p))
                self.known.pop(id(p), None)
                if before is not None:
                    self.known.pop(id(before), None)
                self._register_param(p, name, before)
                for opt in self.optimizers:         # its state is named after it too
                    self._name_state(opt, p)
                continue
            self.announce_param(p, name)
        for name, b in module.named_buffers():
            if id(b) not in self.known:         # found from the module, named with its prefix
                self.known[id(b)] = _attr_slot(module, name, "buffer", prefix + name)

    def fact(self, name, get):
        self.facts.append((name, get, get()))

    def at_end(self, check):
        self.end_checks.append(check)

    def _unread(self, p):
        return id(storage_root(p._data)) not in self.storages

    def announce_param(self, p, name):
        if id(p) in self.params:
            return
        # its layout, its .grad's (or None), requires_grad, and tensor hooks (they run Python
        # during backward, which the graph does not replay): one fact, checked on every call
        self.fact(f"{name}: layout, .grad, requires_grad, hooks", ParamFact(p))
        if p._hooks:
            self.graph_break(f"parameter {name} has a tensor hook (register_hook): it runs "
                             "Python code during backward")
        self._register_param(p, name, p._grad)

    def _register_param(self, p, name, grad_before):
        if self.undo is not None and id(p) not in self.params:
            self.undo.grad(p)
        self.params[id(p)] = (p, name, grad_before)
        self.param_slots.update((name, f"{name}.grad"))     # announce_param's fact guards them
        self.keep.append(p)
        if id(p) not in self.known:
            self.known[id(p)] = Slot(name, "param", lambda: p)
        if p._grad is not None:
            self.known[id(p._grad)] = self._grad_slot(p, name)

    def announce_optimizer(self, opt):
        if any(o is opt for o in self.optimizers):
            return
        self.optimizers.append(opt)
        if self.undo is not None:
            self.undo.optimizer(opt)
        oname = "opt" if len(self.optimizers) == 1 else f"opt{len(self.optimizers) - 1}"
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in self.params:
                    self.announce_param(p, f"{oname}.param{len(self.params)}")
        self.opt_names[id(opt)] = oname
        self.opt_before[id(opt)] = {(id(p), k): v for p, st in opt.state.items()
                                    for k, v in st.items()}
        for p in opt.state:
            self._name_state(opt, p)
        for i, group in enumerate(opt.param_groups):
            keys = tuple(k for k in group if k not in ("params", "lr", "initial_lr"))
            self.fact(f"{oname}.param_groups[{i}] {', '.join(keys)}",
                      lambda g=group, keys=keys: tuple(value_key(g.get(k)) for k in keys))
        self.fact(f"{oname}.state keys", lambda: _state_keys(opt))
        # which tensors each group updates (add_param_group, a group's list edited)
        self.fact(f"{oname}.param_groups members", lambda: _group_members(opt))

    def grad_read(self, t):
        """The call reads ``t.grad`` (its tensor, or that it is None; backward() reads it to
        add to it): the graph depends on the .grad the call found, unless the call replaced
        it before."""
        if id(t) not in self.grad_access:
            self.grad_access[id(t)] = (t, "read")
            self._adopt_leaf(t)

    def grad_replaced(self, t):
        """The call sets ``t.grad`` (to None or a tensor) without having read it."""
        if id(t) not in self.grad_access:
            self.grad_access[id(t)] = (t, "replaced")
            self._adopt_leaf(t)

    def _adopt_leaf(self, t):
        """A tensor from outside the call whose .grad the call uses, met before any module
        or optimizer named it (a tensor the function reads from a global, a parameter whose
        .grad is read before its module runs): a parameter of the call from now on, so that
        its .grad is state, guarded and written back like a module's parameter's.  (Before,
        such a .grad was bound as the very tensor the trace saw: replays read a stale one and
        never set a new one.)"""
        if id(t) in self.params or t.grad_fn is not None or not t.requires_grad or \
                any(t is a for a in self.arg_tensors.values()):
            return
        s = self._known_storage(t._data)
        if s is not None and s.slot is None:
            return                                  # made by the call itself
        self.announce_param(t, f"leaf{len(self.params)}")

    def grad_made(self, t):
        """backward() gave ``t`` a new .grad, made by the graph."""
        self.grads_made[id(t)] = t._grad

    def _grad_free(self, p):
        """Whether the graph does not depend on the .grad ``p`` had: the call replaced it before
        any use and left None or the gradient backward() made (a replay assigns that; a .grad
        that is a view of other memory, as DistributedDataParallel's bucket views, is not)."""
        if self.grad_access.get(id(p), (None, None))[1] != "replaced":
            return False
        return p._grad is None or p._grad is self.grads_made.get(id(p))

    def state_ahead(self, opt):
        """Before one of dynograph's optimizers updates: the state its first step creates for
        each parameter with a gradient (zeros, a step count) is made now, outside the graph,
        and becomes an input of it, as it is on every later call.  The update then runs the
        code of every later step, on the same values (``Optimizer._state_ahead`` says which
        optimizers do this), and the graph fits the state the call leaves: a training step is
        traced once instead of twice."""
        self.announce_optimizer(opt)
        created = []
        saved, TRACE.tracer = TRACE.tracer, None        # (made outside the graph)
        try:
            with unwatched():
                for group in opt.param_groups:
                    for p in group["params"]:
                        if p._grad is not None and not opt.state.get(p):
                            if opt._state_ahead(p, group):
                                created.append(p)
        finally:
            TRACE.tracer = saved
        if not created:
            return
        before = self.opt_before[id(opt)]
        for p in created:
            before.update(((id(p), k), v) for k, v in opt.state[p].items())
            self._name_state(opt, p)
        # the guard on the state's keys holds for the state as the graph reads it
        name = f"{self.optimizer_name(opt)}.state keys"
        self.facts = [(n, get, get() if n == name else want) for n, get, want in self.facts]

    def _name_state(self, opt, p):
        """Slots for the state tensors of ``p`` in ``opt``, named after ``p``'s name now (a
        parameter an optimizer named first takes its module's name when the module runs;
        the state it had not read yet follows, so every trace names them alike)."""
        pname = self.params[id(p)][1] if id(p) in self.params else "?"
        for k, v in opt.state.get(p, {}).items():
            if hasattr(v, "_data") and (id(v) not in self.known or self._unread(v)):
                self.known[id(v)] = _state_slot(opt, p, k,
                                                f"{self.optimizer_name(opt)}.state[{pname}].{k}")

    def optimizer_name(self, opt):
        return self.opt_names.get(id(opt), "opt")

    # ------------------------------------------------------------ reads

    def value_of(self, t):
        """The IR value of tensor ``t`` now."""
        a = t._data
        hit = self.cache.get(id(t))
        if hit is not None and hit[0]() is t and hit[1] is a and hit[4] == hit[3].version:
            return hit[2]
        s = self._known_storage(a)
        if s is None:
            s = self._classify(t)
        geom = _geometry(a, s.root)
        if geom == s.geom:
            v = s.value
        else:
            v = self._window(s, a, geom)
        self.cache[id(t)] = (_forgetting(t, self.cache), a, v, s, s.version)
        return v

    def _window(self, s, a, geom):
        """A read of part of a buffer: strided_view over the buffer's elements."""
        size, stride, offset = self._element_geometry(s, a, geom)
        return self.emit("strided_view", (s.value,), dict(size=size, stride=stride, offset=offset),
                         [TensorType(a.shape, D.from_numpy_dtype(a.dtype))])[0]

    def _element_geometry(self, s, a, geom):
        root = s.root
        item = a.itemsize
        whole = (root.shape, root.strides, 0)
        if (s.geom != whole or not root.flags.c_contiguous or a.dtype != root.dtype
                or geom[2] % item or any(st % item for st in geom[1])):
            self.graph_break("a tensor aliases memory in a way the compiler cannot follow "
                             "(a view of an op's internal buffer, or of another element type)")
            raise _Abandon()
        return (tuple(a.shape), tuple(st // item for st in geom[1]), geom[2] // item)

    # ------------------------------------------------------------ recording ops

    def emit(self, op, args, attrs, types, source=None):
        outs = tuple(map(Value, types))
        self.graph.nodes.append(Node(op, tuple(args), dict(attrs), outs,
                                     source if source is not None else user_frame(3)[0]))
        return outs

    def run_op(self, run, op, args, attrs):
        """The dispatcher runs and records an op: where its operands are dynograph's tensors
        and plain values, the op's body runs no code of the user's, so the watcher need not
        follow its frames (most of a trace's time went to the hooks there)."""
        if self.watcher is None:
            return run(op, args, attrs)
        return self.watcher.run_inert((args, attrs.values()), run, op, args, attrs)

    def run_rule(self, node, grads):
        """The autograd engine applies a recorded op's derivative rule (dynograph's own code,
        as the op's body is) to ``grads``."""
        if self.watcher is None or type(node) is not OpNode:     # (a subclass: the user's apply)
            return node.apply(*grads)
        return self.watcher.run_inert((node._inputs, node.attrs.values(), grads), node.apply,
                                      *grads)

    def run_backward(self, run, roots, *args):
        """The autograd engine's backward pass from ``roots``: dynograph's own code, which the
        watcher need not follow where it reaches no hook and no user's Function
        (``engine.own_code_only``); its hooks went to every node and gradient sum otherwise."""
        if self.watcher is None or not own_code_only(roots):
            return run(roots, *args)
        return self.watcher.run_inert((), run, roots, *args)

    def run_step(self, opt, closure):
        """An optimizer's update: one of dynograph's optimizers with no closure runs only
        dynograph's own code, unless its hyper-parameters, parameters or state hold a user's
        object (``watch.operands_inert``); the state its first step creates is made first
        (``state_ahead``)."""
        if closure is None and type(opt).__module__.startswith("dynograph.optim."):
            self.state_ahead(opt)
        if self.watcher is None or closure is not None or \
                not type(opt).__module__.startswith("dynograph.optim."):
            return opt._step(closure)
        operands = [g.values() for g in opt.param_groups]
        operands += [s.values() if type(s) is dict else (s,) for s in opt.state.values()]
        return self.watcher.run_inert(operands, opt._step, closure)

    def record(self, op, args, attrs, result, outs):
        """The dispatcher ran ``op`` eagerly, producing tensors ``outs``: append its node."""
        lift = self._lift
        try:
            vargs = tuple([lift(a) for a in args])
            vattrs = {k: lift(v) for k, v in attrs.items()} if attrs else {}
        except _Abandon:
            return
        arrays = result if type(result) is tuple else (result,)
        types = [TensorType(r.shape, D.from_numpy_dtype(r.dtype)) for r in arrays]
        values = self.emit(op.name, vargs, vattrs, types)
        for t, v in zip(outs, values):
            self._bind(t, v)

    def _known_storage(self, a, root=None):
        """The storage the trace knows for array ``a`` (whose storage_root is ``root``, where
        the caller has it): an argument's own array, a buffer, or, for a view of an argument,
        the argument whose memory holds it."""
        s = self.arg_storages.get(id(a))
        if s is not None:
            return s
        if root is None:
            root = storage_root(a)
        s = self.storages.get(id(root))
        if s is not None:
            return s
        for s in self.arg_roots.get(id(root), ()):
            if is_inside(a, s.root):
                return s
        return None

    def _bind(self, t, v):
        a = t._data
        root = storage_root(a)
        s = self._known_storage(a, root)
        if s is None:
            geom = _geometry(a, root)
            if type(root) is np.ndarray or type(root) is DeviceArray:
                s = _ResultStorage(root, v, geom, self.storages)
            else:       # a numpy scalar (no weak references): kept
                s = _Storage(root, v, geom)
                self.keep.append(root)
            self.storages[id(root)] = s
        self.cache[id(t)] = (_forgetting(t, self.cache), a, v, s, s.version)

    def _lift(self, x):
        if isinstance(x, Tensor):
            return self.value_of(x)
        kind = type(x)
        if kind is int or kind is float or kind is bool or x is None or kind is str:
            return x                # (most attributes: nothing to look into)
        if isinstance(x, (tuple, list)):
            lifted = [self._lift(a) for a in x]
            return tuple(lifted) if isinstance(x, tuple) else lifted
        if isinstance(x, np.random.Generator):
            return self._rng(x)
        if isinstance(x, np.ndarray):
            return self.value_of(Tensor._wrap(x))
        if isinstance(x, np.generic):
            return x.item()
        return x

    def _rng(self, gen):
        v = self.rngs.get(id(gen))
        if v is None:
            from dynograph._random import generator_of
            owner = generator_of(gen)
            name = "rng" if len(self.rngs) == 0 else f"rng{len(self.rngs)}"
            v = self.add_input("rng", name, RNG, ("rng", owner))
            self.rngs[id(gen)] = v
            self.keep.append(gen)
        return v

    def alias(self, new, old):
        """``new`` is a fresh copy of ``old`` made outside the dispatcher: same value."""
        try:
            v = self.value_of(old)
        except _Abandon:
            return
        self._bind(new, v)

    # ------------------------------------------------------------ writes

    def write(self, dst, src):
        """``dst``'s memory now holds ``src`` (broadcast and cast to dst): functionalize it.
        Called before the write happens."""
        if self.undo is not None:
            self.undo.before_write(dst)
        try:
            v = self._lift(src)
            a = dst._data
            dtype = D.from_numpy_dtype(a.dtype)
            if not isinstance(v, Value):
                v = self.emit("full", (), dict(shape=tuple(a.shape), fill_value=v, dtype=dtype),
                              [TensorType(a.shape, dtype)])[0]
            if v.type.dtype is not dtype:
                v = self.emit("to_copy", (v,), dict(dtype=dtype),
                              [TensorType(v.type.shape, dtype)])[0]
            if v.type.shape != a.shape:
                v = self.emit("expand", (v,), dict(shape=tuple(a.shape)),
                              [TensorType(a.shape, dtype)])[0]
                # the buffer holds its own copy: later views of it (reshape) need real strides
                v = self.emit("clone", (v,), {}, [TensorType(a.shape, dtype)])[0]
            s = self._known_storage(a)
            if s is None:
                s = self._classify(dst)
            geom = _geometry(a, s.root)
            if geom == s.geom:
                s.value = v
            else:
                size, stride, offset = self._element_geometry(s, a, geom)
                s.value = self.emit("strided_scatter", (s.value, v),
                                    dict(size=size, stride=stride, offset=offset),
                                    [s.value.type])[0]
            s.version += 1
            self.cache[id(dst)] = (_forgetting(dst, self.cache), a, v, s, s.version)
        except _Abandon:
            pass

    # ------------------------------------------------------------ breaks

    def graph_break(self, reason, where=None):
        if where is None:
            where, _ = user_frame(2)
        if self.fullgraph:
            raise GraphBreak(f"{reason}\n  at {where}\nfullgraph=True: the function must be "
                             "captured as one graph. Move this out of the compiled function, "
                             "or compile without fullgraph=True to run it eagerly.")
        if not any(r == reason and w == where for r, w in self.breaks):
            self.breaks.append((reason, where))

    # ------------------------------------------------------------ the end of a trace

    def forget(self):
        """Drop the tables of tensors and arrays, once the trace has ended: each entry's weak
        reference calls back into its own table, a cycle that otherwise lived on until the
        garbage collector's next pass."""
        self.cache.clear()
        self.storages.clear()

    def finish(self, out_tensors):
        """Close the graph: outputs, state updates and slot assignments.

        Returns the effects the runtime applies after each call: a list of (Slot, kind) in the
        order of ``graph.updates`` where kind is 'write' (into the tensor the slot held when
        the graph was traced) or 'assign' (the slot gets a new tensor), and the slots cleared.
        """
        self.graph.outputs = [self.value_of(t) for t in out_tensors]
        effects, clears = [], []
        assigned = set()
        self._unguard_replaced_grads()
        for p, name, before in list(self.params.values()):
            after = p._grad
            free = self._grad_free(p)
            if after is before and not free:
                continue
            slot = self._grad_slot(p, name)
            if after is None:
                clears.append(slot)     # (even where it was None: a replay may find one)
            else:
                self.graph.updates.append((slot.name, self.value_of(after)))
                effects.append((slot, "assign"))
                assigned.add(id(after))
        for index, (t, name, before) in self.arg_grads.items():
            after = t._grad
            if after is not before and after is not None:
                self.graph.updates.append((name, self.value_of(after)))
                effects.append((("arg_grad", index), "assign"))
                assigned.add(id(after))
        for opt in self.optimizers:
            self._optimizer_effects(opt, effects, assigned)
        for i, m in enumerate(self.modules):
            self._module_effects(m, "" if i == 0 else f"m{i}.", effects, assigned)
        by_name = {inp.name: (inp, b) for inp, b in zip(self.graph.inputs, self.bindings)}
        for s in [*self.arg_storages.values(), *self.storages.values()]:
            if s.slot is None or s.value is s.input_value:
                continue
            self.graph.updates.append((s.slot, s.value))
            effects.append((by_name[s.slot][1], "write"))
        return effects, clears

    def _unguard_replaced_grads(self):
        """A parameter whose .grad the call replaced before reading it (``zero_grad()``
        before ``backward()``) does not depend on the .grad it found: its guard leaves the
        .grad out, so that the state the first call leaves (every .grad set) fits the graph."""
        facts = []
        for name, get, want in self.facts:
            if type(get) is ParamFact and get.grad and self._grad_free(get.p):
                get = ParamFact(get.p, grad=False)
                name = name.replace(", .grad,", ",") + " (its .grad is replaced before use)"
                want = (want[0], get.UNREAD, want[2], want[3])
            facts.append((name, get, want))
        self.facts = facts

    def _optimizer_effects(self, opt, effects, assigned):
        before = self.opt_before[id(opt)]
        for p, st in opt.state.items():
            pname = self.params[id(p)][1] if id(p) in self.params else "?"
            for k, v in st.items():
                old = before.get((id(p), k), _MISSING)
                if old is v:
                    continue
                if not hasattr(v, "_data"):
                    self.graph_break(f"optimizer state {k!r} holds a Python value "
                                     f"({type(v).__name__}) that changes between steps")
                    continue
                slot = _state_slot(opt, p, k, f"{self.optimizer_name(opt)}.state[{pname}].{k}")
                self.graph.updates.append((slot.name, self.value_of(v)))
                effects.append((slot, "assign"))
                assigned.add(id(v))

    def _module_effects(self, module, prefix, effects, assigned):
        for mname, m in module.named_modules():
            for store in ("_parameters", "_buffers"):
                for k, t in m.__dict__.get(store, {}).items():
                    if t is None or id(t) in assigned or id(t) in self.known:
                        continue
                    # a tensor put into the module during the call (buffer reassignment)
                    name = f"{mname}.{k}" if mname else k
                    slot = _attr_slot(module, name, "buffer", prefix + name)
                    self.graph.updates.append((slot.name, self.value_of(t)))
                    effects.append((slot, "assign"))


class ParamFact:
    """A parameter's layout, its .grad's layout (or None; UNREAD with ``grad=False``: the call
    replaces it before any use), requires_grad and whether it has hooks.  Callable like any
    fact; ``code`` writes the same test out inline for the generated guard function
    (guard_code.py), which saves a call per parameter on every replay."""
    __slots__ = ("p", "grad")
    UNREAD = "replaced before use"

    def __init__(self, p, grad=True):
        self.p = p
        self.grad = grad

    def __call__(self):
        p = self.p
        grad = _slot_key(p._grad) if self.grad else self.UNREAD
        return (_slot_key(p), grad, p.requires_grad, bool(p._hooks))

    def code(self, want, bind):
        """An expression true when this fact still equals ``want``; None when it cannot be
        written out (a parameter that is a view of a larger buffer)."""
        layout, grad, requires_grad, hooks = want
        p = bind(self.p)
        if len(layout) != 3 or (grad is not None and grad != self.UNREAD and len(grad) != 3):
            return None
        parts = [_layout_code(f"{p}._data", layout, bind)]
        if grad != self.UNREAD:
            parts.append(f"{p}._grad is None" if grad is None else
                         _layout_code(f"{p}._grad._data", grad, bind))
        parts += [f"{p}._rg is {requires_grad}", f"not {p}._hooks" if not hooks else f"bool({p}._hooks)"]
        return "(" + " and ".join(parts) + ")"


def _layout_code(a, key, bind):
    """An expression true when the array of expression ``a`` (evaluated once) has the layout
    ``key`` of ``_slot_key``: a numpy array of its own with that shape, dtype and strides."""
    shape, dtype, strides = key
    return (f"((_a := {a}).__class__ is {bind(np.ndarray)} and _a.base is None and "
            f"_a.shape == {shape!r} and _a.dtype == {bind(dtype)} and _a.strides == {strides!r})")


class AttributeFact:
    """``obj.<name>`` (a module's ``training`` flag): callable like any fact; ``code`` writes
    the test out inline for the generated guard function."""
    __slots__ = ("obj", "name")

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def __call__(self):
        return getattr(self.obj, self.name)

    def code(self, want, bind):
        return f"{bind(self.obj)}.{self.name} is {want}" if type(want) is bool else None


class LayoutFact:
    """The layout of the tensor a slot holds (``_slot_key``): inline where the slot says how
    its tensor is read (``Slot.code``: a constant, an optimizer's state)."""
    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    def __call__(self):
        return _slot_key(self.slot.get())

    def code(self, want, bind):
        if self.slot.code is None or (want is not None and len(want) != 3):
            return None
        t = self.slot.code(bind)
        return f"{t} is None" if want is None else _layout_code(f"{t}._data", want, bind)


def _slot_key(t):
    """The layout of the tensor a slot holds: shape, dtype and where it lies in its buffer."""
    if t is None:
        return None
    a = t._data
    if type(a) is DeviceArray:          # a cuda tensor: its device too (a longer key)
        root = storage_root(a)
        return (a.shape, a.dtype, a.strides, str(a.device), root.shape, _geometry(a, root))
    if a.base is None:                  # the common case, and the cheap one
        return (a.shape, a.dtype, a.strides)
    root = storage_root(a)
    return ("view of", root.shape, root.dtype, _geometry(a, root))


def _state_keys(opt):
    return tuple(map(tuple, opt.state.values()))


def _group_members(opt):
    return tuple((id(g), tuple(id(p) for p in g["params"])) for g in opt.param_groups)


class _Abandon(Exception):
    """Stop recording one node: the trace already has a graph break."""


_MISSING = object()


def _attr_slot(module, dotted, kind, name=None):
    """The parameter or buffer at ``dotted`` (a path from ``module``), as a slot called
    ``name`` (default: the path)."""
    *path, leaf = dotted.split(".")

    def owner():
        m = module
        for part in path:
            m = getattr(m, part)
        return m

    def get():
        o = owner()
        store = o._parameters if leaf in o._parameters else o._buffers
        return store.get(leaf)

    def set(t):
        o = owner()
        store = o._parameters if leaf in o._parameters else o._buffers
        store[leaf] = t
    return Slot(name or dotted, kind, get, set)


def _state_slot(opt, p, key, name):
    def get():
        return opt.state[p].get(key)

    def set(t):
        opt.state[p][key] = t
    return Slot(name, "state", get, set,
                code=lambda bind: f"{bind(opt)}.state[{bind(p)}].get({bind(key)})")

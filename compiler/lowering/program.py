"""A graph as a runtime Program (runtime/executor.py) for one backend (runtime/backend.py).

Each node becomes a step:

* a kernel step for fused nodes, and single elementwise and reduction nodes, whose ops all have
  lowerings: the node's kernel description (kernel.py) for the layouts (shapes and strides) its
  inputs have at run time, compiled by the backend once per layout and launched on the
  buffers; its outputs go to planned buffers, into the state they update (in place), or into
  recycled result arrays;
* an extern step for every other node: the op's direct kernel where it has one (the ``kernel``
  facet: convolution, max pooling, the matrix product into its planned buffer; direct.py),
  else its numpy ``impl`` as the interpreter runs it.  A fused node that cannot be described as
  one kernel for its inputs' layouts is described for row-major copies of its strided inputs
  (made at each call), and where that fails too runs its subgraph as a program of its own,
  node by node.

The results agree with the interpreter's (compiler/interpreter.py); the tests check it.
"""
import sys
import weakref

import numpy as np

from dynograph.runtime import config, executor
from dynograph.runtime.cuda_memory import DeviceArray
from dynograph.runtime.backend import kernel_function
from ..interpreter import evaluate, last_uses, outputs_of
from ..ir import TensorType, Value
from ..ops import REGISTRY
from ..ops.creation import contiguous_strides
from ..passes.fold import constant_results
from ..passes.memory import plan_memory
from ..symbolic import Sym, concrete
from .kernel import describe, lowerable
from .products import product_steps
from .scalar import Unsupported

# node -> {(backend, input layouts, shapes, batch): Plan or None (no kernel for those)}
PLANS = weakref.WeakKeyDictionary()
# node -> the Values its kernel reads, or None (see kernel_inputs)
_INPUTS = weakref.WeakKeyDictionary()


def run(graph, inputs, batch=None, writable=(), *, backend):
    """Execute ``graph`` like ``interpreter.run``, on ``backend``'s kernels where nodes lower.
    ``writable``: the state slots whose input buffer an update may overwrite in place (the
    caller writes those updates back into the same tensors anyway)."""
    writable = writable if isinstance(writable, frozenset) else frozenset(writable)
    programs = graph.__dict__.setdefault("_programs", {})
    with backend.running():
        return executor.run_cached(programs, (backend.name, batch, writable),
                                   lambda: build(graph, batch, writable, backend), inputs)


class Plan:
    """A kernel for one set of input layouts: ``plan(addresses)`` runs it, compiled on its first
    run (an update kernel may only ever run as its in-place variant).  ``copies``: the inputs
    the kernel reads from row-major copies (their own strides cannot express a reshape in it)."""
    __slots__ = ("backend", "_fn", "outputs", "kernel", "variants", "faults", "copies")

    def __init__(self, backend, kernel, copies=()):
        self.backend = backend
        self.kernel = kernel
        self._fn = None
        self.outputs = [kernel.buffers[s.buffer][1].np for s in kernel.stores]   # numpy dtypes
        self.variants = {}
        self.faults = kernel.divides_integers   # the kernel reports a 0 divisor through a flag
        self.copies = copies

    @property
    def fn(self):
        """The backend's loaded function of the kernel."""
        if self._fn is None:
            self._fn = kernel_function(self.backend, self.kernel)
        return self._fn

    def writing_into(self, pairs):
        """The plan of the same kernel storing output j into input buffer k for each (j, k)
        of ``pairs`` (an in-place update): the kernel itself must know, since its buffer
        arguments do not alias."""
        plan = self.variants.get(pairs)
        if plan is None:
            plan = self.variants[pairs] = Plan(self.backend, self.kernel.writing_into(pairs),
                                               self.copies)
        return plan

    def bound(self, addresses):
        """A callable of no arguments running the kernel on ``addresses``; None for a kernel
        that reports a zero divisor (its flag is made per call)."""
        return None if self.faults else self.backend.bind(self.fn, self.kernel, addresses)

    def __call__(self, addresses):
        if self.faults:
            fault = np.zeros(1, np.uint8)
            self.backend.launch(self.fn, self.kernel, addresses + [executor.address(fault)])
            if fault[0]:
                raise RuntimeError("ZeroDivisionError")
        else:
            self.backend.launch(self.fn, self.kernel, addresses)


def build(graph, batch, writable, backend):
    """The Program of ``graph`` at batch size ``batch``."""
    slots = {}

    def slot(v):
        return slots.setdefault(v, len(slots))

    input_slots = [slot(inp.value) for inp in graph.inputs]
    memory = graph.memory_plan or plan_memory(graph)
    last = last_uses(graph)
    leaving = {*graph.outputs, *(v for _, v in graph.updates)}
    constants = _constants(graph, backend, leaving)
    steps, frees = [], []
    for i, node in enumerate(graph.nodes):
        if all(v in constants for v in node.outs):
            continue
        extern = _ExternStep(node, slot, batch, backend, leaving)
        values = kernel_inputs(node)
        steps.append(extern if values is None else
                     _KernelStep(node, values, [slot(v) for v in values], extern, batch, backend))
        frees.append([slot(v) for v in last.get(i, ())])
    steps, frees = product_steps(steps, frees, memory, batch, _ExternStep)
    buffers = {slot(v): (tuple(concrete(v.type.shape, batch)), v.type.dtype.np, b,
                         v in memory.lifetimes)
               for v, b in memory.buffers.items()}
    by_name = {inp.name: inp.value for inp in graph.inputs}
    inplace = {slot(v): slot(by_name[name]) for name, v in graph.updates
               if name in memory.inplace and name in writable}
    return executor.Program(len(slots), input_slots, steps, frees,
                            [slot(v) for v in graph.outputs],
                            [(name, slot(v)) for name, v in graph.updates],
                            buffers, inplace, backend.allocate,
                            {slot(v): a for v, a in constants.items()})


def _constants(graph, backend, leaving):
    """{Value: array} of the small values computed from constants alone (an ``arange`` and
    its views, as in gather's gradient): computed once per program instead of by a step at
    every call.  Values that leave the graph (``leaving``) are not among them (the caller gets
    a new array each call).  Host backends only: a device backend's steps make its own arrays."""
    if backend.extern is not None:
        return {}
    known = {}
    for node in graph.nodes:
        results = constant_results(node, known)
        if results is not None:
            known.update(zip(node.outs, results))
    return {v: a for v, a in known.items() if v not in leaving}


class _KernelStep:
    """A node run as a compiled kernel where its inputs' layouts allow, else by ``fallback``."""

    def __init__(self, node, values, ins, fallback, batch, backend):
        self.node, self.values, self.ins = node, values, ins
        self.outs = fallback.outs
        self.shapes = [tuple(concrete(v.type.shape, batch)) for v in node.outs]
        self.fallback, self.batch, self.backend = fallback, batch, backend
        self.last = None        # (the inputs' layouts at the last call, its plan)
        # the launches of the last calls (executor.Bound, newest first) with the outputs each
        # writes into inputs: a call that reads the same arrays and writes the same ones
        # launches the same kernel on the same addresses
        self.same = []

    def __call__(self, program, env):
        arrays = [env[s] for s in self.ins]
        for same, into in self.same:
            outs = same.again(program, arrays)
            # (an input updated in place must still be writable)
            if outs is not None and all(outs[j].flags.writeable for j in into):
                same.launch()
                for s, o in zip(self.outs, outs):
                    env[s] = o
                return
        # a program's inputs keep their layouts from call to call: the last plan is checked
        # by a tuple comparison, not looked up again (a tiny kernel's whole launch is µs)
        try:
            layouts = [(type(a), a.dtype, a.shape, a.strides) for a in arrays]
        except AttributeError:      # not an array: kernel_plan says None
            layouts = None
        if self.last is not None and self.last[0] == layouts:
            plan = self.last[1]
        else:
            plan = kernel_plan(self.node, arrays, self.values, self.batch, self.backend)
            self.last = (layouts, plan)
        if plan is None:
            self.fallback(program, env)
            return
        if plan.copies:     # (never an input updated in place: those are row-major already)
            arrays = [np.ascontiguousarray(a) if i in plan.copies else a
                      for i, a in enumerate(arrays)]
        outs, into, handed = [], [], {}
        for j, (s, shape, dt) in enumerate(zip(self.outs, self.shapes, plan.outputs)):
            out = program.planned.get(s)
            if out is None:
                old = program.inplace.get(s)
                if old is not None and old in self.ins and executor.overwritable(env[old], dt, shape):
                    out = env[old]
                    into.append((j, self.ins.index(old)))
                else:       # outputs are contiguous, as the description's store strides assume
                    out = handed[j] = program.result_array(s, shape, dt)
            outs.append(out)
        if into:
            plan = plan.writing_into(tuple(into))
        address = self.backend.address
        addresses = [address(a) for a in arrays] + [address(o) for o in outs]
        launch = None if plan.copies else plan.bound(addresses)
        if launch is None:
            plan(addresses)
            self.same = []
        else:
            launch()
            bound = executor.Bound(arrays, launch, outs,
                                   {j: (self.outs[j], o) for j, o in handed.items()})
            self.same = executor.with_bound(self.same, (bound, [j for j, _ in into]))
        for s, o in zip(self.outs, outs):
            env[s] = o


class _ExternStep:
    """A node run by its direct kernel or its numpy implementation (a fused node: its subgraph)."""

    def __init__(self, node, slot, batch, backend, leaving=frozenset()):
        self.node, self.batch, self.backend = node, batch, backend
        self.op = REGISTRY.get(node.op)
        self.host = Host(backend)
        self.outs = [slot(v) for v in node.outs]
        self.args = template(node.args, slot, batch)
        self.attrs = {k: template(v, slot, batch) for k, v in node.attrs.items()}
        # most nodes read plain slots and have constant attributes (a transpose, a view, a
        # gather): their call skips the templates (a step's Python is most of a small op's time)
        self.plain = None
        if self.op is not None and all(type(a) is _Slot for a in self.args) and \
                not any(_has_slot(v) for v in self.attrs.values()):
            self.plain = [a.index for a in self.args]
        # a view of the same array as at the last call is the same view: a parameter's
        # transpose, a view of a planned buffer (it is the array's shape and strides, not its
        # values).  Not for results that leave (each call hands out its own).
        self.remembers = self.plain is not None and len(self.plain) == 1 and self.op.view and \
            len(node.outs) == 1 and node.outs[0] not in leaving
        self.last_view = None       # (the array viewed, its view)
        # a direct rule writes a result the program hands out into a recycled array of it
        # (executor.Program.result_array), so that the steps reading it stay bound
        self.handed = None
        if self.op is not None and self.op.kernel is not None and node.outs[0] in leaving:
            out = node.outs[0].type
            self.handed = (tuple(concrete(out.shape, batch)), out.dtype.np)
        # a direct rule with a bound form (launch.py), whose attributes are the same at every
        # call and whose other results stay inside the program: a call reading the same arrays
        # as one of the last calls launches what that call bound (executor.Bound)
        self.binds = None
        if self.op is not None and getattr(self.op.kernel, "bind", None) is not None and \
                all(type(a) is _Slot or a is None for a in self.args) and \
                not any(_has_slot(v) for v in self.attrs.values()) and \
                not any(v in leaving for v in node.outs[1:]):
            self.binds = self.op.kernel.bind
        self.same = []          # the bound launches of the last calls, newest first

    def arguments(self, env):
        """The node's arguments and attributes in this call."""
        if self.plain is not None:
            return [env[i] for i in self.plain], self.attrs
        return fill(self.args, env), {k: fill(v, env) for k, v in self.attrs.items()}

    def __call__(self, program, env):
        last = self.last_view
        if last is not None and env[self.plain[0]] is last[0]:
            env[self.outs[0]] = last[1]
            return
        op = self.op
        args, attrs = self.arguments(env)
        if op is None:                      # a fused node: its subgraph, node by node
            sub = attrs.pop("graph")
            result = run(sub, args, self.batch, backend=self.backend)[0]
        else:
            result = None
            extern = self.backend.extern
            if op.kernel is not None and extern is None:
                if self.binds is not None:
                    result = self._bound(program, args, attrs)
                else:
                    result = op.kernel(self.node, args, attrs, self._out(program), self.host)
            if result is None:
                result = evaluate(op, args, attrs) if extern is None else extern(op, args, attrs)
                result = list(outputs_of(result))
                if not op.view:     # a result sharing a planned buffer would be overwritten later
                    result = [r.copy() if isinstance(r, (np.ndarray, DeviceArray)) and
                              program.in_arena(r) else r for r in result]
            elif not isinstance(result, list):
                result = [result]
        if self.remembers and type(args[0]) is np.ndarray and type(result[0]) is np.ndarray:
            root = executor.storage_root(args[0])
            # not a reshape that copied; not a view of a result the program hands out (kept
            # here, it could never be recycled)
            if executor.storage_root(result[0]) is root and \
                    not any(root is r for arrays in program.results.values() for r in arrays):
                self.last_view = (args[0], result[0])
        for s, r in zip(self.outs, result):
            env[s] = r

    def _out(self, program):
        """Where a direct rule writes its first result: the planned buffer, a recycled array
        of a result the program hands out, or None (the rule makes one)."""
        out = program.planned.get(self.outs[0])
        if out is None and self.handed is not None:
            out = program.result_array(self.outs[0], *self.handed)
        return out

    def _bound(self, program, args, attrs):
        """The direct rule's results by a launch bound at one of the last calls where it reads
        the same arrays, else by a launch bound now (or run unbound where it cannot be); None
        where the rule does not cover the call (then the op's impl runs)."""
        for same in self.same:
            results = same.again(program, args)
            if results is not None:
                same.launch()
                return results
        out = self._out(program)
        handed = {0: (self.outs[0], out)} if self.handed is not None and \
            self.outs[0] not in program.planned else {}
        made = self.binds(self.node, args, attrs, out, self.host)
        if made is None:
            _release([b.launch for b in self.same])
            self.same = []
            return None
        launch, results, owned, reusable = made
        results = results if type(results) is list else [results]
        launch()
        # kept where it writes the planned buffer or recycled result, and arrays of its own:
        # an array the rule made for this call alone may still be held (a view handed out)
        if reusable and out is not None and results[0] is out and \
                all(j in owned for j in range(1, len(results))):
            bound = executor.Bound(args, launch, results, handed, owned)
            kept = executor.with_bound(self.same, bound)
            _release([b.launch for b in self.same if b not in kept])
            self.same = kept
        else:
            _release([b.launch for b in self.same] + [launch])
            self.same = []
        return results


def _release(launches):
    """Give back the padded buffers of bound launches no longer kept (launch._Bound.release)."""
    for launch in launches:
        release = getattr(launch, "release", None)
        if release is not None:
            release()


def _has_slot(x):
    if type(x) is _Slot:
        return True
    return type(x) in (tuple, list) and any(_has_slot(a) for a in x)


class Host:
    """What a direct rule (direct.py) gets of the backend: ``host(kernel)`` compiles a kernel
    description to a Plan, ``host.matmul`` is the backend's matrix product."""
    __slots__ = ("backend", "matmul")

    def __init__(self, backend):
        self.backend = backend
        self.matmul = backend.matmul

    def __call__(self, kernel):
        plan = Plan(self.backend, kernel)
        plan.fn             # compiled now: a rule's caller falls back where this raises
        return plan


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def template(x, slot, batch):
    """``x`` (an argument or attribute) with Values replaced by their slots and sizes that
    depend on the batch size made concrete (a program runs at one batch size)."""
    if isinstance(x, Value):
        return _Slot(slot(x))
    if isinstance(x, tuple):
        return tuple(template(a, slot, batch) for a in x)
    if isinstance(x, list):
        return [template(a, slot, batch) for a in x]
    if isinstance(x, Sym):
        return x.at(batch)
    return x


def fill(x, env):
    """``x`` with the slots of a template replaced by the values of ``env``."""
    if type(x) is _Slot:
        return env[x.index]
    if type(x) is tuple:
        return tuple(fill(a, env) for a in x)
    if type(x) is list:
        return [fill(a, env) for a in x]
    return x


def kernel_inputs(node):
    """The Values a kernel of ``node`` reads, in argument order, or None when ``node`` cannot
    be a kernel (an op without a lowering, a value inside an attribute, an input that is not
    a tensor).  Worked out once per node."""
    try:
        return _INPUTS[node]
    except KeyError:
        pass
    values = None
    if lowerable(node) and _plain_inputs(node):
        values = list(node.args) if node.op == "fused" else list(dict.fromkeys(node.input_values()))
        if not all(isinstance(v.type, TensorType) for v in values):
            values = None
    _INPUTS[node] = values
    return values


def _plain_inputs(node):
    """Kernels read tensors only: attributes holding values (rare) go to the interpreter."""
    if node.op == "fused":
        return True
    runtime = REGISTRY[node.op].scalar_attrs
    return not any(isinstance(v, (tuple, list)) for v in node.args) and \
        all(not hasattr(v, "type") or (k in runtime and v.type.shape == ())
            for k, v in node.attrs.items())


def _layout(a, dtype):
    """(element strides, offset) of an input array, or None when a kernel cannot read it."""
    if (type(a) is not np.ndarray and type(a) is not DeviceArray) or a.dtype != dtype.np:
        return None
    size = a.itemsize
    if any(s % size for s in a.strides):
        return None
    return tuple(0 if n == 1 else s // size for n, s in zip(a.shape, a.strides)), 0


def kernel_plan(node, arrays, values, batch, backend):
    """The Plan of ``node``'s kernel for input ``arrays`` (host or device arrays; ``values``:
    the Values they are), cached per layout; None where no kernel covers them."""
    if backend.extern is not None and any(type(a) is np.ndarray for a in arrays):
        return None             # a host array on a device backend: its extern step copies it
    layouts = []
    for a, v in zip(arrays, values):
        lay = _layout(a, v.type.dtype)
        if lay is None:
            return None
        layouts.append(lay)
    key = (backend.name, tuple(layouts), tuple(a.shape for a in arrays), batch)
    plans = PLANS.setdefault(node, {})
    if key in plans:
        return plans[key]
    # the shapes are part of the key: they are checked against the node's once per key
    if any(a.shape != tuple(concrete(v.type.shape, batch)) for a, v in zip(arrays, values)):
        plans[key] = None
        return None
    copies = ()
    try:
        kernel = describe(node, list(layouts), batch)
    except Unsupported as e:
        kernel, copies = _from_copies(node, arrays, layouts, batch, backend)
        if kernel is None and config.debug("fallbacks"):
            print(f"[dynograph] {node.op} {node.attrs.get('name', '')} runs on the interpreter: {e}",
                  file=sys.stderr)
    plan = None if kernel is None else Plan(backend, kernel, copies)
    plans[key] = plan
    return plan


def _from_copies(node, arrays, layouts, batch, backend):
    """(the kernel of ``node`` reading row-major copies of its strided host inputs, their
    positions), or (None, ()) where that does not describe it either: a reshape merging dims of
    a permuted argument has no strides of its own, and a copy per call beats running the
    group op by op."""
    copies = tuple(i for i, a in enumerate(arrays)
                   if type(a) is np.ndarray and not a.flags.c_contiguous)
    if not copies or backend.extern is not None:
        return None, ()
    layouts = list(layouts)
    for i in copies:
        layouts[i] = _contiguous_layout(arrays[i])
    try:
        return describe(node, layouts, batch), copies
    except Unsupported:
        return None, ()


def _contiguous_layout(a):
    """The (element strides, offset) of a row-major array of ``a``'s shape, as ``_layout``
    gives them."""
    return tuple(0 if n == 1 else s for n, s in zip(a.shape, contiguous_strides(a.shape))), 0


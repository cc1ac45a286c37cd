"""The ``llvm`` backend: run a graph as a flat list of steps, LLVM kernels where the nodes lower.

Fused nodes, and single elementwise and reduction nodes, whose ops all have lowerings become
kernels compiled for the layouts (shapes and strides) of their inputs; every other node (matrix
products through numpy's BLAS, convolution, indexing, random draws) runs the interpreter's
``evaluate``.  A fused node that cannot be described as one kernel runs its subgraph node by
node, each node again a kernel where it can be.  The results agree with the interpreter's.
"""
import ctypes
import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..interpreter import _resolve, evaluate, last_uses
from ..ir import TensorType
from ..passes.memory import plan_memory
from ..lowering.kernel import describe, lowerable
from ..lowering.scalar import Unsupported
from ..ops import REGISTRY
from ..symbolic import Sym, concrete
from ..tracer import storage_root
from . import jit
from .convolution import run_convolution, run_weight_grad
from .pooling import run_max_pool
from .render import extent, render

# node -> {input layouts: _Plan or None (not lowerable for those layouts)}
_PLANS = weakref.WeakKeyDictionary()
# node -> the Values its kernel reads, or None (see _kernel_inputs)
_INPUTS = weakref.WeakKeyDictionary()


# kernels with at least this many domain elements are split across the CPU cores
PARALLEL_MIN = 1 << 21
_pool = []
# a forked child (a DataLoader worker) inherits the pool without its threads: it makes its own
os.register_at_fork(after_in_child=_pool.clear)


def set_threads(n):
    """Split kernels over ``n`` threads from now on (dynograph.set_num_threads)."""
    if _pool and _pool[0][1] is not None:
        _pool[0][1].shutdown(wait=False)
    _pool[:] = [(n, ThreadPoolExecutor(n, thread_name_prefix="dynograph-kernel") if n > 1 else None)]


def _threads():
    if not _pool:
        n = os.cpu_count() or 1
        _pool.append((n, ThreadPoolExecutor(n, thread_name_prefix="dynograph-kernel")
                      if n > 1 else None))
    return _pool[0]


class _Plan:
    __slots__ = ("fn", "outputs", "kernel", "extent", "numel", "variants", "faults")

    def __init__(self, fn, outputs, kernel):
        self.fn = fn
        self.outputs = outputs          # numpy dtype per output
        self.kernel = kernel
        self.extent = extent(kernel)    # the outermost kept axis, which calls may split
        self.numel = int(np.prod(kernel.domain))
        self.variants = {}
        self.faults = kernel.divides_integers   # the kernel reports a 0 divisor through a flag

    def writing_into(self, pairs):
        """The plan of the same kernel storing output j into input buffer k for each (j, k)
        of ``pairs`` (an in-place update): the kernel itself must know, since its buffer
        arguments are ``noalias``."""
        plan = self.variants.get(pairs)
        if plan is None:
            plan = self.variants[pairs] = _compile(self.kernel.writing_into(pairs))
        return plan

    def __call__(self, pointers):
        if self.faults:
            fault = np.zeros(1, np.uint8)
            self.run(pointers + [fault.ctypes.data])
            if fault[0]:
                raise RuntimeError("ZeroDivisionError")
        else:
            self.run(pointers)

    def run(self, pointers):
        n, pool = _threads()
        parts = min(n, self.extent) if self.numel >= PARALLEL_MIN else 1
        if parts <= 1 or pool is None:
            self.fn(*pointers, 0, self.extent)
            return
        # ctypes releases the GIL during the calls: the ranges run in parallel
        bounds = [self.extent * i // parts for i in range(parts + 1)]
        futures = [pool.submit(self.fn, *pointers, lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        for f in futures:
            f.result()


def _kernel_inputs(node):
    """The Values a kernel of ``node`` reads, in argument order, or None when ``node`` cannot
    be a kernel (an op without a lowering, a value inside an attribute, an input that is not
    a tensor).  Worked out once per node."""
    try:
        return _INPUTS[node]
    except KeyError:
        pass
    values = None
    if lowerable(node) and _plain_inputs(node):
        if node.op == "fused":
            values = list(node.args)
        else:
            values = list(dict.fromkeys(node.input_values()))
        if not all(isinstance(v.type, TensorType) for v in values):
            values = None
    _INPUTS[node] = values
    return values


def _layout(a, dtype):
    """(element strides, offset) of an input array, or None when a kernel cannot read it."""
    if type(a) is not np.ndarray or a.dtype != dtype.np:
        return None
    size = a.itemsize
    if any(s % size for s in a.strides):
        return None
    return tuple(0 if n == 1 else s // size for n, s in zip(a.shape, a.strides)), 0


def _plan(node, arrays, values, batch):
    layouts = []
    for a, v in zip(arrays, values):
        lay = _layout(a, v.type.dtype)
        if lay is None:
            return None
        layouts.append(lay)
    key = (tuple(layouts), tuple(a.shape for a in arrays), batch)
    plans = _PLANS.setdefault(node, {})
    if key in plans:
        return plans[key]
    # the shapes are part of the key: they are checked against the node's once per key
    if any(a.shape != tuple(concrete(v.type.shape, batch)) for a, v in zip(arrays, values)):
        plans[key] = None
        return None
    try:
        kernel = describe(node, list(layouts), batch)
    except Unsupported as e:
        kernel = None
        if jit.debug_level() >= 1:
            print(f"[dynograph] {node.op} {node.attrs.get('name', '')} runs on the interpreter: {e}",
                  file=sys.stderr)
    plan = None if kernel is None else _compile(kernel)
    plans[key] = plan
    return plan


def _compile(kernel):
    name = f"dg_{kernel.key}"
    dims = "x".join(str(n) for n in kernel.domain)
    pointers = len(kernel.buffers) + kernel.divides_integers
    fn = jit.compile_kernel(name, kernel.key, lambda: render(kernel, name, jit.triple()),
                            [ctypes.c_void_p] * pointers + [ctypes.c_int64] * 2,
                            describe=f"({kernel.name}, domain [{dims}])")
    outputs = [kernel.buffers[s.buffer][1].np for s in kernel.stores]
    return _Plan(fn, outputs, kernel)


def run(graph, inputs, batch=None, writable=()):
    """Execute ``graph`` like ``interpreter.run``, with LLVM kernels where nodes lower.
    ``writable``: the state slots whose input buffer an update may overwrite in place (the
    caller writes those updates back into the same tensors anyway)."""
    programs = graph.__dict__.setdefault("_llvm_programs", {})
    key = (batch, writable if isinstance(writable, frozenset) else frozenset(writable))
    program = programs.get(key)
    if program is None:
        program = programs[key] = _Program(graph, batch, key[1])
    if not program.busy.acquire(blocking=False):
        # running already (another thread): its buffers are in use, this call gets its own
        return _Program(graph, batch, key[1]).run(inputs)
    try:
        return program.run(inputs)
    finally:
        program.busy.release()


class _Program:
    """A graph made ready to run many times at one batch size: the intermediate values of its
    memory plan (compiler/passes/memory.py) live in buffers allocated once, so a steady-state
    call allocates only what it returns; updates the plan allows to be made in place are
    written by their kernel straight into the state's own buffer."""

    def __init__(self, graph, batch, writable):
        self.graph, self.batch = graph, batch
        self.frees = last_uses(graph)
        plan = graph.memory_plan or plan_memory(graph)
        self.planned, self.arenas = _allocate(plan, batch)
        slots = {inp.name: inp.value for inp in graph.inputs}
        # update value -> the input value (the slot's old state) it may overwrite
        self.inplace = {v: slots[slot] for slot, v in graph.updates
                        if slot in plan.inplace and slot in writable}
        self.results = {}       # returned Value -> the array the last call returned for it
        self.busy = threading.Lock()

    def run(self, inputs):
        env = {inp.value: x for inp, x in zip(self.graph.inputs, inputs)}
        env[Sym] = self.batch
        for i, node in enumerate(self.graph.nodes):
            result = self.run_kernel(node, env)
            if result is None:
                result = self.run_extern(node, env)
            for v, r in zip(node.outs, result):
                env[v] = r
            for v in self.frees.get(i, ()):
                del env[v]
        graph = self.graph
        return [env[v] for v in graph.outputs], {slot: env[v] for slot, v in graph.updates}

    def run_kernel(self, node, env):
        """Run ``node`` as a compiled kernel; returns its outputs, or None when it does not lower."""
        values = _kernel_inputs(node)
        if values is None:
            return None
        arrays = [env[v] for v in values]
        plan = _plan(node, arrays, values, self.batch)
        if plan is None:
            return None
        outs, into = [], []
        for j, (v, dt) in enumerate(zip(node.outs, plan.outputs)):
            out = self.planned.get(v)
            if out is None:
                old = self.inplace.get(v)
                if old is not None and old in values and _overwritable(env[old], dt, v, self.batch):
                    out = env[old]
                    into.append((j, values.index(old)))
                else:        # outputs are contiguous, as the description's store strides assume
                    out = self.result_array(v, dt)
            outs.append(out)
        if into:
            plan = plan.writing_into(tuple(into))
        plan([a.ctypes.data for a in arrays] + [o.ctypes.data for o in outs])
        return outs

    def result_array(self, v, dt):
        """A new array for a value the graph hands out, or the one handed out for it by the
        last call once nothing holds that one any more (no page faults on fresh memory)."""
        last = self.results.get(v)
        # three references: self.results, ``last`` and getrefcount's argument
        if last is not None and sys.getrefcount(last) == 3:
            return last
        self.results[v] = out = np.empty(concrete(v.type.shape, self.batch), dt)
        return out

    def run_extern(self, node, env):
        """Run ``node`` on numpy (the interpreter's ``evaluate``); a matrix product writes into
        its planned buffer, a convolution runs a generated direct kernel where it can."""
        args = _resolve(node.args, env)
        attrs = {k: _resolve(v, env) for k, v in node.attrs.items()}
        if node.op == "fused":
            sub = attrs.pop("graph")
            return run(sub, args, self.batch)[0]
        out = self.planned.get(node.outs[0])
        if node.op == "mm" and out is not None and out.dtype in _BLAS and \
                args[0].dtype == args[1].dtype == out.dtype:
            return [np.dot(args[0], args[1], out=out)]
        if node.op in _DIRECT:
            result = _DIRECT[node.op](node, args, attrs, out, _compile)
            if result is not None:
                return result if isinstance(result, list) else [result]
        op = REGISTRY[node.op]
        result = evaluate(op, args, attrs)
        result = [result] if len(node.outs) == 1 else list(result)
        if not op.view:        # a result sharing a planned buffer would be overwritten later
            result = [r.copy() if isinstance(r, np.ndarray) and id(storage_root(r)) in self.arenas else r
                      for r in result]
        return result


_BLAS = (np.dtype(np.float32), np.dtype(np.float64))
# ops run by a generated direct kernel where they can (compiler/llvm/convolution.py)
_DIRECT = {"convolution": run_convolution, "convolution_weight_grad": run_weight_grad,
           "max_pool2d_with_indices": run_max_pool, "max_pool3d_with_indices": run_max_pool}


def _allocate(plan, batch):
    """(planned Value -> its array in a buffer allocated now, the buffers' root arrays)."""
    shapes = {v: tuple(concrete(v.type.shape, batch)) for v in plan.buffers}
    sizes = {}
    for v, b in plan.buffers.items():
        sizes[b] = max(sizes.get(b, 0), int(np.prod(shapes[v])) * v.type.dtype.itemsize)
    buffers = {b: np.empty(n, np.uint8) for b, n in sizes.items()}
    # views share their base's buffer but are made by their own nodes: only bases get arrays
    planned = {v: np.ndarray(shapes[v], v.type.dtype.np, buffer=buffers[b])
               for v, b in plan.buffers.items() if v in plan.lifetimes}
    return planned, {id(a) for a in buffers.values()}


def _overwritable(a, dt, v, batch):
    """Whether a kernel may store ``v`` into the input array ``a`` (element k into element k)."""
    return type(a) is np.ndarray and a.dtype == dt and a.flags.c_contiguous and \
        a.flags.writeable and a.shape == tuple(concrete(v.type.shape, batch))


def _plain_inputs(node):
    """Kernels read tensors only: attributes holding values (rare) go to the interpreter."""
    if node.op == "fused":
        return True
    return not any(isinstance(v, (tuple, list)) for v in node.args) and \
        all(not hasattr(v, "type") for v in node.attrs.values())

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
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..interpreter import _resolve, evaluate, last_uses
from ..ir import TensorType
from ..lowering.kernel import describe, lowerable
from ..lowering.scalar import Unsupported
from ..ops import REGISTRY
from ..symbolic import Sym, concrete
from . import jit
from .render import extent, render

# node -> {input layouts: _Plan or None (not lowerable for those layouts)}
_PLANS = weakref.WeakKeyDictionary()
# node -> the Values its kernel reads, or None (see _kernel_inputs)
_INPUTS = weakref.WeakKeyDictionary()


# kernels with at least this many domain elements are split across the CPU cores
PARALLEL_MIN = 1 << 21
_pool = []


def _threads():
    if not _pool:
        n = os.cpu_count() or 1
        _pool.append((n, ThreadPoolExecutor(n, thread_name_prefix="dynograph-kernel")
                      if n > 1 else None))
    return _pool[0]


class _Plan:
    __slots__ = ("fn", "outputs", "kernel", "extent", "numel")

    def __init__(self, fn, outputs, kernel):
        self.fn = fn
        self.outputs = outputs          # numpy dtype per output
        self.kernel = kernel
        self.extent = extent(kernel)    # the outermost kept axis, which calls may split
        self.numel = int(np.prod(kernel.domain))

    def __call__(self, pointers):
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
    fn = jit.compile_kernel(name, kernel.key, lambda: render(kernel, name, jit.triple()),
                            [ctypes.c_void_p] * len(kernel.buffers) + [ctypes.c_int64] * 2,
                            describe=f"({kernel.name}, domain [{dims}])")
    outputs = [kernel.buffers[s.buffer][1].np for s in kernel.stores]
    return _Plan(fn, outputs, kernel)


def run_kernel(node, env, batch):
    """Run ``node`` as a compiled kernel; returns its outputs, or None when it does not lower."""
    values = _kernel_inputs(node)
    if values is None:
        return None
    arrays = [env[v] for v in values]
    plan = _plan(node, arrays, values, batch)
    if plan is None:
        return None
    # outputs are contiguous, as the description's store strides assume
    outs = [np.empty(concrete(v.type.shape, batch), dt) for v, dt in zip(node.outs, plan.outputs)]
    plan([a.ctypes.data for a in arrays] + [o.ctypes.data for o in outs])
    return outs


def run(graph, inputs, batch=None):
    """Execute ``graph`` like ``interpreter.run``, with LLVM kernels where nodes lower."""
    env = {inp.value: x for inp, x in zip(graph.inputs, inputs)}
    env[Sym] = batch
    frees = last_uses(graph)
    for i, node in enumerate(graph.nodes):
        result = run_kernel(node, env, batch)
        if result is None:
            args = _resolve(node.args, env)
            attrs = {k: _resolve(v, env) for k, v in node.attrs.items()}
            if node.op == "fused":
                sub = attrs.pop("graph")
                result, _ = run(sub, args, batch)
            else:
                result = evaluate(REGISTRY[node.op], args, attrs)
                if len(node.outs) == 1:
                    result = [result]
        for v, r in zip(node.outs, result):
            env[v] = r
        for v in frees.get(i, ()):
            del env[v]
    return [env[v] for v in graph.outputs], {slot: env[v] for slot, v in graph.updates}


def _plain_inputs(node):
    """Kernels read tensors only: attributes holding values (rare) go to the interpreter."""
    if node.op == "fused":
        return True
    return not any(isinstance(v, (tuple, list)) for v in node.args) and \
        all(not hasattr(v, "type") for v in node.attrs.values())

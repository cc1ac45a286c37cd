"""Compiling a program's kernels ahead of its first run, on several threads.

A program compiles each kernel on its first use, for the layouts its inputs have then
(program.py).  Most of those layouts are known before the first run: the graph's inputs are at
hand, kernels store contiguous outputs, views are what their ``impl`` makes of their inputs,
and other ops return new contiguous arrays.  ``compile_ahead`` walks the graph with stand-ins
of those layouts (empty arrays, whose memory is never touched), describes the kernel of every
node they determine (the same Plan, under the same key, that the run looks up:
``program.kernel_plan``, in-place variants included) and hands the kernels to the backend's
``compile_ahead`` (runtime/backend.py), which compiles them on a few threads while the run goes
on; the run takes each kernel when it reaches it.  A layout guessed wrong costs a
kernel compiled in vain (and cached on disk), never a wrong result: the run looks its kernels
up by the layouts it really meets, and compiles any other on the spot, as before.
"""
import sys

import numpy as np

from dynograph.runtime import backend as runtime_backend, config
from dynograph.runtime.executor import overwritable
from ..interpreter import evaluate, outputs_of
from ..ir import TensorType
from ..ops import REGISTRY
from ..symbolic import concrete
from . import program


def compile_ahead(graph, inputs, batch, writable, backend):
    """Start compiling the kernels ``graph`` will need when it runs on ``inputs`` (once per
    graph, batch size and set of writable slots: the key of its program)."""
    done = graph.__dict__.setdefault("_compiled_ahead", set())
    key = (backend.name, batch, writable)
    if key in done or not backend.parallel_compile:
        return
    done.add(key)
    direct = []
    try:
        plans = plans_ahead(graph, inputs, batch, writable, backend, direct)
    except Exception as e:      # noqa: BLE001  (the run meets whatever this is, or compiles lazily)
        if config.debug("kernels"):
            print(f"[dynograph] no kernels compiled ahead: {type(e).__name__}: {e}", file=sys.stderr)
        return
    runtime_backend.compile_ahead(backend, [plan.kernel for plan in plans] + direct)


def plans_ahead(graph, inputs, batch, writable, backend, direct=None):
    """The Plans of the kernel nodes whose input layouts are known before the run; the kernels
    of the direct rules (convolutions, pooling) whose inputs are known are added to the list
    ``direct``."""
    arrays = {inp.value: a for inp, a in zip(graph.inputs, inputs)}
    return _walk(graph, arrays, batch, writable, backend, direct)


def _walk(graph, arrays, batch, writable, backend, direct):
    """plans_ahead's walk, from the stand-ins ``arrays`` of the graph's inputs (to which it
    adds those of the values it determines)."""
    memory = graph.memory_plan
    by_name = {inp.name: inp.value for inp in graph.inputs}
    inplace = {} if memory is None else \
        {v: by_name[name] for name, v in graph.updates if name in memory.inplace and name in writable}
    planned = () if memory is None else \
        {v for v in memory.buffers if v in memory.lifetimes}
    plans = []
    for node in graph.nodes:
        values = program.kernel_inputs(node)
        if values is None:
            if direct is not None:
                direct.extend(_direct_kernels(node, arrays, batch, backend))
            if node.op == "fused":
                plans.extend(_node_by_node(node, arrays, batch, backend, direct))
            _extern_outputs(node, arrays, batch)
            continue
        ins = [arrays.get(v) for v in values]
        if any(a is None for a in ins):
            continue
        plan = program.kernel_plan(node, ins, values, batch, backend)
        if plan is None:                    # the interpreter runs it: its outputs are unknown
            if node.op == "fused":
                plans.extend(_node_by_node(node, arrays, batch, backend, direct))
            continue
        into = []
        for j, (v, dtype) in enumerate(zip(node.outs, plan.outputs)):
            shape = tuple(concrete(v.type.shape, batch))
            old = inplace.get(v)
            # as _KernelStep does: an unplanned update may store into the state it replaces
            if v not in planned and old is not None and old in values and \
                    overwritable(arrays[old], dtype, shape):
                into.append((j, values.index(old)))
                arrays[v] = arrays[old]
            else:
                arrays[v] = np.empty(shape, dtype)
        plans.append(plan.writing_into(tuple(into)) if into else plan)
    return plans


def _node_by_node(node, arrays, batch, backend, direct):
    """The plans of a fused node that no kernel covers whole, which the run runs node by node
    (its subgraph as a program of its own: a kernel per node); the stand-ins of its outputs
    are added to ``arrays``."""
    sub = node.attrs["graph"]
    if any(arrays.get(v) is None for v in node.args):
        return []
    inner = {inp.value: arrays[v] for inp, v in zip(sub.inputs, node.args)}
    plans = _walk(sub, inner, batch, frozenset(), backend, direct)
    for v, out in zip(node.outs, sub.outputs):
        if inner.get(out) is not None:
            arrays[v] = inner[out]
    return plans


class _Collect:
    """A direct rule's ``compile_kernel`` that keeps the kernels it is given, compiling none."""

    def __init__(self, backend):
        self.backend, self.matmul, self.kernels = backend, None, []

    def __call__(self, kernel):
        self.kernels.append(kernel)


def _direct_kernels(node, arrays, batch, backend):
    """The kernels ``node``'s direct rule would compile for its stand-ins (the rule's
    ``plans``), [] where it has none or its inputs are unknown."""
    plans = getattr(getattr(REGISTRY.get(node.op), "kernel", None), "plans", None)
    ins = [v for v in node.input_values() if isinstance(v.type, TensorType)]
    if plans is None or backend.extern is not None or any(arrays.get(v) is None for v in ins):
        return []
    collect = _Collect(backend)
    try:
        plans(_filled(node.args, arrays, batch),
              {k: _filled(v, arrays, batch) for k, v in node.attrs.items()}, collect)
    except Exception:                       # whatever it is, the run will meet it
        return []
    return collect.kernels


def _extern_outputs(node, arrays, batch):
    """The outputs of a node the interpreter or a direct kernel runs.  A view's are what its
    ``impl`` makes of the stand-ins (a view reads no element); other ops' results are new
    arrays, contiguous (numpy's products, gathers, scatters and creations make them so)."""
    op = REGISTRY.get(node.op)
    if op is None:                          # a fused node run node by node: left out
        return
    if op.view:
        ins = node.input_values()
        if any(arrays.get(v) is None for v in ins if isinstance(v.type, TensorType)):
            return
        try:
            args = _filled(node.args, arrays, batch)
            attrs = {k: _filled(v, arrays, batch) for k, v in node.attrs.items()}
            result = evaluate(op, args, attrs)
        except Exception:                   # whatever it is, the run will meet it
            return
        for v, r in zip(node.outs, outputs_of(result)):
            if type(r) is np.ndarray:
                arrays[v] = r
        return
    for v in node.outs:
        if isinstance(v.type, TensorType) and len(v.type.shape) > 0:   # 0-d: maybe a numpy scalar
            arrays[v] = np.empty(tuple(concrete(v.type.shape, batch)), v.type.dtype.np)


def _filled(x, arrays, batch):
    """An argument or attribute of a node with its Values replaced by their stand-ins."""
    return program.fill(program.template(x, lambda v: v, batch), arrays)

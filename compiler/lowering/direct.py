"""Direct kernels: how an op that is not a fused loop nest runs as generated code or a library
call, declared on the op as its ``kernel`` facet (compiler/ops/core.py).

A direct rule is a function ``rule(owner, args, attrs, out, compile_kernel)``:

* ``owner``: an object whose lifetime bounds the rule's cached plans (the graph node);
* ``args``/``attrs``: the op's arguments, arrays and Python values, as its ``impl`` takes them;
* ``out``: the planned buffer of the first result (an array of the result's shape and dtype)
  or None;
* ``compile_kernel(kernel)``: the backend's compiled form of a kernel description
  (description.py), called with the buffers' addresses, inputs first.

It returns the results (an array, or a list for several), written into ``out`` where it fits,
or None when the case is not covered: the executor then runs the op's ``impl``.  The
preparation (padding, layout changes) runs on host arrays; the rules: convolution and its
weight gradient (conv.py), max pooling (pool.py), and the matrix product below.
"""
import numpy as np

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def matmul_into(owner, args, attrs, out, compile_kernel):
    """``mm`` through numpy's BLAS, written straight into the planned buffer."""
    a, b = args
    if out is None or out.dtype not in _BLAS or a.dtype != out.dtype or b.dtype != out.dtype:
        return None
    return np.dot(a, b, out=out)

"""Direct kernels: how an op that is not a fused loop nest runs as generated code or a library
call, declared on the op as its ``kernel`` facet (compiler/ops/core.py).

A direct rule is a function ``rule(owner, args, attrs, out, compile_kernel)``:

* ``owner``: an object whose lifetime bounds the rule's cached plans (the graph node);
* ``args``/``attrs``: the op's arguments, arrays and Python values, as its ``impl`` takes them;
* ``out``: the planned buffer of the first result (an array of the result's shape and dtype)
  or None;
* ``compile_kernel(kernel)``: the backend's compiled form of a kernel description
  (description.py), called with the buffers' addresses, inputs first;
  ``compile_kernel.matmul(a, b, out, bias, alpha, beta)``, where it exists, is the backend's
  matrix product (runtime/backend.py), None where it has none for those operands.

It returns the results (an array, or a list for several), written into ``out`` where it fits,
or None when the case is not covered: the executor then runs the op's ``impl``.  The
preparation (padding, layout changes) runs on host arrays; the rules: convolution and its
weight gradient (conv.py), max pooling (pool.py), and the matrix products below.
"""
import numpy as np

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def _floats(out, *arrays):
    return out is not None and out.dtype in _BLAS and all(a.dtype == out.dtype for a in arrays)


def matmul_into(owner, args, attrs, out, compile_kernel):
    """``mm`` by the backend's matrix product or numpy's BLAS, into the planned buffer (or a
    new array)."""
    a, b = args
    if out is None and a.ndim == b.ndim == 2 and a.shape[1] == b.shape[0]:
        out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    if not _floats(out, a, b):
        return None
    matmul = getattr(compile_kernel, "matmul", None)
    if matmul is not None and matmul(a, b, out) is not None:
        return out
    return np.dot(a, b, out=out)


def addmm_into(owner, args, attrs, out, compile_kernel):
    """``addmm`` (nn.Linear) by the backend's matrix product, or numpy's where it has none,
    into the planned buffer (or a new array); None (the impl) for other dtypes."""
    bias, a, b = args
    alpha, beta = attrs.get("alpha", 1), attrs.get("beta", 1)
    if out is None and a.ndim == b.ndim == 2 and a.shape[1] == b.shape[0]:
        out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    if not _floats(out, bias, a, b) or not all(type(v) in (int, float) for v in (alpha, beta)):
        return None
    matmul = getattr(compile_kernel, "matmul", None)
    if matmul is not None and matmul(a, b, out, bias, alpha, beta) is not None:
        return out
    # numpy's product into ``out``, then the impl's scaling and sum, as eager's addmm
    from ..ops.linalg import add_scaled        # (linalg imports this module)
    np.matmul(a, b, out=out)
    return add_scaled(out, bias, beta, alpha)

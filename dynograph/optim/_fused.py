"""Fused in-place parameter updates: one compiled loop over a parameter and its state, in place
of the several numpy passes (and temporaries) the tensor methods make.

A kernel computes the same float operations, in the same order and dtype, as the eager
methods it replaces (lerp's and addcmul's fused multiply-adds included), so the values are
those of the numpy path, bit for bit.  Hyper-parameters travel in a small buffer read on each
call (rounded to the parameter's dtype, as a Python scalar meets a tensor), so a changing
learning rate or Adam's bias corrections do not recompile; a kernel is compiled per update
kind, flags and parameter size.

Kernels come from the backend that lends eager ops compiled code (runtime/host_kernels.py);
where none does, a case is not covered, or a parameter is too small for a compilation to pay
back, ``run`` answers False and the optimizer keeps its tensor methods.
"""
import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.runtime import host_kernels

__all__ = ["sgd_momentum", "adam"]

_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))

# elements below which an update keeps numpy: compiling a kernel costs 30-100 ms (once per
# size and flags; the backend then keeps it on disk).  SGD's numpy update costs about 1 ns
# an element and the kernel saves about half; Adam's (lerp and addcmul round their
# multiply-adds once, which numpy emulates in float64) costs 50-90 ns an element.
MIN_SGD = 1 << 16
MIN_ADAM = 1 << 12
# updates of one kind, flags and size numpy makes before a kernel is compiled: a script that
# takes a step or two does not pay for a compilation (SGD's kernel saves about 1 µs per 2k
# elements a step: it pays back over hundreds of steps; Adam's at the first)
WARM = {"sgd": 16, "adam": 0}

_plans = {}             # (kind, flags, size, dtype) -> compiled plan, or None (numpy)
_calls = {}             # (kind, flags, size, dtype) -> updates made before compiling


def _arrays(tensors):
    """The tensors' arrays where a kernel may update them in place: C-contiguous, writeable
    numpy arrays of one float dtype and size, not being traced, none sharing memory with
    another; else None."""
    if TRACE.tracer is not None:
        return None
    arrays = [t._data for t in tensors]
    first = arrays[0]
    if first.dtype not in _FLOAT:
        return None
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != first.dtype or a.shape != first.shape \
                or not a.flags.c_contiguous or not a.flags.writeable:
            return None
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b):
                return None
    return arrays


def _plan(kind, flags, n, dtype, build):
    key = (kind, flags, n, dtype)
    plan = _plans.get(key, False)
    if plan is False:
        calls = _calls.get(key, 0)
        if calls < WARM[kind]:
            _calls[key] = calls + 1
            return None
        _calls.pop(key, None)
        compile_kernel = host_kernels.compiler()
        plan = None
        if compile_kernel is not None:
            kernel, pairs = build(n, dtype)
            plan = compile_kernel(kernel)
            if plan is not None:
                plan = plan.writing_into(pairs)
                try:
                    plan.fn                     # compiled now: numpy where it fails
                except Exception:
                    plan = None
        _plans[key] = plan
    return plan


def _run(plan, arrays, scalars, n_out):
    from dynograph.runtime import executor
    s = np.array(scalars, arrays[0].dtype)
    addresses = [executor.address(a) for a in arrays] + [executor.address(s)]
    # the outputs are stored into their inputs (Plan.writing_into); their arguments go unused
    plan(addresses + addresses[:n_out])


def _kernel(name, n, dtype, n_arrays, n_scalars, body):
    """The elementwise Kernel over ``n`` elements of ``n_arrays`` arrays and a buffer of
    ``n_scalars`` scalars (read at every element: stride 0); ``body(b, loads, scalar)``
    returns the values stored into the arrays, as ``[(array index, handle)]``."""
    from dynograph.compiler.lowering.description import Kernel, Load, Recorder, Store
    from dynograph.runtime import dtypes as D
    dt = D.from_numpy_dtype(np.dtype(dtype))
    loads = [Load(i, (1,), 0) for i in range(n_arrays)] + \
        [Load(n_arrays, (0,), i) for i in range(n_scalars)]
    b = Recorder()
    arrays = [b.load(i, dt, 0) for i in range(n_arrays)]
    scalars = [b.load(n_arrays + i, dt, 0) for i in range(n_scalars)]
    stored = body(b, arrays, scalars)
    buffers = [(f"in{i}", dt, "in") for i in range(n_arrays + 1)] + \
        [(f"out{j}", dt, "out") for j in range(len(stored))]
    stores = [Store(n_arrays + 1 + j, v.index, (1,)) for j, (_, v) in enumerate(stored)]
    pairs = tuple((j, k) for j, (k, _) in enumerate(stored))
    return Kernel(name, (n,), (), buffers, b.exprs, loads, [], stores), pairs


def sgd_momentum(p, grad, buf, momentum, dampening, lr, weight_decay, nesterov, maximize):
    """One step of SGD with an existing momentum buffer, in place, as sgd.py's tensor methods
    compute it:
    ``g = -grad if maximize; g += p * wd; buf = buf * m + g * (1 - d);
    p += (g + buf * m if nesterov else buf) * -lr``; False where it does not run."""
    if p.numel() < MIN_SGD or type(lr) is not float:
        return False
    arrays = _arrays((p, grad, buf))
    if arrays is None:
        return False
    flags = (bool(maximize), weight_decay != 0, dampening != 0, bool(nesterov))

    def build(n, dtype):
        def body(b, loads, scalars):
            pv, g, bv = loads
            m, d1, wd, neg_lr = scalars
            if maximize:
                g = b.neg(g)
            if weight_decay != 0:
                g = b.add(g, b.mul(pv, wd))
            bv = b.add(b.mul(bv, m), b.mul(g, d1) if dampening != 0 else g)
            step = b.add(g, b.mul(bv, m)) if nesterov else bv
            return [(0, b.add(pv, b.mul(step, neg_lr))), (2, bv)]
        return _kernel("sgd_momentum", n, dtype, 3, 4, body)

    plan = _plan("sgd", flags, arrays[0].size, arrays[0].dtype, build)
    if plan is None:
        return False
    _run(plan, arrays, [momentum, 1 - dampening, weight_decay, -lr], 2)
    buf._bump_version()
    p._bump_version()
    return True


def adam(p, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled,
         maximize, bias_correction2_sqrt, step_size):
    """One step of Adam (not AMSGrad) after its step counter's increment, in place, as
    adam.py's tensor methods compute it: by a kernel where one pays, else by numpy on the
    arrays (the same operations without the tensor methods' dispatch); False where neither
    applies."""
    if type(lr) is not float:
        return False
    arrays = _arrays((p, grad, exp_avg, exp_avg_sq))
    if arrays is None:
        return False
    dtype = arrays[0].dtype
    # lerp's weight in the dtype: w * (end - start) + start for small weights, else
    # (w - 1) * (end - start) + end (compiler/ops/elementwise.py _lerp)
    w = dtype.type(1 - beta1)
    small = bool(abs(w) < 0.5)
    lerp_weight = w if small else w - dtype.type(1)
    value = 1 - beta2                   # addcmul's value: value * t1 first, unless it is 1
    decay = (1 - lr * weight_decay) if decoupled else weight_decay
    scalars = [decay, lerp_weight, beta2, value, bias_correction2_sqrt, eps, -step_size]
    flags = (bool(maximize), weight_decay != 0, bool(decoupled), small, value == 1)

    def build(n, dtype):
        def body(b, loads, s):
            pv, g, m, v = loads
            if maximize:
                g = b.neg(g)
            if weight_decay != 0:
                if decoupled:
                    pv = b.mul(pv, s[0])
                else:
                    g = b.add(g, b.mul(pv, s[0]))
            diff = b.sub(g, m)
            m = b.call_math("fma", s[1], diff, m if small else g)
            v = b.call_math("fma", g if value == 1 else b.mul(s[3], g), g, b.mul(v, s[2]))
            denom = b.add(b.div(b.sqrt(v), s[4]), s[5])
            return [(0, b.add(pv, b.div(b.mul(s[6], m), denom))), (2, m), (3, v)]
        return _kernel("adam", n, dtype, 4, 7, body)

    plan = None
    if arrays[0].size >= MIN_ADAM:
        plan = _plan("adam", flags, arrays[0].size, dtype, build)
    if plan is not None:
        _run(plan, arrays, scalars, 3)
    else:
        _adam_numpy(arrays, scalars, flags)
    for t in (exp_avg, exp_avg_sq, p):
        t._bump_version()
    return True


def _adam_numpy(arrays, scalars, flags):
    """The kernel's operations by numpy, in place (the fused multiply-adds rounded once, as
    lerp's and addcmul's impls round them)."""
    from dynograph.compiler.ops.fused import fma
    pv, g, m, v = arrays
    decay, lerp_weight, beta2, value, bc2, eps, neg_step = \
        [pv.dtype.type(x) for x in scalars]
    maximize, weight_decay, decoupled, small, value_is_one = flags
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            np.multiply(pv, decay, out=pv)
        else:
            g = g + pv * decay
    diff = g - m
    m[...] = fma(lerp_weight, diff, m if small else g)
    np.multiply(v, beta2, out=v)
    v[...] = fma(g if value_is_one else value * g, g, v)
    # (out=: a 0-dim parameter's ufunc results would be numpy scalars, which out= refuses)
    denom = np.sqrt(v, out=np.empty_like(v))
    np.true_divide(denom, bc2, out=denom)
    np.add(denom, eps, out=denom)
    step = np.multiply(m, neg_step, out=np.empty_like(m))
    np.true_divide(step, denom, out=step)
    np.add(pv, step, out=pv)

"""Eager-mode overhead: tiny ops where Python dispatch dominates, and short op chains.

Each system runs the same computation on the same values; ``numpy`` is the floor (our
kernels are numpy calls), ``torch`` is the target (per-op overhead at most 3x torch's).
"""
import numpy as np
from scipy import special

import dynograph

from ..runner import optional_torch, workload


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape, dtype=np.float32), rng.random(shape, dtype=np.float32))


@workload("eager_overhead", "a + b on 4-element float32 tensors (per-op dispatch cost)")
def eager_overhead():
    a, b = _inputs((4,))
    da, db = dynograph.from_numpy(a), dynograph.from_numpy(b)
    fns = {"dynograph": lambda: da + db, "numpy": lambda: a + b}
    torch = optional_torch()
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        fns["torch"] = lambda: ta + tb
    return fns


@workload("eager_scalar", "a + 1.0 on a 4-element float32 tensor (tensor-scalar dispatch cost)")
def eager_scalar():
    a, _ = _inputs((4,))
    da = dynograph.from_numpy(a)
    fns = {"dynograph": lambda: da + 1.0, "numpy": lambda: a + 1.0}
    torch = optional_torch()
    if torch is not None:
        ta = torch.from_numpy(a)
        fns["torch"] = lambda: ta + 1.0
    return fns


@workload("eager_record", "a * b on 4-element tensors requiring grad (records a backward node)")
def eager_record():
    a, b = _inputs((4,))
    da = dynograph.from_numpy(a.copy()).requires_grad_()
    db = dynograph.from_numpy(b.copy()).requires_grad_()
    fns = {"dynograph": lambda: da * db}
    torch = optional_torch()
    if torch is not None:
        ta = torch.from_numpy(a.copy()).requires_grad_()
        tb = torch.from_numpy(b.copy()).requires_grad_()
        fns["torch"] = lambda: ta * tb
    return fns


def chain(x, y, sigmoid):
    """Ten elementwise ops; ``sigmoid`` is a function because numpy has no method for it."""
    return (((x * y + 1).exp() - x).tanh() * 0.5 + sigmoid(y)) * x - y


def _np_chain(x, y):
    return (np.tanh(np.exp(x * y + 1) - x) * 0.5 + special.expit(y)) * x - y


@workload("eager_chain", "a 10-op elementwise chain on 64x64 float32 tensors")
def eager_chain():
    x, y = _inputs((64, 64))
    dx, dy = dynograph.from_numpy(x), dynograph.from_numpy(y)
    fns = {"dynograph": lambda: chain(dx, dy, dynograph.sigmoid), "numpy": lambda: _np_chain(x, y)}
    torch = optional_torch()
    if torch is not None:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        fns["torch"] = lambda: chain(tx, ty, torch.sigmoid)
    return fns


def _fwd_bwd(x, y, sigmoid):
    x.grad = None
    y.grad = None
    chain(x, y, sigmoid).sum().backward()
    return x.grad, y.grad


@workload("autograd_chain", "forward + backward of the 10-op chain on 64x64 (requires_grad)")
def autograd_chain():
    x, y = _inputs((64, 64))
    dx = dynograph.from_numpy(x.copy()).requires_grad_()
    dy = dynograph.from_numpy(y.copy()).requires_grad_()
    fns = {"dynograph": lambda: _fwd_bwd(dx, dy, dynograph.sigmoid)}
    torch = optional_torch()
    if torch is not None:
        tx = torch.from_numpy(x.copy()).requires_grad_()
        ty = torch.from_numpy(y.copy()).requires_grad_()
        fns["torch"] = lambda: _fwd_bwd(tx, ty, torch.sigmoid)
    return fns


@workload("autograd_overhead", "forward + backward of (a * b).sum() on 4-element tensors")
def autograd_overhead():
    a, b = _inputs((4,))
    da = dynograph.from_numpy(a.copy()).requires_grad_()
    db = dynograph.from_numpy(b.copy()).requires_grad_()

    def step(x, y):
        x.grad = None
        y.grad = None
        (x * y).sum().backward()
        return x.grad, y.grad

    fns = {"dynograph": lambda: step(da, db)}
    torch = optional_torch()
    if torch is not None:
        ta = torch.from_numpy(a.copy()).requires_grad_()
        tb = torch.from_numpy(b.copy()).requires_grad_()
        fns["torch"] = lambda: step(ta, tb)
    return fns

"""Small float64 inputs for gradcheck cases (shared by test_gradcheck_ops and grad_cases_*)."""
import numpy as np

import dynograph as dg

F64 = dg.float64


def r(*shape, lo=-1.0, hi=1.0, seed=0):
    """A float64 leaf with uniform values in (lo, hi)."""
    a = np.random.default_rng(seed).uniform(lo, hi, size=shape)
    return dg.tensor(a, dtype=F64, requires_grad=True)


def distinct(*shape, seed=0, lo=-1.0, hi=1.0):
    """A float64 leaf whose values are well separated (no ties for sort/max/median)."""
    n = int(np.prod(shape)) if shape else 1
    vals = np.linspace(lo, hi, n)[np.random.default_rng(seed).permutation(n)]
    return dg.tensor(vals.reshape(shape), dtype=F64, requires_grad=True)


def idx(values):
    return dg.tensor(values, dtype=dg.int64)


def mask(values):
    return dg.tensor(values, dtype=dg.bool)


def spd(a):
    """A symmetric positive definite matrix that depends smoothly on ``a``."""
    return a @ a.mT + 3 * dg.eye(a.shape[-1], dtype=F64)


def grad_of(forward):
    """fn(x, g): the vector-Jacobian product of ``forward`` at x, kept differentiable.

    Reaches the primitives that only appear inside derivative rules (e.g. as_strided_backward).
    """
    def fn(x, g):
        return dg.autograd.grad(forward(x), x, g, create_graph=True)[0]
    return fn

"""Helpers of the family sweeps (tests/test_families_*.py): one case is a function of the
library (``torch`` or ``dynograph``) that builds its inputs with that library and calls the op,
so the same code runs on both sides and the outcomes are compared.

An outcome is either a value (tensors, tuples of them, Python numbers) or an exception: when
torch raises, dynograph must raise the same exception type; when torch returns, dynograph must
return the same structure, shapes, dtypes and values (NaN equal to NaN)."""
import math

import numpy as np

import dynograph
from conftest import to_numpy


def values(L, shape, dtype=None, lo=-2.0, hi=2.0):
    """Deterministic, irregular values in [lo, hi) of ``shape`` (integers: -3 .. 3; bool:
    a pattern); never random, so both libraries build the same inputs."""
    dtype = dtype or L.float64
    n = math.prod(shape)
    k = L.arange(n, dtype=L.float64)
    if dtype == L.bool:
        return ((k * 7) % 3 == 0).reshape(shape)
    if not dtype.is_floating_point:
        return ((k * 5) % 7 - 3).to(dtype).reshape(shape)
    x = (k * 0.6180339887) % 1.0 * (hi - lo) + lo
    return x.to(dtype).reshape(shape)


def outcome(L, fn):
    try:
        return "ok", fn(L)
    except Exception as e:      # noqa: BLE001  the exception is the outcome compared
        return "raised", e


def _leaves(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _leaves(v)]
    return [x]


def assert_same_value(ours, theirs, rtol=1e-6, atol=1e-7, what="result"):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)), f"{what}: {type(ours).__name__}, torch a sequence"
        assert len(ours) == len(theirs), f"{what}: {len(ours)} results, torch {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_value(a, b, rtol, atol, f"{what}[{i}]")
        return
    if hasattr(theirs, "dtype") and hasattr(theirs, "shape"):
        assert isinstance(ours, dynograph.Tensor), f"{what}: {type(ours).__name__}, torch a Tensor"
        assert tuple(ours.shape) == tuple(theirs.shape), \
            f"{what}: shape {tuple(ours.shape)}, torch {tuple(theirs.shape)}"
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], \
            f"{what}: dtype {ours.dtype}, torch {theirs.dtype}"
        a, b = to_numpy(ours), to_numpy(theirs)
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)
        return
    if isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours), f"{what}: {ours!r}, torch nan"
        return
    if isinstance(theirs, float):
        assert math.isclose(ours, theirs, rel_tol=rtol, abs_tol=atol), f"{what}: {ours!r}, torch {theirs!r}"
        return
    assert ours == theirs, f"{what}: {ours!r}, torch {theirs!r}"


def check(torch, fn, rtol=1e-6, atol=1e-7):
    """fn(torch) and fn(dynograph) agree: same exception type, or same results."""
    t_kind, t_val = outcome(torch, fn)
    d_kind, d_val = outcome(dynograph, fn)
    if t_kind == "raised":
        assert d_kind == "raised", f"torch raised {type(t_val).__name__}: {t_val}; dynograph returned"
        assert type(d_val).__name__ == type(t_val).__name__, \
            f"dynograph raised {type(d_val).__name__}: {d_val}; torch {type(t_val).__name__}: {t_val}"
        return t_val, d_val
    if d_kind == "raised":
        raise AssertionError(f"dynograph raised {type(d_val).__name__}: {d_val}") from d_val
    assert_same_value(d_val, t_val, rtol, atol)
    return t_val, d_val


def check_grad(torch, make, rtol=1e-6, atol=1e-8):
    """make(L) -> (leaves, output): the output's values and the float64 gradients of a fixed
    weighting of it with respect to each leaf agree with torch (no gradient = zeros)."""
    grads = []
    for L in (torch, dynograph):
        leaves, out = make(L)
        outs = [o for o in _leaves(out) if o.requires_grad]
        ws = [L.linspace(-1.0, 1.5, o.numel(), dtype=o.dtype).reshape(o.shape) for o in outs]
        g = L.autograd.grad(outs, leaves, ws, allow_unused=True) if outs else [None] * len(leaves)
        g = [L.zeros_like(leaf) if gi is None else gi for gi, leaf in zip(g, leaves)]
        grads.append((out, g))
    (d_out, d_g), (t_out, t_g) = grads[1], grads[0]
    assert_same_value(d_out, t_out, rtol, atol, "output")
    for i, (a, b) in enumerate(zip(d_g, t_g)):
        assert_same_value(a, b, rtol, atol, f"gradient of input {i}")

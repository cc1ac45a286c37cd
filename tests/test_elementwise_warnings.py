"""Elementwise ops give inf/nan quietly, as PyTorch does: no numpy RuntimeWarning escapes for
x / 0, log(-1), sqrt(-1), exp(1000), float32 overflow, inf - inf or nan operands, even where
the user turned warnings into errors."""
import warnings

import numpy as np
import pytest

import dynograph
from dynograph._dispatch import call
from dynograph.compiler.ops import elementwise  # noqa: F401  (registers the ops)
from dynograph.compiler.ops.core import REGISTRY

SPECIAL = [0.0, -0.0, 1.0, -1.0, -2.5, 0.5, 1000.0, -1000.0, 3e38, -3e38, 1e308, np.inf, -np.inf, np.nan]
INTEGERS = [0, 1, -1, 2, -3, 1000, 2 ** 62, -2 ** 63]
OPS = sorted(name for name, op in REGISTRY.items() if op.kind == "elementwise")


def _operands(dtype, name=""):
    """Every pair (and triple) of special values, broadcast against each other."""
    values = SPECIAL if dtype != "int64" else INTEGERS
    if "polynomial" in name:
        # the degree is a loop count (torch's kernels loop n times too): no 2**62-step loops
        values = [v for v in values if abs(v) <= 1000]
    with np.errstate(over="ignore"):     # 1e308 is inf in float32
        v = dynograph.tensor(np.array(values, dtype=dtype))
    return [(v,), (v[:, None], v[None, :]), (v[:, None, None], v[None, :, None], v[None, None, :]),
            (v, 0), (0, v), (v, 0.0), (0.0, v), (v, -1), (v, 2.5), (v[:, None], v[None, :], 2.0)]


def _run_quietly(op, args):
    """Run op on args with every warning an error; errors other than warnings do not count."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            call(op, *args)
        except RuntimeWarning:
            raise
        except Exception:
            pass    # wrong arity, missing attrs, unsupported dtype: not this test's business


@pytest.mark.parametrize("name", OPS)
def test_no_numpy_warning(name):
    op = REGISTRY[name]
    for dtype in ("float32", "float64", "int64"):
        for args in _operands(dtype, name):
            _run_quietly(op, args)


def test_tensor_api_is_quiet():
    x = dynograph.tensor([0.0, -1.0, 1000.0, 3e38])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dynograph.isinf(x[:1].reciprocal()).all()
        assert dynograph.isnan((x[1:2]).log()).all() and dynograph.isnan(x[1:2].sqrt()).all()
        assert dynograph.isinf(x[2:3].exp()).all() and dynograph.isinf(x[3:] * 10).all()
        assert dynograph.isinf(x[3:] + x[3:]).all() and dynograph.isinf(x[1:] / 0).all()

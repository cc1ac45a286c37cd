"""masked_fill with 0 (relu's derivative) selects bits without branches: the same values as
torch, NaN and -0.0 kept where the mask is false, +0 where it is true, any layout."""
import numpy as np
import pytest

import dynograph

from conftest import from_torch, to_numpy


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_masked_fill_zero_matches_torch(torch, dtype, layout):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((6, 5)) * 10).astype(dtype)
    if x.dtype.kind == "f":
        x[0, :3] = [np.nan, -0.0, np.inf]
        x[1, :3] = [np.nan, -0.0, -np.inf]
    m = rng.random((6, 5)) > 0.5
    m[0, :3] = False
    m[1, :3] = True
    tx, tm = torch.from_numpy(x), torch.from_numpy(m)
    if layout == "transposed":
        tx, tm = tx.t(), tm.t()
    want = tx.masked_fill(tm, 0)
    got = from_torch(tx).masked_fill(from_torch(tm), 0)
    assert got.dtype is getattr(dynograph, dtype)
    np.testing.assert_array_equal(to_numpy(got), to_numpy(want))
    np.testing.assert_array_equal(np.signbit(to_numpy(got)), np.signbit(to_numpy(want)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_gradient_keeps_nans_where_it_passes(torch, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype(dtype)
    x[0, :2] = 0.0
    g = rng.standard_normal((4, 8)).astype(dtype)
    g[1, :4] = [np.nan, np.inf, np.nan, -np.inf]
    tx = torch.tensor(x, requires_grad=True)
    dx = from_torch(tx, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g))
    dynograph.relu(dx).backward(dynograph.tensor(g))
    np.testing.assert_array_equal(dx.grad.numpy(), tx.grad.numpy())

"""Shared test helpers: the PyTorch oracle and comparisons against it."""
import os
import sys

import numpy as np
import pytest

# every op's meta rule is checked against eager execution throughout the suite
os.environ["DYNOGRAPH_CHECK_META"] = "1"
# and every graph the compiler optimizes is verified after each pass (SSA, types, order)
os.environ["DYNOGRAPH_VERIFY"] = "1"

# the tests import the repository's tools (the benchmarks' models, the fuzzers) however pytest
# is started
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dynograph  # noqa: E402


def torch_or_skip():
    """The oracle; tests that need it skip cleanly where it is not installed."""
    return pytest.importorskip("torch")


@pytest.fixture
def torch():
    return torch_or_skip()


@pytest.fixture
def two_threads():
    """dynograph's kernels on two threads (a pool with one worker) for the test."""
    from dynograph.runtime import threads
    before = threads.count()
    threads.set_threads(2)
    yield
    threads.set_threads(before)


def dtype_name(dt):
    """'float32' for dynograph.float32 or torch.float32."""
    return str(dt).split(".")[-1]


def to_numpy(x):
    """A numpy copy of a dynograph or torch tensor (bfloat16 as float32)."""
    if isinstance(x, dynograph.Tensor):
        a = x._data
        return a.astype(np.float32) if a.dtype.name == "bfloat16" else np.array(a)
    if hasattr(x, "detach"):
        x = x.detach()
        import torch
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy().copy()
    return np.asarray(x)


def from_torch(t, requires_grad=False):
    """The dynograph tensor holding the same values and dtype as torch tensor ``t``."""
    import torch
    t = t.detach()
    if t.dtype == torch.bfloat16:
        out = dynograph.tensor(t.float().numpy()).to(dynograph.bfloat16)
    else:
        out = dynograph.tensor(t.numpy())
    if requires_grad:
        out.requires_grad_(True)
    return out


def assert_same(ours, theirs, rtol=1.3e-6, atol=1e-5, check_dtype=True):
    """``ours`` (dynograph) equals ``theirs`` (torch): shape, dtype and values."""
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b, rtol, atol, check_dtype)
        return
    if not hasattr(theirs, "shape"):
        assert ours == theirs or np.allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)
        return
    assert isinstance(ours, dynograph.Tensor), f"expected a Tensor, got {type(ours).__name__}"
    assert tuple(ours.shape) == tuple(theirs.shape), f"shape {tuple(ours.shape)} != {tuple(theirs.shape)}"
    if check_dtype:
        assert dtype_name(ours.dtype) == dtype_name(theirs.dtype), f"dtype {ours.dtype} != {theirs.dtype}"
    a, b = to_numpy(ours), to_numpy(theirs)
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def eval_expr(expr, env):
    """Evaluate ``expr`` (a string) in ``env``; an exception it raises is its result."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return eval(expr, env)
        except Exception as e:          # the error is the result under test
            return e


def error_text(e):
    """An error message with torch's names in dynograph's spelling; overload lists cut off."""
    return str(e).replace("torch.", "dynograph.").split("but expected one of")[0]


def assert_same_error(ours, theirs, expr=""):
    """``ours`` is an exception of the same type and text as torch's ``theirs``."""
    assert isinstance(ours, Exception), f"{expr}: expected {theirs!r}, got {ours!r}"
    assert type(ours).__name__ == type(theirs).__name__, f"{expr}: {ours!r} vs {theirs!r}"
    assert error_text(ours) == error_text(theirs)

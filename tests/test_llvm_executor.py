"""The LLVM backend's loop structure and executor: column-wise reductions (the reduced axes
outside the innermost kept one), and graphs run with planned buffers, in-place state updates
and the thread pool, all against the IR interpreter."""
import os
import sys

import numpy as np
import pytest

import dynograph as dg

from dynograph.compiler.llvm import jit
from dynograph.compiler.llvm.render import BLOCK, COLUMNS, Renderer, render
from dynograph.compiler.lowering.kernel import describe

sys.path.insert(0, os.path.dirname(__file__))
from test_llvm_backend import _private_cache, compare, graph_of, noncontiguous, sample  # noqa: E402,F401


def _layouts(arrays):
    return [(tuple(s // a.itemsize for s in a.strides), 0) for a in arrays]


# ---------------------------------------------------------------- column-wise reductions

COLUMN_CASES = [
    ((5, 150), (0,)),                   # tiles of COLUMNS columns and a remainder tile
    ((3, 4, 70), (1,)),                 # a kept axis outside the reduced one
    ((BLOCK + 7, 3), (0,)),             # more rows than one accumulation block
    ((6, 5, 2, 9), (0, 2)),             # two reduced axes between kept ones
    ((4, 1, 33), (0,)),                 # a size-1 axis dropped
]


@pytest.mark.parametrize("shape, dim", COLUMN_CASES, ids=[str(s) for s, _ in COLUMN_CASES])
@pytest.mark.parametrize("op", ["sum_dim", "mean_dim", "amax", "amin", "nansum", "prod_dim",
                                "var", "std", "all"])
def test_column_reductions_match_interpreter(op, shape, dim):
    dt = np.bool_ if op == "all" else np.float64
    x = sample(dt, shape)
    if op == "prod_dim":                      # one dim at a time
        x = 1 + 0.01 * x
        assert compare(op, (x,), dim=dim[0], keepdim=False)
        return
    if op in ("amax", "amin", "nansum"):
        x = x.copy()
        x.reshape(-1)[::7] = np.nan             # NaN propagation (amax) and skipping (nansum)
    assert compare(op, (x,), dim=dim, keepdim=op == "mean_dim")


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int64])
def test_column_sums_over_dtypes_and_strided_inputs(dt):
    x = noncontiguous(dt, (9, 131))
    assert compare("sum_dim", (x,), tol=5e-5 if dt == np.float32 else None, dim=(0,))
    assert compare("sum_dim", (sample(dt, (9, 131)).T,), tol=5e-5 if dt == np.float32 else None,
                   dim=(1,))


def test_column_softmax_and_log_softmax_match_eager():
    # one fused kernel: the second reduction (the sum) reads the first's per-column max
    x = dg.from_numpy(sample(np.float32, (37, 100)) * 30)
    for fn in (lambda t: dg.softmax(t, 0), lambda t: dg.nn.functional.log_softmax(t, 0),
               lambda t: t - t.mean(0, keepdim=True) / t.std(0, keepdim=True)):
        got = dg.compile(fn, backend="llvm")(x)
        np.testing.assert_allclose(got.numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)


def test_column_reduction_runs_column_wise_and_vectorizes():
    x = np.zeros((4096, 256), np.float32)
    _, _, node = graph_of("sum_dim", (x,), dim=(0,))
    kernel = describe(node, _layouts([x]))
    renderer = Renderer(kernel, "col", jit.triple())
    assert renderer.columnwise()
    assert COLUMNS % 8 == 0
    ir_text = str(jit.optimize(render(kernel, "col_check", jit.triple())))
    assert "<8 x float>" in ir_text


def test_inner_reductions_and_argmax_keep_the_plain_nest():
    x = np.zeros((64, 256), np.float32)
    for op, attrs in [("sum_dim", {"dim": (1,)}), ("argmax", {"dim": 0})]:
        _, _, node = graph_of(op, (x,), **attrs)
        assert not Renderer(describe(node, _layouts([x])), "k", jit.triple()).columnwise()

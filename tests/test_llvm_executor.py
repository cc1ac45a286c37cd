"""The LLVM backend's loop structure and executor: column-wise reductions (the reduced axes
outside the innermost kept one), and graphs run with planned buffers, in-place state updates
and the thread pool, all against the IR interpreter."""
import os
import sys

import numpy as np
import pytest

import dynograph as dg
from tools.bench.workloads.training import classifier_step

from dynograph.compiler.llvm import backend as llvm_backend, jit
from dynograph.compiler.lowering.program import PLANS
from dynograph.compiler.llvm.render import render
from dynograph.compiler.lowering.schedule import BLOCK, COLUMNS, schedule
from dynograph.compiler.lowering.kernel import describe

sys.path.insert(0, os.path.dirname(__file__))
from test_llvm_backend import _LAST_GRAPH, _private_cache, compare, graph_of, noncontiguous, sample  # noqa: E402,F401


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
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "nansum", "prod",
                                "var", "std", "all"])
def test_column_reductions_match_interpreter(op, shape, dim):
    dt = np.bool_ if op == "all" else np.float64
    x = sample(dt, shape)
    if op == "prod":                      # one dim at a time
        x = 1 + 0.01 * x
        assert compare(op, (x,), dim=dim[0], keepdim=False)
        return
    if op in ("amax", "amin", "nansum"):
        x = x.copy()
        x.reshape(-1)[::7] = np.nan             # NaN propagation (amax) and skipping (nansum)
    assert compare(op, (x,), dim=dim, keepdim=op == "mean")


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int64])
def test_column_sums_over_dtypes_and_strided_inputs(dt):
    x = noncontiguous(dt, (9, 131))
    assert compare("sum", (x,), tol=5e-5 if dt == np.float32 else None, dim=(0,))
    assert compare("sum", (sample(dt, (9, 131)).T,), tol=5e-5 if dt == np.float32 else None,
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
    _, _, node = graph_of("sum", (x,), dim=(0,))
    kernel = describe(node, _layouts([x]))
    assert schedule(kernel).columnwise
    assert COLUMNS % 8 == 0
    ir_text = str(jit.optimize(render(kernel, "col_check", jit.triple())))
    assert "<8 x float>" in ir_text


def test_inner_reductions_keep_the_plain_nest_and_outer_argmax_runs_column_wise():
    x = np.zeros((64, 256), np.float32)
    for op, attrs, columns in [("sum", {"dim": (1,)}, False), ("argmax", {"dim": 1}, False),
                               ("argmax", {"dim": 0}, True)]:
        _, _, node = graph_of(op, (x,), **attrs)
        assert schedule(describe(node, _layouts([x]))).columnwise == columns


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_column_wise_arg_reductions_keep_the_first_extreme_and_the_first_nan(op):
    x = sample(np.float32, (40, 70))
    x[3, :] = x[7, :] = 9.0 if op == "argmax" else -9.0      # ties: the first row wins
    x[5, 10:20] = x[9, 10:30] = np.nan                       # the first NaN wins
    assert compare(op, (x,), dim=0)
    assert compare(op, (np.nan_to_num(x).astype(np.int64),), dim=0)   # NaN has no integer value


# ---------------------------------------------------------------- direct convolution kernels

def _conv_case(n, c, o, size, k, stride=1, padding=0, dilation=1, groups=1, bias=True,
               transposed=False, output_padding=0, dt=np.float32, strided=False):
    nd = len(size)
    x = sample(dt, (n, c) + size)
    if strided:
        x = noncontiguous(dt, (n, c) + size)
    wshape = (c, o // groups) + (k,) * nd if transposed else (o, c // groups) + (k,) * nd
    w = sample(dt, wshape)
    b = sample(dt, (o,)) if bias else None
    attrs = dict(stride=(stride,) * nd, padding=(padding,) * nd, dilation=(dilation,) * nd,
                 transposed=transposed, output_padding=(output_padding,) * nd, groups=groups)
    return (x, w, b), attrs


CONV_CASES = {
    "plain": _conv_case(2, 3, 4, (9, 11), 3),
    "padded-strided": _conv_case(2, 4, 6, (10, 7), 3, stride=2, padding=1),
    "dilated-grouped": _conv_case(1, 4, 6, (12, 12), 3, dilation=2, groups=2, padding=2),
    "no-bias-1d": _conv_case(3, 2, 5, (17,), 4, bias=False),
    "3d": _conv_case(1, 2, 3, (5, 6, 7), 2, padding=1),
    "float64": _conv_case(2, 3, 4, (8, 8), 5, dt=np.float64),
    "non-contiguous": _conv_case(2, 3, 4, (8, 9), 3, strided=True),
    "transposed": _conv_case(2, 4, 6, (6, 5), 3, transposed=True, padding=1),
    "transposed-output-padding": _conv_case(1, 3, 4, (5, 5), 3, transposed=True, output_padding=1,
                                            dilation=2, padding=1),
    "transposed-grouped": _conv_case(2, 4, 6, (7,), 3, transposed=True, groups=2, bias=False),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_direct_convolution_kernels_match_interpreter(case):
    from dynograph.compiler.lowering import conv as convolution
    convolution._PLANS.clear()
    args, attrs = CONV_CASES[case]
    assert compare("convolution", args, expect_kernel=False, tol=2e-5, **attrs)
    plans = [p for node_plans in convolution._PLANS.values() for p, *_ in node_plans.values()]
    assert plans and all(p is not None for p in plans)


@pytest.mark.parametrize("case, expected", [
    (_conv_case(1, 2, 2, (6, 6), 3, transposed=True, stride=2), "strided transposed"),
    (_conv_case(1, 2, 2, (6, 6), 3, dt=np.float16), "float16"),
    (_conv_case(1, 2, 2, (6, 6), 3, transposed=True, padding=3), "padding beyond the kernel"),
])
def test_convolutions_without_a_direct_kernel_run_im2col(case, expected):
    from dynograph.compiler.lowering import conv as convolution
    convolution._PLANS.clear()
    args, attrs = case
    assert compare("convolution", args, expect_kernel=False, tol=2e-3, **attrs), expected
    assert not any(p is not None for plans in convolution._PLANS.values() for p, *_ in plans.values())


def test_cnn_training_steps_with_direct_convolutions_match_eager():
    def net(lib):
        m = lib.nn
        return m.Sequential(m.Conv2d(3, 4, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                            m.Conv2d(4, 6, 3, groups=2), m.ReLU(), m.Flatten(), m.Linear(6 * 2 * 2, 5))
    dg.manual_seed(0)
    eager, compiled = net(dg), net(dg)
    compiled.load_state_dict(eager.state_dict())
    opts = [dg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, compiled)]

    eager_step = classifier_step(eager, opts[0])
    compiled_step = dg.compile(classifier_step(compiled, opts[1]), backend="llvm")
    rng = np.random.default_rng(1)
    for _ in range(6):
        x = dg.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
        y = dg.from_numpy(rng.integers(0, 5, size=4))
        np.testing.assert_allclose(compiled_step(x, y).item(), eager_step(x, y).item(), rtol=1e-5)
    for (name, a), b in zip(eager.state_dict().items(), compiled.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


# ---------------------------------------------------------------- planned buffers, in place

def test_steady_state_calls_allocate_only_what_they_return():
    import tracemalloc
    rng = np.random.default_rng(0)
    x, w1, w2 = (dg.from_numpy(rng.standard_normal(s).astype(np.float32) * 0.1)
                 for s in ((256, 512), (512, 512), (512, 256)))

    def fn(x, w1, w2):                  # intermediates of 512 KB each, a 0-d result
        h = dg.relu(x @ w1)
        return (h @ w2).tanh().sum()
    compiled = dg.compile(fn, backend="llvm")
    for _ in range(3):
        got = compiled(x, w1, w2)
    np.testing.assert_allclose(got.item(), fn(x, w1, w2).item(), rtol=1e-4)
    tracemalloc.start()
    try:
        compiled(x, w1, w2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak      # no 512 KB intermediate allocated


def test_sgd_updates_parameters_and_momentum_in_place():
    model = dg.nn.Sequential(dg.nn.Linear(64, 32), dg.nn.ReLU(), dg.nn.Linear(32, 4))
    twin = dg.nn.Sequential(dg.nn.Linear(64, 32), dg.nn.ReLU(), dg.nn.Linear(32, 4))
    twin.load_state_dict(model.state_dict())
    steps = []
    for m, backend in ((model, "llvm"), (twin, None)):
        opt = dg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, m=m, opt=opt):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        steps.append((dg.compile(step, backend=backend) if backend else step, opt))
    rng = np.random.default_rng(0)
    data = [(dg.from_numpy(rng.standard_normal((16, 64)).astype(np.float32)),
             dg.from_numpy(rng.integers(0, 4, size=16))) for _ in range(6)]
    (compiled, opt), (eager, _) = steps
    for x, y in data[:3]:
        compiled(x, y), eager(x, y)
    held = [p.detach() for p in model.parameters()]          # share the parameters' memory
    where = [p.data_ptr() for p in model.parameters()]
    buffers = [opt.state[p]["momentum_buffer"].data_ptr() for p in model.parameters()]
    for x, y in data[3:]:
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-5)
    assert [p.data_ptr() for p in model.parameters()] == where
    assert [opt.state[p]["momentum_buffer"].data_ptr() for p in model.parameters()] == buffers
    for h, p, q in zip(held, model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert np.array_equal(h.numpy(), p.detach().numpy())  # written through, as eager does
    entry = compiled.entries[-1]
    assert len(entry.graph.memory_plan.inplace) == 8          # 4 parameters, 4 momentum buffers


def test_a_replaced_gradient_tensor_keeps_its_values():
    # .grad is assigned a new tensor each step (zero_grad sets None): the old one must not be
    # overwritten by an in-place update
    lin = dg.nn.Linear(8, 3)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)

    @dg.compile(backend="llvm")
    def step(x):
        opt.zero_grad()
        lin(x).square().sum().backward()
        opt.step()
    x = dg.ones(4, 8)
    step(x), step(x)
    old = lin.weight.grad
    kept = old.numpy().copy()
    step(x * 2)
    assert lin.weight.grad is not old and np.array_equal(old.numpy(), kept)


@pytest.mark.parametrize("n", [3, 7])
def test_programs_per_batch_size_agree_with_eager(n):
    lin = dg.nn.Linear(5, 4)
    fn = dg.compile(lambda x: dg.relu(lin(x)).sum(1), backend="llvm", dynamic=True)
    for size in (n, n + 5, n):
        x = dg.from_numpy(np.random.default_rng(size).standard_normal((size, 5)).astype(np.float32))
        np.testing.assert_allclose(fn(x).detach().numpy(), dg.relu(lin(x)).sum(1).detach().numpy(),
                                   rtol=1e-5)


def test_a_fused_node_over_a_symbolic_batch_plans_its_own_memory():
    # the subgraph of a fused node the llvm runner runs node by node was planned with sizes
    # holding s0, which raised TypeError once the batch dimension was symbolic
    def f(a, b):
        return dg.softmax(b, dim=2), (b + a) * 3
    compiled = dg.compile(f, backend="llvm")
    for size in (2, 3, 4, 6):
        a = dg.randn(1, 1, dtype=dg.float64, requires_grad=True)
        b = dg.randn(size, 1, 2, dtype=dg.float64, requires_grad=True)
        for got, want in zip(compiled(a, b), f(a, b)):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


def test_a_result_is_recycled_only_after_the_caller_drops_it():
    x = dg.from_numpy(sample(np.float32, (1000,)))
    f = dg.compile(lambda t: dg.relu(t * 1.5 + 0.25) * 0.5, backend="llvm")
    expected = (dg.relu(x * 1.5 + 0.25) * 0.5).numpy()
    for _ in range(2):
        f(x)
    held = f(x)
    again = f(x)
    assert held.data_ptr() != again.data_ptr()            # still held: not written over
    view = again[10:20]
    del again
    third = f(x)
    assert third.data_ptr() not in (held.data_ptr(), view.data_ptr() - 40)   # a view holds it
    del third
    fourth = f(x)                    # dropped: its memory serves the next call
    first = fourth.data_ptr()
    del fourth
    assert f(x).data_ptr() == first
    for t in (held, view, f(x)):
        np.testing.assert_array_equal(t.numpy(), expected[10:20] if t is view else expected)


def _weight_grad_case(n, c, o, size, k, padding=0, dilation=1, groups=1, dt=np.float32,
                      strided=False, short=0):
    nd = len(size)
    x = noncontiguous(dt, (n, c) + size) if strided else sample(dt, (n, c) + size)
    out = tuple(s + 2 * padding - dilation * (k - 1) - short for s in size)
    gy = sample(dt, (n, o) + out)
    attrs = dict(kernel_size=(k,) * nd, stride=(1,) * nd, padding=(padding,) * nd,
                 dilation=(dilation,) * nd, groups=groups)
    return (x, gy), attrs


WEIGHT_GRAD_CASES = {
    "plain": _weight_grad_case(3, 3, 6, (12, 11), 5),
    "many-channels": _weight_grad_case(2, 3, 16, (8, 8), 3),
    "padded-dilated": _weight_grad_case(2, 2, 4, (9, 9), 3, padding=2, dilation=2),
    "grouped": _weight_grad_case(2, 4, 8, (7, 8), 3, groups=2),
    "1d": _weight_grad_case(4, 3, 5, (20,), 4),
    "3d": _weight_grad_case(1, 2, 3, (5, 6, 7), 2, padding=1),
    "float64": _weight_grad_case(2, 3, 4, (8, 8), 3, dt=np.float64),
    "non-contiguous": _weight_grad_case(2, 3, 4, (8, 9), 3, strided=True),
    "fewer-positions": _weight_grad_case(2, 3, 4, (8, 9), 3, short=1),
}


@pytest.mark.parametrize("case", WEIGHT_GRAD_CASES)
def test_direct_weight_gradient_kernels_match_interpreter(case):
    from dynograph.compiler.lowering import conv as convolution
    convolution._PLANS.clear()
    args, attrs = WEIGHT_GRAD_CASES[case]
    # float32 sums of hundreds of products in another order: a few ulps of their magnitudes
    assert compare("convolution_weight_grad", args, expect_kernel=False, tol=1e-4, **attrs)
    plans = [p for node_plans in convolution._PLANS.values() for p, *_ in node_plans.values()]
    assert plans and all(p is not None for p in plans)


def test_weight_gradients_of_strided_or_half_convolutions_run_im2col():
    from dynograph.compiler.lowering import conv as convolution
    for args, attrs in [_weight_grad_case(2, 3, 4, (8, 8), 3, dt=np.float16),
                        ((sample(np.float32, (2, 3, 9, 9)), sample(np.float32, (2, 4, 4, 4))),
                         dict(kernel_size=(3, 3), stride=(2, 2), padding=(0, 0), dilation=(1, 1),
                              groups=1))]:
        convolution._PLANS.clear()
        assert compare("convolution_weight_grad", args, expect_kernel=False, tol=2e-5, **attrs)
        assert not convolution._PLANS


def test_concurrent_calls_of_one_compiled_function_agree():
    from concurrent.futures import ThreadPoolExecutor
    w = dg.from_numpy(sample(np.float32, (64, 64)))
    f = dg.compile(lambda x: dg.tanh(dg.relu(x @ w) @ w).sum(1), backend="llvm")
    xs = [dg.from_numpy(sample(np.float32, (32, 64)) * (i + 1)) for i in range(8)]
    f(xs[0]), f(xs[0])
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: f(x).numpy(), xs * 4))
    for x, g in zip(xs * 4, got):
        np.testing.assert_allclose(g, dg.tanh(dg.relu(x @ w) @ w).sum(1).numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_independent_reductions_share_one_loop_and_dependent_ones_follow():
    from dynograph.compiler.lowering.conv import flat_weight_grad
    from dynograph.runtime import dtypes as D
    weight_grad = flat_weight_grad((2, 3, 9, 8), (2, 4, 4, 8), (5, 5), (1, 1), 1, D.float32,
                                   tiles=True)
    # 5 kernel offsets x 2 output channels per step, all in one loop nest
    assert [len(g) for g in schedule(weight_grad).groups] == [10]
    x = dg.from_numpy(sample(np.float32, (37, 300)))
    softmax = dg.compile(lambda t: dg.softmax(t, 1), backend="llvm")
    for _ in range(2):                      # traced, then replayed
        np.testing.assert_allclose(softmax(x).numpy(), dg.softmax(x, 1).numpy(), rtol=1e-5,
                                   atol=1e-7)
    kernels = [p.kernel for plans in PLANS.values() for p in plans.values()
               if p is not None and len(p.kernel.reductions) == 2]
    # the sum reads the max: a second pass
    assert [len(g) for g in schedule(kernels[-1]).groups] == [1, 1]


# ---------------------------------------------------------------- max pooling kernels

def _run_both(op, x, **attrs):
    """(interpreter outputs, llvm outputs) of a one-node graph with several outputs."""
    from dynograph.compiler import interpreter
    from dynograph.compiler.ir import Graph, Input, Node, TensorType, Value
    from dynograph.compiler.ops import REGISTRY
    from dynograph.compiler.ops.core import TensorSpec
    from dynograph.runtime import dtypes as D
    v = Value(TensorType(x.shape, D.from_numpy_dtype(x.dtype)))
    specs = REGISTRY[op].meta(TensorSpec(x.shape, v.type.dtype), **attrs)
    outs = tuple(Value(TensorType(s.shape, s.dtype)) for s in specs)
    graph = Graph([Input(v, "input", "x")], [Node(op, (v,), attrs, outs)], list(outs))
    _LAST_GRAPH[:] = [graph]    # keeps the node, and so its entries in the plan tables, alive
    return interpreter.run(graph, [x])[0], llvm_backend.run(graph, [x])[0]


def _pool_attrs(nd, k, s, d=1, ceil_mode=False, padding=0):
    return dict(kernel_size=(k,) * nd, stride=(s,) * nd, padding=(padding,) * nd,
                dilation=(d,) * nd, ceil_mode=ceil_mode)


POOL_CASES = {
    "2x2": ((2, 3, 8, 10), _pool_attrs(2, 2, 2)),
    "3x3-stride1-dilated": ((1, 2, 9, 11), _pool_attrs(2, 3, 1, d=2)),
    "ceil-mode-inside": ((2, 2, 8, 8), _pool_attrs(2, 2, 2, ceil_mode=True)),
    "unbatched": ((3, 7, 9), _pool_attrs(2, 3, 2)),
    "3d": ((1, 2, 6, 5, 7), _pool_attrs(3, 2, 2)),
    "float64": ((2, 2, 6, 6), _pool_attrs(2, 3, 3)),
}


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_kernels_match_interpreter_with_ties_and_nans(case):
    from dynograph.compiler.lowering import pool as pooling
    shape, attrs = POOL_CASES[case]
    x = sample(np.float64 if case == "float64" else np.float32, shape)
    flat = x.reshape(-1)
    flat[::13] = np.nan                          # the last NaN of a window is picked
    flat[5::17] = 0.5                            # ties: the first is picked
    flat[6::17] = 0.5
    op = f"max_pool{len(attrs['kernel_size'])}d_with_indices"
    pooling._PLANS.clear()
    (ref_v, ref_i), (got_v, got_i) = _run_both(op, x, **attrs)
    np.testing.assert_array_equal(got_v, ref_v)
    np.testing.assert_array_equal(got_i, ref_i)
    assert [p[0] is not None for plans in pooling._PLANS.values() for p in plans.values()] == [True]


def test_max_pool_with_padding_or_overhang_runs_on_the_interpreter():
    from dynograph.compiler.lowering import pool as pooling
    x = sample(np.float32, (1, 2, 7, 7))
    for attrs in (_pool_attrs(2, 3, 2, padding=1), _pool_attrs(2, 2, 2, ceil_mode=True)):
        pooling._PLANS.clear()
        (ref_v, ref_i), (got_v, got_i) = _run_both("max_pool2d_with_indices", x, **attrs)
        np.testing.assert_array_equal(got_v, ref_v)
        np.testing.assert_array_equal(got_i, ref_i)
        assert [p[0] for plans in pooling._PLANS.values() for p in plans.values()] == [None]


def test_max_pool_indices_match_torch():
    torch = pytest.importorskip("torch")
    x = sample(np.float32, (2, 3, 8, 8))
    x[0, 0, 0, :2] = np.nan
    (_, _), (values, indices) = _run_both("max_pool2d_with_indices", x, **_pool_attrs(2, 2, 2))
    tv, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    np.testing.assert_array_equal(values, tv.numpy())
    np.testing.assert_array_equal(indices, ti.numpy())


def test_zero_dim_values_of_ops_run_by_numpy_stay_arrays():
    # numpy gives scalars for some 0-d results (a dropout mask of a 0-d tensor); the next op's
    # dtype rule wants arrays
    import dynograph.nn.functional as F

    def step(a):
        t = (a.sum(-1) > 0).float()[..., 0]
        return (F.dropout(t, p=0.5) > 0).float()
    compiled = dg.compile(step)
    for n in (4, 5, 3, 3):
        dg.manual_seed(n)
        a = dg.randint(-3, 4, (n, 2))
        dg.manual_seed(n)
        expected = step(a)
        dg.manual_seed(n)
        assert float(compiled(a)) == float(expected)


def test_values_computed_from_constants_are_made_once_per_program():
    """An ``arange`` and its views are computed when the program is built, not by a step at
    each call; a result that is a view of one is copied, so changing it changes no later call."""
    def f(x):
        pos = dg.arange(6)
        return x * pos.view(2, 3), pos.view(3, 2)
    compiled = dg.compile(f, backend="llvm")
    x = dg.ones(2, 3)
    for _ in range(3):
        got, pos_view = compiled(x)
        assert np.array_equal(got.numpy(), np.arange(6.0).reshape(2, 3))
        assert np.array_equal(pos_view.numpy(), np.arange(6).reshape(3, 2))
        pos_view.add_(100)              # the caller's copy, not the program's constant
    program = next(iter(compiled.entries[-1].graph._programs.values()))
    # x * pos.view(2, 3) fused; pos.view(3, 2) leaves, so it is made at each call
    assert sorted(s.node.op for s in program.steps) == ["fused", "view"]


def test_constants_whose_size_is_the_symbolic_batch_size_are_made_at_each_call():
    """A training step over a symbolic batch size whose graph holds constants of the batch's
    size (the zeros an argument's gradient starts from) builds its programs: such constants
    are not made once."""
    model = dg.nn.Sequential(dg.nn.Linear(4, 5), dg.nn.Tanh(), dg.nn.Linear(5, 1))
    twin = dg.nn.Sequential(dg.nn.Linear(4, 5), dg.nn.Tanh(), dg.nn.Linear(5, 1))
    twin.load_state_dict(model.state_dict())
    steps = []
    for m in (model, twin):
        opt = dg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(a, m=m, opt=opt):
            opt.zero_grad()
            loss = dg.nn.functional.mse_loss(m(a), a[:, :1])
            loss.backward()
            opt.step()
            return loss
        steps.append(step)
    compiled = dg.compile(steps[0], backend="llvm")
    for n in (2, 5, 4, 3):
        data = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        a, b = (dg.tensor(data, requires_grad=True) for _ in range(2))
        np.testing.assert_allclose(compiled(a).item(), steps[1](b).item(), rtol=1e-5)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_cross_entropy_gradient_runs_no_scatter():
    """Cross-entropy's pick gathers one logit per row: its gradient is a select that fuses with
    the softmax's, where a scatter into zeros ran as steps of its own."""
    model = dg.nn.Linear(8, 5)

    def step(x, y):
        model.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss
    compiled = dg.compile(step, backend="llvm")
    rng = np.random.default_rng(0)
    x, y = dg.from_numpy(rng.standard_normal((16, 8)).astype(np.float32)), dg.tensor(rng.integers(0, 5, 16))
    for _ in range(3):
        loss = compiled(x, y)
        grad = model.weight.grad.clone()
    expected = step(x, y)
    assert abs(loss.item() - expected.item()) < 1e-6
    np.testing.assert_allclose(grad.numpy(), model.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    program = next(iter(compiled.entries[-1].graph._programs.values()))
    ops = [s.node.op for s in program.steps]
    assert "scatter_add" not in ops and "full" not in ops and "arange" not in ops, ops


def _program_of(compiled):
    return next(iter(compiled.entries[-1].graph._programs.values()))


@pytest.mark.parametrize("n_threads", [2, 1])
def test_a_layers_two_gradient_products_run_at_once_and_match_eager(n_threads):
    """Each linear layer's backward computes two products from the same output gradient;
    they run as one step, each on its own thread (on one thread: one after the other, by
    numpy), and the step matches eager."""
    from dynograph.compiler.lowering.products import Products
    from dynograph.runtime import threads
    before = threads.count()
    threads.set_threads(n_threads)
    try:
        _two_gradient_products(Products, n_threads)
    finally:
        threads.set_threads(before)


def _mlp_steps():
    """(compiled step, eager step, check): an MLP's SGD step compiled and eager from the same
    weights; ``check()`` compares their parameters."""
    def mlp():
        return dg.nn.Sequential(dg.nn.Linear(96, 160), dg.nn.ReLU(), dg.nn.Linear(160, 160),
                                dg.nn.ReLU(), dg.nn.Linear(160, 10))
    model, twin = mlp(), mlp()
    twin.load_state_dict(model.state_dict())
    opts = [dg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, twin)]

    def check():
        for p, q in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    return (dg.compile(classifier_step(model, opts[0]), backend="llvm"),
            classifier_step(twin, opts[1]), check)


def _batch(rng):
    return (dg.from_numpy(rng.standard_normal((128, 96)).astype(np.float32)),
            dg.from_numpy(rng.integers(0, 10, 128)))


def _two_gradient_products(Products, n_threads):
    compiled, eager, check = _mlp_steps()
    rng = np.random.default_rng(0)
    for _ in range(4):
        x, y = _batch(rng)
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-5)
    check()
    pairs = [s for s in _program_of(compiled).steps if isinstance(s, Products) and len(s.steps) == 2]
    # layer 2's and layer 3's (layer 1 needs no input gradient)
    assert [[step.node.op for step in s.steps] for s in pairs] == [["mm", "mm"]] * 2
    # bound once and relaunched since; on one thread nothing is bound
    assert all(bool(s.same) == (n_threads > 1) for s in pairs)


def test_bound_launches_follow_a_change_of_the_thread_count():
    """Launches bound at 2 threads run on the pool of that time; after set_num_threads the
    steps bind again (a product's launcher declines another pool), and the step stays eager's."""
    from dynograph.runtime import threads
    compiled, eager, check = _mlp_steps()
    x, y = _batch(np.random.default_rng(5))
    before = threads.count()
    try:
        for n in (2, 2, 2, 1, 1, 3, 3, 2):
            threads.set_threads(n)
            np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-5)
    finally:
        threads.set_threads(before)
    check()


def test_products_that_depend_differ_or_share_memory_run_one_after_the_other(two_threads):
    """No pair where the second reads the first's result, where one does far more work than
    the other, or where the second's result takes the buffer of an operand of the first (the
    memory plan frees it once the first has run); the results stay eager's."""
    from dynograph.compiler.lowering.products import Products
    rng = np.random.default_rng(1)

    def arr(*shape):
        return dg.from_numpy(rng.standard_normal(shape).astype(np.float32))

    def chain(a, b, c):
        return (a @ b) @ c

    def uneven(a, b, c, d):
        return (a @ b).sum() + (c @ d).sum()

    def reused(x, w, y, v):
        h = x * 2                       # freed once h @ w has run: y @ v may take its buffer
        return (h @ w).sum() + (y @ v).sum()
    cases = [(chain, (arr(64, 64), arr(64, 64), arr(64, 64))),
             (uneven, (arr(256, 256), arr(256, 256), arr(256, 32), arr(32, 256))),
             # (large enough that the second's writes would meet the first's reads)
             (reused, (arr(256, 512), arr(512, 512), arr(256, 512), arr(512, 512)))]
    for fn, args in cases:
        compiled = dg.compile(fn, backend="llvm")
        for _ in range(3):
            got = compiled(*args)
        np.testing.assert_allclose(got.numpy(), fn(*args).numpy(), rtol=1e-5)
        assert not any(isinstance(s, Products) and len(s.steps) == 2
                       for s in _program_of(compiled).steps), fn


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bound_products_alone_or_two_at_once_match_numpy(two_threads, dt):
    from dynograph.compiler.llvm import blas, pool
    from dynograph.runtime import threads
    if not blas.usable():
        pytest.skip("numpy's BLAS is not OpenBLAS: products run on numpy")
    rng = np.random.default_rng(2)
    a, b, c, d = (rng.standard_normal(s).astype(dt) for s in ((40, 300), (500, 300), (40, 20), (40, 60)))
    bias = rng.standard_normal(500).astype(dt)
    out1, out2 = np.empty((40, 500), dt), np.empty((20, 60), dt)
    tol = 1e-6 if dt == np.float64 else 1e-5
    with blas.single_threaded():
        for products in ([(a, b.T, out1, bias, 1.0, 0.5), (c.T, d, out2, None, 1, 1)],
                         [(a, b.T, out1, bias, 1.0, 0.5)], [(c.T, d, out2, None, 1, 1)]):
            out1[...] = out2[...] = np.nan
            launch = blas.bind(pool.pool(), products)
            for _ in range(2):          # bound once, launched again on the same blocks
                assert launch()
            if len(products) != 1 or products[0][2] is out1:
                np.testing.assert_allclose(out1, 0.5 * bias + a @ b.T, rtol=tol)
            if len(products) != 1 or products[0][2] is out2:
                np.testing.assert_allclose(out2, c.T @ d, rtol=tol)
        threads.set_threads(3)          # another pool: the launcher declines
        assert launch() is False


def test_a_view_step_keeps_its_view_of_the_same_array_only():
    """A view step keeps the view it made of the same array as at its last call (a transpose
    of a parameter): new values in that array show through it, another array gets its own."""
    def f(a, w):
        return (a.reshape(2, 6) @ w.t()).sum()    # (the strided reshape copies: not a view step)
    compiled = dg.compile(f, backend="llvm")
    base = dg.arange(12.0).reshape(3, 4)
    a = base.t()
    w = dg.ones(2, 6)
    for _ in range(4):
        assert compiled(a, w).item() == f(a, w).item()
        base.add_(1)                    # the same arrays, new values
        w.mul_(2)
    for other in (dg.full((2, 6), 3.0), dg.full((2, 6), 5.0)):
        assert compiled(a, other).item() == f(a, other).item()
    steps = _program_of(compiled).steps
    assert [s.node.op for s in steps if getattr(s, "last_view", None) is not None] == ["t"]


def test_a_view_of_a_result_keeps_the_result_recyclable():
    """A view step does not keep its view of a result the program hands out: the caller's
    dropped result is written again by the next call, not a new array."""
    def f(a):
        r = a * 2 + 1
        return r, (r.t() @ a).sum()
    compiled = dg.compile(f, backend="llvm")
    a = dg.from_numpy(np.random.default_rng(4).standard_normal((64, 64)).astype(np.float32))
    for _ in range(3):
        compiled(a)
    r, _ = compiled(a)
    first = r.data_ptr()
    del r
    r, total = compiled(a)
    assert r.data_ptr() == first
    np.testing.assert_allclose(total.item(), f(a)[1].item(), rtol=1e-4)


def test_a_kernel_step_on_the_same_arrays_relaunches_and_on_others_binds_again():
    """A kernel step that sees the arrays of its last call launches on the addresses it bound
    then; new values in those arrays are read, other arrays are bound anew."""
    def f(a, b):
        h = (a * 2 + b).exp()           # a fused kernel into a planned buffer
        return h @ b.t()
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(3)
    a, b = (dg.from_numpy(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(2))
    for k in range(6):
        if k == 3:
            a = dg.from_numpy(rng.standard_normal((8, 8)).astype(np.float32))   # another array
        np.testing.assert_allclose(compiled(a, b).numpy(), f(a, b).numpy(), rtol=1e-5)
        a.mul_(0.5)                     # the same array, new values
    kernel = _program_of(compiled).steps[0]
    assert kernel.node.op == "fused" and kernel.same[0][0].reads[0]() is a._data


@pytest.mark.parametrize("n_threads", [2, 1])
def test_results_kept_until_the_next_call_alternate_between_two_bound_arrays(n_threads):
    """A result the caller lets go only when the next call's replaces it (a step's ``.grad``,
    a loss kept until the next) is recycled one call later: calls alternate between two
    arrays, each with its own bound launches, and never write into the ones the caller holds.
    On one thread the product is numpy's, into the recycled array too."""
    from dynograph.runtime import threads
    before = threads.count()
    threads.set_threads(n_threads)
    try:
        _alternating_results(n_threads)
    finally:
        threads.set_threads(before)


def _alternating_results(n_threads):
    def f(a):
        r = a * 2 + 1                   # a kernel into a result handed out
        p = a.t() @ (a - 1)             # a product into a result
        return r, p, (p * 3).sum()      # a kernel reading it, into a result
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(6)
    a = dg.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    held, seen, bounds = None, [], []
    for k in range(8):
        expected = [t.numpy().copy() for t in f(a)]
        results = compiled(a)
        if held is not None:        # the last call's results, unchanged by this one
            for t, e in zip(*held):
                np.testing.assert_allclose(t.numpy(), e, rtol=1e-5)
        for t, e in zip(results, expected):
            np.testing.assert_allclose(t.numpy(), e, rtol=1e-5)
        held = (results, expected)
        seen.append(tuple(t.data_ptr() for t in results))
        if k >= 2:          # (the first call traces; the program runs from the second)
            bounds.append({id(b) for step in _program_of(compiled).steps
                           for b in getattr(step, "same", ())})
        a.mul_(0.5)
    assert len(set(seen[2:])) == 2 and seen[2] == seen[4] == seen[6] and seen[3] == seen[5]
    # bound once for each array: two launches of each step, one of `a - 1` (a planned buffer);
    # on one thread the product is not bound (numpy's)
    assert bounds[1] == bounds[5] and len(bounds[1]) == (7 if n_threads > 1 else 5)


def test_a_gather_of_one_pick_per_line_runs_into_its_planned_buffer(monkeypatch):
    """A program's gather of one pick per line (cross-entropy's, along any dim) writes into its
    planned buffer by its direct rule, equal to eager's; other gathers take the impl."""
    from dynograph.compiler.ops import REGISTRY
    from dynograph.compiler.ops.indexing import _gather, _gather_into
    op = REGISTRY["gather"]
    results = []

    def spy(*args):
        results.append(_gather_into(*args))
        return results[-1]
    monkeypatch.setattr(op, "kernel", spy)

    def f(x, i, j):
        picked = x.log_softmax(1).gather(1, i.unsqueeze(1))        # (8, 1)
        across = x.exp().gather(0, j)                               # (1, 10): dim 0
        return (picked * 2).sum() + (across * 3).sum()
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = dg.from_numpy(rng.standard_normal((8, 10)).astype(np.float32))
        i = dg.from_numpy(rng.integers(0, 10, 8))
        j = dg.from_numpy(rng.integers(0, 8, (1, 10)))
        np.testing.assert_allclose(compiled(x, i, j).item(), f(x, i, j).item(), rtol=1e-6)
    assert len(results) >= 4 and all(r is not None for r in results)
    # the rule against the impl, bit for bit, on more shapes; a bad index raises eager's error
    for shape, d in [((5, 7, 3), 1), ((4, 6), 0), ((2, 3, 4, 5), 3), ((3,), 0)]:
        x = rng.standard_normal(shape).astype(np.float32)
        index = rng.integers(0, shape[d], shape[:d] + (1,) + shape[d + 1:])
        out = np.empty(index.shape, np.float32)
        assert _gather_into(None, [x, index], {"dim": d - len(shape)}, out, None) is out
        np.testing.assert_array_equal(out, _gather(x, index, d))
        for bad in (shape[d], -1):
            index.flat[-1] = bad
            with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for "
                                                   f"dimension {d} with size {shape[d]}"):
                _gather_into(None, [x, index], {"dim": d}, out, None)
    # two picks per line: the impl's
    x = rng.standard_normal((4, 6)).astype(np.float32)
    assert _gather_into(None, [x, np.zeros((4, 2), np.int64)], {"dim": 1},
                        np.empty((4, 2), np.float32), None) is None


def test_array_addresses_are_numpys():
    """Launches read their buffers' addresses from the array objects (numpy's ``ctypes.data``
    is too slow for a tiny kernel's launch); they are numpy's own, for every kind of array."""
    from dynograph.runtime import executor
    from dynograph.runtime.executor import address
    # CPython's numpy arrays hold the pointer right after the object header: the fast way is
    # taken (its import-time check once failed on a probe that numpy 2.4 makes a scalar)
    assert executor._DATA_OFFSET == np.dtype(np.intp).itemsize * 2
    base = np.arange(120, dtype=np.float64).reshape(10, 12)
    frozen = base[2:, 3:]
    frozen.flags.writeable = False
    arrays = [base, base[3:], base[:, 5:].T, base[::-2, 1::3], frozen, np.zeros(0, np.int8),
              np.array(3.5, np.float32), base.reshape(-1)[7:8].reshape(()), np.empty((0, 4))[:, 2:],
              np.frombuffer(bytearray(64), np.uint8)[5:], np.asfortranarray(base)]
    for a in arrays:
        assert address(a) == a.__array_interface__["data"][0] == a.ctypes.data
    # a subclass is asked the slow way, and agrees
    m = np.ma.masked_array(base)[1:]
    assert address(m) == m.__array_interface__["data"][0]


def test_a_step_sees_its_inputs_layout_change():
    """A compiled program step keeps the plan of its inputs' last layout; an input of another
    layout (transposed, a strided view) gets the plan of that layout, not the last one."""
    f = dg.compile(lambda a, b: (a * 2 + b).exp().sum(0), backend="llvm")
    wide = np.random.default_rng(0).standard_normal((6, 12)).astype(np.float32)
    x = wide[:, :6].copy()
    for a, b in [(x, x), (x.T, x), (x, wide[:, ::2]), (x.T, x.T), (x, x)]:
        got = f(dg.from_numpy(a), dg.from_numpy(b))
        np.testing.assert_allclose(got.numpy(), np.exp(a * 2 + b).sum(0), rtol=1e-5)

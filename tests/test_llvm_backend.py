"""The LLVM backend against the IR interpreter: every lowered elementwise op and reduction over
dtypes, shapes (empty, 0-d, odd sizes for the vector remainder loop), broadcasting and
non-contiguous inputs; vectorization; whole training steps; the disk cache."""
import copy
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynograph as dg
from dynograph.compiler import interpreter
from dynograph.compiler.ir import Graph, Input, Node, TensorType, Value
from dynograph.compiler.llvm import backend as llvm_backend, jit
from dynograph.compiler.lowering.program import PLANS
from dynograph.compiler.llvm.render import render
from dynograph.compiler.lowering.kernel import describe
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.ops.core import TensorSpec
from dynograph.runtime import dtypes as D

sys.path.insert(0, os.path.dirname(__file__))
from test_compile_training import assert_state_close, batches, make_step, mlp  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory):
    old = os.environ.get("DYNOGRAPH_CACHE_DIR")
    os.environ["DYNOGRAPH_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    if old is None:
        del os.environ["DYNOGRAPH_CACHE_DIR"]
    else:
        os.environ["DYNOGRAPH_CACHE_DIR"] = old


def graph_of(op, args, **attrs):
    """A one-node graph applying ``op`` to arrays (graph inputs) and Python literals."""
    inputs, nargs, specs, arrays = [], [], [], []
    for a in args:
        if isinstance(a, np.ndarray):
            v = Value(TensorType(a.shape, D.from_numpy_dtype(a.dtype)))
            inputs.append(Input(v, "input", f"x{len(inputs)}"))
            nargs.append(v)
            specs.append(TensorSpec(a.shape, v.type.dtype))
            arrays.append(a)
        else:
            nargs.append(a)
            specs.append(a)
    spec = REGISTRY[op].meta(*specs, **attrs)
    out = Value(TensorType(spec.shape, spec.dtype))
    node = Node(op, tuple(nargs), attrs, (out,))
    return Graph(inputs, [node], [out]), arrays, node


_LAST_GRAPH = []


def compare(op, args, expect_kernel=True, tol=None, **attrs):
    """Run ``op`` on both backends; returns False when the interpreter rejects the input."""
    try:
        g, arrays, node = graph_of(op, args, **attrs)
        ref = interpreter.run(g, arrays)[0][0]
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
        return False
    got = llvm_backend.run(g, arrays)[0][0]
    _LAST_GRAPH[:] = [g]        # keeps the node, and so its entries in the plan tables, alive
    if expect_kernel:
        assert any(p is not None for p in PLANS[node].values()), f"{op} did not lower"
    assert got.shape == ref.shape and got.dtype == ref.dtype, (op, got.shape, ref.shape)
    dt = ref.dtype
    if dt.kind == "f" or dt == D.bfloat16.np:
        tol = tol or {8: 1e-12, 4: 2e-6}.get(dt.itemsize, 1e-2)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True, err_msg=f"{op} {attrs}")
    else:
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} {attrs}")
    return True


RNG = np.random.default_rng(0)


def sample(dtype, shape, positive=False):
    if dtype == np.bool_:
        return np.asarray(RNG.random(shape) < 0.5)
    if np.dtype(dtype).kind in "iu":
        lo = 1 if positive else -6
        return np.asarray(RNG.integers(lo, 7, size=shape), dtype)
    x = RNG.normal(size=shape) * 2
    if positive:
        x = np.abs(x) + 0.1
    return np.asarray(x, dtype)


def noncontiguous(dtype, shape, positive=False):
    """A transposed view (for 2-d shapes) or a strided slice."""
    if len(shape) == 2:
        return sample(dtype, shape[::-1], positive).T
    big = sample(dtype, tuple(2 * n for n in shape), positive)
    return big[tuple(slice(None, None, 2) for _ in shape)]


LOWERED = sorted(n for n, o in REGISTRY.items() if o.kind == "elementwise" and o.lowering)
TERNARY = {"where", "masked_fill", "lerp", "addcmul", "addcdiv", "clamp"}
BINARY = {"prelu", "add", "sub", "mul", "div", "remainder", "fmod", "pow", "atan2", "maximum", "minimum",
          "fmax", "fmin", "copysign", "hypot", "logaddexp", "logaddexp2", "xlogy", "heaviside", "nextafter",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
          "bitwise_right_shift"}
# (dtype, shape of the first operand, shape of the second, non-contiguous first operand)
LAYOUTS = [(np.float32, (5, 7), (7,), True), (np.float64, (37,), (37,), False),
           (np.int32, (), (), False), (np.int64, (0,), (0,), False),
           (np.bool_, (3, 4), (3, 1), True), (np.float16, (33,), (), False)]


# attributes the parametrized test passes to ops that need them
ATTRS = {"polygamma": {"n": 2}, "affine_normalize": {"eps": 1e-5, "kind": "layer"},
         "adam_param": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}}


def _args(op, dt, shape, other, strided):
    positive = op in ("div", "remainder", "fmod") and np.dtype(dt).kind in "iu"
    x = noncontiguous(dt, shape) if strided else sample(dt, shape)
    y = sample(dt, other, positive)
    if op == "affine_normalize":
        # statistics broadcast like ``other``; a missing weight and bias arrive as 1 and 0
        stats = (y, sample(dt, other, positive=True))
        if strided:
            return (x, *stats, 1, 0)
        return (x, *stats, sample(dt, shape[-1:]), sample(dt, other))
    if op in ("bitwise_left_shift", "bitwise_right_shift"):
        y = RNG.integers(-1, 70, size=other).astype(dt) if np.dtype(dt).kind in "iu" else y
    if op == "where":
        return (sample(np.bool_, other), x, y)
    if op == "adam_param":      # a parameter, its moments, the step counter and the lr
        return (x, sample(dt, shape), sample(dt, shape, positive=True), np.array(3, np.float32),
                np.array(1e-3))
    if op == "masked_fill":
        return (x, sample(np.bool_, other), 2.5)
    if op == "clamp":
        return (x, -1, 1.5 if np.dtype(dt).kind == "f" else 2)
    if op in ("lerp", "addcmul", "addcdiv"):
        return (x, y, sample(dt, other) if op != "lerp" else 0.3)
    return (x, y) if op in BINARY else (x,)


@pytest.mark.parametrize("op", LOWERED)
def test_elementwise_op_matches_interpreter(op):
    ran = 0
    for dt, shape, other, strided in LAYOUTS:
        ran += compare(op, _args(op, dt, shape, other, strided),
                       expect_kernel=not (op == "pow" and np.dtype(dt).kind in "iub"),
                       **ATTRS.get(op, {}))
    assert ran, f"{op}: no dtype accepted"


@pytest.mark.parametrize("op, args, attrs", [
    ("pow", (np.float32, 2), {}), ("pow", (np.float32, 0.5), {}), ("pow", (np.float32, -2), {}),
    ("pow", (np.float32, 2.5), {}), ("pow", (np.int64, 3), {}),
    ("div", (np.int64, None), {"rounding_mode": "floor"}),
    ("div", (np.int32, None), {"rounding_mode": "trunc"}),
    ("div", (np.float32, None), {"rounding_mode": "floor"}),
    ("remainder", (np.float64, None), {}), ("remainder", (np.int64, -3), {}),
    ("add", (np.float32, 2.0), {"alpha": 3}), ("sub", (np.int64, None), {"alpha": 2}),
    ("round", (np.float32,), {"decimals": 2}), ("logit", (np.float32,), {"eps": 0.1}),
    ("nan_to_num", (np.float32,), {"nan": 1.0}), ("addcmul", (np.float32, "t", "t"), {"value": 0.5}),
    ("addcdiv", (np.float64, "t", "t"), {"value": -2}), ("clamp", (np.int32, None, 3), {}),
    ("clamp", (np.float32, "t", "t"), {}),
])
def test_elementwise_attributes_and_literals(op, args, attrs):
    dt = args[0]
    built = [sample(dt, (9, 5))]
    for a in args[1:]:
        if a is None:
            built.append(sample(dt, (5,), positive=True) * np.where(RNG.random(5) < 0.5, -1, 1)
                         .astype(dt))
        elif a == "t":
            built.append(sample(dt, (9, 1), positive=True))
        else:
            built.append(a)
    assert compare(op, tuple(built), **attrs)


def test_integer_division_overflow_does_not_trap_and_a_zero_divisor_raises_as_in_torch():
    x = np.array([7, -7, np.iinfo(np.int32).min, 5], np.int32)
    y = np.array([3, 2, -1, -1], np.int32)
    g, arrays, _ = graph_of("div", (x, y), rounding_mode="trunc")
    out = llvm_backend.run(g, arrays)[0][0]
    # INT_MIN / -1 overflows: its value is undefined, only that it does not trap is promised
    assert list(out[[0, 1, 3]]) == [2, -3, -5]
    for op, attrs in [("div", {"rounding_mode": "trunc"}), ("div", {"rounding_mode": "floor"}),
                      ("remainder", {}), ("fmod", {})]:
        for dt in (np.int64, np.uint8):
            x = np.arange(1, 5 << 20, dtype=np.int64).astype(dt)      # split over threads
            y = np.ones_like(x)
            y[len(y) // 2] = 0
            g, arrays, node = graph_of(op, (x, y), **attrs)
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                llvm_backend.run(g, arrays)
            assert any(p is not None for p in PLANS[node].values())   # the kernel raised


def test_nan_propagates_through_max_and_min():
    x = np.array([1.0, np.nan, 3.0, -np.inf], np.float32)
    y = np.array([np.nan, 2.0, 1.0, 0.0], np.float32)
    assert compare("maximum", (x, y)) and compare("minimum", (x, y))
    assert compare("amax", (np.array([[1.0, np.nan], [2.0, 3.0]], np.float32),), dim=(1,))
    ties = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 3.0, 3.0, -1.0]], np.float32)
    assert compare("argmax", (ties,), dim=1) and compare("argmin", (ties,), dim=1)
    assert compare("argmax", (ties,))


# "op/dim": the op called with ``dim`` (sum, mean and prod have both forms)
REDUCTIONS = ["sum", "sum/dim", "mean", "mean/dim", "prod", "prod/dim", "amax", "amin", "max",
              "min", "all", "any", "nansum", "var", "std", "argmax", "argmin"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_match_interpreter(name):
    op, _, with_dim = name.partition("/")
    full = not with_dim and op in ("sum", "mean", "prod", "max", "min")
    cases = []
    for dt, shape, strided in [(np.float32, (6, 37), True), (np.float64, (4, 3, 5), False),
                               (np.int64, (3, 9), False), (np.bool_, (7, 3), True),
                               (np.float16, (2, 65), False), (np.int32, (0, 4), False)]:
        x = noncontiguous(dt, shape) if strided else sample(dt, shape)
        if full:
            cases.append((x, {}))
        elif op in ("prod", "argmax", "argmin"):
            cases.append((x, {"dim": 0}))
            cases.append((x, {"dim": len(shape) - 1, "keepdim": True}))
            if op != "prod":
                cases.append((x, {"dim": None}))
        else:
            cases.append((x, {"dim": (len(shape) - 1,)}))                  # inner
            cases.append((x, {"dim": (0,), "keepdim": True}))               # outer
            if len(shape) == 3:
                cases.append((x, {"dim": (0, 2)}))                          # strided
            if op not in ("amax", "amin"):
                cases.append((x, {"dim": None}))                            # all
    # float32 sums in another order differ by a few ulps of the sum of magnitudes
    ran = sum(compare(op, (x,), tol=5e-5 if x.dtype == np.float32 else None, **attrs)
              for x, attrs in cases)
    assert ran >= 3


def test_sum_of_16m_float32_ones_is_exact():
    g, arrays, _ = graph_of("sum", (np.ones(1 << 24, np.float32),))
    assert llvm_backend.run(g, arrays)[0][0] == 16777216.0


def test_scalar_and_empty_reductions():
    assert compare("sum", (np.array(2.5, np.float32),))
    assert compare("mean", (np.zeros((3, 0), np.float32),), dim=(1,))
    assert compare("sum", (np.zeros((0, 4), np.float64),), dim=(0,))


@pytest.mark.parametrize("op, args, attrs", [
    ("mul", (np.zeros(1000, np.float32),) * 2, {}),
    ("sum", (np.zeros((64, 4096), np.float32),), {"dim": (1,)}),
    ("amax", (np.zeros((64, 4096), np.float32),), {"dim": (1,)}),
], ids=["mul", "row-sum", "row-max"])
def test_kernels_are_vectorized(op, args, attrs):
    _, _, node = graph_of(op, args, **attrs)
    layouts = [(tuple(s // a.itemsize for s in a.strides), 0) for a in args]
    ir_text = str(jit.optimize(render(describe(node, layouts), "vec_check", jit.triple())))
    # the host's vector width: 8 floats with AVX2, 16 with AVX-512, 4 with SSE alone
    widths = [int(n) for n in re.findall(r"<(\d+) x float>", ir_text)]
    assert widths and max(widths) >= 4, ir_text[:2000]


def test_kernel_description_prints_loads_reductions_and_stores():
    _, _, node = graph_of("sum", (np.zeros((4, 6), np.float32),), dim=(1,))
    text = str(describe(node, [((6, 1), 0)]))
    assert "domain [4,6] reduce (1,)" in text and "reduce add" in text
    assert "store out0 strides (1, 0)" in text


def _fused_node(text, name):
    """A fused node holding the graph ``text`` (a kernel of the shape fusion makes)."""
    from dynograph.compiler.text import parse_graph
    sub = parse_graph(textwrap.dedent(text))
    args = tuple(Value(inp.value.type) for inp in sub.inputs)
    outs = tuple(Value(v.type) for v in sub.outputs)
    return Node("fused", args, {"graph": sub, "name": name}, outs)


_SCALE = """
    graph {{
      input %0: f32[4,6] x
      %1: f32[4,6] = mul(%0, {factor})
      %2: f32[4,6] = exp(%1)
      return %2
    }}"""


def test_kernels_of_one_structure_are_described_once_each_under_its_own_name():
    """describe() reuses the description of a node of the same structure, layouts and batch
    size (a kernel per layer, per parameter): the same key, the node's own name; a different
    literal (the sign of a zero included), layout or dtype is another kernel."""
    layouts = [((6, 1), 0)]
    first = describe(_fused_node(_SCALE.format(factor="1.5"), "k1"), layouts)
    again = describe(_fused_node(_SCALE.format(factor="1.5"), "k7"), layouts)
    assert (first.name, again.name) == ("k1", "k7") and first.key == again.key
    assert str(first).split("\n", 1)[1] == str(again).split("\n", 1)[1]
    others = [describe(_fused_node(_SCALE.format(factor=f), "k2"), layouts)
              for f in ("0.0", "-0.0", "2", "2.0")]
    others.append(describe(_fused_node(_SCALE.format(factor="1.5"), "k3"), [((1, 4), 0)]))
    others.append(describe(_fused_node(_SCALE.format(factor="1.5").replace("f32", "f64"),
                                       "k4"), layouts))
    zero, negative_zero, two, two_float, transposed, double = [k.key for k in others]
    assert two == two_float                     # (x * 2 multiplies by the float 2.0 too)
    keys = [first.key, zero, negative_zero, two, transposed, double]
    assert len(set(keys)) == len(keys)


def test_fused_softmax_kernel_matches_interpreter():
    x = dg.tensor(RNG.normal(size=(6, 33)).astype(np.float32))
    f = lambda t: dg.nn.functional.softmax(t * 2.0, dim=-1)
    ref = dg.compile(f, backend="interpreter")(x).numpy()
    got = dg.compile(f, backend="llvm")(x).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make_opt", [
    lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: dg.optim.Adam(ps, lr=1e-2),
], ids=["sgd", "adam"])
def test_mlp_training_steps_match_eager(make_opt):
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    o1, o2 = make_opt(eager_model.parameters()), make_opt(comp_model.parameters())
    eager = make_step(eager_model, o1)
    compiled = dg.compile(make_step(comp_model, o2), backend="llvm")
    for x, y in batches(20):
        l1, l2 = eager(x, y), compiled(x, y)
        assert abs(l1.item() - l2.item()) < 1e-5
    assert_state_close(eager_model, o1, comp_model, o2)


CACHE_SCRIPT = textwrap.dedent("""
    import numpy as np
    from dynograph.compiler.ir import Graph, Input, Node, TensorType, Value
    from dynograph.compiler.llvm import backend as llvm_backend, jit
    from dynograph.runtime import dtypes as D
    x = Value(TensorType((1000,), D.float32))
    y = Value(TensorType((1000,), D.float32))
    g = Graph([Input(x, "input", "x")], [Node("tanh", (x,), {}, (y,))], [y])
    a = np.linspace(-3, 3, 1000, dtype=np.float32)
    out = llvm_backend.run(g, [a])[0][0]
    assert np.allclose(out, np.tanh(a), atol=1e-6)
    print(jit.STATS["compiled"], jit.STATS["disk_hits"])
""")


def _run_cache_script(cache, debug="0"):
    env = dict(os.environ, DYNOGRAPH_CACHE_DIR=str(cache), DYNOGRAPH_DEBUG=debug)
    done = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    compiled, hits = map(int, done.stdout.split())
    return compiled, hits, done.stderr


def test_disk_cache_serves_a_second_process_and_rebuilds_corrupted_entries(tmp_path):
    compiled, hits, log = _run_cache_script(tmp_path, debug="1")
    assert (compiled, hits) == (1, 0) and "compiled dg_" in log
    assert _run_cache_script(tmp_path)[:2] == (0, 1)
    entries = list((tmp_path / "kernels").iterdir())
    assert len(entries) == 1
    data = bytearray(entries[0].read_bytes())
    data[-10] ^= 0xFF                       # corrupt the object code
    entries[0].write_bytes(bytes(data))
    compiled, hits, log = _run_cache_script(tmp_path, debug="2")
    assert (compiled, hits) == (1, 0)
    assert "define void @" in log and "dg_" in log          # level 2 prints the optimized IR
    entries[0].write_bytes(b"foreign" + entries[0].read_bytes()[7:])    # another header
    assert _run_cache_script(tmp_path)[:2] == (1, 0)


@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid"])
def test_vectorized_float32_exp_and_tanh_over_their_whole_range(op):
    x = np.concatenate([np.linspace(-110, 95, 20001), RNG.normal(size=1000) * 1e-3,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, -87.3, -103.5]])
    assert compare(op, (x.astype(np.float32),))


def test_large_kernels_split_across_threads_agree(monkeypatch):
    from dynograph.compiler.llvm import pool
    from dynograph.runtime import threads
    monkeypatch.setattr(threads, "_count", [3])
    monkeypatch.setattr(llvm_backend, "PIECE_MIN", 1000)
    calls = []
    real_run = pool.Pool.run_kernel
    monkeypatch.setattr(pool.Pool, "run_kernel",
                        lambda self, *a: calls.append(a[-1]) or real_run(self, *a))
    x = sample(np.float32, (600, 1001))
    assert compare("mul", (x, 0.5))
    assert compare("sum", (x,), dim=(1,), tol=1e-4)     # another summation order
    assert compare("amax", (x,), dim=(0,), keepdim=True)
    assert len(calls) >= 3 and min(calls) > 1           # three kernels, each in pieces


@pytest.mark.parametrize("op, attrs", [("add", {}), ("mul", {}), ("exp", {}), ("maximum", {}),
                                       ("sum", {"dim": (1,)}), ("to_copy", {})])
def test_half_types_compute_in_float32_and_round_on_store(op, attrs):
    for dt in (np.float16, D.bfloat16.np):
        x = np.asarray(RNG.normal(size=(5, 19)), dt)
        if op == "to_copy":
            assert compare(op, (x,), dtype=D.float32)
            assert compare(op, (x.astype(np.float32) * 3,), dtype=D.from_numpy_dtype(np.dtype(dt)))
        elif op in ("sum", "exp"):
            assert compare(op, (x,), **attrs)
        else:
            assert compare(op, (x, np.asarray(RNG.normal(size=(19,)), dt)), **attrs)


def test_layer_norm_training_step_fuses_its_variance_and_matches_interpreter():
    dg.manual_seed(0)
    models = [dg.nn.Sequential(dg.nn.Linear(12, 16), dg.nn.LayerNorm(16), dg.nn.Tanh())
              for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    x = dg.tensor(RNG.normal(size=(6, 12)).astype(np.float32))

    def step_of(model):
        def step(x):
            loss = (model(x) ** 2).var()
            loss.backward()
            return loss
        return step
    steps = [dg.compile(step_of(models[0]), backend="interpreter"),
             dg.compile(step_of(models[1]), backend="llvm")]
    for _ in range(3):          # traced (no .grad yet), traced again, then replayed
        for m in models:
            m.zero_grad()
        ref, got = (step(x) for step in steps)
        np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert steps[1].hits >= 1


def _passes_helpers():
    import test_passes
    return test_passes


def _both_backends(graph, arrays):
    """Outputs and updates of ``graph`` on the interpreter and on the llvm runner."""
    results = []
    for run in (interpreter.run, llvm_backend.run):
        feeds = [np.random.default_rng(0) if arrays[inp] is None else arrays[inp].copy()
                 for inp in graph.inputs]
        results.append(run(graph, feeds))
    return results


def _assert_same(ref, got):
    (outs_a, upd_a), (outs_b, upd_b) = ref, got
    assert sorted(upd_a) == sorted(upd_b)
    for a, b in list(zip(outs_a, outs_b)) + [(upd_a[k], upd_b[k]) for k in upd_a]:
        np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(12))
def test_fused_random_programs_of_the_pass_tests_match_interpreter(seed):
    from dynograph.compiler.pipeline import optimize
    tp = _passes_helpers()
    fn = tp._random_program(seed)
    graph = dg.trace(fn, dg.randn(4, 4), dg.randn(4, 4) if seed % 2 else dg.randn(1, 4))
    out, _ = optimize(graph)
    _assert_same(*_both_backends(out, tp.random_arrays(out, seed)))


@pytest.mark.parametrize("name", ["mlp-adamw", "cnn-adam"])
def test_fused_training_steps_of_the_pass_tests_match_interpreter(name):
    from dynograph.compiler.pipeline import optimize
    tp = _passes_helpers()
    model, make_opt, (x, y) = tp.STEPS[name]()
    captured, arrays = tp._traced(make_step(model, make_opt(model.parameters())), x, y)
    out, stats = optimize(captured)
    assert stats["kernels"] > 0
    _assert_same(*_both_backends(out, arrays))


@pytest.mark.parametrize("op", ["logaddexp", "logaddexp2"])
def test_logaddexp_at_infinities_and_nan(op):
    x = np.array([np.inf, -np.inf, np.inf, np.nan, 1.0, -50.0], np.float64)
    y = np.array([np.inf, -np.inf, -np.inf, 1.0, 2.0, 30.0], np.float64)
    assert compare(op, (x, y))


def test_lgamma_at_poles_and_infinities():
    x = np.array([-np.inf, np.inf, 0.0, -1.0, -2.5, 0.5, 30.0, np.nan], np.float32)
    assert compare("lgamma", (x,))


INF, NAN = np.inf, np.nan
# (op, attrs, inputs): poles, zero of either sign, negative integers, +-1 for erfinv, huge and
# tiny magnitudes, the root of digamma, NaN and infinities
SPECIAL_EDGES = [
    ("digamma", {}, [0.0, -0.0, -1.0, -2.0, -1e6, -2.5, -0.5, 1e-30, -1e-30, 1.4616321449683623,
                     0.25, 7.5, 1e15, 1e30, INF, -INF, NAN]),
    ("polygamma", {"n": 0}, [0.0, -0.0, -3.0, -2.5, 0.5, 12.0, INF, NAN]),
    ("polygamma", {"n": 1}, [0.0, -0.0, -2.0, -2.5, -0.3, 1e-30, 0.75, 30.0, 1e8, INF, NAN]),
    ("polygamma", {"n": 2}, [0.0, -0.0, -2.0, -2.5, -0.3, 1e-30, 0.75, 30.0, 1e8, NAN, -INF]),
    ("polygamma", {"n": 5}, [0.0, -1.0, -4.75, -0.3, 0.1, 3.0, 40.0, 1e8, NAN]),
    ("erfinv", {}, [1.0, -1.0, 0.0, -0.0, 0.5, -0.5, 0.9, -0.999, 1 - 2.0 ** -24, -(1 - 2.0 ** -24),
                    1e-30, 1.5, -2.0, INF, NAN]),
]
# where torch's algorithm, not the function, decides the value, the kernel follows the
# reference (scipy): polygamma(1, x) at x = -1, -2... (torch: a huge finite number from
# sin(pi x) != 0), polygamma(n >= 2, +inf) (torch: NaN; the limit is 0) and its -inf
TORCH_ARTIFACTS = {("polygamma", 1): (-2.0,), ("polygamma", 2): (-INF,)}


@pytest.mark.parametrize("op, attrs, xs", SPECIAL_EDGES,
                         ids=[f"{op}{a.get('n', '')}" for op, a, _ in SPECIAL_EDGES])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_special_functions_at_edge_inputs_match_interpreter_and_torch(op, attrs, xs, dt):
    import torch
    x = np.array(xs, dt)
    assert compare(op, (x,), **attrs)
    g, arrays, _ = graph_of(op, (x,), **attrs)
    got = llvm_backend.run(g, arrays)[0][0]
    skip = TORCH_ARTIFACTS.get((op, attrs.get("n")), ())
    keep = ~np.isin(x, skip)
    t = torch.from_numpy(x[keep])
    ref = (torch.polygamma(attrs["n"], t) if op == "polygamma" else getattr(torch, op)(t)).numpy()
    # torch's own trigamma is good to about 5e-10 in float64; atol: digamma's root
    rtol, atol = (1e-9, 1e-14) if dt == np.float64 else (1e-5, 1e-6)
    np.testing.assert_allclose(got[keep], ref, rtol=rtol, atol=atol, equal_nan=True, err_msg=op)


@pytest.mark.parametrize("op, attrs, lo, hi", [
    ("digamma", {}, -60.0, 60.0), ("polygamma", {"n": 1}, -30.0, 30.0),
    ("polygamma", {"n": 3}, -8.0, 30.0), ("erfinv", {}, -1.0, 1.0)])
def test_special_functions_over_wide_ranges(op, attrs, lo, hi):
    """Relative accuracy over a fine grid, plus log-spaced magnitudes for the gamma functions
    and erfinv's tails up to 1 - 2^-53."""
    grid = np.linspace(lo, hi, 40001)[1:-1]
    if op == "erfinv":
        tails = 1 - np.logspace(-16.3, -1, 4001)
        grid = np.concatenate([grid, tails, -tails])
    else:
        grid = np.concatenate([grid, np.logspace(-300, 300, 4001)])
    for dt in (np.float64, np.float32):
        assert compare(op, (grid.astype(dt),), tol=1e-10 if dt == np.float64 else 1e-5, **attrs)


def _norm_kernels(compiled):
    """(plans of the nodes computing affine_normalize, nodes the interpreter ran) of the graphs
    ``compiled`` ran on the llvm backend (a graph traced but never run may have plans too: its
    kernels compile ahead)."""
    norm, fallback = [], []
    for graph in [e.graph for e in compiled.entries if e.calls]:
        for node in graph.nodes:
            plans = list(PLANS.get(node, {}).values())
            inner = node.attrs["graph"].nodes if node.op == "fused" else [node]
            if any(n.op == "affine_normalize" for n in inner):
                norm.extend(plans)
            if node.op == "fused" and any(p is None for p in plans):
                fallback.append(node)
    return norm, fallback


NORM_LAYERS = {      # (input shape, layers); a Linear in front makes the input need a gradient
    "layer": ((30, 12), lambda: [dg.nn.Linear(12, 12), dg.nn.LayerNorm(12)]),
    "batch1d-train": ((16, 6), lambda: [dg.nn.Linear(6, 6), dg.nn.BatchNorm1d(6)]),
    "batch1d-eval": ((16, 6), lambda: [dg.nn.Linear(6, 6), dg.nn.BatchNorm1d(6)]),
    "batch2d-train": ((6, 4, 3, 5), lambda: [dg.nn.BatchNorm2d(4)]),
    "batch2d-eval": ((6, 4, 3, 5), lambda: [dg.nn.BatchNorm2d(4)]),
}


@pytest.mark.parametrize("kind", list(NORM_LAYERS))
def test_normalization_layers_fuse_into_one_kernel_and_match_eager(kind):
    dg.manual_seed(0)
    shape, layers = NORM_LAYERS[kind]
    models = [dg.nn.Sequential(*layers()) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    for m in models:
        with dg.no_grad():
            m[-1].weight.mul_(1.5).add_(0.25)
            m[-1].bias.add_(-0.5)
        m.train(not kind.endswith("eval"))
    x = dg.tensor(RNG.normal(size=shape).astype(np.float32) * 3 + 1)

    def step_of(model):
        def step(x):
            out = model(x)
            (out * out.tanh()).sum().backward()
            return out
        return step
    eager, compiled = step_of(models[0]), dg.compile(step_of(models[1]), backend="llvm")
    # the first two calls trace (the second because the parameters now have grads); the third
    # runs the compiled graph; the running statistics change between the calls
    for _ in range(3):
        ref, got = eager(x), compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip(models[0].buffers(), models[1].buffers()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    norm, fallback = _norm_kernels(compiled)
    assert len(norm) == 1 and norm[0] is not None, "the normalization group is not one kernel"
    assert not fallback


def test_prelu_and_affine_normalize_match_torch():
    import torch
    x = np.array([[-2.0, 3.0], [-0.0, 0.0], [np.nan, -np.inf], [np.inf, -1e-30]], np.float32)
    w = np.array([0.25, -1.5], np.float32)
    g, arrays, _ = graph_of("prelu", (x, w))
    assert compare("prelu", (x, w))
    ref = torch.nn.functional.prelu(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    np.testing.assert_array_equal(llvm_backend.run(g, arrays)[0][0], ref)
    # Python-number weight and bias other than 1 and 0 are applied like tensors
    x = sample(np.float32, (5, 16))
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    attrs = {"eps": 1e-5, "kind": "layer"}
    assert compare("affine_normalize", (x, mean, var, 2.0, 0.5), **attrs)
    g, arrays, _ = graph_of("affine_normalize", (x, mean, var, 2.0, 0.5), **attrs)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (16,), torch.full((16,), 2.0),
                                         torch.full((16,), 0.5), eps=1e-5).numpy()
    np.testing.assert_allclose(llvm_backend.run(g, arrays)[0][0], ref, rtol=1e-5, atol=1e-5)

"""The CUDA C renderer (compiler/cuda) on machines without a GPU: kernels rendered from real
descriptions run through the CPU emulation (the host C++ compiler) against the interpreter
(every lowered elementwise op over dtypes, shapes, strides and broadcasts; the reductions,
column-wise ones included) and against the llvm backend (the fused kernels of compiled
softmax and training steps); cubins for sm_80 and sm_90 compile without spills; golden text."""
import copy
import os
import sys

import numpy as np
import pytest

import dynograph as dg
from dynograph.compiler import interpreter
from dynograph.compiler.ir import Graph, Input, Node, TensorType, Value
from dynograph.compiler.cuda import CompileError, CudaSource, compile_cubin, emulate, source
from dynograph.compiler.cuda.gemm import matmul_kernel
from dynograph.compiler.cuda.philox import RandomKernel, RandomSource
from dynograph.compiler.cuda.render import render
from dynograph.compiler.lowering.conv import Weights, direct_convolution
from dynograph.compiler.lowering import program
from dynograph.compiler.lowering.kernel import describe
from dynograph.compiler.lowering.program import PLANS
from dynograph.compiler.lowering.scalar import Unsupported
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.ops.core import TensorSpec
from dynograph.runtime import dtypes as D

sys.path.insert(0, os.path.dirname(__file__))
from test_compile_training import batches, make_step, mlp  # noqa: E402
from test_llvm_backend import (ATTRS, LAYOUTS, LOWERED, RNG, _args, graph_of,  # noqa: E402,F401
                               _private_cache, noncontiguous, sample)

needs_cxx = pytest.mark.skipif(emulate.host_compiler() is None,
                               reason="no host C++ compiler (g++) to emulate CUDA kernels")
needs_nvcc = pytest.mark.skipif(source.nvcc() is None, reason="nvcc not on PATH")

# launch shapes the emulation runs: one thread, grid-stride loops over a small grid, a full one
SHAPES = [(1, 1), (2, 3), (None, None)]
# the same for kernels whose blocks cooperate (whole warps; a gemm's blocks have 256 threads)
COOPERATIVE_SHAPES = {"warp": [(1, 32), (2, 64), (None, None)],
                      "block": [(1, 32), (3, 64), (None, None)],
                      "gemm": [(1, 256), (2, 256), (None, None)]}


def launch_shapes(src, i):
    """The launch shape ``i`` (mod 3) for the kernel of ``src``."""
    return COOPERATIVE_SHAPES.get(src.mapping.kind, SHAPES)[i % len(SHAPES)]


def layout(a):
    """(element strides, offset) as the program passes an input array to a kernel."""
    return tuple(0 if n == 1 else s // a.itemsize for n, s in zip(a.shape, a.strides)), 0


def tolerance(dt, tol=None):
    if dt.kind == "f" or dt == D.bfloat16.np:
        return tol or {8: 1e-12, 4: 2e-6}.get(dt.itemsize, 1e-2)
    return None


def assert_same(got, ref, tol, what):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (what, got.dtype, ref.dtype)
    if tol is None:
        np.testing.assert_array_equal(got, ref, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True, err_msg=what)


def run_against_interpreter(cases):
    """Each (op, args, attrs, tol) as a one-node kernel, all compiled in one emulation object,
    run on launch shapes in turn and compared with the interpreter; returns how many ran."""
    prepared = []
    for op, args, attrs, tol in cases:
        try:
            g, arrays, node = graph_of(op, args, **attrs)
            ref = interpreter.run(g, arrays)[0][0]
        except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
            continue        # the input is not one the op takes
        try:
            kernel = describe(node, [layout(a) for a in arrays])
        except Unsupported:
            continue        # runs on the interpreter on every backend (integer pow)
        prepared.append((CudaSource(kernel, f"k{len(prepared)}"), arrays, ref,
                         f"{op} {attrs} {[(a.dtype, a.shape, a.strides) for a in arrays]}", tol))
    launchers = emulate.build([p[0] for p in prepared])
    for i, (src, arrays, ref, what, tol) in enumerate(prepared):
        out = np.full(ref.shape, 77, ref.dtype)
        grid, block = launch_shapes(src, i)
        launchers[src.name].run(list(arrays) + [out], grid, block)
        assert_same(out, ref, tolerance(ref.dtype, tol), what)
    return len(prepared)


# the llvm tests' layouts, and the small integer types and bfloat16 beside them
MORE_LAYOUTS = [(np.uint8, (4, 5), (5,), False), (np.int8, (6,), (6,), True),
                (np.int16, (3, 4), (4,), False), (D.bfloat16.np, (2, 9), (9,), True)]


@needs_cxx
@pytest.mark.parametrize("lay", LAYOUTS + MORE_LAYOUTS,
                         ids=lambda lay: f"{np.dtype(lay[0]).name}-{'x'.join(map(str, lay[1]))}")
def test_every_elementwise_op_matches_interpreter(lay):
    dt, shape, other, strided = lay
    cases = [(op, _args(op, dt, shape, other, strided), ATTRS.get(op, {}), None) for op in LOWERED]
    assert run_against_interpreter(cases) >= 60


REDUCTIONS = ["sum", "mean", "prod", "amax", "amin", "max", "min", "all", "any", "nansum", "var",
              "std", "argmax", "argmin"]


@needs_cxx
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")   # the reference's float16 prod
def test_reductions_match_interpreter():
    cases = []
    for dt, shape, strided in [(np.float32, (6, 37), True), (np.float64, (4, 3, 5), False),
                               (np.int64, (3, 9), False), (np.bool_, (7, 3), True),
                               (np.float16, (2, 65), False), (np.int32, (0, 4), False)]:
        x = noncontiguous(dt, shape) if strided else sample(dt, shape)
        for op in REDUCTIONS:
            tol = 5e-5 if dt == np.float32 else None
            if op in ("argmax", "argmin", "prod"):
                dims = [{"dim": 0}, {"dim": len(shape) - 1, "keepdim": True}]
                dims += [] if op == "prod" else [{"dim": None}]
            else:
                dims = [{"dim": (len(shape) - 1,)}, {"dim": (0,), "keepdim": True}]
                dims += [{"dim": (0, 2)}] if len(shape) == 3 else []
                dims += [] if op in ("amax", "amin") else [{"dim": None}]
            cases += [(op, (x,), attrs, tol) for attrs in dims]
    ties = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 3.0, 3.0, -1.0]], np.float32)
    cases += [(op, (ties,), {"dim": 1}, None) for op in ("argmax", "argmin")]
    cases += [("amax", (ties,), {"dim": (1,)}, None), ("argmax", (ties,), {}, None)]
    assert run_against_interpreter(cases) >= 150


@needs_cxx
def test_column_wise_and_blocked_reductions_match_interpreter():
    """Sums over rows (the innermost axis kept: one column per thread), over two outer axes,
    and rows longer than a BLOCK of the partial sums."""
    wide = sample(np.float32, (70, 130))
    cube = sample(np.float64, (5, 3, 70))
    long = sample(np.float32, (3, 2500))
    cases = [("sum", (wide,), {"dim": (0,)}, 5e-5), ("mean", (wide,), {"dim": (0,)}, 5e-5),
             ("amax", (wide,), {"dim": (0,)}, None), ("argmax", (wide,), {"dim": 0}, None),
             ("sum", (cube,), {"dim": (0, 1)}, None), ("var", (cube,), {"dim": (0, 1)}, None),
             ("sum", (long,), {"dim": (1,)}, 5e-5), ("sum", (long.T,), {"dim": (0,)}, 5e-5),
             ("sum", (np.ones(3000, np.float32),), {}, None)]
    assert run_against_interpreter(cases) == len(cases)


@needs_cxx
def test_integer_division_by_zero_raises_and_min_by_minus_one_does_not_trap():
    x = np.array([7, -7, np.iinfo(np.int32).min, 5], np.int32)
    y = np.array([3, 2, -1, -1], np.int32)
    _, arrays, node = graph_of("div", (x, y), rounding_mode="trunc")
    kernel = describe(node, [layout(a) for a in arrays])
    run = emulate.emulate(kernel)
    out = np.zeros(4, np.int32)
    run.run([x, y, out])
    assert list(out[[0, 1, 3]]) == [2, -3, -5]      # MIN / -1 overflows: only no trap is promised
    for dt in (np.int64, np.uint8):
        a, b = np.arange(1, 40).astype(dt), np.ones(39, dt)
        b[20] = 0
        _, arrays, node = graph_of("remainder", (a, b))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            emulate.emulate(describe(node, [layout(v) for v in arrays])).run(
                [a, b, np.zeros(39, dt)], 2, 4)


def half_roundtrip(dt):
    """The emulated float -> half -> float conversions against numpy over every 16-bit
    pattern and float32 values between them (ties, subnormals, overflow, NaN)."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    halves = bits.view(dt)
    as_f32 = halves.astype(np.float32)
    finite = as_f32[np.isfinite(as_f32)]
    ordered = np.unique(finite.astype(np.float64))
    ties = ((ordered[1:] + ordered[:-1]) / 2).astype(np.float32)    # exact in float32
    mids = np.concatenate([finite, ties, np.nextafter(finite, np.float32(np.inf)),
                           np.nextafter(finite, np.float32(-np.inf)),
                           np.array([65519.0, 65520.0, 1e6, 2.0 ** -25, 3 * 2.0 ** -26], np.float32)])
    _, arrays, node = graph_of("to_copy", (mids,), dtype=D.from_numpy_dtype(np.dtype(dt)))
    kernel = describe(node, [layout(mids)])
    out = np.zeros(mids.shape, dt)
    emulate.emulate(kernel).run([mids, out])
    return mids, out


@needs_cxx
@pytest.mark.parametrize("dt", [np.float16, D.bfloat16.np], ids=["float16", "bfloat16"])
def test_half_conversions_round_to_nearest_even_bit_for_bit(dt):
    mids, out = half_roundtrip(dt)
    with np.errstate(over="ignore"):        # numpy's own conversion overflows to inf too
        expected = mids.astype(dt)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


# ---------------------------------------------------------------- fused kernels of compiled code


def compiled_kernels(compiled):
    """The kernels (and in-place variants) of the llvm plans of the graphs ``compiled`` ran."""
    plans = []
    for graph in compiled.graphs():
        for node in graph.nodes:
            for plan in PLANS.get(node, {}).values():
                if plan is not None:
                    plans.append(plan)
                    plans.extend(plan.variants.values())
    return plans


def random_buffers(kernel, rng):
    """Arrays large enough for every load and store of ``kernel``, inputs filled at random."""
    arrays = []
    for b, (_, dt, role) in enumerate(kernel.buffers):
        size = 1
        for acc in [ld for ld in kernel.loads if ld.buffer == b] + \
                   [s for s in kernel.stores if s.buffer == b]:
            size = max(size, acc.offset + 1 + sum((n - 1) * abs(s) for n, s in
                                                  zip(kernel.domain, acc.strides)))
        if dt is D.bool:
            a = rng.random(size) < 0.5
        elif dt.is_floating_point:
            a = rng.normal(size=size).astype(dt.np)
        else:
            a = rng.integers(0, 5, size=size).astype(dt.np)
        arrays.append(a if role == "in" else np.zeros(size, dt.np))
    return arrays


def run_plans_against_llvm(plans):
    """Each plan's kernel emulated and run by its llvm plan on the same random buffers."""
    rng = np.random.default_rng(3)
    sources = {}
    for plan in plans:
        src = CudaSource(plan.kernel)
        sources.setdefault(src.name, src)
    launchers = emulate.build(list(sources.values()))
    for i, plan in enumerate(plans):
        k = plan.kernel
        ref = random_buffers(k, rng)
        got = [a.copy() for a in ref]
        plan([a.ctypes.data for a in ref])
        grid, block = launch_shapes(sources[f"dg_{k.key}"], i)
        launchers[f"dg_{k.key}"].run(got, grid, block)
        for j, (r, g) in enumerate(zip(ref, got)):
            tol = 1e-4 if r.dtype.kind == "f" or r.dtype == D.bfloat16.np else None
            assert_same(g, r, tol, f"{k}\nbuffer {j}")
    return len(sources)


@needs_cxx
def test_fused_softmax_runs_on_the_emulation_backend_and_as_llvm_does():
    x = dg.tensor(RNG.normal(size=(6, 33)).astype(np.float32))
    f = dg.compile(lambda t: dg.nn.functional.softmax(t * 2.0, dim=-1), backend="llvm")
    f(x)
    got = f(x).numpy()          # the first call traces and runs eagerly
    plans = compiled_kernels(f)
    assert any(len(p.kernel.reductions) >= 2 for p in plans)       # max, then the sum
    assert run_plans_against_llvm(plans) >= 1
    # the whole graph as a program on emulated CUDA kernels
    (graph,) = f.graphs()
    out = program.run(graph, [x.numpy()], backend=emulate.EMULATION)[0][0]
    np.testing.assert_allclose(out, got, rtol=1e-6, atol=1e-7)


@needs_cxx
@pytest.mark.parametrize("make_opt", [
    lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: dg.optim.Adam(ps, lr=1e-2),
], ids=["sgd", "adam"])
def test_training_step_kernels_match_llvm(make_opt):
    model = copy.deepcopy(mlp())
    step = dg.compile(make_step(model, make_opt(model.parameters())), backend="llvm")
    for x, y in batches(3):
        step(x, y)
    plans = compiled_kernels(step)
    assert any(p.kernel.reductions for p in plans) and len(plans) >= 4
    assert run_plans_against_llvm(plans) >= 4


def _multi_output_graph(op, x, **attrs):
    """A one-node graph of ``op`` (several outputs) on the input array ``x``."""
    v = Value(TensorType(x.shape, D.from_numpy_dtype(x.dtype)))
    specs = REGISTRY[op].meta(TensorSpec(x.shape, v.type.dtype), **attrs)
    outs = tuple(Value(TensorType(s.shape, s.dtype)) for s in specs)
    return Graph([Input(v, "input", "x")], [Node(op, (v,), attrs, outs)], list(outs))


@needs_cxx
@pytest.mark.parametrize("op, case", [
    ("convolution", "padded-strided"), ("convolution", "dilated-grouped"),
    ("convolution", "transposed"), ("convolution", "3d"),
    ("convolution_weight_grad", "plain"), ("convolution_weight_grad", "padded-dilated"),
    ("max_pool2d_with_indices", "3x3-stride1-dilated"), ("max_pool3d_with_indices", "3d")])
def test_direct_kernels_run_on_the_emulation_backend(op, case):
    """Convolutions, weight gradients and max pooling (ties and NaNs) run their direct kernels'
    descriptions as emulated CUDA kernels through the program, as the llvm backend runs them."""
    from dynograph.compiler.lowering import conv, pool
    from test_llvm_executor import CONV_CASES, POOL_CASES, WEIGHT_GRAD_CASES
    if op.startswith("max_pool"):
        shape, attrs = POOL_CASES[case]
        x = sample(np.float32, shape)
        flat = x.reshape(-1)
        flat[::13] = np.nan                          # the last NaN of a window is picked
        flat[5::17] = flat[6::17] = 0.5              # ties: the first is picked
        g, arrays, plans = _multi_output_graph(op, x, **attrs), [x], pool._PLANS
    else:
        args, attrs = (CONV_CASES if op == "convolution" else WEIGHT_GRAD_CASES)[case]
        g, arrays, _ = graph_of(op, args, **attrs)
        plans = conv._PLANS
    ref = interpreter.run(g, arrays)[0]
    got = program.run(g, arrays, backend=emulate.EMULATION)[0]
    for r, o in zip(ref, got):
        assert_same(o, r, 2e-5 if r.dtype.kind == "f" else None, f"{op} {case}")
    ran = [p for node_plans in plans.values() for p, *_ in node_plans.values()
           if p is not None and p.backend is emulate.EMULATION]
    assert ran, f"{op} {case} did not run a direct kernel"


# ---------------------------------------------------------------- cubins


def representative_kernels():
    """Elementwise kernels of each dtype family, special functions, reductions of each kind,
    and the fused kernels of an Adam training step."""
    kernels = []
    f32, f64 = sample(np.float32, (5, 7)), sample(np.float64, (5, 7))
    for op, args, attrs in [
            ("add", (f32, f32[0]), {}), ("mul", (f32.astype(np.float16),) * 2, {}),
            ("mul", (f32.astype(D.bfloat16.np),) * 2, {}), ("tanh", (f32,), {}),
            ("polygamma", (f64,), {"n": 2}), ("erfinv", (f32,), {}), ("lgamma", (f64,), {}),
            ("div", (sample(np.int32, (9,)),) * 2, {"rounding_mode": "floor"}),
            ("bitwise_left_shift", (sample(np.int8, (9,)),) * 2, {}),
            ("where", (sample(np.bool_, (5, 7)), f32, f32), {}),
            ("sum", (f32,), {"dim": (1,)}), ("sum", (f32,), {"dim": (0,)}),
            ("var", (f64,), {"dim": (1,)}), ("argmax", (f32,), {"dim": 1}),
            ("amax", (f32.astype(np.float16),), {"dim": (0,)})]:
        _, arrays, node = graph_of(op, args, **attrs)
        kernels.append(describe(node, [layout(a) for a in arrays]))
    # block and warp reductions, GEMMs of each dtype, a convolution as implicit GEMM
    for op, args, attrs in [("sum", (sample(np.float32, (3, 3000)),), {"dim": (1,)}),
                            ("var", (sample(np.float64, (4, 3000)),), {"dim": (1,)}),
                            ("all", (sample(np.bool_, (100, 100)),), {"dim": (1,)}),
                            ("amax", (sample(np.float16, (100, 100)),), {"dim": (1,)}),
                            ("argmax", (sample(np.float32, (3, 3000)),), {"dim": 1}),
                            ("argmin", (sample(np.int32, (100, 100)),), {"dim": 1})]:
        _, arrays, node = graph_of(op, args, **attrs)
        kernels.append(describe(node, [layout(a) for a in arrays]))
    for dt in (np.float32, np.float64, np.float16, D.bfloat16.np):
        a, b = np.zeros((100, 70), dt), np.zeros((80, 70), dt).T
        kernels.append(matmul_kernel(a, b, np.zeros((100, 80), dt), np.zeros(80, dt), 0.5, 2.0))
    kernels.append(matmul_kernel(np.zeros((3, 9, 70), np.float32), np.zeros((3, 70, 20), np.float32),
                                 np.zeros((3, 9, 20), np.float32)))
    kernels.append(direct_convolution((2, 6, 10, 10), (600, 100, 10, 1),
                                      Weights.forward((27, 9, 3, 1), 2, 8), 1, 2, 16, (3, 3),
                                      (1, 1), (1, 1), D.float32))
    model = mlp()
    step = dg.compile(make_step(model, dg.optim.Adam(model.parameters(), lr=1e-2)), backend="llvm")
    x, y = batches(1)[0]
    step(x, y)
    kernels += [p.kernel for p in compiled_kernels(step)]
    sources = list({CudaSource(k).name: CudaSource(k) for k in kernels}.values())
    # the Philox kernels of each random op
    sources += [RandomSource(RandomKernel(*k)) for k in [
        ("uniform", 1000, D.float32, (0.0, 1.0)), ("normal", 1000, D.float64, (0.0, 1.0)),
        ("normal", 1000, D.bfloat16, (1.0, 2.0)), ("bernoulli", 1000, D.float16, ()),
        ("bernoulli_scalar", 1000, D.bool, (0.5,)), ("dropout", 1000, D.float32, (0.1,))]]
    return sources


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubins_compile_without_spills(arch):
    sources = representative_kernels()
    kinds = {s.name: getattr(s, "mapping", None) and s.mapping.kind for s in sources}
    assert {"thread", "warp", "block", "gemm", None} <= set(kinds.values())
    found = compile_cubin(sources, arch)
    assert set(found) == {s.name for s in sources}
    for r in found.values():
        assert r.registers > 0 and r.spill_stores == 0 and r.spill_loads == 0
        assert r.cubin.startswith(b"\x7fELF")
        # block reductions and GEMM tiles stage values in shared memory, within the limit
        assert (r.shared > 0) == (kinds[r.name] in ("block", "gemm"))
        assert r.shared <= source.SHARED_LIMIT


def test_ptxas_report_parsing_and_limits():
    report = """ptxas info    : Compiling entry function 'k1' for 'sm_80'
ptxas info    : Function properties for k1
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 368 bytes cmem[0]
"""
    found = source.parse_ptxas(report, "sm_80")
    k1, k2 = found["k1"], found["k2"]
    assert (k1.registers, k1.spill_stores, k1.spill_loads, k1.shared) == (40, 4, 4, 1024)
    assert (k2.registers, k2.spill_stores, k2.shared) == (12, 0, 0)


@needs_nvcc
def test_a_spilling_kernel_is_refused(monkeypatch):
    _, arrays, node = graph_of("add", (np.zeros(3, np.float32),) * 2)
    src = CudaSource(describe(node, [layout(a) for a in arrays]))
    monkeypatch.setattr(source, "parse_ptxas", lambda text, arch: {
        src.name: source.Resources(src.name, arch, registers=30, spill_stores=8)})
    with pytest.raises(CompileError, match="spills registers"):
        src.cubin("sm_80")


def test_complex_kernels_are_unsupported():
    z = np.ones(3, np.complex64)
    _, arrays, node = graph_of("neg", (z,))
    try:
        kernel = describe(node, [layout(a) for a in arrays])
    except Unsupported:
        return          # not even described
    with pytest.raises(Unsupported):
        render(kernel, "k")


# ---------------------------------------------------------------- golden text

GOLDEN_ADD = """\
// add: domain [5,7] reduce (); collapsed [5, 7] reduce ()
extern "C" __global__ void k(const float* __restrict__ b0, const float* __restrict__ b1, float* __restrict__ b2)
{
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < 35LL; t += (long long)blockDim.x * gridDim.x) {
    const long long i1 = t % 7LL;
    long long rest = t / 7LL;
    const long long i0 = rest;
    const float v1 = b0[i0 * (7) + i1];
    const float v2 = b1[i1];
    const float v3 = v1 + v2;
    b2[i0 * (7) + i1] = v3;
  }
}
"""

GOLDEN_ARGMAX = """\
// argmax: domain [4,6] reduce (1,); collapsed [4, 6] reduce (1,)
extern "C" __global__ void k(const float* __restrict__ b0, long long* __restrict__ b1)
{
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < 4LL; t += (long long)blockDim.x * gridDim.x) {
    const long long i0 = t;
    float best1 = __uint_as_float(4286578688u);
    long long at2 = 0;
    for (long long i1 = 0; i1 < 6LL; ++i1) {
      const float v3 = b0[i0 * (6) + i1];
      if (v3 > best1 || (v3 != v3 && best1 == best1)) {
        best1 = v3;
        at2 = i1;
      }
    }
    b1[i0] = at2;
  }
}
"""

GOLDEN_REMAINDER = """\
// remainder: domain [8] reduce (); collapsed [8] reduce ()
extern "C" __global__ void k(const int* __restrict__ b0, const int* __restrict__ b1, int* __restrict__ b2, unsigned char* __restrict__ fault)
{
  bool faulted = false;   // an integer divisor was 0 (torch raises)
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < 8LL; t += (long long)blockDim.x * gridDim.x) {
    const long long i0 = t;
"""


def test_golden_text():
    _, arrays, node = graph_of("add", (np.zeros((5, 7), np.float32), np.zeros(7, np.float32)))
    assert render(describe(node, [layout(a) for a in arrays]), "k") == GOLDEN_ADD
    _, arrays, node = graph_of("argmax", (np.zeros((4, 6), np.float32),), dim=1)
    assert render(describe(node, [layout(a) for a in arrays]), "k") == GOLDEN_ARGMAX
    _, arrays, node = graph_of("remainder", (np.zeros(8, np.int32), np.ones(8, np.int32)))
    text = render(describe(node, [layout(a) for a in arrays]), "k")
    assert text.startswith(GOLDEN_REMAINDER) and "faulted |= v2 == 0;" in text
    assert text.endswith("  if (faulted) *fault = 1;\n}\n")

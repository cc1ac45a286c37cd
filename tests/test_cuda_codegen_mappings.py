"""The CUDA code generator's faster mappings (compiler/cuda/mapping.py) on machines without a GPU,
run by the emulation (one OS thread per CUDA thread of a block, barriers, warp shuffles):
block and warp reductions against the per-thread path and the interpreter, the tiled GEMM
(matrix products of every float dtype, batched, transposed; convolutions as implicit GEMM)
against numpy and the interpreter, the Philox random kernels against numpy's Philox (and
Random123's known answers), each over several launch shapes; golden text of each kind."""
import os
import sys

import numpy as np
import pytest

import dynograph as dg
from dynograph.compiler import interpreter
from dynograph.compiler.cuda import CudaSource, emulate, philox
from dynograph.compiler.cuda.gemm import matmul_kernel
from dynograph.compiler.cuda.mapping import mapping_of
from dynograph.compiler.cuda.philox import RandomKernel, RandomSource
from dynograph.compiler.lowering import program
from dynograph.compiler.lowering.kernel import describe
from dynograph.runtime import dtypes as D

sys.path.insert(0, os.path.dirname(__file__))
from test_cuda_codegen import (COOPERATIVE_SHAPES, SHAPES, assert_same, compiled_kernels,  # noqa: E402
                               graph_of, layout, needs_cxx, run_plans_against_llvm, sample)

GOLDEN = os.path.join(os.path.dirname(__file__), "cuda_golden")
BF16 = D.bfloat16.np


def kernel_of(op, args, **attrs):
    _, arrays, node = graph_of(op, args, **attrs)
    return describe(node, [layout(a) for a in arrays])


# ---------------------------------------------------------------- block and warp reductions


def _with_nans(x, every):
    x = x.copy()
    x.reshape(-1)[::every] = np.nan
    return x


def reduction_cases():
    """(op, input, attrs, the mapping expected)."""
    f32 = sample(np.float32, (3, 3000))
    return [
        ("sum", f32, {"dim": (1,)}, "block"),
        ("sum", sample(np.float32, (3000, 3)).T, {"dim": (1,)}, "block"),     # strided rows
        ("mean", sample(np.float32, (100, 100)), {"dim": (1,)}, "warp"),
        ("amax", _with_nans(sample(np.float32, (5000,)), 1777), {"dim": (0,)}, "block"),
        ("amin", sample(np.float16, (70, 200)), {"dim": (1,)}, "warp"),
        ("prod", (1 + sample(np.float64, (4, 300)) / 100), {"dim": 1}, "block"),
        ("all", sample(np.bool_, (100, 100)) | True, {"dim": (1,)}, "warp"),
        ("any", np.zeros(3000, np.bool_), {}, "block"),
        ("sum", sample(np.int64, (5, 3000)), {"dim": (1,)}, "block"),
        ("sum", sample(np.int8, (4100,)), {}, "block"),
        ("var", sample(np.float64, (4, 3, 500)), {"dim": (0, 2)}, "block"),
        ("nansum", _with_nans(sample(np.float32, (80, 100)), 7), {"dim": (1,)}, "warp"),
        ("std", sample(np.float32, (2, 2500)), {"dim": (1,)}, "block"),
        ("sum", sample(BF16, (2, 9000)), {"dim": (1,)}, "block"),
        ("argmax", _ties(_with_nans(sample(np.float32, (3, 3000)), 701)), {"dim": 1}, "block"),
        ("argmin", _ties(sample(np.float32, (4000,))), {}, "block"),
        ("argmax", np.full((2, 100), -np.inf, np.float32), {"dim": 1}, "block"),
        ("argmin", sample(np.int32, (100, 100)), {"dim": 1}, "warp"),
        ("argmax", _with_nans(sample(np.float16, (70, 300)), 29), {"dim": 1}, "warp"),
    ]


def _ties(x):
    """``x`` with its extremes repeated at later positions (the first must be picked)."""
    x = x.copy()
    flat = x.reshape(-1)
    flat[len(flat) // 2::97] = np.nanmax(flat)
    flat[len(flat) // 3::89] = np.nanmin(flat)
    return x


def exact(kernel):
    """Whether the cooperative result must equal the per-thread one bit for bit: no float sum
    or product (whose terms the mappings add in other orders)."""
    return all(not r.dtype.is_floating_point or r.combine in ("max", "min", "argmax", "argmin")
               for r in kernel.reductions)


@needs_cxx
def test_block_and_warp_reductions_match_the_per_thread_path_and_interpreter():
    prepared, sources = [], []
    for i, (op, x, attrs, kind) in enumerate(reduction_cases()):
        g, arrays, node = graph_of(op, (x,), **attrs)
        kernel = describe(node, [layout(a) for a in arrays])
        assert mapping_of(kernel).kind == kind, (op, x.shape, attrs)
        fast, slow = CudaSource(kernel, f"fast{i}"), CudaSource(kernel, f"slow{i}", per_thread=True)
        sources += [fast, slow]
        prepared.append((fast, slow, x, interpreter.run(g, arrays)[0][0], f"{op} {attrs} {x.shape}"))
    launchers = emulate.build(sources)
    for fast, slow, x, ref, what in prepared:
        per_thread = np.zeros(ref.shape, ref.dtype)
        launchers[slow.name].run([x, per_thread])
        tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float16): 1e-2,
               np.dtype(BF16): 2e-2}.get(ref.dtype, 2e-5)
        for grid, block in COOPERATIVE_SHAPES[fast.mapping.kind]:
            out = np.full(ref.shape, 77, ref.dtype)
            launchers[fast.name].run([x, out], grid, block)
            if exact(fast.kernel):
                np.testing.assert_array_equal(out, per_thread, err_msg=what)
            assert_same(out, ref, None if ref.dtype.kind in "biu" else tol, what)


def test_cooperative_kernels_refuse_blocks_they_cannot_run_in():
    block = CudaSource(kernel_of("sum", (np.ones(3000, np.float32),)))
    assert block.launch_shape() == (1, 256) and block.launch_shape(64) == (1, 64)
    with pytest.raises(ValueError, match="whole warps"):
        block.launch_shape(48)
    mm = np.zeros((70, 70), np.float32)
    gemm = CudaSource(matmul_kernel(mm, mm, mm))
    assert gemm.launch_shape(64) == (4, 256)            # 2 x 2 tiles of 64, 256 threads
    with pytest.raises(ValueError, match="blocks of 256"):
        gemm.mapping.check_block(128)


@needs_cxx
@pytest.mark.parametrize("shape", [(4, 3000), (100, 200)], ids=["few-long-rows", "many-rows"])
def test_fused_softmax_rows_run_as_block_or_warp_reductions_as_llvm_does(shape):
    x = dg.tensor(np.random.default_rng(5).normal(size=shape).astype(np.float32))
    f = dg.compile(lambda t: dg.nn.functional.softmax(t * 2.0, dim=-1), backend="llvm")
    f(x)
    f(x)
    plans = compiled_kernels(f)
    kinds = {mapping_of(p.kernel).kind for p in plans}
    assert kinds & {"block", "warp"}, kinds
    assert run_plans_against_llvm(plans) >= 1


# ---------------------------------------------------------------- GEMM

def _operand(rng, shape, dt, transposed):
    x = rng.normal(size=shape[::-1] if transposed else shape).astype(dt)
    return x.T if transposed else x


GEMM_CASES = {
    # name: (dtype, (batch or None, m, k, n), transpose a, transpose b, bias shape, alpha, beta)
    "f32-tiles": (np.float32, (None, 130, 37, 70), False, True, (70,), 1, 1),
    "f64-scaled": (np.float64, (None, 20, 50, 9), True, False, None, 2.0, 0),
    "f16-column-bias": (np.float16, (None, 65, 40, 66), False, False, (65, 1), 0.5, 2.0),
    "bf16-both-transposed": (BF16, (None, 17, 33, 8), True, True, (8,), 1, 1),
    "bmm-f32": (np.float32, (3, 40, 20, 70), False, True, None, 1, 1),
    "bmm-f16": (np.float16, (2, 10, 100, 12), True, False, None, 1, 1),
    "beta-zero-ignores-nan-bias": (np.float32, (None, 9, 5, 7), False, False, "nan", 1, 0),
}


def gemm_case(name, rng):
    dt, (batch, m, k, n), ta, tb, bias_shape, alpha, beta = GEMM_CASES[name]
    lead = () if batch is None else (batch,)
    a = _operand(rng, (m, k), dt, ta) if batch is None else \
        np.stack([_operand(rng, (m, k), dt, ta) for _ in range(batch)])
    b = _operand(rng, (k, n), dt, tb)
    if batch is not None:
        b = np.broadcast_to(b, (batch, k, n))           # one b for every batch index: stride 0
    bias = None
    if bias_shape == "nan":
        bias = np.full((m, n), np.nan, dt)
    elif bias_shape is not None:
        bias = np.broadcast_to(rng.normal(size=bias_shape).astype(dt), lead + (m, n))
    # the reference: exact products of the rounded inputs summed in float64, then rounded once
    wide = [x.astype(np.float64) for x in (a, b)]
    ref = alpha * np.matmul(*wide)
    if bias is not None and beta != 0:
        ref = ref + beta * bias.astype(np.float64)
    return a, b, bias, alpha, beta, ref.astype(dt)


@needs_cxx
def test_tiled_gemm_matches_numpy_over_dtypes_layouts_and_grids():
    rng = np.random.default_rng(11)
    cases, sources = [], {}
    for name in GEMM_CASES:
        a, b, bias, alpha, beta, ref = gemm_case(name, rng)
        out = np.zeros(ref.shape, ref.dtype)
        kernel = matmul_kernel(a, b, out, bias, alpha, beta)
        src = CudaSource(kernel, f"g{len(sources)}")
        assert src.mapping.kind == "gemm", name
        sources[name] = src
        cases.append((name, a, b, bias if beta != 0 else None, ref))
    launchers = emulate.build(list(sources.values()))
    for name, a, b, bias, ref in cases:
        src = sources[name]
        for grid, block in COOPERATIVE_SHAPES["gemm"]:
            out = np.full(ref.shape, 7, ref.dtype)
            launchers[src.name].run([a, b] + ([] if bias is None else [bias]) + [out], grid, block)
            # float32 sums of up to 100 products; half results within one rounding of the half
            tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-5}.get(ref.dtype, 1e-2)
            assert_same(out, ref, tol, name)


@needs_cxx
def test_matrix_products_of_a_program_run_the_emulated_gemm(monkeypatch):
    """mm and addmm (nn.Linear) in a program on EMULATION go through its matmul: the GEMM."""
    calls = []
    real = emulate.EMULATION.matmul

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(emulate.EMULATION, "matmul", counting)
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(33, 20)).astype(np.float32), rng.normal(size=(20, 70)).astype(np.float32)
    bias = rng.normal(size=(70,)).astype(np.float32)
    for op, args, attrs in [("mm", (x, w), {}), ("mm", (x, w.T.copy().T), {}),
                            ("addmm", (bias, x, w), {"alpha": 0.5, "beta": 2.0})]:
        g, arrays, _ = graph_of(op, args, **attrs)
        got = program.run(g, arrays, backend=emulate.EMULATION)[0][0]
        assert_same(got, interpreter.run(g, arrays)[0][0], 2e-5, op)
    assert len(calls) == 3


@needs_cxx
def test_max_pooling_over_large_windows_picks_as_the_per_thread_path():
    """Windows of 100 elements take the warp or block mapping: the max and the position of
    its first occurrence, or of the last NaN (``argmax_pool``), as the interpreter."""
    from test_cuda_codegen import _multi_output_graph
    x = sample(np.float32, (2, 3, 10, 10))       # one window per plane: not column-wise
    flat = x.reshape(-1)
    flat[:200:37] = np.nan                      # NaNs in two planes, ties of 9 in the others
    flat[3::41] = flat[4::41] = 9.0
    g = _multi_output_graph("max_pool2d_with_indices", x, kernel_size=[10, 10], stride=[10, 10],
                            padding=[0, 0], dilation=[1, 1], ceil_mode=False)
    ref = interpreter.run(g, [x])[0]
    got = program.run(g, [x], backend=emulate.EMULATION)[0]
    for r, o in zip(ref, got):
        assert_same(o, r, None, "max_pool2d")
    from dynograph.compiler.lowering import pool
    kinds = {mapping_of(p.kernel).kind for node_plans in pool._PLANS.values()
             for p, *_ in node_plans.values() if p is not None and p.backend is emulate.EMULATION}
    assert kinds & {"warp", "block"}, kinds


def _conv_plans():
    from dynograph.compiler.lowering import conv
    return [p for node_plans in conv._PLANS.values() for p, *_ in node_plans.values()
            if p is not None and p.backend is emulate.EMULATION]


@needs_cxx
@pytest.mark.parametrize("case", ["many-tiles", "grouped-strided"])
def test_convolutions_run_as_implicit_gemm_on_the_emulation_backend(case):
    """The direct convolution's own description renders as a GEMM whose rows are the batch and
    output positions and whose columns are the output channels (groups: a batch axis)."""
    rng = np.random.default_rng(4)
    if case == "many-tiles":
        x, w = rng.normal(size=(2, 5, 12, 12)), rng.normal(size=(70, 5, 3, 3))
        attrs = dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    else:
        x, w = rng.normal(size=(1, 6, 11, 13)), rng.normal(size=(8, 3, 3, 2))
        attrs = dict(stride=[2, 1], padding=[0, 1], dilation=[1, 2], groups=2)
    x, w = x.astype(np.float32), w.astype(np.float32)
    bias = rng.normal(size=(w.shape[0],)).astype(np.float32)
    attrs.update(transposed=False, output_padding=[0, 0])
    g, arrays, _ = graph_of("convolution", (x, w, bias), **attrs)
    ref = interpreter.run(g, arrays)[0][0]
    got = program.run(g, arrays, backend=emulate.EMULATION)[0][0]
    assert_same(got, ref, 2e-5, case)
    kinds = {mapping_of(p.kernel).kind for p in _conv_plans() if hasattr(p, "kernel")}
    assert "gemm" in kinds, kinds


# ---------------------------------------------------------------- Philox

# Random123's known-answer vectors (kat_vectors): counter, key, result
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


class _Source:
    """A hand-written kernel for the emulation: what build() needs of a source."""
    cooperative = False
    divides_integers = False

    def __init__(self, name, text, n):
        self.name, self.text, self.n = name, text, n

    def launch_shape(self):
        return 1, self.n


def test_numpy_philox_gives_the_known_answers():
    ctr, key, want = (np.array(v, np.uint32) for v in zip(*KNOWN_ANSWERS))
    np.testing.assert_array_equal(philox.philox(ctr, key), want)


@needs_cxx
def test_device_philox_gives_the_known_answers():
    text = philox.PHILOX + r"""
extern "C" __global__ void kat(const unsigned int* __restrict__ ctr,
    const unsigned int* __restrict__ key, unsigned int* __restrict__ out) {
  const int t = threadIdx.x;
  const dg_words r = dg_philox4x32_10(ctr[4 * t], ctr[4 * t + 1], ctr[4 * t + 2], ctr[4 * t + 3],
                                      key[2 * t], key[2 * t + 1]);
  for (int j = 0; j < 4; ++j) out[4 * t + j] = r.w[j];
}
"""
    ctr, key, want = (np.array(v, np.uint32) for v in zip(*KNOWN_ANSWERS))
    out = np.zeros((3, 4), np.uint32)
    emulate.build([_Source("kat", text, 3)])["kat"].run([ctr, key, out])
    np.testing.assert_array_equal(out, want)


RANDOM_CASES = [
    RandomKernel("uniform", 37, D.float32, (0.0, 1.0)),
    RandomKernel("uniform", 37, D.float64, (-2.0, 3.0)),
    RandomKernel("uniform", 21, D.float16, (-2.0, 3.0)),
    RandomKernel("uniform", 21, D.bfloat16, (0.0, 1.0)),
    RandomKernel("normal", 37, D.float32, (1.0, 2.0)),
    RandomKernel("normal", 23, D.float64, (0.0, 1.0)),
    RandomKernel("normal", 21, D.bfloat16, (-1.0, 0.5)),
    RandomKernel("bernoulli", 37, D.float32),
    RandomKernel("bernoulli", 22, D.float16),
    RandomKernel("bernoulli_scalar", 37, D.int64, (0.3,)),
    RandomKernel("bernoulli_scalar", 19, D.bool, (1.0,)),
    RandomKernel("dropout", 37, D.float32, (0.25,)),
    RandomKernel("dropout", 21, D.float64, (1.0,)),
]
SEED, OFFSET = 0x1234_5678_9ABC_DEF0, 77


def random_inputs(k, rng):
    if k.op in ("bernoulli", "dropout"):
        return [rng.random(k.n).astype(k.dtype.np)]
    return []


@needs_cxx
def test_random_kernels_match_numpy_philox_on_every_launch_shape():
    rng = np.random.default_rng(9)
    sources = [RandomSource(k, f"rand{i}") for i, k in enumerate(RANDOM_CASES)]
    launchers = emulate.build(sources)
    state = np.array([SEED, OFFSET], np.uint64)
    for src in sources:
        k = src.kernel
        inputs = random_inputs(k, rng)
        ref = philox.reference(k, SEED, OFFSET, inputs)
        first = None
        for grid, block in SHAPES + [(3, 2)]:
            outs = [np.zeros(k.n, r.dtype) for r in ref]
            launchers[src.name].run(inputs + outs + [state], grid, block)
            if first is None:
                first = outs
            for o, f in zip(outs, first):       # the same numbers on every launch shape
                np.testing.assert_array_equal(o.view(np.uint8), f.view(np.uint8))
        for o, r in zip(first, ref):
            if k.op == "normal" and k.dtype is not D.bfloat16:
                # the math library's log, cos and sin against numpy's: a few ulps
                np.testing.assert_allclose(o, r, rtol=1e-5 if k.dtype is D.float32 else 1e-13,
                                           atol=1e-6 if k.dtype is D.float32 else 1e-14)
            else:
                np.testing.assert_array_equal(o, r, err_msg=f"{k}")


@needs_cxx
def test_random_streams_continue_by_offset_and_differ_by_seed():
    sources = [RandomSource(RandomKernel("uniform", n, D.float32, (0.0, 1.0)), f"u{n}")
               for n in (40, 80)]
    launchers = emulate.build(sources)

    def draw(seed, offset, n=40):
        out = np.zeros(n, np.float32)
        launchers[f"u{n}"].run([out, np.array([seed, offset], np.uint64)], 2, 3)
        return out
    long = draw(5, 0, 80)
    np.testing.assert_array_equal(draw(5, 0), long[:40])        # element i depends on i alone
    # a later offset (in counters of 4 draws) continues the stream
    np.testing.assert_array_equal(draw(5, 10), long[40:])
    np.testing.assert_array_equal(draw(5, 3)[:28], long[12:40])
    assert not np.array_equal(draw(6, 0), long[:40])
    assert ((long >= 0) & (long < 1)).all()


def test_philox_draws_have_the_expected_distribution():
    """Large draws of the numpy reference (what the kernels equal): moments and ranges."""
    u = philox.reference(RandomKernel("uniform", 1 << 16, D.float32, (0.0, 1.0)), 3, 0)[0]
    z = philox.reference(RandomKernel("normal", 1 << 16, D.float64, (0.0, 1.0)), 3, 0)[0]
    b = philox.reference(RandomKernel("bernoulli_scalar", 1 << 16, D.float32, (0.2,)), 3, 0)[0]
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    assert abs(b.mean() - 0.2) < 0.01
    with pytest.raises(ValueError, match="floating point"):
        RandomKernel("normal", 3, D.int32, (0.0, 1.0))


# ---------------------------------------------------------------- golden text


def golden_sources():
    """One small kernel of each new kind: {file name: its text}."""
    mm = matmul_kernel(np.zeros((8, 5), np.float32), np.zeros((5, 6), np.float32),
                       np.zeros((8, 6), np.float32))
    return {
        "block_sum.cu": CudaSource(kernel_of("sum", (np.zeros(3000, np.float32),)), "k").text,
        "warp_amax.cu": CudaSource(kernel_of("amax", (np.zeros((70, 100), np.float16),),
                                             dim=(1,)), "k").text,
        "gemm_mm.cu": CudaSource(mm, "k").text,
        "philox_uniform.cu": RandomSource(RandomKernel("uniform", 10, D.float32, (-1.0, 1.0)),
                                          "k").text,
    }


def test_golden_text_of_each_mapping():
    for name, text in golden_sources().items():
        with open(os.path.join(GOLDEN, name)) as f:
            assert text == f.read(), name

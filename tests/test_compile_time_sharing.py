"""What keeps cold compilations short: kernels that render to the same source compile once per
process (runtime/backend.py), and LLVM unrolls only the kernels that ask for it
(Kernel.unroll: the direct kernels)."""
import threading
import time

import numpy as np
import pytest

from dynograph.compiler.llvm import jit
from dynograph.compiler.llvm.backend import LLVM, options, unrolled
from dynograph.compiler.lowering import conv, pool
from dynograph.compiler.lowering.description import Kernel, Load, Recorder, ReductionStep, Store
from dynograph.compiler.lowering.padding import copy_kernel
from dynograph.runtime import backend
from dynograph.runtime import dtypes as D


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    backend.settle_compilations()           # (a kernel queued earlier would write here)
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backend, "_sources", {})    # no source compiled by earlier tests
    return tmp_path


def _copy(shape):
    """A contiguous copy of ``shape``: one flat loop, whatever the shape."""
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    return copy_kernel(shape, strides, shape, (0,) * len(shape), D.float32)


def _run(kernel, x):
    out = np.empty_like(x)
    fn = backend.kernel_function(LLVM, kernel)
    LLVM.launch(fn, kernel, [x.ctypes.data, out.ctypes.data])
    return out


def test_kernels_of_other_shapes_that_render_alike_compile_once_and_each_runs_right(fresh_cache):
    a, b = _copy((3, 5, 7)), _copy((11, 13))
    assert a.key != b.key
    assert LLVM.render(a, LLVM.symbol(a)) == LLVM.render(b, LLVM.symbol(b))
    before = dict(backend.STATS)
    x, y = np.random.rand(3, 5, 7).astype(np.float32), np.random.rand(11, 13).astype(np.float32)
    np.testing.assert_array_equal(_run(a, x), x)
    np.testing.assert_array_equal(_run(b, y), y)
    assert backend.STATS["compiled"] - before["compiled"] == 2
    assert backend.STATS["shared"] - before["shared"] == 1
    # each is on disk under its own key, loadable by the one name
    for k in (a, b):
        obj = LLVM.disk.read(k.key)
        assert obj is not None and jit.load_all(obj, [LLVM.symbol(k)])[LLVM.symbol(k)]


class _Counting(backend.Backend):
    """A backend whose compilations take a while, are counted, and fail on request."""
    name = "test-counting"

    def __init__(self):
        self.compiled, self.fail = [], 0

    def render(self, kernel, name):
        return f"{name}: {len(kernel.domain)}"        # alike for every kernel of one rank

    def compile(self, source, name, kernel):
        time.sleep(0.05)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("no object code")
        self.compiled.append(source)
        return source.encode()

    def symbol(self, kernel):
        return "k"

    def load(self, obj, name, kernel):
        return (obj, kernel.key)

    def launch(self, fn, kernel, addresses):
        pass

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data


def test_threads_needing_one_source_wait_for_its_one_compilation():
    counting = _Counting()
    kernels = [_copy((n, 3)) for n in range(2, 8)]
    results = [None] * len(kernels)

    def get(i):
        results[i] = backend.kernel_function(counting, kernels[i])
    threads = [threading.Thread(target=get, args=(i,)) for i in range(len(kernels))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counting.compiled == ["k: 2"]
    assert [r[1] for r in results] == [k.key for k in kernels]     # each kernel loaded as itself


def test_a_failed_compilation_raises_and_the_next_kernel_of_its_source_compiles_again():
    counting = _Counting()
    counting.fail = 1
    with pytest.raises(RuntimeError, match="no object code"):
        backend.kernel_function(counting, _copy((3, 4, 5)))
    assert backend.kernel_function(counting, _copy((6, 4, 5)))[0] == b"k: 3"
    assert counting.compiled == ["k: 3"]


def _direct_kernels():
    """A convolution, a weight gradient, max pooling and its backward (small float32 cases)."""
    w = conv.Weights.forward((150, 25, 5, 1), 1, 6)
    return [conv.direct_convolution((1, 6, 12, 12), (864, 144, 12, 1), w, None, 1, 6, (5, 5),
                                    (1, 1), (1, 1), D.float32),
            conv.flat_weight_grad((1, 3, 12, 12), (1, 6, 8, 8), (5, 5), (1, 1), 1, D.float32),
            pool.max_pool_windows(2, (8, 8), (4, 4), (2, 2), (2, 2), (1, 1), D.float32),
            pool.max_pool_gather(2, (8, 8), (4, 4), (4, 4), (2, 2), (2, 2), (1, 1), D.float32)]


def test_only_the_direct_kernels_are_unrolled(monkeypatch):
    asked = {}
    real = jit.emit_object

    def emit_object(text, name, describe="", level=None, unroll=True, vectorize=True):
        asked[describe] = unroll
        return real(text, name, describe, level, unroll, vectorize)
    monkeypatch.setattr(jit, "emit_object", emit_object)
    direct = _direct_kernels()
    assert sorted(k.name for k in direct) == ["conv", "conv_weight_grad", "max_pool",
                                              "max_pool_backward"]
    for k in direct + [_copy((4, 5))]:
        LLVM.compile(LLVM.render(k, LLVM.symbol(k)), LLVM.symbol(k), k)
    assert [unroll for describe, unroll in asked.items() if "(pad," in describe] == [False]
    assert [unroll for describe, unroll in asked.items() if "(pad," not in describe] == [True] * 4


def _sum(domain, reduce_axes):
    """A float32 sum of a contiguous array of shape ``domain`` over ``reduce_axes``."""
    strides = tuple(int(np.prod(domain[i + 1:])) for i in range(len(domain)))
    b = Recorder()
    x = b.load(0, D.float32, 1)
    total = b.acc(0, D.float32)
    out = [0 if a in reduce_axes else 1 for a in range(len(domain))]
    out_strides = tuple(int(np.prod([domain[j] for j in range(i + 1, len(domain)) if out[j]]))
                        * out[i] for i in range(len(domain)))
    buffers = [("in0", D.float32, "in"), ("out0", D.float32, "out")]
    return Kernel("sum", domain, reduce_axes, buffers, b.exprs, [Load(0, strides, 0)],
                  [ReductionStep("add", 0.0, D.float32, x.index)],
                  [Store(1, total.index, out_strides)])


def test_rows_reduced_in_one_loop_are_unrolled_and_other_fused_kernels_are_not():
    assert unrolled(_sum((64, 4096), (1,)))             # softmax's rows: 5% faster unrolled
    assert unrolled(_sum((4, 6, 28, 28), (2, 3)))       # (the pixels merge into one loop)
    assert not unrolled(_sum((4, 6, 28, 28), (0, 2, 3)))    # a bias gradient: two loops
    assert not unrolled(_sum((64, 120), (0,)))          # column-wise
    assert not unrolled(_copy((64, 120)))
    assert all(unrolled(k) for k in _direct_kernels())


def test_small_fused_kernels_compile_without_the_vectorizers():
    small, large = _sum((4, 120), (0,)), _sum((64, 120), (0,))
    assert not options(small)["vectorize"] and options(large)["vectorize"]
    assert all(options(k)["vectorize"] for k in _direct_kernels())    # (max pooling's selects)
    source = LLVM.render(small, LLVM.symbol(small))
    assert "vector.body" not in str(jit.optimize(source, **options(small)))   # the vectorizer's
    assert "vector.body" in str(jit.optimize(source))
    out = np.empty(120, np.float32)
    x = np.random.default_rng(0).standard_normal((4, 120)).astype(np.float32)
    fn = LLVM.load(LLVM.compile(source, LLVM.symbol(small), small), LLVM.symbol(small), small)
    LLVM.launch(fn, small, [x.ctypes.data, out.ctypes.data])
    np.testing.assert_allclose(out, x.sum(0), rtol=1e-6)


def test_unrolling_is_part_of_a_kernels_key():
    from dataclasses import replace
    k = _copy((4, 5))
    assert replace(k, unroll=True).key != k.key


def test_a_kernel_left_rolled_compiles_to_less_code():
    """What the fused kernels gain: LLVM's unrolling copies the body of every short constant
    loop (here the rows of a strided copy) many times over."""
    k = copy_kernel((64, 16), (32, 1), (64, 16), (0, 0), D.float32)
    text = LLVM.render(k, LLVM.symbol(k))
    rolled, unrolled = (len(jit._object_code(jit.optimize(text, unroll=u))) for u in (False, True))
    assert rolled < unrolled * 0.8

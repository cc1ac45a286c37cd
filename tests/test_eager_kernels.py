"""Eager convolution and max pooling on the compiled direct kernels (dynograph/_direct_kernels.py):
the same values and gradients as torch and as the numpy implementations they replace, numpy
where no backend lends kernels, and PyTorch's errors either way."""
import numpy as np
import pytest

import dynograph
from dynograph import _direct_kernels as direct
from dynograph.compiler.ops import conv as conv_ops
from dynograph.compiler.ops import pooling as pool_ops
from dynograph.runtime import host_kernels

from conftest import from_torch, to_numpy

pytest.importorskip("llvmlite")


@pytest.fixture
def kernels_always(monkeypatch):
    """Every call covered by a direct rule takes its kernel, however small."""
    monkeypatch.setattr(direct, "MIN_WORK", 0)
    monkeypatch.setattr(direct, "MIN_POOL_READS", 0)
    monkeypatch.setattr(direct, "_owners", type(direct._owners)())


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)


def _conv_inputs(rng, nd, n, c, o, size, k, groups, dtype):
    x = rng.standard_normal((n, c) + (size,) * nd).astype(dtype)
    w = rng.standard_normal((o, c // groups) + (k,) * nd).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    return x, w, b


CONV_CASES = [  # nd, stride, padding, dilation, groups
    (2, 1, 0, 1, 1),
    (2, 1, 2, 1, 1),
    (2, 2, 1, 1, 1),
    (2, 1, 1, 2, 2),
    (1, 1, 1, 1, 1),
    (3, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("nd,stride,padding,dilation,groups", CONV_CASES)
def test_conv_values_and_gradients_match_torch(torch, kernels_always, nd, stride, padding,
                                               dilation, groups, dtype):
    rng = np.random.default_rng(nd * 100 + stride * 10 + padding + dilation + groups)
    size = 6 if nd == 3 else 9
    x, w, b = _conv_inputs(rng, nd, 2, 4, 6, size, 3, groups, dtype)
    fn = getattr(torch.nn.functional, f"conv{nd}d")
    ours_fn = getattr(dynograph.nn.functional, f"conv{nd}d")
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    dx, dw, db = (from_torch(t, requires_grad=True) for t in (tx, tw, tb))
    ty = fn(tx, tw, tb, **kw)
    dy = ours_fn(dx, dw, db, **kw)
    np.testing.assert_allclose(to_numpy(dy), to_numpy(ty), **_tol(dtype))
    g = rng.standard_normal(ty.shape).astype(dtype)
    ty.backward(torch.tensor(g))
    dy.backward(dynograph.tensor(g))
    for ours, theirs in ((dx, tx), (dw, tw), (db, tb)):
        np.testing.assert_allclose(to_numpy(ours.grad), to_numpy(theirs.grad), **_tol(dtype))
    # the forward pass ran on a kernel (an owner holds its plans)
    assert any(key[0] == "convolution" and owner is not None
               for key, owner in direct._owners.items())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transposed", [False, True])
def test_conv_kernel_equals_numpy_implementation(kernels_always, transposed, dtype):
    rng = np.random.default_rng(1)
    x, w, b = _conv_inputs(rng, 2, 3, 4, 4, 8, 3, 1, dtype)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=transposed,
                 output_padding=(0, 0), groups=1)
    args = [dynograph.from_numpy(x), dynograph.from_numpy(w), dynograph.from_numpy(b)]
    got = direct.run(conv_ops.convolution, args, attrs)
    assert got is not None
    want = conv_ops.convolution.impl(x, w, b, **attrs)
    np.testing.assert_allclose(got, want, **_tol(dtype))
    # again from the cached plan, on a strided (non-contiguous) input
    xt = np.ascontiguousarray(x.swapaxes(2, 3)).swapaxes(2, 3)
    got = direct.run(conv_ops.convolution, [dynograph.from_numpy(xt)] + args[1:], attrs)
    np.testing.assert_allclose(got, want, **_tol(dtype))


def test_weight_grad_kernel_equals_numpy_implementation(kernels_always):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 9, 9))
    gy = rng.standard_normal((2, 6, 9, 9))
    attrs = dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=2)
    got = direct.run(conv_ops.convolution_weight_grad,
                     [dynograph.from_numpy(x), dynograph.from_numpy(gy)], attrs)
    assert got is not None
    np.testing.assert_allclose(got, conv_ops.convolution_weight_grad.impl(x, gy, **attrs),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_kernel_matches_torch(torch, kernels_always, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 8)).astype(dtype)
    x[0, 0, :2, :2] = 1.0                   # a tie: the first largest element wins
    tx = torch.tensor(x, requires_grad=True)
    dx = from_torch(tx, requires_grad=True)
    ty, ti = torch.nn.functional.max_pool2d(tx, 2, return_indices=True)
    dy, di = dynograph.nn.functional.max_pool2d(dx, 2, return_indices=True)
    np.testing.assert_array_equal(to_numpy(dy), to_numpy(ty))
    np.testing.assert_array_equal(to_numpy(di), to_numpy(ti))
    ty.sum().backward()
    dy.sum().backward()
    np.testing.assert_array_equal(to_numpy(dx.grad), to_numpy(tx.grad))
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    got = direct.run(pool_ops.max_pool2d_with_indices, [dynograph.from_numpy(x)], attrs)
    want = pool_ops.max_pool2d_with_indices.impl(x, **attrs)
    assert got is not None
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_small_calls_and_wide_layers_keep_numpy(monkeypatch):
    monkeypatch.setattr(direct, "_owners", type(direct._owners)())
    rng = np.random.default_rng(4)
    attrs = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False,
                 output_padding=(0, 0), groups=1)
    small = [dynograph.from_numpy(a) for a in _conv_inputs(rng, 2, 1, 2, 2, 5, 3, 1, "float32")]
    assert direct.run(conv_ops.convolution, small, attrs) is None
    wide = [dynograph.from_numpy(a) for a in _conv_inputs(rng, 2, 4, 64, 64, 16, 3, 1, "float32")]
    assert direct.run(conv_ops.convolution, wide, attrs) is None
    # the CIFAR tutorial's first layer pays
    cifar = [dynograph.from_numpy(a) for a in _conv_inputs(rng, 2, 64, 3, 6, 32, 5, 1, "float32")]
    got = direct.run(conv_ops.convolution, cifar, attrs)
    assert got is not None
    np.testing.assert_allclose(got, conv_ops.convolution.impl(*[t.numpy() for t in cifar], **attrs),
                               rtol=1e-4, atol=1e-4)


def _assert_conv_runs_numpy(seed):
    """conv2d equals the numpy implementation exactly (no kernel ran)."""
    x, w, b = _conv_inputs(np.random.default_rng(seed), 2, 2, 3, 4, 8, 3, 1, "float64")
    got = dynograph.nn.functional.conv2d(dynograph.from_numpy(x), dynograph.from_numpy(w),
                                         dynograph.from_numpy(b))
    attrs = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False,
                 output_padding=(0, 0), groups=1)
    np.testing.assert_array_equal(got.numpy(), conv_ops.convolution.impl(x, w, b, **attrs))


def test_without_a_backend_numpy_runs(monkeypatch, kernels_always):
    def broken():
        raise ImportError("no JIT here")
    host_kernels.install(broken)
    try:
        assert host_kernels.compiler() is None
        _assert_conv_runs_numpy(5)
    finally:
        from dynograph.compiler import backends
        host_kernels.install(backends.llvm_kernels)
    assert host_kernels.compiler() is not None


def test_a_kernel_that_does_not_compile_falls_back(monkeypatch, kernels_always):
    def failing(kernel):
        raise RuntimeError("cannot compile")
    host_kernels.install(lambda: failing)
    try:
        _assert_conv_runs_numpy(6)
    finally:
        from dynograph.compiler import backends
        host_kernels.install(backends.llvm_kernels)


@pytest.mark.parametrize("bad", ["channels", "dtype", "rank"])
def test_errors_are_torchs_with_kernels_on(torch, kernels_always, bad):
    x = np.zeros((2, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    if bad == "channels":
        w = np.zeros((4, 2, 3, 3), np.float32)
    elif bad == "dtype":
        w = w.astype(np.float64)
    else:
        x = x[0, 0]
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w))
    with pytest.raises(type(theirs.value)) as ours:
        dynograph.nn.functional.conv2d(dynograph.from_numpy(x), dynograph.from_numpy(w))
    assert str(ours.value) == str(theirs.value).replace("torch.", "dynograph.")

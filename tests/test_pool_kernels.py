"""Max pooling's generated kernels (compiler/lowering/pool.py) against torch and the op's numpy
impl: the forward storing final flat indices, the backward gathering each element's gradients
from the windows that chose it (overlapping windows summed in the windows' order as the impl's
bincount), and the padding copy kernel (padding.py) that convolutions and weight gradients read.
The rules run directly on the llvm backend; eager and compiled calls run the same rules."""
import threading

import numpy as np
import pytest

import dynograph
from dynograph import _direct_kernels as direct
from dynograph.compiler.llvm.backend import LLVM
from dynograph.compiler.lowering import conv, padding, pool
from dynograph.compiler.lowering.program import Host
from dynograph.compiler.ops import conv as conv_ops, pooling as pool_ops
from conftest import from_torch, to_numpy

torch = pytest.importorskip("torch")
HOST = Host(LLVM)


class _Owner:
    """Stands for the graph node a rule keeps its plans on."""


def _window(nd, k, s, d=1, ceil_mode=False, p=0):
    def each(v):
        return tuple(v) if isinstance(v, tuple) else (v,) * nd
    return dict(kernel_size=each(k), stride=each(s), padding=each(p), dilation=each(d),
                ceil_mode=ceil_mode)


# shape, window: ties and NaNs are planted in every input
CASES = {
    "2x2-stride2": ((3, 4, 28, 28), _window(2, 2, 2)),
    "odd-tail": ((2, 3, 9, 11), _window(2, 2, 2)),
    "3x3-stride1-overlap": ((2, 3, 9, 10), _window(2, 3, 1)),
    "3x3-stride2-overlap": ((2, 2, 12, 14), _window(2, 3, 2)),
    "dilated": ((2, 3, 10, 12), _window(2, (2, 3), (1, 2), (2, 1))),
    "stride-over-window": ((2, 2, 12, 13), _window(2, 2, 3)),
    "ceil-mode-inside": ((2, 3, 8, 8), _window(2, 2, 2, ceil_mode=True)),
    "unbatched": ((3, 7, 8), _window(2, (3, 2), (3, 2))),
    "3d": ((2, 2, 6, 7, 8), _window(3, 2, 2)),
    "3d-overlap": ((1, 2, 5, 6, 7), _window(3, 2, 1)),
}
FALLBACK = {        # windows past the input's edges: the impl runs (shape, window, forward too)
    "padded": ((2, 3, 8, 8), _window(2, 3, 2, p=1), True),
    "ceil-mode-overhang": ((2, 3, 9, 9), _window(2, 2, 2, ceil_mode=True), True),
    # a window reaching past the input's whole strides: the backward's impl
    "last-window-in-the-tail": ((2, 2, 11, 13), _window(2, 3, 2), False),
}


def _input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[5::17] = flat[6::17] = flat[7::29] = 0.5       # ties: the first is picked
    flat[::23] = np.nan                                 # the last NaN of a window is picked
    return x


def _torch_pool(x, window, g=None):
    nd = len(window["kernel_size"])
    fn = torch.nn.functional.max_pool2d if nd == 2 else torch.nn.functional.max_pool3d
    tx = torch.tensor(x, requires_grad=True)
    values, indices = fn(tx, window["kernel_size"], window["stride"], window["padding"],
                         window["dilation"], window["ceil_mode"], return_indices=True)
    if g is not None:
        values.backward(torch.from_numpy(g))
    return values.detach().numpy(), indices.numpy(), None if g is None else tx.grad.numpy()


def _backward_attrs(x, window):
    nd = len(window["kernel_size"])
    disjoint = all(s >= (k - 1) * d + 1 for k, s, d in
                   zip(window["kernel_size"], window["stride"], window["dilation"]))
    return dict(input_shape=x.shape, nd=nd, disjoint=disjoint, **window)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_kernels_match_torch_and_the_impl_exactly(case, dtype):
    shape, window = CASES[case]
    x = _input(shape, dtype)
    values, indices = pool.run_max_pool(_Owner(), [x], window, None, HOST)
    want_values, want_indices, _ = _torch_pool(x, window)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)
    # gradients: random, with a NaN and a -0 among them (only where chosen do they arrive)
    g = np.random.default_rng(1).standard_normal(values.shape).astype(dtype)
    g.reshape(-1)[3] = np.nan
    g.reshape(-1)[4] = -0.0
    attrs = _backward_attrs(x, window)
    out = np.full(x.shape, 7.0, dtype)                  # a planned buffer holding old values
    got = pool.run_max_pool_backward(_Owner(), [g, indices], attrs, out, HOST)
    assert got is out, f"{case}: the backward kernel did not run"
    want = pool_ops.max_pool_backward.impl(g, indices, **attrs)
    np.testing.assert_array_equal(got, want)            # bit for bit, NaNs where the impl's
    assert np.array_equal(np.signbit(got), np.signbit(want))
    _, _, torch_grad = _torch_pool(x, window, g)
    tol = 0 if attrs["disjoint"] else (1e-6 if dtype == np.float32 else 1e-14)
    np.testing.assert_allclose(got, torch_grad, rtol=tol, atol=tol)


def test_overlapping_windows_add_every_gradient_of_a_shared_maximum():
    """One element the largest of all 9 windows that hold it (3x3, stride 1): its gradient is
    the sum of all of them, added in float64 in the windows' order as np.bincount does."""
    x = np.zeros((1, 1, 5, 5), np.float32)
    x[0, 0, 2, 2] = 1.0
    window = _window(2, 3, 1)
    values, indices = pool.run_max_pool(_Owner(), [x], window, None, HOST)
    assert (indices == 12).all()
    g = np.array([1e8, 1.0, -1e8, 3.0, 0.5, 0.25, 1e-3, 7.0, -2.0], np.float32).reshape(1, 1, 3, 3)
    attrs = _backward_attrs(x, window)
    got = pool.run_max_pool_backward(_Owner(), [g, indices], attrs, None, HOST)
    want = np.zeros_like(x)
    want[0, 0, 2, 2] = np.float32(np.sum(g.astype(np.float64)))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, pool_ops.max_pool_backward.impl(g, indices, **attrs))


@pytest.mark.parametrize("case", FALLBACK)
def test_windows_past_the_edges_run_the_impl(case):
    shape, window, forward = FALLBACK[case]
    x = _input(shape, np.float32)
    assert (pool.run_max_pool(_Owner(), [x], window, None, HOST) is None) == forward
    values, indices = pool_ops.max_pool2d_with_indices.impl(x, **window)
    g = np.ones(values.shape, np.float32)
    attrs = _backward_attrs(x, window)
    assert pool.run_max_pool_backward(_Owner(), [g, indices], attrs, None, HOST) is None
    # without window attributes (adaptive and fractional pools) the backward declines too
    bare = dict(input_shape=x.shape, nd=2)
    assert pool.run_max_pool_backward(_Owner(), [g, indices], bare, None, HOST) is None


def test_non_contiguous_operands():
    x = _input((2, 3, 16, 20), np.float32)[:, :, ::2, 1::2]        # (2, 3, 8, 10), strided
    window = _window(2, 2, 2)
    values, indices = pool.run_max_pool(_Owner(), [x], window, None, HOST)
    want_values, want_indices, _ = _torch_pool(np.ascontiguousarray(x), window)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)
    g = np.random.default_rng(2).standard_normal((2, 3, 5, 4)).astype(np.float32).transpose(0, 1, 3, 2)
    attrs = _backward_attrs(x, window)
    got = pool.run_max_pool_backward(_Owner(), [g, indices], attrs, None, HOST)
    np.testing.assert_array_equal(got, pool_ops.max_pool_backward.impl(g, indices, **attrs))


@pytest.fixture
def kernels_always(monkeypatch):
    monkeypatch.setattr(direct, "MIN_POOL_READS", 0)
    monkeypatch.setattr(direct, "MIN_WORK", 0)
    monkeypatch.setattr(direct, "_owners", type(direct._owners)())


@pytest.mark.parametrize("case", ["2x2-stride2", "3x3-stride2-overlap", "dilated", "3d"])
def test_eager_and_compiled_agree_with_torch(kernels_always, case):
    """Eager max pooling and its backward run the kernels (the indices they return are reused
    by the next call only once nothing holds them); a compiled step runs them too and gives
    the same bits."""
    shape, window = CASES[case]
    x = _input(shape, np.float32)
    x[np.isnan(x)] = 0.0                    # a NaN loss would hide everything else
    weight = np.random.default_rng(5).standard_normal(_torch_pool(x, window)[0].shape)
    nd = len(window["kernel_size"])
    f = dynograph.nn.functional.max_pool2d if nd == 2 else dynograph.nn.functional.max_pool3d

    def loss(t, w):
        y, _ = f(t, window["kernel_size"], window["stride"], window["padding"],
                 window["dilation"], window["ceil_mode"], return_indices=True)
        return (y * w).sum()

    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(weight, dtype=torch.float32)
    fn = torch.nn.functional.max_pool2d if nd == 2 else torch.nn.functional.max_pool3d
    y, ti = fn(tx, window["kernel_size"], window["stride"], window["padding"],
               window["dilation"], window["ceil_mode"], return_indices=True)
    (y * tw).sum().backward()

    grads = []
    for _ in range(2):                      # the second call reuses what the first dropped
        dx = from_torch(tx, requires_grad=True)
        loss(dx, from_torch(tw)).backward()
        grads.append(to_numpy(dx.grad))
    np.testing.assert_array_equal(grads[0], grads[1])
    # torch sums overlapping windows' gradients in float32, the impl in float64
    tol = 0 if _backward_attrs(x, window)["disjoint"] else 1e-5
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=tol, atol=tol)
    eager_owners = [k[0] for k, owner in direct._owners.items() if owner is not None]
    assert "max_pool_backward" in eager_owners and any(n.startswith("max_pool") and n.endswith(
        "with_indices") for n in eager_owners)

    def step(t, w):
        value = loss(t, w)
        value.backward()
        return value

    compiled = dynograph.compile(step, backend="llvm")
    for _ in range(3):
        dx = from_torch(tx, requires_grad=True)
        compiled(dx, from_torch(tw))
        np.testing.assert_array_equal(to_numpy(dx.grad), grads[0])
    ran = {node.op for node, plans in pool._PLANS.items() if hasattr(node, "op")
           for entry in plans.values() if entry[0] is not None}
    assert {"max_pool_backward", f"max_pool{nd}d_with_indices"} <= ran, ran


# ---------------------------------------------------------------- the padding copy kernel

def test_padding_fills_the_border_once_and_copies_any_layout():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5).transpose(0, 1, 3, 2)
    pad = padding.Padding(x, (1, 2), (3, 0), -1.0, HOST)
    with pad(x) as first:
        np.testing.assert_array_equal(first, np.pad(x, [(0, 0), (0, 0), (1, 3), (2, 0)],
                                                     constant_values=-1.0))
    y = x + 100
    with pad(y) as again:
        assert again is first               # the buffer is reused, its border left as it was
        np.testing.assert_array_equal(again, np.pad(y, [(0, 0), (0, 0), (1, 3), (2, 0)],
                                                    constant_values=-1.0))
        with pad(x) as other:               # held meanwhile: another buffer
            assert other is not again
            np.testing.assert_array_equal(other[:, :, 1:-3, 2:], x)


def test_large_padded_buffers_are_not_kept(monkeypatch):
    monkeypatch.setattr(padding, "KEEP_BYTES", 100)
    x = np.ones((2, 3, 4, 5), np.float64)
    pad = padding.Padding(x, (1, 1), (1, 1), 0.0, HOST)
    for _ in range(2):
        with pad(x) as got:
            np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)]))
    assert not pad.free


def test_padded_convolutions_and_weight_gradients_from_threads():
    """Padded convolutions, their input gradients (transposed) and weight gradients of strided
    operands equal the impl, also when several threads run one node's plans at once (each
    takes its own padded buffer)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 18, 15)).astype(np.float32)[:, :, ::2, :]   # (4, 3, 9, 15)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((4, 5, 11, 17)).astype(np.float32)[:, :, :9, 1:16]
    fwd = dict(stride=(1, 1), padding=(1, 2), dilation=(1, 1), transposed=False,
               output_padding=(0, 0), groups=1)
    back = dict(fwd, transposed=True)
    grad = dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 2), dilation=(1, 1), groups=1)
    owners = [_Owner() for _ in range(3)]
    calls = [(conv.run_convolution, owners[0], [x, w, None], fwd, conv_ops.convolution),
             (conv.run_convolution, owners[1], [gy, w, None], back, conv_ops.convolution),
             (conv.run_weight_grad, owners[2], [x, gy], grad, conv_ops.convolution_weight_grad)]
    wants = [op.impl(*args, **attrs) for _, _, args, attrs, op in calls]
    failures = []

    def worker():
        for _ in range(5):
            for (rule, owner, args, attrs, _), want in zip(calls, wants):
                got = rule(owner, args, attrs, None, HOST)
                if got is None or not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                    failures.append(rule.__name__)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    for owner in owners:                    # each ran a kernel, with a padding copy
        (entry,) = conv._PLANS[owner].values()
        assert entry[0] is not None and any(isinstance(p, padding.Padding) for p in entry[1:])

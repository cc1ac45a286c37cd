"""The backward engine and its safety nets: deep graphs, freed graphs, hooks, modes, anomaly,
profiler, version counters; and the PyTorch tutorials' autograd examples with exact values."""
import threading
import warnings

import numpy as np
import pytest

import dynograph
from dynograph import autograd


def test_tutorial_mean_of_squares():
    x = dynograph.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    out = z.mean()
    assert y.grad_fn.name() == "AddBackward0" and out.grad_fn.name() == "MeanBackward0"
    out.backward()
    assert x.grad.tolist() == [[4.5, 4.5], [4.5, 4.5]]


def test_tutorial_log_of_product():
    x = dynograph.tensor([0.5, 0.75], requires_grad=True)
    y = dynograph.log(x[0] * x[1])
    y.backward()
    np.testing.assert_allclose(x.grad._data, [1 / 0.5, 1 / 0.75], rtol=1e-6)
    assert repr(x.grad) == "tensor([2.0000, 1.3333])"


def test_tutorial_vector_jacobian_product(torch):
    data = np.array([0.3, -1.2, 0.8], dtype=np.float32)
    v = [0.1, 1.0, 0.0001]

    def run(lib, x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * 2
        y.backward(lib.tensor(v, dtype=lib.float32))
        return x.grad

    ours = run(dynograph, dynograph.tensor(data, requires_grad=True))
    theirs = run(torch, torch.tensor(data, requires_grad=True))
    np.testing.assert_allclose(ours._data, theirs.numpy())


def test_tutorial_linear_regression_converges_like_torch(torch):
    rng = np.random.default_rng(0)
    xs = rng.random((50, 1)).astype(np.float32)
    ys = (2 * xs + 1 + 0.05 * rng.standard_normal((50, 1))).astype(np.float32)

    def fit(lib):
        a = lib.zeros(1, requires_grad=True)
        b = lib.zeros(1, requires_grad=True)
        x, y = lib.tensor(xs), lib.tensor(ys)
        for _ in range(200):
            loss = ((a * x + b - y) ** 2).mean()
            loss.backward()
            a.data.add_(-0.1 * a.grad.data)
            b.data.add_(-0.1 * b.grad.data)
            a.grad.data.zero_()
            b.grad.data.zero_()
        return a.item(), b.item(), loss.item()

    np.testing.assert_allclose(fit(dynograph), fit(torch), rtol=1e-4)


def test_a_chain_of_100000_ops_backpropagates():
    x = dynograph.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.tolist() == [1.0]


def test_each_node_runs_once_in_a_diamond():
    calls = []
    x = dynograph.tensor([2.0], requires_grad=True)
    y = x * 3
    y.grad_fn.register_prehook(lambda g: calls.append(1))
    (y * y + y).backward()
    assert calls == [1]
    assert x.grad.tolist() == [3 * (2 * 6 + 1)]


def test_saved_values_are_freed_unless_retain_graph():
    x = dynograph.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_backward_errors(torch):
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (dynograph.ones(2, requires_grad=True) * 2).backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        dynograph.ones(2).sum().backward()


def test_create_graph_gives_second_derivatives():
    x = dynograph.tensor([1.5], requires_grad=True)
    y = x ** 3
    g, = autograd.grad(y, x, create_graph=True)
    g2, = autograd.grad(g, x)
    assert g.item() == pytest.approx(3 * 1.5 ** 2) and g2.item() == pytest.approx(6 * 1.5)


def test_autograd_grad_allow_unused_and_materialize():
    x = dynograph.tensor([1.0], requires_grad=True)
    z = dynograph.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gx.tolist() == [2.0] and gz is None
    gx, gz = autograd.grad(y, [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0]
    assert x.grad is None


def test_gradients_accumulate_and_zero():
    x = dynograph.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    x.grad.zero_()
    assert x.grad.tolist() == [0.0, 0.0]


def test_tensor_hooks_and_retain_grad():
    x = dynograph.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    assert y.retains_grad
    handle = y.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    (y * y).sum().backward()
    assert y.grad.tolist() == [40.0, 80.0]          # retain_grad sees the hooked gradient
    assert x.grad.tolist() == [81.0, 161.0]
    handle.remove()
    x.grad = None
    (x * 2 * 2).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_non_leaf_grad_warns_and_is_none():
    x = dynograph.tensor([1.0], requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert y.grad is None


def test_backward_inputs_accumulates_only_there():
    a = dynograph.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    (b * b).sum().backward(inputs=[b])
    assert a.grad is None
    assert b.grad.tolist() == [6.0, 12.0]


def test_requires_grad_rules(torch):
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype can require gradients"):
        dynograph.ones(2, dtype=dynograph.int64).requires_grad = True
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        dynograph.tensor([1, 2], requires_grad=True)
    y = dynograph.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    assert not y.detach().requires_grad and y.detach().is_leaf


def test_detach_and_data_share_memory():
    x = dynograph.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    d[0] = 5.0
    assert x.tolist() == [5.0, 2.0]
    x.data.mul_(2)
    assert x.tolist() == [10.0, 4.0] and x.requires_grad


def test_version_counter_error_matches_torch(torch):
    def run(lib):
        a = lib.ones(3, requires_grad=True)
        b = a.exp()
        c = b * b
        b.mul_(2)
        with pytest.raises(RuntimeError) as info:
            c.sum().backward()
        return str(info.value)

    assert run(dynograph) == run(torch).replace("torch.", "dynograph.")


def test_inplace_on_leaf_requiring_grad(torch):
    x = dynograph.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        x.add_(1)
    with dynograph.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0, 2.0]


def test_grad_modes_and_decorators():
    x = dynograph.ones(1, requires_grad=True)
    with dynograph.no_grad():
        assert not (x * 2).requires_grad
        with dynograph.enable_grad():
            assert (x * 2).requires_grad
    with dynograph.set_grad_enabled(False):
        assert not dynograph.is_grad_enabled()
    assert dynograph.is_grad_enabled()

    @dynograph.no_grad()
    def f(t):
        return t * 2

    @dynograph.set_grad_enabled(False)
    def g(t):
        return t * 2

    assert dynograph.is_grad_enabled()
    assert not f(x).requires_grad and not g(x).requires_grad
    with dynograph.inference_mode():
        assert not (x * 2).requires_grad and dynograph.is_inference_mode_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with dynograph.no_grad():
        t = threading.Thread(target=lambda: seen.append(dynograph.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_anomaly_detection_names_node_and_forward_line():
    x = dynograph.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autograd.detect_anomaly():
            y = x.sqrt() * 0          # the sqrt's backward produces 0/0
            with pytest.raises(RuntimeError) as info:
                y.sum().backward()
    message = str(info.value)
    assert "Function 'SqrtBackward0' returned nan values in its 0th output." in message
    assert "test_autograd_engine.py" in message and "y = x.sqrt() * 0" in message
    assert not autograd.is_anomaly_enabled()


def test_profiler_lists_forward_and_backward_ops():
    x = dynograph.ones(4, requires_grad=True)
    with autograd.profiler.profile() as prof:
        with autograd.profiler.record_function("my_block"):
            (x * x).sum().backward()
    rows = {e.key: e for e in prof.key_averages()}
    assert rows["mul"].count >= 1 and rows["MulBackward0"].count == 1 and rows["my_block"].count == 1
    assert rows["my_block"].cpu_time_total >= rows["MulBackward0"].cpu_time_total
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Self CPU %" in table and "# of Calls" in table and "Self CPU time total" in table


def test_inplace_on_views_carries_gradients(torch):
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        y = x * 1
        y[0:2].mul_(2)
        z = y.view(1, 4)
        z[:, 0] = 5
        (y * y).sum().backward()
        return x.grad

    np.testing.assert_allclose(run(dynograph)._data, run(torch).numpy())


def test_overwriting_an_input_the_derivative_never_reads_is_fine(torch):
    def run(lib):
        x = lib.ones(3, requires_grad=True)
        y = x * 1
        z = y[0] * 3          # the derivative of `* 3` does not read y[0]
        y[1] = 5
        z.backward()
        return x.grad

    np.testing.assert_array_equal(run(dynograph)._data, run(torch).numpy())

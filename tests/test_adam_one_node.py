"""A compiled Adam step records each parameter's decay, bias corrections and step as one node
(compiler/ops/updates.py's ``adam_param``), which computes what the tensor methods it stands
for compute: the same values, bit for bit, eagerly, in the interpreter and in LLVM kernels."""
from collections import Counter

import numpy as np
import pytest

import dynograph as dg
from dynograph._dispatch import call
from dynograph.compiler.ops import updates
from dynograph.optim import adam

BETAS = (0.9, 0.999)


def _methods(p, m, v, step, lr, eps, weight_decay):
    """The step as optim/adam.py's tensor methods take it (the op's oracle)."""
    p = p.clone()
    if weight_decay:
        p.mul_(1 - lr * weight_decay)
    step = step.double()
    bias_correction1 = 1 - BETAS[0] ** step
    bias_correction2_sqrt = (1 - BETAS[1] ** step) ** 0.5
    denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
    return p.addcdiv_(m, denom, value=-(lr / bias_correction1))


@pytest.mark.parametrize("dtype", [dg.float32, dg.float64, dg.float16])
@pytest.mark.parametrize("weight_decay", [0, 0.01])
@pytest.mark.parametrize("lr_dtype", [dg.float64, dg.float32])
def test_the_op_computes_what_the_methods_compute(dtype, weight_decay, lr_dtype):
    g = np.random.default_rng(0)
    p, m = (dg.tensor(g.standard_normal((5, 7)), dtype=dtype) for _ in range(2))
    v = dg.tensor(g.random((5, 7)) + 0.01, dtype=dtype)
    for step in (1.0, 7.0, 1000.0):
        s, lr = dg.tensor(step), dg.tensor(3e-3, dtype=lr_dtype)
        got = call(updates.adam_param, p, m, v, s, lr, beta1=BETAS[0], beta2=BETAS[1], eps=1e-8,
                   weight_decay=weight_decay)
        want = _methods(p, m, v, s, lr, 1e-8, weight_decay)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_the_op_refuses_what_it_does_not_stand_for():
    p = dg.ones(3)
    with pytest.raises(RuntimeError, match="shape"):
        call(updates.adam_param, p, dg.ones(1), p, dg.tensor(1.0), dg.tensor(0.1),
             beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0)
    with pytest.raises(RuntimeError, match="0-dim"):
        call(updates.adam_param, p, p, p, dg.ones(3), dg.tensor(0.1),
             beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0)


def _model():
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(6, 8), dg.nn.Tanh(), dg.nn.Linear(8, 3))
    model.register_parameter("scale", dg.nn.Parameter(dg.tensor(1.5)))     # 0-dim: the methods
    return model


def _train(options, backend, one_node, monkeypatch, steps=4):
    monkeypatch.setattr(adam, "_one_node", adam._one_node if one_node else lambda p, lr: False)
    model = _model()
    opt = dg.optim.AdamW(model.parameters(), **options) if options.pop("adamw", False) \
        else dg.optim.Adam(model.parameters(), **options)
    x, y = dg.randn(16, 6), dg.randint(0, 3, (16,))

    @dg.compile(backend=backend)
    def step(x, y):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x) * model.scale, y)
        loss.backward()
        opt.step()
        return loss
    for _ in range(steps):
        step(x, y)
    nodes = Counter(n.op for n in step.entries[-1].captured.nodes)
    state = [opt.state[p][k].numpy().copy() for p in model.parameters() for k in sorted(opt.state[p])]
    versions = np.array([p._version for p in model.parameters()])
    return [p.detach().numpy().copy() for p in model.parameters()] + state + [versions], nodes


OPTIONS = [dict(lr=3e-3), dict(lr=3e-3, weight_decay=0.1, adamw=True),
           dict(lr=1e-2, amsgrad=True, weight_decay=0.05), dict(lr=1e-2, maximize=True),
           dict(lr=1e-2, amsgrad=True, adamw=True, weight_decay=0.2)]


@pytest.mark.parametrize("backend", ["llvm", "interpreter"])
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_a_compiled_step_with_one_node_per_parameter_matches_the_methods(options, backend,
                                                                         monkeypatch):
    one, nodes = _train(dict(options), backend, True, monkeypatch)
    methods, before = _train(dict(options), backend, False, monkeypatch)
    assert nodes["adam_param"] == 4         # the weights and biases; the 0-dim scale keeps the methods
    assert before["adam_param"] == 0 and sum(nodes.values()) < sum(before.values()) - 4 * 12
    for a, b in zip(one, methods):
        np.testing.assert_array_equal(a, b)


def test_a_compiled_step_matches_eager(monkeypatch):
    compiled, _ = _train(dict(lr=3e-3, weight_decay=0.1, adamw=True), "llvm", True, monkeypatch)
    model = _model()
    opt = dg.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    x, y = dg.randn(16, 6), dg.randint(0, 3, (16,))
    for _ in range(4):
        opt.zero_grad()
        dg.nn.functional.cross_entropy(model(x) * model.scale, y).backward()
        opt.step()
    eager = [p.detach().numpy() for p in model.parameters()]
    for a, b in zip(compiled, eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_the_kernel_computes_what_the_op_computes_for_random_hyper_parameters(seed):
    """Random betas, eps, decay, learning rate and step: the LLVM kernel of one adam_param node
    gives the op's eager values bit for bit (its constants and scalar work in float64)."""
    g = np.random.default_rng(seed)
    dtype = (dg.float32, dg.float64)[seed % 2]
    hyper = dict(beta1=float(g.uniform(0.0, 0.999)), beta2=float(g.uniform(0.5, 0.9999)),
                 eps=float(10 ** g.uniform(-10, -3)),
                 weight_decay=0.0 if seed % 3 == 0 else float(g.uniform(0.0, 0.5)))
    shape = tuple(int(n) for n in g.integers(1, 40, size=int(g.integers(1, 4))))
    p, m = (dg.tensor(g.standard_normal(shape), dtype=dtype) for _ in range(2))
    v = dg.tensor(g.random(shape) + 1e-3, dtype=dtype)
    step = dg.tensor(float(g.integers(1, 10_000)))
    lr = dg.tensor(float(10 ** g.uniform(-4, -1)), dtype=dg.float64)

    def update(p, m, v, step, lr):
        return call(updates.adam_param, p, m, v, step, lr, **hyper)
    want = update(p, m, v, step, lr)
    got = dg.compile(update, backend="llvm", fullgraph=True)(p, m, v, step, lr)
    np.testing.assert_array_equal(got.numpy(), want.numpy())

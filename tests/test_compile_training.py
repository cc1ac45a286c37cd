"""@dynograph.compile on whole training steps: compiled (interpreter backend) against eager.

Two copies of the same model and optimizer take the same steps, one eagerly and one through
the compiled step; losses, weights, gradients and optimizer state must agree within 1e-5."""
import copy
import warnings

import numpy as np
import pytest

import dynograph as dg
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph.compiler.compiled import CompileError
from tools.bench.workloads.training import classifier_step as make_step


def mlp(sizes=(20, 32, 32, 5), seed=0):
    dg.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def batches(n, batch=8, features=20, classes=5, seed=1):
    rng = np.random.default_rng(seed)
    return [(dg.tensor(rng.normal(size=(batch, features)), dtype=dg.float32),
             dg.tensor(rng.integers(0, classes, size=batch))) for _ in range(n)]


def assert_state_close(m1, o1, m2, o2, tol=1e-5):
    for (n, p), (_, q) in zip(m1.named_parameters(), m2.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=n)
        if p.grad is None:
            assert q.grad is None, n
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{n}.grad")
    for s1, s2 in zip(o1.state.values(), o2.state.values()):
        assert sorted(s1) == sorted(s2)
        for k in s1:
            np.testing.assert_allclose(np.asarray(s1[k].numpy()), np.asarray(s2[k].numpy()),
                                       rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("make_opt", [
    lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: dg.optim.Adam(ps, lr=1e-2),
    lambda ps: dg.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    lambda ps: dg.optim.RMSprop(ps, lr=1e-2, momentum=0.5, centered=True),
    lambda ps: dg.optim.Adagrad(ps, lr=0.1),
    lambda ps: dg.optim.NAdam(ps, lr=1e-2, weight_decay=1e-3),
    lambda ps: dg.optim.RAdam(ps, lr=1e-2),
    lambda ps: dg.optim.Adamax(ps, lr=1e-2),
    lambda ps: dg.optim.Adadelta(ps, lr=1.0),
], ids=["sgd-momentum", "sgd-nesterov", "adam", "adamw-amsgrad", "rmsprop", "adagrad", "nadam",
        "radam", "adamax", "adadelta"])
def test_mlp_training_matches_eager(make_opt):
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    eager_opt, comp_opt = make_opt(eager_model.parameters()), make_opt(comp_model.parameters())
    eager_step = make_step(eager_model, eager_opt)
    comp_step = dg.compile(make_step(comp_model, comp_opt))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)     # no graph break, no fallback
        for x, y in batches(20):
            a, b = eager_step(x, y), comp_step(x, y)
            np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5, atol=1e-6)
    # centered RMSprop divides by sqrt(E[g^2] - E[g]^2): the fused kernels' float32 rounding
    # grows over the 19 compiled steps
    tol = 2e-4 if isinstance(eager_opt, dg.optim.RMSprop) else 1e-5
    assert_state_close(eager_model, eager_opt, comp_model, comp_opt, tol)
    assert len(comp_step.entries) <= 2          # first step creates optimizer state
    assert comp_step.hits == 19                 # ... and traces the second step's graph ahead


@pytest.mark.parametrize("backend", ["llvm", "interpreter"])
@pytest.mark.parametrize("rnn", ["lstm", "gru"])
def test_single_layer_recurrent_training_matches_eager(backend, rnn):
    """A one-layer LSTM or GRU unbinds its initial state over a dim of size 1: a node whose
    op returns a one-element tuple.  Its replays ran that tuple as the value (the compiled
    step raised on its first replay); they take its element, as the trace recorded it."""
    def make():
        dg.manual_seed(0)
        cell = nn.LSTM if rnn == "lstm" else nn.GRU
        model = nn.ModuleDict({"emb": nn.Embedding(20, 8), "rnn": cell(8, 12, batch_first=True),
                               "fc": nn.Linear(12, 20)})
        return model, dg.optim.Adam(model.parameters(), lr=1e-2)

    def forward(model, x):
        h = model["rnn"](model["emb"](x))[0]
        return model["fc"](h).reshape(-1, 20)
    (em, eo), (cm, co) = make(), make()
    steps = []
    for model, opt in ((em, eo), (cm, co)):
        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(forward(model, x), y)
            loss.backward()
            opt.step()
            return loss
        steps.append(step)
    compiled = dg.compile(steps[1], backend=backend)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)     # no graph break, no fallback
        for _ in range(4):
            x = dg.from_numpy(rng.integers(0, 20, (3, 5)))
            y = dg.from_numpy(rng.integers(0, 20, (15,)))
            np.testing.assert_allclose(steps[0](x, y).item(), compiled(x, y).item(), rtol=1e-5)
    assert compiled.hits >= 2
    assert_state_close(em, eo, cm, co, 1e-5)


@pytest.mark.parametrize("size", [6, 1])
def test_batch_norm_statistics_update_in_their_reduction_kernel(capsys, monkeypatch, size):
    """A batch norm's running statistics and its affine parameters' updates have shape (C,)
    and join the kernel reducing over (N, H, W): they are placed at the channel axis where the
    reduction's result is (right-aligned broadcasting would put (C,) last, inside the reduced
    axes, and the group then ran op by op).  On a 1 x 1 image (the last stage of a ResNet on
    small inputs) the reduction's result has size-1 axes, which are no position to read it
    at.  The compiled step matches eager."""
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "1")

    def make():
        dg.manual_seed(0)
        # (no convolution bias: before a batch norm its gradient is rounding noise, which
        # Adam's normalization turns into steps of full size in either run)
        model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4))
        return model, dg.optim.Adam(model.parameters(), lr=1e-2)
    (em, eo), (cm, co) = make(), make()
    eager_step, compiled = make_step(em, eo), dg.compile(make_step(cm, co))
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = dg.from_numpy(rng.standard_normal((5, 3, size, size)).astype(np.float32))
        y = dg.from_numpy(rng.integers(0, 4, (5,)))
        np.testing.assert_allclose(eager_step(x, y).item(), compiled(x, y).item(), rtol=1e-5)
    assert compiled.hits >= 2
    assert_state_close(em, eo, cm, co, 1e-5)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(cm[1], name).numpy(), getattr(em[1], name).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert "runs on the interpreter" not in capsys.readouterr().err


def test_group_norm_statistics_expanded_to_the_channels_leave_the_reduction_kernel(capsys,
                                                                                     monkeypatch):
    """Group norm expands its (N, G) statistics to (N, G, C/G, 1), more elements than the
    reduction keeps and fewer than its domain (N, G, C/G * H * W): such a value has no place in
    the reduction's kernel, and the group ran op by op.  Fusion keeps it out now; the compiled
    step matches eager."""
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "1")

    def make():
        dg.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(),
                              nn.Flatten(), nn.Linear(8 * 6 * 6, 3))
        return model, dg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    (em, eo), (cm, co) = make(), make()
    eager_step, compiled = make_step(em, eo), dg.compile(make_step(cm, co))
    rng = np.random.default_rng(5)
    for _ in range(4):
        x = dg.from_numpy(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
        y = dg.from_numpy(rng.integers(0, 3, (4,)))
        np.testing.assert_allclose(eager_step(x, y).item(), compiled(x, y).item(), rtol=1e-5)
    assert compiled.hits >= 2
    assert_state_close(em, eo, cm, co, 1e-5)
    assert "runs on the interpreter" not in capsys.readouterr().err


def test_cross_entropy_with_class_weights_and_smoothing_is_kernels_only(capsys, monkeypatch):
    """Class weights, an ignored target and label smoothing make per-sample values of shape (N,)
    from the kernel's inputs alone in a kernel over (N, C); right-aligned broadcasting cannot
    place them (C is last), so each goes on the first axis of its size, and the group is one
    kernel instead of running op by op.  The compiled step matches eager."""
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "1")
    weight = dg.tensor([1.0, 2.0, 0.5, 1.0])
    y = dg.tensor([0, 1, 2, 3, -100, 1, 2])

    def loss_fn(out, target):
        return F.cross_entropy(out, target, weight=weight, label_smoothing=0.1)
    losses = []
    for compiled in (False, True):
        dg.manual_seed(0)
        model = nn.Linear(6, 4)
        step = make_step(model, dg.optim.SGD(model.parameters(), lr=0.1), loss_fn=loss_fn)
        step = dg.compile(step) if compiled else step
        x = dg.from_numpy(np.random.default_rng(4).standard_normal((7, 6)).astype(np.float32))
        losses.append([step(x, y).item() for _ in range(3)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-6)
    assert step.hits == 2
    assert "runs on the interpreter" not in capsys.readouterr().err


def test_scheduler_changes_lr_without_retracing():
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    o1 = dg.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    o2 = dg.optim.SGD(comp_model.parameters(), lr=0.1, momentum=0.9)
    s1 = dg.optim.lr_scheduler.StepLR(o1, step_size=3, gamma=0.5)
    s2 = dg.optim.lr_scheduler.StepLR(o2, step_size=3, gamma=0.5)
    e, c = make_step(eager_model, o1), dg.compile(make_step(comp_model, o2))
    for x, y in batches(10):
        e(x, y)
        c(x, y)
        s1.step()
        s2.step()
    assert_state_close(eager_model, o1, comp_model, o2)
    assert len(c.entries) == 1 and c.hits == 9


def test_a_learning_rate_reads_as_one_array_while_it_is_the_same():
    """The 0-d array a compiled step reads its learning rate from is kept while the rate is
    the same float (so kernels stay bound to it), made anew when it changes, and read-only."""
    from dynograph.compiler.binding import scalar_array
    group = {"lr": 0.25}
    get = lambda: group["lr"]       # noqa: E731  (a binding's getter)
    first = scalar_array(get)
    assert scalar_array(get) is first and first == 0.25 and not first.flags.writeable
    group["lr"] = 0.125
    second = scalar_array(get)
    assert second is not first and second == 0.125 and first == 0.25
    # on the LLVM backend, a rate changed and set back is read at every call
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    o1 = dg.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    o2 = dg.optim.SGD(comp_model.parameters(), lr=0.1, momentum=0.9)
    e, c = make_step(eager_model, o1), dg.compile(make_step(comp_model, o2), backend="llvm")
    for k, (x, y) in enumerate(batches(8)):
        np.testing.assert_allclose(e(x, y).item(), c(x, y).item(), rtol=1e-5)
        for o in (o1, o2):
            o.param_groups[0]["lr"] = float(str((0.1, 0.05)[k % 3 == 1]))   # new objects
    assert_state_close(eager_model, o1, comp_model, o2)
    assert len(c.entries) == 1


def test_batch_size_change_retraces_and_stays_exact():
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    o1 = dg.optim.SGD(eager_model.parameters(), lr=0.1)
    o2 = dg.optim.SGD(comp_model.parameters(), lr=0.1)
    e, c = make_step(eager_model, o1), dg.compile(make_step(comp_model, o2))
    for x, y in batches(3) + batches(2, batch=3, seed=5) + batches(2):
        np.testing.assert_allclose(e(x, y).item(), c(x, y).item(), rtol=1e-5)
    assert_state_close(eager_model, o1, comp_model, o2)
    # batch 8 (its graph replaces the .grad before use: it fits the calls after the first);
    # batch 3 is traced once and merged with it into a general graph
    assert len(c.entries) == 1
    report = c.explain()
    assert any("argument 0" in r for r in report.recompiles) and report.dynamic


def test_python_control_flow_on_shapes_is_specialized():
    def f(x):
        if x.shape[0] > 2:
            return (x * 2).sum(0)
        return x.exp()
    c = dg.compile(f)
    for shape in [(4, 3), (1, 3), (4, 3), (2, 3)]:
        x = dg.randn(*shape)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert len(c.entries) == 3 and c.hits == 1


def test_graph_break_warns_and_runs_eagerly():
    def f(x):
        y = x * 2
        if y.sum().item() > 0:
            return y + 1
        return y - 1
    c = dg.compile(f)
    x = dg.ones(3)
    with pytest.warns(UserWarning, match=r"runs eagerly: graph break at .*test_compile_training.py:\d+ "
                                         r"in f: Tensor.item\(\) reads a value into Python"):
        out = c(x)
    assert out.tolist() == [3.0, 3.0, 3.0]
    assert c(-x).tolist() == [-3.0, -3.0, -3.0]
    report = c.explain()
    assert len(report.breaks) == 1 and "Tensor.item()" in report.breaks[0]


def test_fullgraph_raises_with_the_users_line():
    @dg.compile(fullgraph=True)
    def f(x):
        return x.tolist()
    with pytest.raises(CompileError, match=r"graph break under fullgraph=True[\s\S]*Tensor.tolist\(\)"
                                           r"[\s\S]*test_compile_training.py:\d+ in f"):
        f(dg.ones(2))


def test_data_dependent_shapes_break():
    c = dg.compile(lambda x: x[x > 0])
    with pytest.warns(UserWarning, match="depends on the data"):
        assert c(dg.tensor([1.0, -1.0, 2.0])).tolist() == [1.0, 2.0]


def test_dropout_draws_from_the_generator_and_replays_with_manual_seed():
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5))
    model.requires_grad_(False)
    c = dg.compile(lambda x: model(x))
    x = dg.ones(4, 6)
    dg.manual_seed(3)
    first = [c(x).numpy().copy() for _ in range(3)]
    assert not np.array_equal(first[1], first[2])       # a new mask each call
    dg.manual_seed(3)
    again = [c(x).numpy().copy() for _ in range(3)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    dg.manual_seed(3)
    eager = [model(x).detach().numpy().copy() for _ in range(3)]
    for a, b in zip(first, eager):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_batchnorm_and_dropout_train_and_eval():
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2),
                        nn.Linear(8, 3))
    twin = copy.deepcopy(net)
    o1 = dg.optim.SGD(net.parameters(), lr=0.1)
    o2 = dg.optim.SGD(twin.parameters(), lr=0.1)
    e, c = make_step(net, o1), dg.compile(make_step(twin, o2))
    data = batches(6, batch=10, features=6, classes=3)
    for mode in ("train", "eval", "train"):
        net.train(mode == "train")
        twin.train(mode == "train")
        for x, y in data:
            dg.manual_seed(11)
            a = e(x, y)
            dg.manual_seed(11)
            b = c(x, y)
            np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    assert_state_close(net, o1, twin, o2)
    for name, buf in net.named_buffers():
        np.testing.assert_allclose(buf.numpy(), dict(twin.named_buffers())[name].numpy(),
                                   rtol=1e-5, err_msg=name)
    assert len(c.entries) == 2          # train, eval: the first step builds no state (no momentum)


def test_manual_data_updates_are_written_back():
    w = nn.Parameter(dg.ones(3))

    @dg.compile
    def step(x):
        loss = (w * x).sum()
        loss.backward()
        w.data.add_(w.grad, alpha=-0.5)
        w.grad = None
        return loss
    for _ in range(3):
        step(dg.ones(3))
    np.testing.assert_allclose(w.detach().numpy(), [-0.5, -0.5, -0.5])
    assert w.grad is None


def test_compile_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_COMPILE", "0")
    c = dg.compile(lambda x: x + 1)
    c(dg.ones(2))
    assert c.entries == []


def test_compiled_module_shares_parameters():
    model = mlp()
    cm = dg.compile(model)
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    x = batches(1)[0][0]
    with dg.no_grad():
        np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=1e-6)
        with dg.no_grad():
            model[0].weight.mul_(2)
        np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=1e-6)


def test_decorator_forms_and_trace():
    @dg.compile()
    def f(x):
        return x.relu()

    @dg.compile(backend="interpreter")
    def g(x):
        return x * 3
    assert f(dg.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    assert g(dg.ones(1)).tolist() == [3.0]
    graph = dg.trace(lambda a, b: (a @ b).sum(), dg.ones(2, 3), dg.ones(3, 4))
    assert [n.op for n in graph.nodes] == ["mm", "sum"]
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        dg.compile(lambda x: x, backend="nope")


def test_verify_runs_eager_beside_compiled_and_names_a_disagreement(monkeypatch):
    model = mlp()
    opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = dg.compile(make_step(model, opt), verify=True, backend="interpreter")
    for x, y in batches(4):
        step(x, y)                          # agrees: no error
    from dynograph.compiler import interpreter
    real = interpreter.evaluate

    def wrong(op, args, attrs):             # a deliberately broken backend: relu is negated
        out = real(op, args, attrs)
        return -out if op.name == "relu" else out
    monkeypatch.setattr(interpreter, "evaluate", wrong)
    x, y = batches(1)[0]
    with pytest.raises(AssertionError, match="compiled and eager execution disagree on output 0"):
        step(x, y)


def test_compiled_module_trains_with_backward_outside():
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    compiled = dg.compile(comp_model)
    o1 = dg.optim.Adam(eager_model.parameters(), lr=1e-2)
    o2 = dg.optim.Adam(comp_model.parameters(), lr=1e-2)
    for x, y in batches(6):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        for model, opt, inp in ((eager_model, o1, x1), (compiled, o2, x2)):
            opt.zero_grad()
            out = model(inp)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    assert_state_close(eager_model, o1, comp_model, o2)
    entry = compiled._compiled_call.entries[-1]
    assert entry.backward_graph is not None and compiled._compiled_call.hits >= 4


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_dynamic_batch_dimension(dynamic):
    eager_model = mlp()
    comp_model = copy.deepcopy(eager_model)
    o1 = dg.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    o2 = dg.optim.SGD(comp_model.parameters(), lr=0.1, momentum=0.9)
    e = make_step(eager_model, o1)
    c = dg.compile(make_step(comp_model, o2), dynamic=dynamic)
    sizes = [8, 8, 8, 5, 8, 3, 7, 5, 2]
    for k, b in enumerate(sizes):
        x, y = batches(1, batch=b, seed=k)[0]
        np.testing.assert_allclose(e(x, y).item(), c(x, y).item(), rtol=1e-5)
    assert_state_close(eager_model, o1, comp_model, o2)
    if dynamic is False:
        assert len(c.entries) == 5          # one per batch size
    else:
        assert len(c.entries) == 1          # one graph for every size
        assert any("s0" in str(g) for g in c.graphs())
        assert any("symbolic" in text for kind, text in c.events if kind == "dynamic")


def test_dynamic_graph_text_round_trips():
    model = mlp()
    c = dg.compile(lambda x: model(x).sum(), dynamic=True)
    with dg.no_grad():
        for b in (4, 6, 9):
            c(dg.randn(b, 20))
    from dynograph.compiler.symbolic import instantiate
    from dynograph.compiler.text import parse_graph, print_graph
    from dynograph.compiler.verify import verify
    (graph,) = c.graphs()
    text = print_graph(graph)
    assert "f32[s0,20]" in text
    assert print_graph(parse_graph(text)) == text
    verify(instantiate(graph, 13))


def test_logs_print_what_explain_reports(monkeypatch, capsys):
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "1")

    def f(x):
        return x * 2 if x.shape[0] < 3 else x.sum().item()
    c = dg.compile(f, dynamic=False)
    c(dg.ones(2))
    c(dg.ones(1))
    with pytest.warns(UserWarning):
        c(dg.ones(4))
    err = capsys.readouterr().err
    report = c.explain()
    assert "[dynograph guards]" in err and "argument 0: tensor float32[2]" in err
    assert "[dynograph recompiles]" in err and "argument 0 changed" in err
    assert "[dynograph breaks]" in err and "Tensor.item()" in err
    assert len(report.recompiles) == 2 and len(report.breaks) == 1
    assert report.hits == 0 and report.misses == 3


def test_compiled_bound_methods_and_self_state():
    class Trainer:
        def __init__(self):
            self.model = mlp()
            self.opt = dg.optim.SGD(self.model.parameters(), lr=0.1)

        @dg.compile
        def step(self, x, y):
            self.opt.zero_grad()
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()
            return loss

    a, b = Trainer(), Trainer()
    b.model.load_state_dict(a.model.state_dict())
    eager = make_step(b.model, b.opt)
    for x, y in batches(4):
        np.testing.assert_allclose(a.step(x, y).item(), eager(x, y).item(), rtol=1e-5)
    assert_state_close(a.model, a.opt, b.model, b.opt)
    assert a.step.hits >= 2


@pytest.mark.parametrize("make_opt", [
    lambda ps: dg.optim.SGD(ps, lr=0.001, momentum=0.9),
    lambda ps: dg.optim.Adam(ps, lr=1e-3),
], ids=["sgd-momentum", "adam"])
def test_cifar_tutorial_network_matches_eager(make_opt):
    from tools.bench.workloads.training import cifar_net
    dg.manual_seed(0)
    eager_model = cifar_net(dg)
    comp_model = copy.deepcopy(eager_model)
    o1, o2 = make_opt(eager_model.parameters()), make_opt(comp_model.parameters())
    e = make_step(eager_model, o1)
    c = dg.compile(make_step(comp_model, o2))
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = dg.tensor(rng.standard_normal((4, 3, 32, 32)), dtype=dg.float32)
        y = dg.tensor(rng.integers(0, 10, size=4))
        np.testing.assert_allclose(e(x, y).item(), c(x, y).item(), rtol=1e-5, atol=1e-6)
    # the compiled convolutions sum in another order; Adam's step m / sqrt(v) of a gradient
    # element near 0 is +-lr whatever its size, so such an element may drift by ~lr * 1e-2
    tol = 1e-4 if isinstance(o1, dg.optim.Adam) else 1e-5
    assert_state_close(eager_model, o1, comp_model, o2, tol=tol)
    assert c.hits >= 18


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_argument_gradients_are_set_and_accumulated_on_every_call(backend):
    lin = dg.nn.Linear(3, 2)

    def step(x):
        (lin(x) ** 2).sum().backward()

    compiled = dg.compile(step, backend=backend)
    for i in range(4):                          # replays, not only the traced calls
        x = dg.randn(5, 3, requires_grad=True)
        compiled(x)
        xe = x.detach().requires_grad_()
        step(xe)
        assert x.grad is not None, i
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
    x = dg.randn(5, 3, requires_grad=True)
    x.grad = dg.ones(5, 3)                      # a .grad already there: accumulated into
    xe = x.detach().requires_grad_()
    xe.grad = dg.ones(5, 3)
    for _ in range(3):
        compiled(x)
        step(xe)
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_buffers_of_a_second_module_called_on_its_own(backend):
    # the second module announced gets the prefix m1.: its buffers are still found from it
    def run(compiled):
        dg.manual_seed(0)
        lin, bn = dg.nn.Linear(8, 16), dg.nn.BatchNorm1d(16)
        opt = dg.optim.SGD(list(lin.parameters()) + list(bn.parameters()), lr=0.01)

        def step(x):
            opt.zero_grad()
            loss = bn(lin(x)).square().mean()
            loss.backward()
            opt.step()
            return loss
        if compiled:
            step = dg.compile(step, backend=backend)
        x = dg.randn(32, 8)
        losses = [step(x).item() for _ in range(4)]
        return losses, bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(), \
            int(bn.num_batches_tracked)
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    np.testing.assert_allclose(compiled[1], eager[1], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(compiled[2], eager[2], rtol=1e-5)
    assert compiled[3] == eager[3] == 4


def test_outputs_whose_backward_reads_an_overwritten_value_run_eagerly():
    # tracing the outputs' backward raised (Linear saved x, then x was written in place);
    # eagerly the function works and only a backward() through its output raises
    lin = nn.Linear(4, 1)

    def f(x):
        out = lin(x)
        x.add_(1)
        return out
    c = dg.compile(f, backend="interpreter")
    x, xe = dg.ones(2, 4), dg.ones(2, 4)
    with pytest.warns(UserWarning, match="backward of the outputs cannot be traced"):
        out = c(x)
    np.testing.assert_allclose(out.detach().numpy(), f(xe).detach().numpy())
    np.testing.assert_array_equal(x.numpy(), xe.numpy())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_an_output_built_on_a_graph_spent_by_backward_inside_is_a_plain_value(backend):
    # tracing the outputs' backward walked into the nodes the backward() inside had freed
    def f(x):
        y = x * 2
        y.sum().backward()
        return y * 3
    c = dg.compile(f, backend=backend)
    for _ in range(3):
        x, xe = dg.randn(3, 4, requires_grad=True), None
        xe = x.detach().requires_grad_()
        np.testing.assert_allclose(c(x).detach().numpy(), f(xe).detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy())

"""A compiled training step replays from its second call: the first call also traces the
state it leaves (look-ahead) and undoes that second run (compiler/undo.py).

Each test runs the same steps eagerly and compiled from the same start, and compares the
losses and every piece of state the step touches: parameters, .grad, optimizer state, module
buffers, version counters, the random generator's state and in-place writes to arguments."""
import warnings

import numpy as np
import pytest

import dynograph as dg
import dynograph.nn as nn
import dynograph.nn.functional as F


def batches(n, batch=8, features=12, classes=4, seed=1):
    rng = np.random.default_rng(seed)
    return [(dg.tensor(rng.normal(size=(batch, features)), dtype=dg.float32),
             dg.tensor(rng.integers(0, classes, size=batch))) for _ in range(n)]


def net(dropout=0.0, seed=0):
    dg.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.BatchNorm1d(16), nn.Dropout(dropout),
                         nn.Linear(16, 4))


def state_of(model, opt):
    """Everything a step changes, as numpy copies (None for a missing .grad)."""
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().numpy().copy()
        out[name + ".grad"] = None if p.grad is None else p.grad.numpy().copy()
        out[name + "._version"] = p._version
    for name, b in model.named_buffers():
        out[name] = b.numpy().copy()
    for i, st in enumerate(opt.state.values()):
        for k, v in st.items():
            out[f"state{i}.{k}"] = v.numpy().copy() if hasattr(v, "numpy") else v
    out["rng"] = dg.get_rng_state().numpy().copy()
    return out


def assert_same(a, b, tol=0.0):
    """Equal state; with ``tol``, a replay's (values within ``tol``; a replay writes each
    tensor back once, where eager bumps the version counter per in-place op)."""
    assert sorted(a) == sorted(b)
    for k in a:
        if tol and k.endswith("._version"):
            continue
        if a[k] is None or b[k] is None:
            assert a[k] is None and b[k] is None, k
        elif tol and isinstance(a[k], np.ndarray) and a[k].dtype.kind == "f":
            np.testing.assert_allclose(a[k], b[k], rtol=tol, atol=tol, err_msg=k)
        else:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def train(step_of, make_opt, compiled, steps=5, dropout=0.0, backend="interpreter"):
    """Losses and the state after each call of ``steps`` calls, and the compiled function."""
    model = net(dropout)
    opt = make_opt(model.parameters())
    step = step_of(model, opt)
    if compiled:
        step = dg.compile(step, backend=backend)
    dg.manual_seed(7)
    losses, states = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)         # no graph break, no fallback
        for x, y in batches(steps):
            losses.append(step(x, y).item())
            states.append(state_of(model, opt))
    return losses, states, step


def standard_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def model_zero_grad_first(model, opt):
    def step(x, y):
        model.zero_grad()                   # before the module is called
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def zero_grad_after_forward(model, opt):
    def step(x, y):                         # examples/char_transformer.py's order
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def keeps_zeroed_grads(model, opt):
    def step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


OPTIMIZERS = {
    "sgd": lambda ps: dg.optim.SGD(ps, lr=0.05),
    "sgd-momentum": lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9),
    "sgd-nesterov-decay": lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                  weight_decay=1e-2),
    "sgd-dampening": lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1),
    "adam": lambda ps: dg.optim.Adam(ps, lr=1e-2),
    "adamw-amsgrad": lambda ps: dg.optim.AdamW(ps, lr=1e-2, amsgrad=True),
    "rmsprop-centered-momentum": lambda ps: dg.optim.RMSprop(ps, lr=1e-2, momentum=0.5,
                                                             centered=True),
    "nadam": lambda ps: dg.optim.NAdam(ps, lr=1e-2),
    "adagrad": lambda ps: dg.optim.Adagrad(ps, lr=1e-2),
}


def traced_once(step_of, opt):
    """Whether the first call's graph fits the state it leaves: its .grad were replaced before
    use (not zeroed in place), and the optimizer's first step runs the update of every later
    one on state it creates from constants (SGD's momentum buffer starts as the gradient,
    which the later update computes from a buffer of -0.0 only without dampening)."""
    return step_of is not keeps_zeroed_grads and opt != "sgd-dampening"


@pytest.mark.parametrize("step_of", [standard_step, model_zero_grad_first,
                                     zero_grad_after_forward, keeps_zeroed_grads])
@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_replays_from_the_second_call_and_matches_eager(step_of, opt):
    eager_losses, eager_states, _ = train(step_of, OPTIMIZERS[opt], compiled=False)
    losses, states, step = train(step_of, OPTIMIZERS[opt], compiled=True)
    # the first call ran eagerly (traced): identical; and the look-ahead left no trace of itself
    assert losses[0] == eager_losses[0]
    assert_same(states[0], eager_states[0])
    for a, b in zip(states[1:], eager_states[1:]):
        assert_same(a, b, tol=1e-5)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    explained = step.explain()
    if traced_once(step_of, opt):
        # one trace: the state the first call created is the graph's input from the start
        assert step.misses == 1 and step.hits == 4 and len(step.entries) == 1, explained
        assert not explained.look_ahead
        assert "its .grad is replaced before use" in str(explained)
    else:
        assert step.misses == 1 and step.hits == 4 and len(step.entries) == 2, explained
        assert "traced ahead" in explained.look_ahead[0]


def reads_grad_first(model, opt):
    def step(x, y):
        w = model[0].weight
        carried = w.grad.sum() if w.grad is not None else 0.0   # read before zero_grad
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y) + 1e-3 * carried
        loss.backward()
        opt.step()
        return loss
    return step


def test_a_grad_read_before_it_is_replaced_keeps_its_guard():
    # the graph depends on the .grad the call found: the first graph must not serve the
    # second call (its loss would leave out the carried term)
    make = OPTIMIZERS["adam"]
    eager_losses, eager_states, _ = train(reads_grad_first, make, compiled=False)
    losses, states, step = train(reads_grad_first, make, compiled=True)
    for a, b in zip(states, eager_states):
        assert_same(a, b, tol=1e-5)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    assert len(step.entries) == 2 and "traced ahead" in step.explain().look_ahead[0]


def test_a_grad_put_there_between_calls_is_replaced_as_eagerly():
    # a parameter that gets no gradient: zero_grad() leaves it None in every call, so the
    # replay clears a .grad the caller set since (and the optimizer makes no state for it)
    runs = []
    for compiled in (False, True):
        model = net()
        spare = nn.Parameter(dg.ones(3))
        opt = dg.optim.Adam([*model.parameters(), spare], lr=1e-2)
        step = standard_step(model, opt)
        f = dg.compile(step, backend="interpreter") if compiled else step
        (x, y), (x2, y2), (x3, y3) = batches(3)
        f(x, y)
        spare.grad = dg.full((3,), 5.0)
        model[0].bias.grad = dg.full((16,), 7.0)
        f(x2, y2)
        f(x3, y3)
        runs.append((state_of(model, opt), spare.grad, spare in opt.state))
        if compiled:
            assert len(f.entries) == 1 and f.hits == 2, f.explain()
    (eager, eager_spare, eager_has), (got, got_spare, got_has) = runs
    assert_same(got, eager, tol=1e-5)
    assert eager_spare is None and got_spare is None
    assert not eager_has and not got_has


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_a_tensor_from_outside_gets_its_grad_on_every_call(backend):
    # no module or optimizer names w: backward() into it is state all the same (replays
    # once left w.grad as the first call set it)
    grads = []
    for compiled in (False, True):
        w = dg.ones(3, requires_grad=True)

        def f(x):
            (w * x).sum().backward()
        g = dg.compile(f, backend=backend) if compiled else f
        for i in range(3):
            g(dg.full((3,), float(i + 1)))
            grads.append(w.grad.numpy().copy())
    eager, got = grads[:3], grads[3:]
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(a, b)
    assert eager[-1].tolist() == [6.0] * 3


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_from_the_later_update_is_the_gradient_bit_for_bit(nesterov):
    # the first call runs the update of later calls on a buffer of -0.0: the buffer and the
    # parameter come out as eager's, signs of zeros, NaN and infinities included
    x = dg.tensor([-0.0, 0.0, float("nan"), float("inf"), -1.5, 3e-39])
    out = []
    for compiled in (False, True):
        w = nn.Parameter(dg.tensor([1.0, -0.0, 2.0, 0.0, -0.0, 0.5]))
        opt = dg.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=nesterov)

        def step(x):
            opt.zero_grad()
            (w * x).sum().backward()
            opt.step()
        f = dg.compile(step, backend="interpreter") if compiled else step
        f(x)
        out.append([w.detach().numpy().copy(), opt.state[w]["momentum_buffer"].numpy().copy()])
        if compiled:
            assert len(f.entries) == 1 and not f.explain().look_ahead
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


def test_gradient_accumulation_keeps_the_grads_it_adds_to():
    # backward() adds to the .grad of the call before (no zero_grad between): those calls
    # depend on it, and every other call replaces it; all as eagerly
    runs = []
    for compiled in (False, True):
        model = net()
        opt = dg.optim.Adam(model.parameters(), lr=1e-2)

        def step(x, y, update):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if update:
                opt.step()
                opt.zero_grad()
            return loss
        f = dg.compile(step, backend="interpreter") if compiled else step
        losses = [f(x, y, i % 2 == 1).item() for i, (x, y) in enumerate(batches(8))]
        runs.append((losses, state_of(model, opt)))
    (eager_losses, eager), (losses, got) = runs
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert_same(got, eager, tol=1e-5)


class _UsersAdam(dg.optim.Adam):
    """A user's optimizer: its first step may differ from the later ones."""


def test_a_users_optimizer_gets_no_state_ahead_of_its_step():
    make = _UsersAdam
    eager_losses, eager_states, _ = train(standard_step, lambda ps: make(ps, lr=1e-2), compiled=False)
    losses, states, step = train(standard_step, lambda ps: make(ps, lr=1e-2), compiled=True)
    for a, b in zip(states, eager_states):
        assert_same(a, b, tol=1e-5)
    assert len(step.entries) == 2 and "traced ahead" in step.explain().look_ahead[0]


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_the_graph_a_trace_ahead_replaced_is_optimized_when_a_call_needs_it(backend):
    # the first graph (no .grad, no optimizer state yet) skips the passes until a call's
    # guards select it: here cleared .grad and optimizer state bring that state back
    runs = []
    for compiled in (False, True):
        model = net()
        opt = OPTIMIZERS["sgd-dampening"](model.parameters())
        step = standard_step(model, opt)
        f = dg.compile(step, backend=backend) if compiled else step
        (x, y), (x2, y2) = batches(2)
        first = f(x, y).item()
        if compiled:
            assert len(f.entries) == 2
            assert f.entries[0]._parts is None and f.entries[1]._parts is not None
        model.zero_grad()
        opt.state.clear()
        again = f(x2, y2).item()
        if compiled:
            assert f.hits == 1 and len(f.entries) == 2, f.explain()
            assert f.entries[0]._parts is not None
        runs.append((first, again, state_of(model, opt)))
    (a1, a2, eager), (b1, b2, got) = runs
    assert a1 == b1
    np.testing.assert_allclose(b2, a2, rtol=1e-5)
    assert_same(got, eager, tol=1e-5)


def test_dropout_draws_the_same_numbers_as_eager():
    make = OPTIMIZERS["sgd-momentum"]
    eager_losses, eager_states, _ = train(standard_step, make, compiled=False, dropout=0.5)
    losses, states, step = train(standard_step, make, compiled=True, dropout=0.5)
    assert_same(states[0], eager_states[0])         # the generator was put back
    for a, b in zip(states[1:], eager_states[1:]):
        assert_same(a, b, tol=1e-5)
    assert step.hits == 4


def test_llvm_backend_replays_from_the_second_call():
    make = OPTIMIZERS["adam"]
    eager_losses, eager_states, _ = train(standard_step, make, compiled=False, steps=4)
    losses, states, step = train(standard_step, make, compiled=True, steps=4, backend="llvm")
    assert_same(states[0], eager_states[0])
    for a, b in zip(states[1:], eager_states[1:]):
        assert_same(a, b, tol=1e-5)
    assert step.misses == 1 and step.hits == 3


def test_writes_into_arguments_and_grads_of_arguments_happen_once():
    w = dg.nn.Parameter(dg.ones(3))
    opt = dg.optim.SGD([w], lr=0.1, momentum=0.5)

    def step(x, counter):
        opt.zero_grad()
        counter.add_(1)                     # an argument written in place
        (w * x).sum().backward()            # x requires grad: x.grad accumulates
        opt.step()

    def run(fn):
        with dg.no_grad():
            w.copy_(dg.ones(3))
        opt.state.clear()
        w.grad = None
        x, counter = dg.ones(3, requires_grad=True), dg.zeros(())
        out = []
        for _ in range(3):
            fn(x, counter)
            out.append((counter.item(), x.grad.numpy().copy(), w.detach().numpy().copy()))
        return out
    eager = run(step)
    compiled = dg.compile(step, backend="interpreter")
    got = run(compiled)
    for (c1, g1, w1), (c2, g2, w2) in zip(eager, got):
        assert c1 == c2
        np.testing.assert_allclose(g1, g2, rtol=1e-6)
        np.testing.assert_allclose(w1, w2, rtol=1e-6)
    assert compiled.hits == 2 and compiled.misses == 1


def test_a_function_that_changes_no_guarded_state_is_not_traced_twice():
    model = net()
    model.eval()
    f = dg.compile(lambda x: model(x).sum(), backend="interpreter")
    x, _ = batches(1)[0]
    f(x)
    f(x)
    assert len(f.entries) == 1 and f.hits == 1 and not f.explain().look_ahead


def _one_param_step(w, opt, second_state):
    def step(x):
        second = w.grad is not None         # True from the second call on
        opt.zero_grad()
        loss = (w * x).sum()
        loss.backward()
        second_state(second, loss)
        opt.step()
        return loss
    return step


def test_a_graph_break_in_the_second_state_is_met_by_the_second_call():
    w = dg.nn.Parameter(dg.ones(3))
    opt = dg.optim.SGD([w], lr=0.1, momentum=0.9)

    def second_state(second, loss):
        if second:
            loss.item()                     # a graph break, in the second state only
    step = dg.compile(_one_param_step(w, opt, second_state), backend="interpreter")
    step(dg.ones(3))
    np.testing.assert_allclose(w.detach().numpy(), 0.9)        # one step, not two
    np.testing.assert_allclose(opt.state[w]["momentum_buffer"].numpy(), 1.0)
    assert len(step.entries) == 1 and step.eager_reason is None
    assert "graph break" in step.explain().look_ahead[0]
    with pytest.warns(UserWarning, match="graph break"):       # met for real, once
        step(dg.ones(3))
    np.testing.assert_allclose(w.detach().numpy(), 0.9 - 0.1 * 1.9, rtol=1e-6)


def test_an_exception_in_the_second_state_is_undone_and_raised_by_the_second_call():
    w = dg.nn.Parameter(dg.ones(3))
    opt = dg.optim.Adam([w], lr=0.1)

    def second_state(second, loss):
        if second:
            raise ValueError("second call")
    step = dg.compile(_one_param_step(w, opt, second_state), backend="interpreter")
    step(dg.ones(3))
    after_one = w.detach().numpy().copy()
    assert opt.state[w]["step"].item() == 1
    assert w.grad is not None and len(step.entries) == 1
    assert "ValueError" in step.explain().look_ahead[0]
    with pytest.raises(ValueError, match="second call"):
        step(dg.ones(3))
    # as eagerly: the second call raised before its optimizer step
    assert opt.state[w]["step"].item() == 1
    np.testing.assert_array_equal(w.detach().numpy(), after_one)



def test_a_replay_checks_the_entry_that_ran_last_first():
    """A step's first entry (traced before any .grad existed) would fail its guards on every
    later call: the entry that replayed last is checked first, and where its guards fail the
    others still are, in their order (a replay, not a retrace)."""
    _, _, step = train(standard_step, OPTIMIZERS["sgd-dampening"], compiled=True)
    assert step.last_hit is step.entries[1]
    f = dg.compile(lambda x: x * 2)
    a, b = dg.ones(3), dg.ones(3, dtype=dg.float64)
    assert f(a).tolist() == [2.0] * 3 and f(b).tolist() == [2.0] * 3     # two entries
    first, second = f.entries
    checked = []
    check = first.guards.check
    first.guards.check = lambda *args: checked.append(1) or check(*args)
    assert f(b).dtype == dg.float64 and f.last_hit is second and checked == []
    assert f(a).dtype == dg.float32 and f.last_hit is first and checked == [1]
    assert f(a).dtype == dg.float32 and checked == [1, 1]
    assert f.misses == 2 and f.hits == 3 and len(f.entries) == 2

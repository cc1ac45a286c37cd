"""Recurrent layers (RNN, LSTM, GRU, their cells) and nn.utils.rnn against PyTorch: same weights,
outputs, final states and the gradients of inputs, initial states and every parameter."""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph.nn.utils import rnn as rnn_utils
from conftest import assert_same, assert_same_error, eval_expr, from_torch

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}
MODES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


def _pair(torch, name, args, kwargs, dtype="float64"):
    """The torch module and ours with torch's weights copied across."""
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))
    ours = getattr(nn, name)(*args, **kwargs).to(getattr(dynograph, dtype))
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    for (_, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert tuple(p.shape) == tuple(tp.shape)
        with dynograph.no_grad():
            p.copy_(from_torch(tp))
    return ours, theirs


def _flat(x):
    """The tensors of a nested output, in order."""
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _flat(item)]
    return [x]


def _call_both(ours, theirs, d_in, t_in, hs, two_states):
    """Our module and torch's on the input and the initial state ``hs``, (ours, torch's) pairs
    (empty: no state); a state of ``two_states`` (LSTM) is the tuple of both tensors."""
    if not hs:
        return ours(d_in), theirs(t_in)
    if two_states:
        return ours(d_in, tuple(d for d, _ in hs)), theirs(t_in, tuple(t for _, t in hs))
    return ours(d_in, hs[0][0]), theirs(t_in, hs[0][1])


def _check_backward(torch, ours, theirs, got, expect, leaves, tol, seed=1):
    """Backward through a random weighting of every output; all gradients agree (of every
    parameter and of the (ours, torch's) input pairs ``leaves``)."""
    g = torch.Generator().manual_seed(seed)
    t_out, d_out = _flat(expect), _flat(got)
    weights = [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in t_out]
    sum((t * w).sum() for t, w in zip(t_out, weights)).backward()
    sum((d * from_torch(w)).sum() for d, w in zip(d_out, weights)).backward()
    for d, t in leaves:
        assert_same(d.grad, t.grad, **tol)
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert p.grad is not None, name
        assert_same(p.grad, tp.grad, **tol)


def _leaf(torch, shape, g, dtype, noncontig=False):
    t = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype))
    if noncontig:
        # a transposed copy: same values, non-contiguous strides on both sides
        t = t.transpose(0, -1).contiguous().transpose(0, -1)
    t.requires_grad_()
    d = from_torch(t.detach(), requires_grad=True)
    if noncontig:
        d = from_torch(t.detach().transpose(0, -1)).transpose(0, -1).detach().requires_grad_()
        assert not d.is_contiguous()
    return d, t


def _hidden(torch, name, kwargs, batch, g, dtype, unbatched=False):
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    hidden = kwargs.get("proj_size") or 5
    lead = (layers,) if unbatched else (layers, batch)
    pairs = [_leaf(torch, lead + (hidden,), g, dtype)]
    if name == "LSTM":
        pairs.append(_leaf(torch, lead + (5,), g, dtype))
    return pairs


CONFIGS = [
    {},
    {"num_layers": 2},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"bias": False, "batch_first": True},
]


# every configuration in float64, two of them in float32 too
CONFIG_DTYPES = [(c, "float64") for c in CONFIGS] + [(CONFIGS[0], "float32"),
                                                     (CONFIGS[3], "float32")]


@pytest.mark.parametrize("config,dtype", CONFIG_DTYPES)
@pytest.mark.parametrize("name,extra", MODES)
def test_layers_match_torch(torch, name, extra, config, dtype):
    kwargs = dict(extra, **config)
    ours, theirs = _pair(torch, name, (3, 5), kwargs, dtype)
    g = torch.Generator().manual_seed(0)
    steps, batch = 4, 3
    shape = (batch, steps, 3) if kwargs.get("batch_first") else (steps, batch, 3)
    dx, tx = _leaf(torch, shape, g, dtype, noncontig=bool(config.get("bidirectional")))
    with_hx = len(config) % 2 == 1    # half of the configurations pass an initial state
    hs = _hidden(torch, name, kwargs, batch, g, dtype) if with_hx else []
    got, expect = _call_both(ours, theirs, dx, tx, hs, name == "LSTM")
    tol = TOL[dtype]
    assert_same(got[0], expect[0], **tol)
    assert_same(_flat(got[1]), _flat(expect[1]), **tol)
    _check_backward(torch, ours, theirs, got, expect, [(dx, tx)] + hs, tol)


@pytest.mark.parametrize("config", [{}, {"num_layers": 2, "bidirectional": True},
                                    {"batch_first": True, "bias": False}])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lstm_proj_size(torch, config, dtype):
    kwargs = dict(config, proj_size=2)
    ours, theirs = _pair(torch, "LSTM", (3, 5), kwargs, dtype)
    assert [tuple(p.shape) for p in ours.all_weights[0]] == \
        [tuple(p.shape) for p in theirs.all_weights[0]]
    g = torch.Generator().manual_seed(3)
    shape = (2, 4, 3) if config.get("batch_first") else (4, 2, 3)
    dx, tx = _leaf(torch, shape, g, dtype)
    hs = _hidden(torch, "LSTM", kwargs, 2, g, dtype)
    got, expect = _call_both(ours, theirs, dx, tx, hs, True)
    tol = TOL[dtype]
    assert_same(_flat(got), _flat(expect), **tol)
    _check_backward(torch, ours, theirs, got, expect, [(dx, tx)] + hs, tol)


@pytest.mark.parametrize("name,extra", MODES)
@pytest.mark.parametrize("with_hx", [False, True])
def test_unbatched_input(torch, name, extra, with_hx):
    kwargs = dict(extra, num_layers=2, bidirectional=True)
    ours, theirs = _pair(torch, name, (3, 5), kwargs)
    g = torch.Generator().manual_seed(4)
    dx, tx = _leaf(torch, (4, 3), g, "float64")
    hs = _hidden(torch, name, kwargs, None, g, "float64", unbatched=True) if with_hx else []
    got, expect = _call_both(ours, theirs, dx, tx, hs, name == "LSTM")
    assert_same(_flat(got), _flat(expect), **TOL["float64"])
    _check_backward(torch, ours, theirs, got, expect, [(dx, tx)] + hs, TOL["float64"])


PACKED = [
    ([4, 3, 1], True, False),
    ([2, 4, 3, 4], False, False),
    ([1, 3, 2], False, True),
]


@pytest.mark.parametrize("lengths,enforce_sorted,batch_first", PACKED)
@pytest.mark.parametrize("name,extra", [m for m in MODES if m[1] == {}] + [("LSTM", {"proj_size": 2})])
def test_packed_sequences(torch, name, extra, lengths, enforce_sorted, batch_first):
    kwargs = dict(extra, num_layers=2, bidirectional=True, batch_first=batch_first)
    ours, theirs = _pair(torch, name, (3, 5), kwargs)
    g = torch.Generator().manual_seed(5)
    batch, steps = len(lengths), max(lengths)
    dx, tx = _leaf(torch, (batch, steps, 3) if batch_first else (steps, batch, 3), g, "float64")
    hs = _hidden(torch, name, kwargs, batch, g, "float64")
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    dp = rnn_utils.pack_padded_sequence(dx, lengths, batch_first, enforce_sorted)
    got, expect = _call_both(ours, theirs, dp, tp, hs, name == "LSTM")
    assert isinstance(got[0], rnn_utils.PackedSequence)
    for a, b in zip(got[0], expect[0]):
        assert (a is None) == (b is None)
        if a is not None:
            assert_same(a, b, **TOL["float64"])
    assert_same(_flat(got[1]), _flat(expect[1]), **TOL["float64"])
    # backward through the padded output, as a model would use it
    got_pad = rnn_utils.pad_packed_sequence(got[0], batch_first)[0]
    expect_pad = torch.nn.utils.rnn.pad_packed_sequence(expect[0], batch_first)[0]
    _check_backward(torch, ours, theirs, (got_pad, got[1]), (expect_pad, expect[1]),
                    [(dx, tx)] + hs, TOL["float64"])


def test_packed_final_state_is_last_valid_step(torch):
    """h_n of each sequence equals the output at its own last step (forward direction)."""
    m = nn.GRU(2, 3)
    lengths = [2, 5, 3]
    x = dynograph.randn(5, 3, 2)
    out, h = m(rnn_utils.pack_padded_sequence(x, lengths, enforce_sorted=False))
    padded, lens = rnn_utils.pad_packed_sequence(out)
    assert lens.tolist() == lengths
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(h[0, b].detach().numpy(), padded[n - 1, b].detach().numpy())
        assert np.all(padded[n:, b].detach().numpy() == 0)
        alone, _ = m(x[:n, b:b + 1])
        np.testing.assert_allclose(padded[:n, b:b + 1].detach().numpy(),
                                   alone.detach().numpy(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- cells

CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("RNNCell", {"bias": False}),
         ("LSTMCell", {}), ("LSTMCell", {"bias": False}), ("GRUCell", {}), ("GRUCell", {"bias": False})]


@pytest.mark.parametrize("with_hx,batched,dtype", [(True, True, "float64"), (False, False, "float64"),
                                                   (True, False, "float32"), (False, True, "float32")])
@pytest.mark.parametrize("name,kwargs", CELLS)
def test_cells_match_torch(torch, name, kwargs, with_hx, batched, dtype):
    ours, theirs = _pair(torch, name, (3, 4), kwargs, dtype)
    g = torch.Generator().manual_seed(6)
    lead = (2,) if batched else ()
    dx, tx = _leaf(torch, lead + (3,), g, dtype)
    states = 2 if name == "LSTMCell" else 1
    hs = [_leaf(torch, lead + (4,), g, dtype) for _ in range(states)] if with_hx else []
    got, expect = _call_both(ours, theirs, dx, tx, hs, states == 2)
    tol = TOL[dtype]
    assert_same(_flat(got), _flat(expect), **tol)
    _check_backward(torch, ours, theirs, got, expect, [(dx, tx)] + hs, tol)


def test_cells_unroll_like_layers(torch):
    """An LSTMCell stepped by hand gives what an LSTM with the same weights gives."""
    cell, layer = nn.LSTMCell(3, 4), nn.LSTM(3, 4)
    with dynograph.no_grad():
        for stem in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(layer, stem + "_l0").copy_(getattr(cell, stem))
    x = dynograph.randn(5, 2, 3)
    out, (h, c) = layer(x)
    state = None
    for t in range(5):
        state = cell(x[t], state)
        np.testing.assert_allclose(state[0].detach().numpy(), out[t].detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state[1].detach().numpy(), c[0].detach().numpy(), rtol=1e-5,
                               atol=1e-6)


# ----------------------------------------------------------------------------- dropout

def test_dropout_between_layers_only(torch, monkeypatch):
    calls = []
    real = F.dropout

    def spy(x, p=0.5, training=True, inplace=False):
        calls.append((tuple(x.shape), p, training))
        return real(x, p, training, inplace)

    monkeypatch.setattr(F, "dropout", spy)
    m = nn.GRU(3, 4, num_layers=3, dropout=0.25, bidirectional=True)
    x = dynograph.randn(5, 2, 3)
    m(x)
    assert calls == [((10, 8), 0.25, True)] * 2   # after layers 0 and 1, not after the last
    calls.clear()
    m.eval()
    m(x)
    assert calls == []


def test_dropout_one_zeroes_the_next_layers_input(torch):
    """With p=1 the second layer sees zeros: deterministic, so torch must agree exactly."""
    ours, theirs = _pair(torch, "LSTM", (3, 4), {"num_layers": 2, "dropout": 1.0}, "float64")
    tx = torch.randn(4, 2, 3, dtype=torch.float64)
    got, expect = ours(from_torch(tx)), theirs(tx)
    assert_same(_flat(got), _flat(expect), **TOL["float64"])
    ours.eval()
    theirs.eval()
    assert_same(_flat(ours(from_torch(tx))), _flat(theirs(tx)), **TOL["float64"])


def test_dropout_statistics(monkeypatch):
    """p=0.5 in training: about half of the next layer's input is zeroed, the rest scaled by 2
    (inverted dropout); eval mode is deterministic."""
    seen = []
    real = F.dropout

    def spy(x, p=0.5, training=True, inplace=False):
        out = real(x, p, training, inplace)
        seen.append((x.detach().numpy(), out.detach().numpy()))
        return out

    monkeypatch.setattr(F, "dropout", spy)
    dynograph.manual_seed(0)
    m = nn.RNN(2, 50, num_layers=2, dropout=0.5)
    x = dynograph.randn(6, 10, 2)
    a, b = m(x)[0], m(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    for inp, out in seen:
        dropped = out == 0
        assert 0.4 < dropped.mean() < 0.6
        np.testing.assert_allclose(out[~dropped], 2 * inp[~dropped], rtol=1e-6)
    m.eval()
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), m(x)[0].detach().numpy())


def test_empty_batch(torch):
    for mod, x in ((nn.GRU(3, 4), dynograph.randn(5, 0, 3)),
                   (nn.LSTM(3, 4, batch_first=True), dynograph.randn(0, 5, 3))):
        out, h = mod(x)
        assert out.shape[:2] == x.shape[:2] and out.shape[2] == 4
        assert all(t.shape == (1, 0, 4) for t in _flat(h))


def test_dropout_warning_and_range():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)


# ----------------------------------------------------------------------------- structure

REPRS = [
    ("LSTM", (10, 20), {"num_layers": 2, "batch_first": True}),
    ("LSTM", (10, 20), {"proj_size": 5, "num_layers": 2, "bias": False, "dropout": 0.5,
                        "bidirectional": True}),
    ("RNN", (3, 4), {"nonlinearity": "relu"}),
    ("RNN", (3, 4, 2, "relu", False)),
    ("GRU", (3, 4), {"bidirectional": True}),
    ("RNNCell", (3, 4), {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", (3, 4), {}),
    ("GRUCell", (3, 4), {"bias": False}),
]


@pytest.mark.parametrize("spec", REPRS)
def test_repr_state_dict_and_weights(torch, spec):
    name, args, kwargs = spec if len(spec) == 3 else spec + ({},)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == \
        [tuple(v.shape) for v in theirs.state_dict().values()]
    if not name.endswith("Cell"):
        assert ours._flat_weights_names == theirs._flat_weights_names
        assert [[tuple(p.shape) for p in ps] for ps in ours.all_weights] == \
            [[tuple(p.shape) for p in ps] for ps in theirs.all_weights]
        assert ours.flatten_parameters() is None
        for attr in ("mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"):
            assert getattr(ours, attr) == getattr(theirs, attr)


def test_load_state_dict_from_torch(torch):
    theirs = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    ours = nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    ours.load_state_dict({k: from_torch(v) for k, v in theirs.state_dict().items()})
    x = torch.randn(3, 2, 3, dtype=torch.float64)
    assert_same(_flat(ours(from_torch(x))), _flat(theirs(x)), **TOL["float64"])


def test_default_init_bounds():
    m = nn.GRU(30, 16, num_layers=2, bidirectional=True)
    bound = 1 / math.sqrt(16)
    values = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.99 * bound
    assert abs(values.mean()) < 0.01
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    cell = nn.LSTMCell(5, 9)
    assert cell.weight_ih.shape == (36, 5) and cell.weight_hh.shape == (36, 9)
    assert np.abs(cell.weight_hh.detach().numpy()).max() <= 1 / 3


def test_flat_weights_follow_assignment():
    m = nn.RNN(3, 4)
    w = nn.Parameter(dynograph.zeros(4, 3))
    m.weight_ih_l0 = w
    assert m._flat_weights[0] is w and m.all_weights[0][0] is w
    out, _ = m(dynograph.randn(2, 1, 3))
    assert out.shape == (2, 1, 4)


def test_dtype_and_grad_fn(torch):
    m = nn.LSTM(3, 4, dtype=dynograph.float64)
    assert m.weight_ih_l0.dtype == dynograph.float64
    out, (h, c) = m(dynograph.randn(2, 1, 3, dtype=dynograph.float64))
    assert out.dtype == h.dtype == c.dtype == dynograph.float64
    assert out.requires_grad and out.grad_fn is not None
    with dynograph.no_grad():
        assert not m(dynograph.randn(2, 1, 3, dtype=dynograph.float64))[0].requires_grad


ERRORS = [
    "nn.RNN(3, 4)(torch.randn(5, 2, 6))",
    "nn.RNN(3, 4)(torch.randn(5, 2, 3, 3))",
    "nn.LSTM(3, 4)(torch.randn(5, 2, 3, 3))",
    "nn.GRU(3, 4)(torch.randn(5))",
    "nn.GRU(3, 4)(torch.randn(0, 2, 3))",
    "nn.LSTM(3, 4, batch_first=True)(torch.randn(2, 0, 3))",
    "nn.RNN(3, 4)(torch.randn(5, 2, 3), torch.randn(2, 2, 4))",
    "nn.GRU(3, 4, batch_first=True)(torch.randn(5, 2, 3), torch.randn(1, 2, 4))",
    "nn.GRU(3, 4)(torch.randn(5, 2, 3), torch.randn(2, 4))",
    "nn.GRU(3, 4)(torch.randn(5, 3), torch.randn(1, 1, 4))",
    "nn.LSTM(3, 4)(torch.randn(5, 2, 3), (torch.randn(1, 3, 4), torch.randn(1, 2, 4)))",
    "nn.LSTM(3, 4)(torch.randn(5, 2, 3), (torch.randn(1, 2, 4), torch.randn(1, 2, 5)))",
    "nn.LSTM(3, 4, proj_size=2)(torch.randn(5, 2, 3), (torch.randn(1, 2, 4), torch.randn(1, 2, 4)))",
    "nn.LSTM(3, 4)(torch.randn(5, 3), (torch.randn(1, 1, 4), torch.randn(1, 1, 4)))",
    "nn.LSTM(3, 4)(torch.randn(5, 2, 3), (torch.randn(1, 4), torch.randn(1, 2, 4)))",
    "nn.LSTM(3, 4)(torch.randn(5, 2, 3, dtype=torch.float64))",
    "nn.RNN(3, 4, nonlinearity='foo')",
    "nn.RNN(3, 4, proj_size=2)",
    "nn.GRU(3, 4, proj_size=2)",
    "nn.LSTM(3, 4, proj_size=4)",
    "nn.LSTM(3, 4, proj_size=-1)",
    "nn.LSTM(3, 4, num_layers=0)",
    "nn.LSTM(0, 4)",
    "nn.LSTM(3, 4.0)",
    "nn.LSTM(3, 4, bias=1)",
    "nn.LSTM(3, 4, batch_first=None)",
    "nn.RNNCell(3, 4)(torch.randn(2, 5))",
    "nn.RNNCell(3, 4)(torch.randn(2, 3), torch.randn(3, 4))",
    "nn.RNNCell(3, 4)(torch.randn(2, 3), torch.randn(2, 5))",
    "nn.RNNCell(3, 4)(torch.randn(3), torch.randn(2, 4))",
    "nn.RNNCell(3, 4)(torch.randn(2, 2, 3))",
    "nn.RNNCell(3, 4)(torch.randn(2, 3), torch.randn(1, 2, 4))",
    "nn.LSTMCell(3, 4)(torch.randn(2, 3), (torch.randn(2, 4), torch.randn(3, 4)))",
    "nn.LSTMCell(3, 4)(torch.randn(2, 3), (torch.randn(2, 5), torch.randn(2, 4)))",
    "nn.LSTMCell(3, 4)(torch.randn(2, 3), (torch.randn(2, 4), torch.randn(2, 1, 4)))",
    "nn.GRUCell(3, 4)(torch.randn(2, 3), torch.randn(2, 5))",
    "nn.GRUCell(3, 4)(torch.randn(()))",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_match_torch(torch, expr):
    theirs = eval_expr(expr, {"torch": torch, "nn": torch.nn})
    ours = eval_expr(expr, {"torch": dynograph, "nn": nn})
    assert_same_error(ours, theirs, expr)


# ----------------------------------------------------------------------------- nn.utils.rnn

def _packed_equal(got, expect):
    assert isinstance(got, rnn_utils.PackedSequence) and isinstance(got, tuple)
    for a, b in zip(got, expect):
        assert (a is None) == (b is None)
        if a is not None:
            assert_same(a, b)


@pytest.mark.parametrize("lengths,enforce_sorted,batch_first", PACKED + [([3, 3], True, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pack_pad_round_trip(torch, lengths, enforce_sorted, batch_first, dtype):
    g = torch.Generator().manual_seed(7)
    batch, steps = len(lengths), max(lengths) + 1
    shape = (batch, steps, 2, 3) if batch_first else (steps, batch, 2, 3)
    dx, tx = _leaf(torch, shape, g, dtype)
    t_lengths = torch.tensor(lengths)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, t_lengths, batch_first, enforce_sorted)
    dp = rnn_utils.pack_padded_sequence(dx, from_torch(t_lengths), batch_first, enforce_sorted)
    _packed_equal(dp, tp)
    for kwargs in ({}, {"padding_value": -2.0, "total_length": steps + 1}):
        expect = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first, **kwargs)
        got = rnn_utils.pad_packed_sequence(dp, batch_first, **kwargs)
        assert_same(list(got), list(expect))
    w = torch.randn(expect[0].shape, generator=g, dtype=tx.dtype)
    (expect[0] * w).sum().backward()
    (got[0] * from_torch(w)).sum().backward()
    assert_same(dx.grad, tx.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(torch, batch_first, padding_side):
    g = torch.Generator().manual_seed(8)
    pairs = [_leaf(torch, (n, 2), g, "float32") for n in (2, 4, 1)]
    expect = torch.nn.utils.rnn.pad_sequence([t for _, t in pairs], batch_first, 1.5, padding_side)
    got = rnn_utils.pad_sequence([d for d, _ in pairs], batch_first, 1.5, padding_side)
    assert_same(got, expect)
    w = torch.randn(expect.shape, generator=g)
    (expect * w).sum().backward()
    (got * from_torch(w)).sum().backward()
    for d, t in pairs:
        assert_same(d.grad, t.grad)


def test_pad_sequence_dtypes_and_broadcast(torch):
    cases = [
        lambda m: [m.ones(2, 3), m.ones(3, dtype=m.float64)],
        lambda m: [m.ones(2, dtype=m.int64), m.ones(3, dtype=m.int64)],
        lambda m: m.arange(6).reshape(2, 3),
    ]
    for make in cases:
        expect = torch.nn.utils.rnn.pad_sequence(make(torch), padding_value=2.5)
        assert_same(rnn_utils.pad_sequence(make(dynograph), padding_value=2.5), expect)


def test_pack_and_unpack_sequence(torch):
    g = torch.Generator().manual_seed(9)
    pairs = [_leaf(torch, (n, 3), g, "float64") for n in (2, 5, 3)]
    tp = torch.nn.utils.rnn.pack_sequence([t for _, t in pairs], enforce_sorted=False)
    dp = rnn_utils.pack_sequence([d for d, _ in pairs], enforce_sorted=False)
    _packed_equal(dp, tp)
    got = rnn_utils.unpack_sequence(dp)
    expect = torch.nn.utils.rnn.unpack_sequence(tp)
    assert_same(got, expect)
    sum((s * (i + 1)).sum() for i, s in enumerate(expect)).backward()
    sum((s * (i + 1)).sum() for i, s in enumerate(got)).backward()
    for d, t in pairs:
        assert_same(d.grad, t.grad)
    sorted_seqs = [d for d, _ in sorted(pairs, key=lambda p: -p[0].shape[0])]
    assert rnn_utils.pack_sequence(sorted_seqs).sorted_indices is None


def test_unpad_sequence(torch):
    tx = torch.randn(4, 3, 2)
    lengths = torch.tensor([4, 1, 3])
    expect = torch.nn.utils.rnn.unpad_sequence(tx.clone(), lengths)
    dx = from_torch(tx)
    got = rnn_utils.unpad_sequence(dx, from_torch(lengths))
    assert_same(got, expect)
    assert dx.shape == (4, 3, 2)   # left as it was
    got = rnn_utils.unpad_sequence(from_torch(tx.transpose(0, 1)), [4, 1, 3], batch_first=True)
    assert_same(got, expect)


def test_packed_sequence_object(torch):
    data, sizes = dynograph.randn(3, 2), dynograph.tensor([2, 1])
    p = rnn_utils.PackedSequence(data, sizes, dynograph.tensor([1, 0]))
    assert p.unsorted_indices.tolist() == [1, 0]
    assert p._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    d, b, s, u = p
    assert d is data and b is sizes
    assert rnn_utils.PackedSequence((data, sizes)).batch_sizes is sizes
    assert p.is_cuda is False
    assert repr(p).startswith("PackedSequence(data=tensor(")
    assert p.to(dynograph.float32) is p and p.cpu() is p
    q = p.double()
    assert q.data.dtype == dynograph.float64 and q.batch_sizes is sizes and type(q) is type(p)
    assert p.to(dtype=dynograph.float16).data.dtype == dynograph.float16
    perm = dynograph.tensor([2, 0, 3, 1])
    expect = torch.nn.utils.rnn.invert_permutation(torch.tensor([2, 0, 3, 1]))
    assert_same(rnn_utils.invert_permutation(perm), expect)
    assert rnn_utils.invert_permutation(None) is None
    assert nn.utils.rnn.PackedSequence is rnn_utils.PackedSequence


UTIL_ERRORS = [
    "U.pack_padded_sequence(torch.randn(4, 3, 2), [2, 3, 1])",
    "U.pack_padded_sequence(torch.randn(4, 3, 2), [3, 1, 0])",
    "U.pack_padded_sequence(torch.randn(4, 3, 2), [3, 2])",
    "U.pack_padded_sequence(torch.randn(0, 3, 2), [3, 2, 1])",
    "U.pack_padded_sequence(torch.randn(4, 3, 2), torch.tensor([[3, 2, 1]]))",
    "U.pack_sequence([torch.ones(2), torch.ones(3)])",
    "U.pad_packed_sequence(U.pack_sequence([torch.ones(3), torch.ones(2)]), total_length=2)",
    "U.pad_sequence([torch.ones(2, 3), torch.ones(3, 4)])",
    "U.pad_sequence([torch.ones(2, 3), torch.ones(3, 2, 3)], batch_first=True)",
    "U.pad_sequence([torch.ones(2, 3)], padding_side='middle')",
    "U.pad_sequence([])",
    "U.pad_sequence(3)",
    "U.PackedSequence(torch.ones(3, 2))",
]


@pytest.mark.parametrize("expr", UTIL_ERRORS)
def test_util_errors_match_torch(torch, expr):
    theirs = eval_expr(expr, {"torch": torch, "U": torch.nn.utils.rnn})
    ours = eval_expr(expr, {"torch": dynograph, "U": rnn_utils})
    assert_same_error(ours, theirs, expr)


def test_lengths_longer_than_input_are_an_error():
    with pytest.raises(RuntimeError, match="does not fit the padded input of 4 steps"):
        rnn_utils.pack_padded_sequence(dynograph.randn(4, 3, 2), [5, 3, 1])

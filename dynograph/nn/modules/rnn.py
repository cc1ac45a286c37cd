"""Recurrent layers: RNN, LSTM, GRU and their single-step cells (torch.nn semantics).

Every layer runs as ordinary dynograph ops: per layer and direction, one matmul projects the
input of all time steps at once; then a Python loop over time steps (never over batch items)
applies the recurrent matmul and the gate nonlinearities. Padded and packed input share one
path: padded input is treated as a packed sequence whose batch size never shrinks.
"""
import math
import numbers
import warnings

import dynograph as _d
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ----------------------------------------------------------------------------- one time step
# Each step takes `gi`, the input projection x @ w_ih.T + b_ih of this step (precomputed for all
# steps at once), and the state (a tuple: (h,) or (h, c)), and returns the new state.

def _rnn_tanh_step(gi, state, w_hh, b_hh, w_hr=None):
    return ((gi + F.linear(state[0], w_hh, b_hh)).tanh(),)


def _rnn_relu_step(gi, state, w_hh, b_hh, w_hr=None):
    return ((gi + F.linear(state[0], w_hh, b_hh)).relu(),)


def _lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi, state, w_hh, b_hh, w_hr=None):
    h = state[0]
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return (n + z * (h - n),)


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step,
          "GRU": _gru_step}


# ----------------------------------------------------------------------------- whole sequences

def _cat_states(a, b):
    return tuple(_d.cat([x, y], 0) for x, y in zip(a, b))


def _run_forward(step, gis, batch_sizes, state, weights):
    """Steps t = 0..T-1; a sequence that ends leaves the batch (its rows are the last ones)
    and keeps its state as its final state."""
    outputs, finished = [], []
    for gi, bs in zip(gis, batch_sizes):
        if bs < state[0].shape[0]:
            finished.append(tuple(s[bs:] for s in state))
            state = tuple(s[:bs] for s in state)
        state = step(gi, state, *weights)
        outputs.append(state[0])
    for rows in reversed(finished):
        state = _cat_states(state, rows)
    return outputs, state


def _run_reverse(step, gis, batch_sizes, state0, weights):
    """Steps t = T-1..0; a sequence joins the batch at its own last step, from its initial
    state."""
    outputs, state, active = [], None, 0
    for gi, bs in zip(reversed(gis), reversed(batch_sizes)):
        if bs > active:
            rows = state0 if active == 0 and bs == state0[0].shape[0] else \
                tuple(s[active:bs] for s in state0)
            state = rows if state is None else _cat_states(state, rows)
            active = bs
        state = step(gi, state, *weights)
        outputs.append(state[0])
    outputs.reverse()
    return outputs, state


def _run_layers(mode, x, batch_sizes, states, weights, num_layers, num_directions, dropout,
                training):
    """The stacked, maybe bidirectional recurrence over packed data ``x`` (steps stacked along
    dim 0, ``batch_sizes[t]`` rows for step t). ``states``: one initial state tuple per layer
    and direction; ``weights``: one (w_ih, w_hh, b_ih, b_hh, w_hr) tuple each.
    Returns the packed output of the last layer and the final state tuples."""
    step = _STEPS[mode]
    finals = []
    for layer in range(num_layers):
        outs = []
        for direction in range(num_directions):
            k = layer * num_directions + direction
            w_ih, w_hh, b_ih, b_hh, w_hr = weights[k]
            # the input projection of every time step in one matmul
            gis = F.linear(x, w_ih, b_ih).split(batch_sizes, 0)
            run = _run_reverse if direction == 1 else _run_forward
            out, final = run(step, gis, batch_sizes, states[k], (w_hh, b_hh, w_hr))
            outs.append(_d.cat(out, 0))
            finals.append(final)
        x = outs[0] if num_directions == 1 else _d.cat(outs, 1)
        if dropout > 0 and training and layer < num_layers - 1:
            x = F.dropout(x, dropout, training)
    return x, finals


# ----------------------------------------------------------------------------- modules

class RNNBase(Module):
    """Shared parameters, checks and driver of RNN, LSTM and GRU (torch.nn.RNNBase)."""

    _kind, _rank_word = "RNN", "tensor "   # how rank errors name the layer, as torch spells them

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        _check_config(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                      proj_size)
        self._flat_weights_names = []
        self._all_weights = []
        gate_size = _GATES[mode] * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        num_directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                shapes = [("weight_ih", (gate_size, layer_input_size)),
                          ("weight_hh", (gate_size, real_hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, Parameter(_d.empty(shape, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) if hasattr(self, n) else None for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters as one list per layer and direction."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """Kept for compatibility: parameters are never packed into one buffer, so a no-op."""

    def reset_parameters(self):
        """Every weight and bias uniform in +-1/sqrt(hidden_size)."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ------------------------------------------------------------------ checks

    def check_input(self, input, batch_sizes):
        """The dtype, rank and feature size of ``input``."""
        wdtype = self._flat_weights[0].dtype
        if input.dtype != wdtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({wdtype}). Convert input: input.to({wdtype}), or convert model: "
                             f"model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def _mini_batch(self, input, batch_sizes):
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return input.size(0) if self.batch_first else input.size(1)

    def get_expected_hidden_size(self, input, batch_sizes):
        """(num_layers * num_directions, batch, proj_size or hidden_size)."""
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, self._mini_batch(input, batch_sizes), size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        """RuntimeError ``msg`` unless ``hx`` has the expected size."""
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        """The input and the initial hidden state agree with the module."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        """``hx`` with its batch dim reordered by ``permutation`` (None: unchanged)."""
        if permutation is None:
            return hx
        return hx.index_select(1, permutation)

    # ------------------------------------------------------------------ forward

    def _prepare(self, input, hx):
        """Unpacks ``input`` into (packed data, batch sizes, unsorted indices, hx, how to
        restore the output layout; None for packed input); checks and default-initializes hx."""
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in batch_sizes.tolist()]
            if hx is None:
                hx = self._zero_hidden(data, batch_sizes[0])
            else:
                hx = self.permute_hidden(hx, sorted_indices)
            self.check_forward_args(data, hx, batch_sizes)
            return data, batch_sizes, unsorted_indices, hx, None
        batch_dim = 0 if self.batch_first else 1
        hx = self._check_ranks(input, hx)
        is_batched = input.dim() == 3
        if not is_batched:
            input = input.unsqueeze(batch_dim)
            if hx is not None:
                hx = self._unsqueeze_hidden(hx)
        if hx is None:
            hx = self._zero_hidden(input, input.size(batch_dim))
        self.check_forward_args(input, hx, None)
        seq = input.transpose(0, 1) if self.batch_first else input
        steps, batch = seq.shape[0], seq.shape[1]
        data = seq.reshape(steps * batch, seq.shape[2])
        return data, [batch] * steps, None, hx, (steps, batch, is_batched, batch_dim)

    def _zero_hidden(self, input, batch):
        num_directions = 2 if self.bidirectional else 1
        return _d.zeros((self.num_layers * num_directions, batch, self.hidden_size),
                        dtype=input.dtype)

    def _unsqueeze_hidden(self, hx):
        return hx.unsqueeze(1)

    def _check_ranks(self, input, hx):
        if input.dim() not in (2, 3):
            raise ValueError(f"{self._kind}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"{self._rank_word}instead")
        if hx is None:
            return hx
        if input.dim() == 3 and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                               f"{hx.dim()}-D tensor")
        if input.dim() == 2 and hx.dim() != 2:
            raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                               f"{hx.dim()}-D tensor")
        return hx

    def _states(self, hx):
        """One initial state tuple per layer and direction."""
        return [(h,) for h in hx.unbind(0)]

    def _finish_hidden(self, finals):
        return _d.stack([f[0] for f in finals], 0)

    def _squeeze_hidden(self, hidden):
        return hidden.squeeze(1)

    def _layer_weights(self):
        out = []
        for names in self._all_weights:
            w = dict((n.split("_l")[0], getattr(self, n)) for n in names)
            out.append((w["weight_ih"], w["weight_hh"], w.get("bias_ih"), w.get("bias_hh"),
                        w.get("weight_hr")))
        return out

    def forward(self, input, hx=None):
        """(output, h_n) for RNN and GRU, (output, (h_n, c_n)) for LSTM; ``input`` may be
        padded ((L, N, H_in), batch_first (N, L, H_in), unbatched (L, H_in)) or a
        PackedSequence (then the output is one too)."""
        data, batch_sizes, unsorted_indices, hx, layout = self._prepare(input, hx)
        if not batch_sizes:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        num_directions = 2 if self.bidirectional else 1
        out, finals = _run_layers(self.mode, data, batch_sizes, self._states(hx),
                                  self._layer_weights(), self.num_layers, num_directions,
                                  self.dropout, self.training)
        hidden = self._finish_hidden(finals)
        if layout is None:
            return (PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                   input.unsorted_indices),
                    self.permute_hidden(hidden, unsorted_indices))
        steps, batch, is_batched, batch_dim = layout
        out = out.reshape(steps, batch, out.shape[1])
        if self.batch_first:
            out = out.transpose(0, 1)
        if not is_batched:
            out = out.squeeze(batch_dim)
            hidden = self._squeeze_hidden(hidden)
        return out, hidden


def _check_config(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                  proj_size):
    if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
            isinstance(dropout, bool):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=4)
    for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                              ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                            f"{type(value).__name__}")
        if kind is int and value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")
    if mode not in _GATES:
        raise ValueError("Unrecognized RNN mode: " + mode)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).

    RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)
    """

    _kind, _rank_word = "RNN", "tensor "

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, gates in torch's order (input, forget, cell, output); with
    proj_size > 0 the hidden state is projected by weight_hr.

    LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)
    """

    _kind, _rank_word = "LSTM", ""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        """(num_layers * num_directions, batch, hidden_size)."""
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, self._mini_batch(input, batch_sizes),
                self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def _zero_hidden(self, input, batch):
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        h = _d.zeros((self.num_layers * num_directions, batch, size), dtype=input.dtype)
        return h, super()._zero_hidden(input, batch)

    def _unsqueeze_hidden(self, hx):
        return hx[0].unsqueeze(1), hx[1].unsqueeze(1)

    def _check_ranks(self, input, hx):
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        if hx is None:
            return hx
        want, what = (3, "batched 3-D") if input.dim() == 3 else (2, "unbatched 2-D")
        if hx[0].dim() != want or hx[1].dim() != want:
            raise RuntimeError(f"For {what} input, hx and cx should also be {want}-D but got "
                               f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
        return hx

    def _states(self, hx):
        return list(zip(hx[0].unbind(0), hx[1].unbind(0)))

    def _finish_hidden(self, finals):
        return (_d.stack([f[0] for f in finals], 0), _d.stack([f[1] for f in finals], 0))

    def _squeeze_hidden(self, hidden):
        return hidden[0].squeeze(1), hidden[1].squeeze(1)


class GRU(RNNBase):
    """Gated recurrent unit, gates in torch's order (reset, update, new) with
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) and h' = (1 - z) * n + z * h.

    GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)
    """

    _kind, _rank_word = "GRU", ""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ----------------------------------------------------------------------------- cells

class RNNCellBase(Module):
    """weight_ih (chunks*hidden, input), weight_hh (chunks*hidden, hidden) and two biases."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_d.empty((num_chunks * hidden_size, input_size), dtype=dtype))
        self.weight_hh = Parameter(_d.empty((num_chunks * hidden_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_d.empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(_d.empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        """Every weight and bias uniform in +-1/sqrt(hidden_size)."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check_rank(self, t, what):
        if t.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected {what} to be 1D or 2D, got "
                             f"{t.dim()}D instead")

    def _check_input(self, input):
        if input.size(1) != self.weight_ih.shape[1]:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected "
                               f"{self.weight_ih.shape[1]}")

    def _check_hidden(self, input, hx, label):
        if input.size(0) != hx.size(0):
            raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{label} "
                               f"batch size {hx.size(0)}")
        if hx.size(1) != self.hidden_size:
            raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {hx.size(1)}, "
                               f"expected {self.hidden_size}")

    def _step(self, step, input, state):
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        return step(gi, state, self.weight_hh, self.bias_hh)

    def _zeros(self, input):
        return _d.zeros((input.size(0), self.hidden_size), dtype=input.dtype)

    def _forward_one_state(self, input, hx):
        """The forward of a cell whose state is one tensor (RNNCell, GRUCell): h', batched or not
        as the input; the step function comes from ``_step_function`` once the state is made."""
        self._check_rank(input, "input")
        if hx is not None:
            self._check_rank(hx, "hidden")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        hx = self._zeros(input) if hx is None else (hx if is_batched else hx.unsqueeze(0))
        step = self._step_function()
        self._check_input(input)
        self._check_hidden(input, hx, 0)
        ret = self._step(step, input, (hx,))[0]
        return ret if is_batched else ret.squeeze(0)


class RNNCell(RNNCellBase):
    """One Elman RNN step: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        """h' of shape (batch, hidden_size), or (hidden_size,) for unbatched input."""
        return self._forward_one_state(input, hx)

    def _step_function(self):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return _rnn_tanh_step if self.nonlinearity == "tanh" else _rnn_relu_step


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from input and (h, c), gates in order input, forget, cell,
    output."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, dtype=dtype)

    def forward(self, input, hx=None):
        """(h', c'), each (batch, hidden_size), or (hidden_size,) for unbatched input."""
        self._check_rank(input, "input")
        if hx is not None:
            for idx, value in enumerate(hx):
                self._check_rank(value, f"hx[{idx}]")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = self._zeros(input)
            hx = (zeros, zeros)
        elif not is_batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check_input(input)
        self._check_hidden(input, hx[0], 0)
        self._check_hidden(input, hx[1], 1)
        h, c = self._step(_lstm_step, input, tuple(hx))
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: h' = (1 - z) * n + z * h, gates in order reset, update, new."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def forward(self, input, hx=None):
        """h' of shape (batch, hidden_size), or (hidden_size,) for unbatched input."""
        return self._forward_one_state(input, hx)

    def _step_function(self):
        return _gru_step

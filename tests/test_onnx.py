"""dynograph.onnx.export: the models run in onnxruntime and equal dynograph's outputs."""
import io
import os
import sys

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import dynograph.onnx  # noqa: E402
from dynograph.onnx import UnsupportedOperatorError  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402


def _session(data):
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _outputs(model, *xs):
    with dynograph.no_grad():
        out = model(*xs)
    flat = []

    def walk(x):
        if isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        else:
            flat.append(x.numpy())
    walk(out)
    return flat


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", export_models.NAMES)
def test_models_run_in_onnxruntime(name):
    model, x, dim = export_models.build(name)
    buf = io.BytesIO()
    proto = dynograph.onnx.export(model, (x,), buf, input_names=["x"],
                                  dynamic_axes={"x": {dim: "batch"}})
    assert proto.opset_import[0].version == dynograph.onnx.DEFAULT_OPSET <= 21
    assert proto.graph.input[0].type.tensor_type.shape.dim[dim].dim_param == "batch"
    assert {i.name for i in proto.graph.initializer} >= set(dict(model.named_parameters()))
    session = _session(buf.getvalue())
    for n in (2, x.shape[dim] + 3):
        shape = list(x.shape)
        shape[dim] = n
        xn = dynograph.randn(*shape)
        _close(session.run(None, {"x": xn.numpy()}), _outputs(model, xn))


R = dynograph.randn
LAYERS = [
    ("bilinear", lambda: nn.Bilinear(3, 4, 2), lambda: (R(2, 3), R(2, 4))),
    ("conv1d", lambda: nn.Conv1d(2, 3, 3, padding=2, dilation=2), lambda: (R(2, 2, 8),)),
    ("conv2d_groups", lambda: nn.Conv2d(2, 4, 3, stride=2, padding=1, groups=2), lambda: (R(2, 2, 8, 8),)),
    ("conv3d", lambda: nn.Conv3d(1, 2, 2), lambda: (R(1, 1, 4, 4, 4),)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(2, 3, 3, stride=2), lambda: (R(2, 2, 5, 5),)),
    ("conv_transpose1d", lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1),
     lambda: (R(2, 2, 5),)),
    ("pools", lambda: nn.Sequential(nn.MaxPool2d(3, 2, 1), nn.AvgPool2d(2, count_include_pad=False),
                                    nn.AdaptiveAvgPool2d((1, 2))), lambda: (R(2, 3, 8, 8),)),
    ("pools1d", lambda: nn.Sequential(nn.MaxPool1d(2), nn.AvgPool1d(2), nn.AdaptiveMaxPool1d(1)),
     lambda: (R(2, 3, 8),)),
    ("norms", lambda: nn.Sequential(nn.GroupNorm(2, 4), nn.InstanceNorm2d(4), nn.LocalResponseNorm(2)),
     lambda: (R(2, 4, 3, 3),)),
    ("layernorm", lambda: nn.LayerNorm([3, 4]), lambda: (R(2, 3, 4),)),
    ("embedding", lambda: nn.Embedding(10, 3, padding_idx=0), lambda: (dynograph.tensor([[1, 2], [3, 0]]),)),
    ("pixel_upsample", lambda: nn.Sequential(nn.PixelShuffle(2), nn.Upsample(scale_factor=2),
                                             nn.Upsample(scale_factor=2, mode="bilinear")),
     lambda: (R(1, 4, 2, 2),)),
    ("pads", lambda: nn.Sequential(nn.ZeroPad2d(1), nn.ReflectionPad2d(1), nn.ReplicationPad2d(1)),
     lambda: (R(1, 2, 3, 3),)),
    ("rnn", lambda: nn.RNN(3, 4, nonlinearity="relu"), lambda: (R(5, 2, 3),)),
    ("gru", lambda: nn.GRU(3, 4, batch_first=True), lambda: (R(2, 5, 3),)),
    ("bilstm", lambda: nn.LSTM(3, 4, bidirectional=True), lambda: (R(5, 2, 3),)),
    ("attention", lambda: nn.MultiheadAttention(8, 2), lambda: (R(3, 2, 8), R(3, 2, 8), R(3, 2, 8))),
    ("decoder", lambda: nn.TransformerDecoderLayer(8, 2, 16, activation="gelu"), lambda: (R(3, 2, 8), R(4, 2, 8))),
    ("distances", lambda: _Pair(), lambda: (R(2, 3), R(2, 3))),
    ("losses", lambda: _Losses(), lambda: (R(4, 3), dynograph.tensor([0, 1, 2, 1]), dynograph.rand(4, 3))),
    ("activations", lambda: nn.Sequential(*[getattr(nn, a)() for a in (
        "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Hardtanh", "Hardsigmoid",
        "Hardswish", "Softplus", "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "LogSigmoid",
        "PReLU")], nn.Softmin(1), nn.LogSoftmax(1)), lambda: (R(3, 4),)),
    ("interpolate", lambda: _Fn(lambda x: (
        F.interpolate(x, size=(5, 7)), F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
        F.interpolate(x, scale_factor=2, mode="bicubic"), F.interpolate(x, size=(2, 2), mode="area"),
        F.pad(x, (1, 1, 1, 1), mode="circular"), F.normalize(x, dim=1))), lambda: (R(1, 2, 3, 3),)),
    ("fold_unfold", lambda: nn.Sequential(nn.Unfold(2, padding=1, stride=2), nn.Fold((4, 4), 2, padding=1, stride=2)),
     lambda: (R(1, 2, 4, 4),)),
    ("shuffles", lambda: nn.Sequential(nn.PixelUnshuffle(2), nn.ChannelShuffle(2)), lambda: (R(1, 1, 4, 4),)),
    ("pools_more", lambda: nn.Sequential(nn.MaxPool2d(2, ceil_mode=True), nn.LPPool2d(2, 2),
                                         nn.AdaptiveAvgPool2d(3), nn.AdaptiveMaxPool2d((2, 3))),
     lambda: (R(1, 2, 9, 9),)),
    ("pools3d", lambda: nn.Sequential(nn.MaxPool3d(2), nn.Upsample(scale_factor=2), nn.AvgPool3d(2),
                                      nn.BatchNorm3d(1)), lambda: (R(1, 1, 4, 4, 4),)),
    ("cells", lambda: _Cells(), lambda: (R(2, 3),)),
    ("transformer", lambda: nn.Transformer(8, 2, 1, 1, 16), lambda: (R(3, 2, 8), R(4, 2, 8))),
    ("tensor_ops", lambda: _Fn(lambda x: (
        x.topk(2, 1).values, x.sort(1, descending=True), x[:, [0, 2]], x[dynograph.tensor([1, 0])],
        x.index_fill(1, dynograph.tensor([0, -1]), 0.5), x.cumsum(1), x.clamp(min=-0.5, max=0.5),
        dynograph.where(x > 0, x, dynograph.zeros_like(x)).masked_fill(x < -1, 3.0))),
     lambda: (dynograph.arange(12.0).reshape(3, 4).sin(),)),
    ("attention_masks", lambda: _Fn(lambda q: (
        F.scaled_dot_product_attention(q, q, q, is_causal=True),
        F.scaled_dot_product_attention(q, q, q, attn_mask=dynograph.ones(3, 3).bool().tril()))),
     lambda: (R(2, 3, 4),)),
    ("encoder_stack", lambda: _Encoder(), lambda: (R(2, 3, 8),)),
    ("grids_unpool", lambda: _Fn(lambda x, theta: (
        F.grid_sample(x, F.affine_grid(theta, (1, 1, 4, 4), align_corners=False), align_corners=False),
        F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
        F.max_pool2d(x, 2, return_indices=True)[1])),
     lambda: (R(1, 1, 4, 4), R(1, 2, 3))),
    ("losses_options", lambda: _Fn(lambda x: (
        F.cross_entropy(x, dynograph.tensor([0, 2, 1, 1]), weight=dynograph.tensor([1., 2., 3.]),
                        label_smoothing=0.1, ignore_index=1),
        F.cross_entropy(x, dynograph.softmax(x * 2, 1)),
        F.nll_loss(x, dynograph.tensor([0, 2, 1, 1]), weight=dynograph.tensor([1., 2., 3.]), reduction="sum"))),
     lambda: (R(4, 3),)),
    ("more_layers", lambda: nn.Sequential(nn.ConvTranspose3d(1, 2, 2, stride=2), nn.RMSNorm(4),
                                          nn.Upsample(scale_factor=1.5, mode="nearest-exact")),
     lambda: (R(1, 1, 2, 2, 2),)),
    ("glu_threshold", lambda: nn.Sequential(nn.GLU(), nn.Threshold(0.1, 2.0), nn.Unflatten(1, (2, 1)),
                                            nn.Flatten()), lambda: (R(3, 4),)),
]


F = nn.functional


class _Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(3)
        padding = dynograph.tensor([[False, False, True], [False, False, False]])
        return self.encoder(x, mask=mask, src_key_padding_mask=padding)


class _Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.lstm, self.gru = nn.RNNCell(3, 4), nn.LSTMCell(3, 4), nn.GRUCell(3, 4)

    def forward(self, x):
        return self.rnn(x), self.lstm(x), self.gru(x)


class _Pair(nn.Module):
    def forward(self, a, b):
        return nn.functional.cosine_similarity(a, b), nn.functional.pairwise_distance(a, b)


class _Losses(nn.Module):
    def forward(self, logits, target, p):
        return (F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, 1), target),
                F.mse_loss(logits, p), F.l1_loss(logits, p), F.smooth_l1_loss(logits, p),
                F.binary_cross_entropy(p, p.flip(0)), F.binary_cross_entropy_with_logits(logits, p),
                F.kl_div(F.log_softmax(logits, 1), p, reduction="batchmean"), F.huber_loss(logits, p))


@pytest.mark.parametrize("name,make,inputs", LAYERS, ids=[c[0] for c in LAYERS])
def test_layers_run_in_onnxruntime(name, make, inputs):
    dynograph.manual_seed(0)
    model = make().eval()
    xs = inputs()
    buf = io.BytesIO()
    dynograph.onnx.export(model, xs, buf)
    session = _session(buf.getvalue())
    feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), xs)}
    _close(session.run(None, feeds), _outputs(model, *xs))


def _writes(x):
    y = x.clone()
    y[:, 0] = 1.0
    y[1] = x[0]
    y[:, 1:3] += 2
    y[-1, -1] = 5.0
    return y


def _index_writes(x):
    y = x.clone()
    y[dynograph.tensor([0, 2])] = 1.5
    y[:, dynograph.tensor([1, -1])] += x[:, :2]
    y.index_put_((dynograph.tensor([0, 1]), dynograph.tensor([2, 3])), dynograph.tensor(7.0), accumulate=True)
    z = dynograph.zeros(2, 3, 4)
    z[:, dynograph.tensor([2, 0])] = x[:2, None, :] * 2
    w = dynograph.zeros(2, 3, 4)
    w[dynograph.tensor([1]), :, dynograph.tensor([3])] = x[0, :3]
    return y, z, w, x.index_fill(0, dynograph.tensor([1]), dynograph.tensor(-2.0))


def _scatters(x):
    idx = dynograph.tensor([[0, 1], [2, 0]])
    return (x.scatter(1, idx, x[:, :2] * 2), x.scatter_add(1, idx, x[:, :2]), x.scatter(1, idx, 3.0),
            x.index_add(1, dynograph.tensor([0, 2]), x[:, :2], alpha=2),
            x.index_copy(0, dynograph.tensor([1, 0]), x[:2]), x.scatter_reduce(1, idx, x[:, :2], "amax"),
            x.roll(1, 1), x.roll((1, -1), (0, 1)), x.roll(2), x.select_scatter(x[0] * 3, 0, 1),
            x.slice_scatter(x[:, :2] + 1, 1, 1, 3))


def _elementwise(x, y):
    return (x.isfinite(), x.frac(), x.deg2rad(), x.rad2deg(), dynograph.logaddexp(x, y),
            dynograph.hypot(x, y), dynograph.heaviside(x, y.round()), dynograph.nan_to_num(x / 0.0))


def _reductions_and_views(x, y):
    m = x[:, :3]
    return (dynograph.var_mean(x, 1), dynograph.std_mean(x, 0, keepdim=True), dynograph.aminmax(x, dim=1),
            x.nansum(), dynograph.count_nonzero(x > 0, 1), dynograph.atan2(x, y), dynograph.logaddexp2(x, y),
            dynograph.logit(x.sigmoid(), eps=1e-3), dynograph.sinc(x), m.diagonal(), x.diagonal(1),
            x.unfold(1, 2, 1), m.trace(), x.take(dynograph.tensor([0, -1, 5])), x.rot90(1, (0, 1)),
            x.rot90(3, (0, 1)),
            dynograph.addbmm(dynograph.ones(3, 3), x[None, :, :2].expand(2, 3, 2), y[None, :2, :3].expand(2, 2, 3)),
            dynograph.addr(dynograph.ones(3, 4), x[:, 0], y[0]))


@pytest.mark.parametrize("fn,n_inputs,dynamic", [(_writes, 1, True), (_scatters, 1, False),
                                                 (_elementwise, 2, True),
                                                 (_reductions_and_views, 2, False), (_index_writes, 1, False)],
                         ids=["writes", "scatters", "elementwise", "reductions_and_views", "index_writes"])
def test_tensor_writes_and_scatters(fn, n_inputs, dynamic):
    """In-place writes in a forward become strided scatters; each runs in onnxruntime (at
    another batch size where the batch size is dynamic; roll needs its size)."""
    names = ["x", "y"][:n_inputs]
    xs = [R(3, 4) for _ in names]
    buf = io.BytesIO()
    dynograph.onnx.export(fn, tuple(xs), buf, input_names=names,
                          dynamic_axes={n: {0: "batch"} for n in names} if dynamic else None)
    session = _session(buf.getvalue())
    xs = [R(5 if dynamic else 3, 4) for _ in names]
    got = session.run(None, dict(zip(names, (x.numpy() for x in xs))))
    want = _outputs(_Fn(fn), *xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_unsupported_primitive_names_the_op_and_the_line():
    def f(x):
        return dynograph.linalg.det(x)           # no ONNX mapping
    with pytest.raises(UnsupportedOperatorError, match=r"'linalg_det' has no ONNX mapping \(called at .*test_onnx.py:\d+ in f\)"):
        dynograph.onnx.export(f, (R(3, 3),))


def test_training_mode_randomness_and_options_are_refused():
    with pytest.raises(UnsupportedOperatorError, match=r"call model.eval\(\)"):
        dynograph.onnx.export(nn.Dropout(0.5).train(), (R(2, 3),))
    with pytest.raises(UnsupportedOperatorError, match=r"updates its state \(0.num_batches_tracked, "
                                                       r"0.running_mean, 0.running_var\)"):
        dynograph.onnx.export(nn.Sequential(nn.BatchNorm1d(3)).train(), (R(2, 3),))
    with pytest.raises(ValueError, match="opset_version 9 is not supported"):
        dynograph.onnx.export(nn.ReLU(), (R(2, 3),), opset_version=9)
    with pytest.raises(ValueError, match="one symbolic size"):
        dynograph.onnx.export(lambda a, b: a + b, (R(2, 3), R(2, 3)), input_names=["a", "b"],
                              dynamic_axes={"a": {0: "n"}, "b": {0: "m"}})


@pytest.mark.parametrize("opset", [17, 21])
def test_opsets(opset):
    model, x, _ = export_models.build("batchnorm")
    buf = io.BytesIO()
    dynograph.onnx.export(model, (x,), buf, opset_version=opset, input_names=["x"])
    _close(_session(buf.getvalue()).run(None, {"x": x.numpy()}), _outputs(model, x))


def test_initializers_as_inputs():
    model, x, _ = export_models.build("mlp")
    buf = io.BytesIO()
    proto = dynograph.onnx.export(model, (x,), buf, input_names=["x"], keep_initializers_as_inputs=True)
    assert [i.name for i in proto.graph.input][:3] == ["x", "fc1.weight", "fc1.bias"]
    session = _session(buf.getvalue())
    _close(session.run(None, {"x": x.numpy()}), _outputs(model, x))
    w = np.zeros((32, 10), np.float32)                  # a weight fed as an input overrides it
    got = session.run(None, {"x": x.numpy(), "fc1.weight": w})[0]
    with dynograph.no_grad():
        model.fc1.weight.zero_()
    _close([got], _outputs(model, x))


def test_external_data_for_large_models(tmp_path, monkeypatch):
    """Models over 2 GB keep their weights in a side file (the limit lowered for the test)."""
    import dynograph.onnx.build as build
    monkeypatch.setattr(build, "EXTERNAL_DATA_AT", 1000)
    model, x, _ = export_models.build("mlp")
    path = tmp_path / "mlp.onnx"
    dynograph.onnx.export(model, (x,), str(path), input_names=["x"])
    assert (tmp_path / "mlp.onnx.data").stat().st_size >= 4 * 10 * 32      # fc1.weight
    stored = onnx.load(str(path), load_external_data=False)
    weight = next(t for t in stored.graph.initializer if t.name == "fc1.weight")
    assert weight.data_location == onnx.TensorProto.EXTERNAL
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    _close(session.run(None, {"x": x.numpy()}), _outputs(model, x))


def test_exported_program_and_saved_file_export_the_same(tmp_path):
    model, x, _ = export_models.build("cifar")
    ep = dynograph.export.export(model, (x,))
    dynograph.export.save(ep, tmp_path / "cifar.dgx")
    loaded = dynograph.export.load(tmp_path / "cifar.dgx")
    proto = dynograph.onnx.export(loaded, (x,), tmp_path / "cifar.onnx", output_names=["logits"])
    assert proto.graph.output[0].name == "logits"
    session = ort.InferenceSession(str(tmp_path / "cifar.onnx"), providers=["CPUExecutionProvider"])
    _close(session.run(None, {session.get_inputs()[0].name: x.numpy()}), _outputs(model, x))


def test_a_missing_onnx_package_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r'needs the onnx package: pip install "dynograph\[onnx\]"'):
        dynograph.onnx.export(nn.ReLU(), (R(2, 3),))

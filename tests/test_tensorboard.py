"""dynograph.utils.tensorboard: files read back with TensorBoard's reader, compared with torch's writer."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import dynograph  # noqa: E402
from dynograph.utils.tensorboard import SummaryWriter  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

SIZES = {"scalars": 0, "histograms": 0, "images": 0, "tensors": 0}


def _read(path):
    acc = EventAccumulator(str(path), size_guidance=SIZES)
    acc.Reload()
    return acc


def _write_both(tmp_path, calls):
    """Run the same writer calls on dynograph's and torch's SummaryWriter; both readers."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    out = []
    for name, lib, writer_type in (("dg", dynograph, SummaryWriter), ("pt", torch, TorchWriter)):
        with writer_type(tmp_path / name) as w:
            calls(w, lib)
        out.append(_read(tmp_path / name))
    return out


def test_scalars_histograms_images_text_match_torch(tmp_path):
    data = np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype(np.float32)
    img = np.random.default_rng(1).random((3, 6, 7)).astype(np.float32)

    def calls(w, lib):
        for step in range(3):
            w.add_scalar("loss", lib.tensor(1.5 - step), step)
        w.add_scalar("lr", 0.25, 7)
        w.add_histogram("weights", lib.tensor(data), 1)
        w.add_histogram("few", lib.tensor(data), 2, bins="auto", max_bins=4)
        w.add_image("chw", lib.tensor(img), 0)
        w.add_image("hwc", lib.tensor(img.transpose(1, 2, 0)), 0, dataformats="HWC")
        w.add_image("hw", (img[0] * 255).astype(np.uint8), 0, dataformats="HW")
        w.add_images("batch", lib.tensor(data[:, :3]), 0)
        w.add_images("nhwc", lib.tensor(data[:, :1].transpose(0, 2, 3, 1)), 0, dataformats="NHWC")
        w.add_text("note", "hello **world**", 4)

    ours, theirs = _write_both(tmp_path, calls)
    assert ours.Tags()["scalars"] == theirs.Tags()["scalars"] == ["loss", "lr"]
    for tag in ("loss", "lr"):
        assert [(e.step, e.value) for e in ours.Scalars(tag)] == [(e.step, e.value) for e in theirs.Scalars(tag)]
    assert [e.value for e in ours.Scalars("loss")] == [1.5, 0.5, -0.5]
    for tag in ("weights", "few"):
        a, b = ours.Histograms(tag)[0], theirs.Histograms(tag)[0]
        assert (a.step, a.histogram_value) == (b.step, b.histogram_value), tag
    assert sorted(ours.Tags()["images"]) == sorted(theirs.Tags()["images"]) == ["batch", "chw", "hw", "hwc", "nhwc"]
    for tag in ours.Tags()["images"]:
        a, b = ours.Images(tag)[0], theirs.Images(tag)[0]
        assert (a.width, a.height, a.encoded_image_string) == (b.width, b.height, b.encoded_image_string), tag
    assert ours.Images("batch")[0].width == 5 * 2        # a grid of two 4x5 images
    text = ours.Tensors("note/text_summary")[0]
    assert text.step == 4 and text.tensor_proto == theirs.Tensors("note/text_summary")[0].tensor_proto
    assert ours.SummaryMetadata("note/text_summary") == theirs.SummaryMetadata("note/text_summary")


def test_add_scalars_writes_one_run_per_tag_like_torch(tmp_path):
    def calls(w, lib):
        w.add_scalars("run/loss", {"train": 1.0, "test": 2.0}, 3)

    _write_both(tmp_path, calls)
    for name in ("dg", "pt"):
        assert sorted(p for p in os.listdir(tmp_path / name) if not p.startswith("events")) == \
            ["run_loss_test", "run_loss_train"]
    acc = _read(tmp_path / "dg" / "run_loss_test")
    assert [(e.step, e.value) for e in acc.Scalars("run/loss")] == [(3, 2.0)]


def test_hparams_match_torch(tmp_path):
    def calls(w, lib):
        w.add_hparams({"lr": 0.1, "opt": "sgd", "nesterov": True, "skip": None},
                      {"hparam/accuracy": 0.9}, hparam_domain_discrete={"opt": ["sgd", "adam"]},
                      run_name="trial")

    _write_both(tmp_path, calls)
    ours, theirs = (_read(tmp_path / name / "trial") for name in ("dg", "pt"))
    assert [e.value for e in ours.Scalars("hparam/accuracy")] == pytest.approx([0.9])
    tags = ("_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info")
    for tag in tags:
        assert ours.SummaryMetadata(tag) == theirs.SummaryMetadata(tag), tag
    from tensorboard.plugins.hparams import plugin_data_pb2
    data = plugin_data_pb2.HParamsPluginData.FromString(
        ours.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
    assert data.session_start_info.hparams["opt"].string_value == "sgd"
    assert data.session_start_info.hparams["lr"].number_value == 0.1
    with pytest.raises(TypeError, match="should be dictionary"):
        SummaryWriter(tmp_path / "bad").add_hparams([("lr", 0.1)], {})


class Net(dynograph.nn.Module):
    def __init__(self, nn):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        self.head = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def test_graph_has_module_scopes_ops_and_shapes(tmp_path):
    model = Net(dynograph.nn)
    model.train()
    with SummaryWriter(tmp_path) as w:
        w.add_graph(model, dynograph.randn(2, 3, 8, 8))
    assert model.training                      # traced in eval mode, then restored
    graph = _read(tmp_path).Graph()
    nodes = {n.name: n for n in graph.node}
    ops = [n.op for n in graph.node]
    assert {"convolution", "relu", "addmm", "IO Node", "Param"} <= set(ops)   # Linear: addmm as in torch
    conv = next(n for n in graph.node if n.op == "convolution")
    assert conv.name.startswith("Net/Sequential[features]/Conv2d[0]/")
    assert [d.size for d in conv.attr["_output_shapes"].list.shape[0].dim] == [2, 4, 6, 6]
    assert b"stride : (1, 1)" in conv.attr["attr"].s
    assert "Net/Sequential[features]/Conv2d[0]/weight" in conv.input
    relu = next(n for n in graph.node if n.op == "relu")
    assert relu.name.startswith("Net/Sequential[features]/ReLU[1]/") and list(relu.input) == [conv.name]
    assert any(n.startswith("Net/Linear[head]/") for n in nodes)
    out = nodes["output/output.0"]
    assert [d.size for d in out.attr["_output_shapes"].list.shape[0].dim] == [2, 2]
    assert all(i in nodes for n in graph.node for i in n.input)     # every edge resolves


def test_embedding_files(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_embedding(dynograph.randn(4, 3), metadata=["a", "b", "c", "d"],
                        label_img=dynograph.rand(4, 3, 5, 5), global_step=2, tag="feat/x")
    folder = tmp_path / "00002" / "feat%2fx"
    assert len((folder / "tensors.tsv").read_text().splitlines()) == 4
    assert (folder / "metadata.tsv").read_text() == "a\nb\nc\nd\n"
    assert (folder / "sprite.png").exists()
    config = (tmp_path / "projector_config.pbtxt").read_text()
    assert 'tensor_name: "feat/x:00002"' in config and "single_image_dim: 5" in config


def test_default_log_dir_comment_and_purge_step(tmp_path, monkeypatch):
    import socket
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1", filename_suffix=".dg")
    w.close()
    pattern = r"runs/[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname()) + "_lr0.1"
    assert re.fullmatch(pattern, w.get_logdir()), w.get_logdir()
    assert os.listdir(w.get_logdir())[0].endswith(".dg")

    with SummaryWriter("purged", purge_step=5) as w:
        w.add_scalar("x", 1.0, 5)
    assert [e.step for e in _read(tmp_path / "purged").Scalars("x")] == [5]


def test_close_then_write_reopens_and_flush(tmp_path):
    w = SummaryWriter(tmp_path, max_queue=1, flush_secs=1)
    w.add_scalar("a", 1.0, 0)
    w.flush()
    w.close()
    w.add_scalar("a", 2.0, 1)                    # a closed writer opens a new event file
    w.close()
    assert [e.value for e in _read(tmp_path).Scalars("a")] == [1.0, 2.0]


def test_figure_is_rendered_lazily(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = plt.figure(figsize=(1, 1), dpi=20)
    with SummaryWriter(tmp_path) as w:
        w.add_figure("fig", fig, 0)
    image = _read(tmp_path).Images("fig")[0]
    assert (image.width, image.height) == (20, 20)


def test_import_is_lazy_and_names_the_extra():
    code = ("import sys, dynograph\n"
            "assert 'tensorboard' not in sys.modules, 'import dynograph imported tensorboard'\n"
            "sys.modules['tensorboard'] = None\n"
            "try:\n"
            "    import dynograph.utils.tensorboard\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert 'pip install "dynograph[tensorboard]"' in r.stdout

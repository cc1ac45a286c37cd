"""dynograph.export: export -> save -> load in a fresh process -> the same outputs as eager, at
batch sizes other than the traced one; preconditions; training steps; damaged files."""
import io
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph.export import Dim, ExportError, export, load, save
from dynograph.serialization import CheckpointError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import export_models  # noqa: E402
from tools import fuzz_files  # noqa: E402


def _batch(x, dim, n):
    shape = list(x.shape)
    shape[dim] = n
    return dynograph.randn(*shape)


def _eager(model, x):
    with dynograph.no_grad():
        out = model(x)
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def test_round_trip_in_a_fresh_process(tmp_path):
    """Every model exported with a symbolic batch size, saved, and run by a new Python process
    that cannot import the models' source, at two batch sizes never traced (and import
    dynograph there does not import onnx)."""
    expected = {}
    for name in export_models.NAMES:
        model, x, dim = export_models.build(name)
        ep = export(model, (x,), dynamic_shapes=({dim: Dim("batch")},))
        save(ep, tmp_path / f"{name}.dgx")
        for n in (2, x.shape[dim] + 3):
            xn = _batch(x, dim, n)
            dynograph.save(xn, tmp_path / f"{name}.{n}.in")
            expected[name, n] = _eager(model, xn)
    del model, ep
    sys.modules.pop("export_models")
    script = textwrap.dedent("""
        import sys
        sys.modules["export_models"] = None          # the models' source cannot be imported
        import dynograph, dynograph.export
        folder, names = sys.argv[1], sys.argv[2:]
        for name in names:
            ep = dynograph.export.load(f"{folder}/{name}.dgx")
            for backend in ("llvm", "interpreter"):
                run = ep.module(backend)
                for n in (2, 3, 4, 6, 7, 8, 10):
                    try:
                        x = dynograph.load(f"{folder}/{name}.{n}.in")
                    except FileNotFoundError:
                        continue
                    out = run(x)
                    out = list(out) if isinstance(out, tuple) else [out]
                    dynograph.save(out, f"{folder}/{name}.{n}.{backend}.out")
            wrong = dynograph.zeros(*[k + 1 for k in x.shape])     # every size off by one
            try:
                ep.module()(wrong)
            except RuntimeError as e:
                assert str(e).startswith("exported program"), e
            else:
                raise AssertionError(f"{name}: a wrong input shape ran")
        dynograph.onnx                               # touching it never imports onnx
        print("ran", len(names), "onnx imported:", "onnx" in sys.modules)
        """)
    env = dict(os.environ, PYTHONPATH="")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), *export_models.NAMES],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "ran 5 onnx imported: False" in done.stdout
    import export_models as _again  # noqa: F401  (put back for the other tests)
    for (name, n), want in expected.items():
        for backend in ("llvm", "interpreter"):
            got = dynograph.load(tmp_path / f"{name}.{n}.{backend}.out")
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape, (name, n, backend)
                np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{name} at batch {n} on {backend}")


def _mlp_program():
    model, x, _ = export_models.build("mlp")
    return model, export(model, (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})


def test_preconditions_are_checked_on_every_call():
    model, ep = _mlp_program()
    run = ep.module()
    np.testing.assert_allclose(run(dynograph.ones(3, 10)).numpy(), _eager(model, dynograph.ones(3, 10))[0],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"expected input x.shape\[1\] to be equal to 10, but got 9"):
        run(dynograph.ones(3, 9))
    with pytest.raises(RuntimeError, match="input x must have dtype float32, got float64"):
        run(dynograph.ones(3, 10, dtype=dynograph.float64))
    with pytest.raises(RuntimeError, match=r"input x must have 2 dimensions \(\[s0, 10\]\), got shape \[10\]"):
        run(dynograph.ones(10))
    with pytest.raises(RuntimeError, match=r"s0 is 1, outside its range \[2, 64\]"):
        run(dynograph.ones(1, 10))
    with pytest.raises(RuntimeError, match=r"s0 is 65, outside its range \[2, 64\]"):
        run(dynograph.ones(65, 10))
    with pytest.raises(RuntimeError, match=r"the inputs have the structure \(\(\*, \*\), \{\}\), the program takes \(\(\*,\), \{\}\)"):
        run(dynograph.ones(3, 10), dynograph.ones(3, 10))
    with pytest.raises(RuntimeError, match="input x must be a tensor, got str"):
        run("x")


def test_comparisons_of_the_batch_size_are_preconditions():
    def f(x):
        if x.shape[0] > 4:              # traced at 6 and 7: the program holds for s0 > 4
            return x * 2
        return x
    ep = export(f, (dynograph.ones(6, 3),), dynamic_shapes=({0: Dim("n")},))
    assert "(s0 > 4) is True" in str(ep)
    np.testing.assert_array_equal(ep.module()(dynograph.ones(9, 3)).numpy(), np.full((9, 3), 2.0))
    with pytest.raises(RuntimeError, match=r"traced where \(s0 > 4\) is True; with s0 = 3 it is not"):
        ep.module()(dynograph.ones(3, 3))


def test_static_program_and_non_tensor_inputs():
    def f(x, scale, mode="sum"):
        y = x * scale
        return {"y": y.sum(0) if mode == "sum" else y, "n": x.shape[1]}
    x = dynograph.randn(4, 3)
    ep = export(f, (x, 2.0), {"mode": "sum"})
    out = ep.module()(x, 2.0, mode="sum")
    assert out["n"] == 3
    np.testing.assert_allclose(out["y"].numpy(), (x * 2.0).sum(0).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"input scale must be 2.0 \(the program was specialized on it\), got 3.0"):
        ep.module()(x, 3.0, mode="sum")
    with pytest.raises(RuntimeError, match=r"expected input x.shape\[0\] to be equal to 4, but got 5"):
        ep.module()(dynograph.randn(5, 3), 2.0, mode="sum")


def test_printing_shows_the_ir_text_that_parses_back():
    from dynograph.compiler.text import parse_graph, print_graph
    _, ep = _mlp_program()
    text = str(ep)
    ir = print_graph(ep.graph)
    assert ir in text and "input %0: f32[s0,10] x" in ir
    assert "x: float32[s0, 10]" in text and "s0 in [2, 64]" in text
    assert print_graph(parse_graph(ir)) == ir
    assert set(ep.state_dict) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


def test_input_mutation_and_buffers():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", dynograph.zeros(3))

        def forward(self, x):
            self.seen.add_(x.sum(0))
            x.mul_(2)
            return x + self.seen
    m = Counter()
    x = dynograph.ones(2, 3)
    ep = export(m, (x,))
    assert dynograph.equal(x, dynograph.ones(2, 3))          # export works on copies
    seen = ep.state["seen"].clone()
    y = dynograph.ones(2, 3)
    out = ep.module("interpreter")(y)
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(ep.state["seen"].numpy(), seen.numpy() + 2)
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(2 + ep.state["seen"].numpy(), (2, 3)))


def test_training_mode_program_keeps_its_generator_and_statistics(tmp_path):
    """Dropout draws from a generator the program holds (saved with it); BatchNorm in training
    mode updates the program's running statistics."""
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.BatchNorm1d(4)).train()
    ep = export(model, (dynograph.ones(4, 3),))
    assert any(i["kind"] == "rng" for i in ep.inputs)
    save(ep, tmp_path / "train.dgx")
    loaded = load(tmp_path / "train.dgx")
    x = dynograph.randn(4, 3)
    first = [ep.module("interpreter")(x) for _ in range(2)]
    again = [loaded.module()(x) for _ in range(2)]
    assert not dynograph.equal(first[0], first[1])         # fresh dropout masks each call
    for a, b in zip(first, again):                          # the same draws after a round trip
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ep.state["2.running_mean"].numpy(),
                               loaded.state["2.running_mean"].numpy(), rtol=1e-6)
    assert int(loaded.state["2.num_batches_tracked"]) == int(ep.state["2.num_batches_tracked"])


def test_training_step_program_continues_training_like_eager(tmp_path):
    dynograph.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = dynograph.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    x, y = dynograph.randn(6, 4), dynograph.randn(6, 1)
    ep = export(step, (x, y), training=True)
    assert ep.training and "addmm" in str(ep)
    save(ep, tmp_path / "step.dgx")
    loaded = load(tmp_path / "step.dgx").module()
    for i in range(3):
        xb, yb = dynograph.randn(6, 4), dynograph.randn(6, 1)
        got = loaded(xb, yb)
        want = step(xb, yb)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    params = dict(model.named_parameters())
    state = load(tmp_path / "step.dgx").state
    assert set(params) <= set(state)


def test_training_step_with_a_symbolic_batch_and_a_mean_loss(tmp_path):
    """A whole training step exported with a dynamic batch dimension runs at other batch sizes
    and keeps training like eager (the loss is a mean: 1/batch is part of the program)."""
    from dynograph.export import Dim
    dynograph.manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = dynograph.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    batch = Dim("batch")
    ep = export(step, (dynograph.randn(4, 8), dynograph.randint(0, 3, (4,))),
                dynamic_shapes=({0: batch}, {0: batch}), training=True)
    assert "s0" in str(ep)
    save(ep, tmp_path / "step.dgx")
    loaded = load(tmp_path / "step.dgx").module()
    for n in (7, 3, 7):
        xb, yb = dynograph.randn(n, 8), dynograph.randint(0, 3, (n,))
        np.testing.assert_allclose(loaded(xb, yb).numpy(), step(xb, yb).numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_export_errors_name_the_problem():
    def breaks(x):
        if x.sum().item() > 0:
            return x + 1
        return x - 1
    with pytest.raises(Exception, match=r"graph break.*\n.*\n.*\n  at .*test_export.py:\d+"):
        export(breaks, (dynograph.ones(2),))
    m = nn.Linear(3, 2)
    with pytest.raises(ExportError, match="one symbolic size .* names several: a, b"):
        export(lambda x, y: x + y, (dynograph.ones(2, 3), dynograph.ones(2, 3)),
               dynamic_shapes=({0: Dim("a")}, {0: Dim("b")}))
    with pytest.raises(ExportError, match="sizes 0 and 1 are specialized"):
        export(m, (dynograph.ones(1, 3),), dynamic_shapes=({0: Dim("batch")},))
    with pytest.raises(ExportError, match="outputs require grad"):
        export(m, (dynograph.ones(2, 3),), training=True)
    with pytest.raises(ExportError, match="dynamic_shapes names 'y', which is not an input"):
        export(m, (dynograph.ones(2, 3),), dynamic_shapes={"y": {0: Dim("b")}})
    with pytest.raises(ExportError, match="cannot share one symbolic size"):
        export(lambda x: x * x.shape[0], (dynograph.ones(4, 3),), dynamic_shapes=({0: Dim("b")},))


# ---------------------------------------------------------------- files

def _saved_mlp():
    buf = io.BytesIO()
    save(_mlp_program()[1], buf)
    return buf.getvalue()


def test_foreign_and_newer_files_are_refused(tmp_path):
    dynograph.save({"weight": dynograph.ones(2)}, tmp_path / "state.pt")
    with pytest.raises(CheckpointError, match="not an exported program"):
        load(tmp_path / "state.pt")
    (tmp_path / "text.dgx").write_text("graph {\n}\n")
    with pytest.raises(CheckpointError, match="not a dynograph checkpoint"):
        load(tmp_path / "text.dgx")
    ep = _mlp_program()[1]
    newer = {"format": "dynograph.export", "version": 99, "dynograph": "9.0.0",
             "program": {}, "state": {}}
    dynograph.save(newer, tmp_path / "newer.dgx")
    with pytest.raises(CheckpointError, match=r"format version 99 \(written by dynograph 9.0.0\); this "
                                              r"dynograph \(0.1.0\) reads export format versions 1 to 1"):
        load(tmp_path / "newer.dgx")
    # a graph calling an op this dynograph does not know
    obj = dynograph.load(io.BytesIO(_saved_mlp()))
    obj["program"]["graph"] = obj["program"]["graph"].replace("= erf(", "= frob(")
    dynograph.save(obj, tmp_path / "frob.dgx")
    with pytest.raises(CheckpointError, match="unknown op 'frob'"):
        load(tmp_path / "frob.dgx")
    obj = dynograph.load(io.BytesIO(_saved_mlp()))
    obj["state"]["fc1.weight"] = dynograph.ones(3, 3)
    dynograph.save(obj, tmp_path / "shape.dgx")
    with pytest.raises(CheckpointError, match=r"state 'fc1.weight' must be a tensor of type f32\[32,10\], "
                                              r"the file holds float32\[3, 3\]"):
        load(tmp_path / "shape.dgx")
    assert ep is not None


def test_extra_files_travel_with_the_program(tmp_path):
    _, ep = _mlp_program()
    save(ep, tmp_path / "mlp.dgx", extra_files={"labels.txt": "cat\ndog", "blob": b"\x00\x01"})
    extra = {"labels.txt": None, "blob": None, "missing": None}
    load(tmp_path / "mlp.dgx", extra_files=extra)
    assert extra == {"labels.txt": "cat\ndog", "blob": b"\x00\x01", "missing": None}


def test_damaged_files_are_refused_cleanly():
    """Truncated, bit-flipped and header-edited copies (tools/fuzz_files.py's mutations) either
    load and run or raise CheckpointError."""
    data = _saved_mlp()
    x = dynograph.randn(3, 10)
    load(io.BytesIO(data)).module("interpreter")(x)
    rng = random.Random(5)
    for i in range(240):
        mutate = fuzz_files.MUTATIONS[i % len(fuzz_files.MUTATIONS)]
        try:
            ep = load(io.BytesIO(mutate(rng, data)))
        except CheckpointError:
            continue
        try:
            ep.module("interpreter")(x)
        except RuntimeError as e:         # a precondition the edit changed
            assert str(e).startswith("exported program"), e

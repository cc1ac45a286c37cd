"""dynograph.save / dynograph.load, PyTorch checkpoint interop and dynograph.safetensors."""
import io
import json
import math
import os
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import dynograph
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import NoCudaError
from dynograph.serialization import CheckpointError, SafetensorError, UnsafeCheckpointError
from dynograph.serialization import container, torch_format

ALL = D.ALL_DTYPES


def roundtrip(obj, **save_kw):
    buf = io.BytesIO()
    dynograph.save(obj, buf, **save_kw)
    buf.seek(0)
    return dynograph.load(buf)


def sample(dtype, shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    if dtype is D.bool:
        a = np.asarray(rng.random(shape) > 0.5)
    elif dtype.is_floating_point:
        a = np.asarray(rng.standard_normal(shape) * 100).astype(dtype.np)
    else:
        a = np.asarray(rng.integers(0, 100, shape)).astype(dtype.np)
    return dynograph.from_numpy(a)


def same_bits(a, b):
    """Same dtype, shape and bytes (nan payloads, -0.0 and bfloat16 included)."""
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    x, y = np.ascontiguousarray(a._data), np.ascontiguousarray(b._data)
    assert x.reshape(-1).view(np.uint8).tobytes() == y.reshape(-1).view(np.uint8).tobytes()


def shares_memory(a, b):
    return np.shares_memory(a._data, b._data)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_every_dtype_round_trips(dtype, fmt):
    x = sample(dtype, (3, 4))
    objs = {"x": x, "scalar": sample(dtype, ()), "empty": dynograph.from_numpy(np.zeros((0, 3), dtype.np)),
            "strided": x[:, ::2], "t": x.t()}
    out = roundtrip(objs, format=fmt)
    for k in objs:
        same_bits(out[k], objs[k])
        assert out[k].stride() == objs[k].stride() or k in ("scalar", "empty")


def test_special_floats_keep_their_bits():
    x = dynograph.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45])
    same_bits(roundtrip(x), x)
    h = x.to(dynograph.bfloat16)
    same_bits(roundtrip(h), h)


def test_nested_containers_keep_types_and_order():
    obj = OrderedDict([
        ("z", 1), ("a", [1, 2.0, True, None, "ünïcode", b"\x00\xff", bytearray(b"ab")]),
        ("tuple", (1, (2, [3, (4,)]))), ("ints", {0: "zero", 1: {2: (3,)}, -5: None}),
        ("floats", [float("nan"), float("inf"), -float("inf"), 0.1, -0.0, 1e308]),
        ("complex", [1 + 2j, complex(float("nan"), -1)]), ("big", 2 ** 100),
        ("tuple_key", {(1, "a"): 2, 2.5: 3, None: 4, True: 5}), ("set", {1, 2}),
        ("frozen", frozenset({"a"})), ("dtype", dynograph.bfloat16), ("device", dynograph.device("cpu")),
        ("size", dynograph.Size([2, 3])), ("empty", [[], (), {}, OrderedDict()]),
        ("counter", Counter({3: 1, 7: 2})),
    ])
    out = roundtrip(obj)
    assert type(out) is OrderedDict and list(out) == list(obj)
    assert out["z"] == 1 and type(out["z"]) is int
    a = out["a"]
    assert a[:5] == [1, 2.0, True, None, "ünïcode"] and type(a[0]) is int and type(a[1]) is float
    assert type(a[2]) is bool and a[5] == b"\x00\xff" and type(a[6]) is bytearray
    assert out["tuple"] == (1, (2, [3, (4,)])) and type(out["tuple"][1][1]) is list
    assert out["ints"] == {0: "zero", 1: {2: (3,)}, -5: None}
    f = out["floats"]
    assert math.isnan(f[0]) and f[1:3] == [math.inf, -math.inf] and f[3] == 0.1
    assert math.copysign(1, f[4]) == -1 and f[5] == 1e308
    assert out["complex"][0] == 1 + 2j and math.isnan(out["complex"][1].real)
    assert out["big"] == 2 ** 100
    assert out["tuple_key"] == {(1, "a"): 2, 2.5: 3, None: 4, True: 5}
    assert out["set"] == {1, 2} and type(out["frozen"]) is frozenset
    assert out["dtype"] is dynograph.bfloat16 and out["device"] == dynograph.device("cpu")
    assert type(out["size"]) is dynograph.Size and out["size"] == (2, 3)
    assert out["empty"] == [[], (), {}, OrderedDict()] and type(out["empty"][3]) is OrderedDict
    assert type(out["counter"]) is Counter and out["counter"] == Counter({3: 1, 7: 2})


def test_lr_scheduler_state_dicts_round_trip(torch, tmp_path):
    from dynograph.optim import lr_scheduler as L
    opt = dynograph.optim.SGD(_mlp(0).parameters(), lr=0.1)
    sched = L.MultiStepLR(opt, [1, 2])
    opt.step()
    sched.step()
    sd = sched.state_dict()
    assert roundtrip(sd) == sd and type(roundtrip(sd)["milestones"]) is Counter
    dynograph.save(sd, tmp_path / "s.pt", format="torch")
    assert torch.load(tmp_path / "s.pt", weights_only=True) == sd
    tsched = torch.optim.lr_scheduler.MultiStepLR(torch.optim.SGD([torch.zeros(1)], lr=0.1), [4, 5])
    torch.save(tsched.state_dict(), tmp_path / "t.pt")
    assert dynograph.load(tmp_path / "t.pt")["milestones"] == Counter({4: 1, 5: 1})


def test_plain_values_at_top_level():
    for v in [None, 3, 2.5, "s", b"b", (1,), [2], 1j, True]:
        out = roundtrip(v)
        assert out == v and type(out) is type(v)
    assert math.isnan(roundtrip(float("nan")))


def test_paths_pathlib_and_file_objects(tmp_path):
    x = sample(D.float32)
    dynograph.save(x, str(tmp_path / "a.pt"))
    same_bits(dynograph.load(str(tmp_path / "a.pt")), x)
    dynograph.save(x, tmp_path / "b.pt")
    same_bits(dynograph.load(tmp_path / "b.pt"), x)
    with open(tmp_path / "c.pt", "wb") as f:
        dynograph.save(x, f)
    with open(tmp_path / "c.pt", "rb") as f:
        same_bits(dynograph.load(f), x)
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "b.pt", "c.pt"]    # no temp files left


class _Pipe(io.RawIOBase):
    """A write-only stream that cannot seek or tell (a pipe, a socket)."""

    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.data += b
        return len(b)


@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_save_to_a_stream_that_cannot_seek(fmt):
    x = dynograph.arange(3_000_000, dtype=dynograph.float32)    # large: its CRC is computed aside
    pipe = _Pipe()
    dynograph.save({"x": x, "v": x[5:10]}, pipe, format=fmt)
    assert zipfile.ZipFile(io.BytesIO(bytes(pipe.data))).testzip() is None
    out = dynograph.load(io.BytesIO(bytes(pipe.data)))
    same_bits(out["x"], x)
    assert out["v"].tolist() == [5, 6, 7, 8, 9] and shares_memory(out["x"], out["v"])


def test_torch_reads_a_torch_format_file_written_to_a_pipe(torch):
    pipe = _Pipe()
    dynograph.save({"x": dynograph.arange(3_000_000, dtype=dynograph.float32)}, pipe, format="torch")
    out = torch.load(io.BytesIO(bytes(pipe.data)), weights_only=True)
    assert out["x"][-1].item() == 2999999.0


@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_zip64_records(monkeypatch, fmt):
    """Sizes and offsets past the (lowered) 4 GiB mark get zip64 records that readers accept."""
    monkeypatch.setattr(container, "ZIP64_AT", 100)
    x = dynograph.arange(1000.0)
    buf = io.BytesIO()
    dynograph.save({"x": x, "v": x[10:20]}, buf, format=fmt)
    monkeypatch.undo()
    data = buf.getvalue()
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data        # zip64 end record and locator
    assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None
    out = dynograph.load(io.BytesIO(data))
    same_bits(out["x"], x)
    assert shares_memory(out["x"], out["v"]) and out["v"][0].item() == 10


def test_zip64_torch_reads_it(torch, monkeypatch):
    monkeypatch.setattr(container, "ZIP64_AT", 100)
    buf = io.BytesIO()
    dynograph.save({"x": dynograph.arange(1000.0)}, buf, format="torch")
    buf.seek(0)
    assert torch.load(buf, weights_only=True)["x"][999].item() == 999.0


def test_same_object_saves_to_same_bytes():
    obj = {"w": sample(D.float32), "step": 3}
    a, b = io.BytesIO(), io.BytesIO()
    dynograph.save(obj, a)
    dynograph.save(obj, b)
    assert a.getvalue() == b.getvalue()


def test_tensor_data_is_aligned_and_stored():
    buf = io.BytesIO()
    dynograph.save({"a": sample(D.float32), "b": sample(D.float64), "c": sample(D.int8)}, buf)
    buf.seek(0)
    reader = container.ZipReader(buf, "x")
    for name in reader.names():
        assert reader.span(name)[0] % 64 == 0
        assert reader.info(name).compress_type == zipfile.ZIP_STORED
    assert zipfile.ZipFile(buf).testzip() is None
    header = json.loads(reader.read("dynograph/header.json"))
    assert all(b % 64 == 0 for b, _ in header["storages"])


# ---------------------------------------------------------------- shared storage

@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_views_share_memory_after_load(fmt):
    x = dynograph.arange(12.0).reshape(3, 4)
    obj = {"x": x, "t": x.t(), "row": x[1], "col": x[:, 2], "again": x}
    out = roundtrip(obj, format=fmt)
    assert out["again"] is out["x"]
    for k in ("t", "row", "col"):
        assert shares_memory(out["x"], out[k])
        same_bits(out[k], obj[k])
    out["x"][1, 2] = -7.0
    assert out["t"][2, 1].item() == -7.0 and out["row"][2].item() == -7.0 and out["col"][1].item() == -7.0
    assert out["row"].storage_offset() == 4 and out["col"].stride() == (4,)


def test_shared_storage_is_saved_once():
    x = dynograph.zeros(1000)
    buf = io.BytesIO()
    dynograph.save([x, x[10:20], x[::3], x.reshape(10, 100)], buf)
    buf.seek(0)
    header = json.loads(container.ZipReader(buf, "x").read("dynograph/header.json"))
    assert len(header["storages"]) == 1 and len(header["tensors"]) == 4


def test_loaded_tensors_are_writable_and_independent_of_the_buffer():
    buf = io.BytesIO()
    dynograph.save({"a": dynograph.ones(3)}, buf)
    data = buf.getvalue()
    out = dynograph.load(io.BytesIO(data))["a"]
    out.add_(1)
    assert out.tolist() == [2, 2, 2]
    assert dynograph.load(io.BytesIO(data))["a"].tolist() == [1, 1, 1]


def test_mmap_load(tmp_path):
    p = tmp_path / "m.pt"
    dynograph.save({"a": dynograph.arange(5.0), "b": dynograph.ones(2, 2)}, p)
    out = dynograph.load(p, mmap=True)
    assert out["a"].tolist() == [0, 1, 2, 3, 4]
    out["a"].add_(1)                               # copy-on-write: the file keeps its bytes
    assert dynograph.load(p)["a"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="mmap=True needs a file on disk"):
        dynograph.load(io.BytesIO(p.read_bytes()), mmap=True)


# ---------------------------------------------------------------- parameters, modules, optimizers

def test_parameters_come_back_as_parameters():
    p = dynograph.nn.Parameter(dynograph.randn(2, 3))
    q = dynograph.nn.Parameter(dynograph.randn(2), requires_grad=False)
    r = dynograph.randn(3).requires_grad_()
    for fmt in ("dynograph", "torch"):
        out = roundtrip([p, q, r, dynograph.ones(1)], format=fmt)
        assert type(out[0]) is dynograph.nn.Parameter and out[0].requires_grad
        assert type(out[1]) is dynograph.nn.Parameter and not out[1].requires_grad
        assert type(out[2]) is dynograph.Tensor and out[2].requires_grad and out[2].is_leaf
        assert not out[3].requires_grad
        same_bits(out[0].detach(), p.detach())


def _mlp(seed):
    dynograph.manual_seed(seed)
    return dynograph.nn.Sequential(dynograph.nn.Linear(4, 8), dynograph.nn.Tanh(), dynograph.nn.Linear(8, 3))


def _train(model, opt, steps, seed):
    g = np.random.default_rng(seed)
    for _ in range(steps):
        x = dynograph.from_numpy(g.standard_normal((5, 4)).astype(np.float32))
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()


@pytest.mark.parametrize("opt_cls,kw", [
    (dynograph.optim.Adam, dict(lr=0.01, amsgrad=True)),
    (dynograph.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (dynograph.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.9))),
])
def test_training_resumes_exactly(tmp_path, opt_cls, kw):
    model = _mlp(0)
    opt = opt_cls(model.parameters(), **kw)
    _train(model, opt, 3, 1)
    dynograph.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, tmp_path / "ck.pt")
    ck = dynograph.load(tmp_path / "ck.pt")
    assert list(ck["model"]) == list(model.state_dict()) and ck["model"]._metadata == \
        model.state_dict()._metadata
    state = ck["opt"]["state"]
    assert sorted(state) == [0, 1, 2, 3] and all(type(k) is int for k in state)
    assert ck["opt"]["param_groups"] == opt.state_dict()["param_groups"]
    if "betas" in kw:
        assert type(ck["opt"]["param_groups"][0]["betas"]) is tuple
    model2 = _mlp(5)
    opt2 = opt_cls(model2.parameters(), **kw)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    _train(model, opt, 3, 2)
    _train(model2, opt2, 3, 2)
    for a, b in zip(model.parameters(), model2.parameters()):
        same_bits(a.detach(), b.detach())


def test_whole_module_is_pickled_and_refused_by_default(tmp_path):
    model = _mlp(0)
    p = tmp_path / "model.pt"
    dynograph.save(model, p)
    with pytest.raises(UnsafeCheckpointError) as err:
        dynograph.load(p)
    msg = str(err.value)
    assert "holds a pickled Python object (dynograph.nn.modules.container.Sequential)" in msg
    assert "loading it could run arbitrary code" in msg
    assert "If you trust the file, load it with weights_only=False." in msg
    assert isinstance(err.value, pickle.UnpicklingError) and isinstance(err.value, RuntimeError)
    loaded = dynograph.load(p, weights_only=False)
    x = dynograph.randn(2, 4)
    same_bits(loaded(x).detach(), model(x).detach())


def test_non_plain_object_inside_a_dict_goes_through_pickle():
    class Config:
        pass
    buf = io.BytesIO()
    dynograph.save({"w": dynograph.ones(2), "cfg": OrderedDict}, buf)   # a class is not plain data
    buf.seek(0)
    with pytest.raises(UnsafeCheckpointError, match="pickled Python object"):
        dynograph.load(buf)
    buf.seek(0)
    assert dynograph.load(buf, weights_only=False)["cfg"] is OrderedDict
    cyc = []
    cyc.append(cyc)
    buf = io.BytesIO()
    dynograph.save(cyc, buf)
    buf.seek(0)
    out = dynograph.load(buf, weights_only=False)
    assert out[0] is out


# ---------------------------------------------------------------- map_location

def test_map_location_forms():
    obj = {"a": dynograph.arange(3.0)}
    for loc in [None, "cpu", dynograph.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}]:
        buf = io.BytesIO()
        dynograph.save(obj, buf)
        buf.seek(0)
        assert dynograph.load(buf, map_location=loc)["a"].tolist() == [0, 1, 2]
    seen = []

    def fn(storage, location):
        seen.append((type(storage), location))
        return storage

    buf = io.BytesIO()
    dynograph.save(obj, buf)
    buf.seek(0)
    assert dynograph.load(buf, map_location=fn)["a"].tolist() == [0, 1, 2]
    assert seen == [(dynograph.Tensor, "cpu")]
    for loc in ["cuda", "cuda:0", {"cpu": "cuda:1"}, lambda s, loc: s.cuda()]:
        buf.seek(0)
        with pytest.raises(NoCudaError, match="no CUDA device is available"):
            dynograph.load(buf, map_location=loc)


def _torch_file_with_location(location):
    data_pkl, roots = torch_format.encode({"w": dynograph.arange(4.0)})
    data_pkl = data_pkl.replace(b"X\x03\x00\x00\x00cpu", b"X" + len(location).to_bytes(4, "little")
                                + location.encode())
    buf = io.BytesIO()
    torch_format.write((data_pkl, roots), buf)
    buf.seek(0)
    return buf


def test_cuda_checkpoints_need_a_map_location():
    with pytest.raises(NoCudaError, match="no CUDA device is available"):
        dynograph.load(_torch_file_with_location("cuda:0"))
    for loc in ["cpu", {"cuda:0": "cpu"}, lambda s, loc: s]:
        out = dynograph.load(_torch_file_with_location("cuda:0"), map_location=loc)
        assert out["w"].tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------- errors

def test_not_a_checkpoint(tmp_path):
    cases = {b"": "not a dynograph checkpoint", b"hello world" * 10: "not a dynograph checkpoint",
             b"\x80\x02}q\x00.": "not a dynograph checkpoint"}
    for data, text in cases.items():
        with pytest.raises(CheckpointError, match=text):
            dynograph.load(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("other/readme.txt", "hi")
    buf.seek(0)
    with pytest.raises(CheckpointError, match="not a dynograph checkpoint"):
        dynograph.load(buf)


def test_truncated_file_names_the_byte():
    buf = io.BytesIO()
    dynograph.save({"a": dynograph.ones(100)}, buf)
    data = buf.getvalue()
    with pytest.raises(CheckpointError, match=f"truncated at byte {len(data) // 2}"):
        dynograph.load(io.BytesIO(data[: len(data) // 2]))


def _rewrite_header(data, edit):
    """The checkpoint ``data`` with its JSON header changed by ``edit(header)``."""
    src = zipfile.ZipFile(io.BytesIO(data))
    header = json.loads(src.read("dynograph/header.json"))
    edit(header)
    out = io.BytesIO()
    w = container.ZipWriter(out)
    w.write_bytes("dynograph/header.json", json.dumps(header).encode())
    w.write_bytes("dynograph/tensors.bin", src.read("dynograph/tensors.bin"))
    w.close()
    out.seek(0)
    return out


@pytest.mark.parametrize("edit,text", [
    (lambda h: h["tensors"][0].update(shape=[10 ** 30]), "reach byte"),
    (lambda h: h["tensors"][0].update(shape=[-1]), "non-negative integer"),
    (lambda h: h["tensors"][0].update(shape=[0, 2 ** 62, 2 ** 62], stride=[1, 1, 1]), "larger than any"),
    (lambda h: h["tensors"][0].update(dtype="float128"), "unknown tensor 0 dtype"),
    (lambda h: h["tensors"][0].update(storage=5), "refers to storage 5"),
    (lambda h: h["tensors"][0].update(stride=[1, 1, 1]), "differ in length"),
    (lambda h: h["tensors"][0].update(extra=1), "unknown key"),
    (lambda h: h["storages"][0].__setitem__(1, 10 ** 12), "outside the"),
    (lambda h: h["storages"].__setitem__(1, [0, 8]), "overlap"),
    (lambda h: h.update(format="other"), "not a dynograph checkpoint"),
    (lambda h: h.update(version=99), "version 99 is not supported"),
    (lambda h: h.update(object={"type": "evil"}), "unknown object type 'evil'"),
    (lambda h: h.update(object={"type": "dict", "items": [[[1], 2]]}), "unhashable"),
    (lambda h: h.update(object={"type": "tensor", "index": 9}), "no tensor 9"),
    (lambda h: h["tensors"][1].update(dtype="int64", requires_grad=True), "cannot require gradients"),
])
def test_header_validation(edit, text):
    buf = io.BytesIO()
    dynograph.save([dynograph.ones(4), dynograph.ones(2, 2, dtype=dynograph.float64)], buf)
    with pytest.raises(CheckpointError, match=text):
        dynograph.load(_rewrite_header(buf.getvalue(), edit))


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown checkpoint format 'npz'"):
        dynograph.save(1, io.BytesIO(), format="npz")
    with pytest.raises(TypeError, match="a path"):
        dynograph.save(1, 42)
    with pytest.raises(TypeError, match="a path"):
        dynograph.load(42)


# ---------------------------------------------------------------- atomic writes

def test_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "ck.pt"
    dynograph.save({"v": dynograph.ones(10)}, p)
    before = p.read_bytes()
    real = container.ZipWriter._put
    written = []

    def crash(self, data):
        written.append(len(data))
        if sum(written) > 1000:
            raise OSError("disk full")
        real(self, data)

    monkeypatch.setattr(container.ZipWriter, "_put", crash)
    with pytest.raises(OSError, match="disk full"):
        dynograph.save({"v": dynograph.zeros(10000)}, p)
    monkeypatch.undo()
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["ck.pt"]
    assert dynograph.load(p)["v"].tolist() == [1.0] * 10


def test_unpicklable_object_fails_before_touching_the_file(tmp_path):
    p = tmp_path / "ck.pt"
    dynograph.save(1, p)
    with pytest.raises(Exception):
        dynograph.save({"f": lambda: 0}, p)
    with pytest.raises(Exception):
        dynograph.save({"f": lambda: 0}, p, format="torch")
    assert dynograph.load(p) == 1 and os.listdir(tmp_path) == ["ck.pt"]


def test_save_through_a_symlink_replaces_the_target(tmp_path):
    target = tmp_path / "real.pt"
    dynograph.save(1, target)
    (tmp_path / "link.pt").symlink_to(target)
    dynograph.save(2, tmp_path / "link.pt")
    assert (tmp_path / "link.pt").is_symlink() and dynograph.load(target) == 2


def test_save_keeps_file_mode(tmp_path):
    p = tmp_path / "ck.pt"
    p.write_bytes(b"old")
    os.chmod(p, 0o640)
    dynograph.save(1, p)
    assert os.stat(p).st_mode & 0o777 == 0o640


# ---------------------------------------------------------------- hostile pickles

class _Touch:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _torch_zip(data_pkl):
    buf = io.BytesIO()
    w = container.ZipWriter(buf)
    w.write_bytes("archive/data.pkl", data_pkl)
    w.write_bytes("archive/version", b"3\n")
    w.close()
    buf.seek(0)
    return buf


def test_hostile_pickle_is_refused_without_side_effect(tmp_path):
    target = tmp_path / "pwned"
    payload = pickle.dumps({"w": _Touch(str(target))}, protocol=2)
    with pytest.raises(UnsafeCheckpointError, match="refusing to load object of type io.open"):
        dynograph.load(_torch_zip(payload))
    assert not target.exists()
    system = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85q\x01Rq\x02."
    with pytest.raises(UnsafeCheckpointError, match="refusing to load object of type os.system"):
        dynograph.load(_torch_zip(system))
    for proto in (0, 4, 5):
        with pytest.raises(UnsafeCheckpointError, match="refusing to load object of type io.open"):
            dynograph.load(_torch_zip(pickle.dumps(_Touch(str(target)), protocol=proto)))
    assert not target.exists()


def test_hostile_pickle_in_own_format_is_never_unpickled(tmp_path):
    target = tmp_path / "pwned"
    buf = io.BytesIO()
    dynograph.save(_Touch(str(target)), buf)
    buf.seek(0)
    with pytest.raises(UnsafeCheckpointError, match="pickled Python object"):
        dynograph.load(buf)
    assert not target.exists()


def test_build_on_a_tensor_is_refused():
    data_pkl, roots = torch_format.encode(dynograph.ones(2))
    evil = data_pkl[:-1] + b"}q\x99X\x05\x00\x00\x00_dataq\x98K\x01sb."
    buf = io.BytesIO()
    torch_format.write((evil, roots), buf)
    buf.seek(0)
    with pytest.raises(UnsafeCheckpointError, match="refusing to set the state of an object of type Tensor"):
        dynograph.load(buf)


# ---------------------------------------------------------------- PyTorch interop

def _torch_dtypes(torch):
    return {d: getattr(torch, d.name) for d in ALL}


def test_torch_written_checkpoint_loads(torch, tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=g)
    tensors = {d.name: (torch.randn(2, 3, generator=g) * 50).to(td) for d, td in _torch_dtypes(torch).items()}
    obj = {"tensors": tensors, "x": x, "xt": x.t(), "row": x[1], "scalar": torch.tensor(3.5),
           "p": torch.nn.Parameter(torch.ones(2)), "nested": OrderedDict(a=(1, [2.5, None]), b={3: "c"}),
           "dtype": torch.float16, "device": torch.device("cpu"), "size": torch.Size([1, 2]),
           "empty": torch.zeros(0, 3), "bytes": b"\x00\x01", "c": 1 + 2j, "nan": float("nan")}
    torch.save(obj, tmp_path / "t.pt")
    out = dynograph.load(tmp_path / "t.pt")
    for d in ALL:
        got, want = out["tensors"][d.name], tensors[d.name]
        assert got.dtype is d
        ref = want.view(torch.int16) if d is D.bfloat16 else want
        assert np.array_equal(got._data.view(np.int16) if d is D.bfloat16 else got._data, ref.numpy())
    assert shares_memory(out["x"], out["xt"]) and shares_memory(out["x"], out["row"])
    assert out["xt"].stride() == (1, 4) and out["row"].storage_offset() == 4
    assert np.array_equal(out["xt"]._data, x.t().numpy())
    assert out["scalar"].item() == 3.5 and out["scalar"].shape == ()
    assert type(out["p"]) is dynograph.nn.Parameter and out["p"].requires_grad
    assert out["nested"] == OrderedDict(a=(1, [2.5, None]), b={3: "c"})
    assert out["dtype"] is dynograph.float16 and out["device"] == dynograph.device("cpu")
    assert out["size"] == (1, 2) and type(out["size"]) is dynograph.Size
    assert out["empty"].shape == (0, 3) and out["bytes"] == b"\x00\x01" and out["c"] == 1 + 2j
    assert math.isnan(out["nan"])


def test_torch_checkpoint_mmap_and_legacy_format(torch, tmp_path):
    x = torch.arange(6.0).reshape(2, 3)
    torch.save({"x": x, "t": x.t()}, tmp_path / "t.pt")
    out = dynograph.load(tmp_path / "t.pt", mmap=True)
    assert out["t"].tolist() == x.t().tolist() and shares_memory(out["x"], out["t"])
    torch.save(x, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy PyTorch checkpoint"):
        dynograph.load(tmp_path / "old.pt")


def test_torch_state_dict_loads_into_dynograph_model(torch, tmp_path):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = torch.optim.Adam(tm.parameters(), lr=0.01)
    tm(torch.randn(5, 4)).sum().backward()
    opt.step()
    torch.save({"model": tm.state_dict(), "opt": opt.state_dict()}, tmp_path / "m.pt")
    ck = dynograph.load(tmp_path / "m.pt")
    dm = _mlp(3)
    dm.load_state_dict(ck["model"])
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    want = tm(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(dm(dynograph.from_numpy(x)).detach().numpy(), want, rtol=1e-6, atol=1e-6)
    assert ck["model"]._metadata == tm.state_dict()._metadata
    state = ck["opt"]["state"]
    assert sorted(state) == [0, 1, 2, 3] and state[0]["step"].item() == 1.0
    assert ck["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    dopt = dynograph.optim.Adam(dm.parameters(), lr=0.01)
    dopt.load_state_dict(ck["opt"])


@pytest.mark.parametrize("weights_only", [True, False])
def test_dynograph_torch_format_loads_in_torch(torch, tmp_path, weights_only):
    x = dynograph.arange(12.0).reshape(3, 4)
    tensors = {d.name: sample(d, (2, 3), seed=i) for i, d in enumerate(ALL)}
    obj = {"tensors": tensors, "x": x, "xt": x.t(), "col": x[:, 1], "p": dynograph.nn.Parameter(dynograph.ones(2)),
           "nested": OrderedDict(a=(1, [2.5, None]), b={3: "c"}), "dtype": dynograph.bfloat16,
           "device": dynograph.device("cpu"), "size": dynograph.Size([2]), "bytes": b"\x00\xff",
           "scalar": dynograph.tensor(2), "empty": dynograph.zeros(0, 2)}
    dynograph.save(obj, tmp_path / "d.pt", format="torch")
    out = torch.load(tmp_path / "d.pt", weights_only=weights_only)
    for d in ALL:
        got = out["tensors"][d.name]
        assert got.dtype == getattr(torch, d.name)
        want = tensors[d.name]._data
        if d is D.bfloat16:
            assert np.array_equal(got.view(torch.int16).numpy(), want.view(np.int16))
        else:
            assert np.array_equal(got.numpy(), want)
    assert out["xt"].untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()
    out["x"][0, 1] = 100.0
    assert out["xt"][1, 0].item() == 100.0 and out["col"][0].item() == 100.0
    assert isinstance(out["p"], torch.nn.Parameter) and out["p"].requires_grad
    assert out["nested"] == OrderedDict(a=(1, [2.5, None]), b={3: "c"})
    assert out["dtype"] is torch.bfloat16 and out["device"] == torch.device("cpu")
    assert out["size"] == torch.Size([2]) and out["bytes"] == b"\x00\xff" and out["scalar"].item() == 2
    assert out["empty"].shape == (0, 2)


def test_dynograph_state_dict_loads_into_torch_model(torch, tmp_path):
    dm = _mlp(0)
    dynograph.save(dm.state_dict(), tmp_path / "d.pt", format="torch")
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tm.load_state_dict(torch.load(tmp_path / "d.pt", weights_only=True))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(tm(torch.from_numpy(x)).detach().numpy(),
                               dm(dynograph.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_torch_whole_module_pickle_is_refused(torch, tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(UnsafeCheckpointError,
                       match="refusing to load object of type torch.nn.modules.linear.Linear"):
        dynograph.load(tmp_path / "m.pt")


# ---------------------------------------------------------------- safetensors

def _st_tensors():
    return {"w": sample(D.float32, (3, 4)), "h": sample(D.float16, (2,)), "b": sample(D.bfloat16, (2, 2)),
            "i": sample(D.int64, (5,)), "m": sample(D.bool, (3,)), "u": sample(D.uint8, (1, 1)),
            "s": sample(D.float64, ()), "e": dynograph.zeros(0, 4), "t": sample(D.float32, (3, 2)).t()}


def test_safetensors_round_trip(tmp_path):
    from dynograph import safetensors as st
    tensors = _st_tensors()
    st.save_file(tensors, tmp_path / "a.safetensors", metadata={"format": "pt"})
    out = st.load_file(tmp_path / "a.safetensors")
    assert sorted(out) == sorted(tensors)
    for k in tensors:
        same_bits(out[k], tensors[k])
    out2 = st.load(st.save(tensors))
    for k in tensors:
        same_bits(out2[k], tensors[k])
    with pytest.raises(NoCudaError):
        st.load_file(tmp_path / "a.safetensors", device="cuda")


def test_safetensors_package_interop(tmp_path):
    sn = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open
    from dynograph import safetensors as st
    tensors = {k: v for k, v in _st_tensors().items() if k != "b"}     # numpy has no bfloat16 here
    st.save_file(tensors, tmp_path / "ours.safetensors", metadata={"k": "v"})
    theirs = sn.load_file(str(tmp_path / "ours.safetensors"))
    for k, t in tensors.items():
        assert np.array_equal(theirs[k], t._data) and theirs[k].dtype == t._data.dtype
    with safe_open(str(tmp_path / "ours.safetensors"), "np") as f:
        assert f.metadata() == {"k": "v"}
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([True, False]),
              "c": np.arange(3, dtype=np.int16)}
    sn.save_file(arrays, str(tmp_path / "theirs.safetensors"))
    out = st.load_file(tmp_path / "theirs.safetensors")
    for k, a in arrays.items():
        assert np.array_equal(out[k]._data, a) and out[k]._data.dtype == a.dtype
    arrays = {k: t._data.copy(order="C") for k, t in tensors.items()}
    assert st.save(tensors, {"k": "v"}) == sn.save(arrays, metadata={"k": "v"})    # byte for byte


def test_safetensors_bfloat16_with_torch(torch, tmp_path):
    pytest.importorskip("safetensors")
    import safetensors.torch as stt
    from dynograph import safetensors as st
    t = {"b": torch.randn(3, 2).to(torch.bfloat16), "f": torch.randn(4)}
    stt.save_file(t, str(tmp_path / "t.safetensors"))
    out = st.load_file(tmp_path / "t.safetensors")
    assert np.array_equal(out["b"]._data.view(np.int16), t["b"].view(torch.int16).numpy())
    st.save_file(out, tmp_path / "d.safetensors")
    back = stt.load_file(str(tmp_path / "d.safetensors"))
    assert torch.equal(back["b"], t["b"]) and torch.equal(back["f"], t["f"])


@pytest.mark.parametrize("mutate,text", [
    (lambda d: d[:4], "truncated at byte 4"),
    (lambda d: d[:20], "truncated at byte 20"),
    (lambda d: (10 ** 9).to_bytes(8, "little") + d[8:], "larger than"),
    (lambda d: d[:-1], "outside the 31 bytes"),
    (lambda d: d + b"\x00" * 8, "cover"),
    (lambda d: d[:8] + d[8:].replace(b'"F32"', b'"X32"', 1), "unsupported dtype"),
])
def test_safetensors_errors(mutate, text):
    from dynograph import safetensors as st
    data = st.save({"a": dynograph.ones(4), "b": dynograph.ones(2, dtype=dynograph.int64)})
    with pytest.raises(SafetensorError, match=text):
        st.load(mutate(data))

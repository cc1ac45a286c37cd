"""Checkpoint files that are hostile or damaged at the file level: paths that are not regular
files, zip bombs, archives re-compressed by a zip tool, bit rot, temporaries of killed saves,
deeply nested objects."""
import io
import os
import struct
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import dynograph
from dynograph import safetensors as st
from dynograph.serialization import CheckpointError, SafetensorError, container


def _saved(obj, fmt="dynograph"):
    buf = io.BytesIO()
    dynograph.save(obj, buf, format=fmt)
    return buf.getvalue()


def _rezip(data, compression=zipfile.ZIP_DEFLATED, replace=None):
    """The archive ``data`` rewritten by python's zipfile with ``compression`` (as a zip tool
    would), entries named in ``replace`` given new contents."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as z:
        for name in src.namelist():
            z.writestr(name, (replace or {}).get(name, src.read(name)))
    return out.getvalue()


def _patch(data, name, value, local_at, central_at):
    """``data`` with a 4-byte field of entry ``name`` rewritten in both of its zip headers."""
    b = bytearray(data)
    raw = name.encode()
    for magic, name_at, field in ((b"PK\x03\x04", 30, local_at), (b"PK\x01\x02", 46, central_at)):
        at = b.find(magic)
        while b[at + name_at:at + name_at + len(raw)] != raw:
            at = b.find(magic, at + 1)
        b[at + field:at + field + 4] = struct.pack("<I", value)
    return bytes(b)


def _set_declared_size(data, name, size):
    return _patch(data, name, size, 22, 24)


def _set_crc(data, name, crc):
    return _patch(data, name, crc, 14, 16)


def _load_error_and_peak(data):
    """The CheckpointError message loading ``data`` raises, and the peak of memory allocated."""
    tracemalloc.start()
    try:
        dynograph.load(io.BytesIO(data))
    except CheckpointError as e:
        return str(e), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    raise AssertionError("the file loaded")


# ---------------------------------------------------------------- paths that are not files

@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("load", [dynograph.load, st.load_file])
def test_a_symlink_to_a_device_is_refused(tmp_path, device, load):
    link = tmp_path / "model.pt"
    link.symlink_to(device)
    error = SafetensorError if load is st.load_file else CheckpointError
    with pytest.raises(error, match="model.pt: the path names a character device, not a regular file"):
        load(link)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs fifos")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.pt"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match="names a fifo"):
        dynograph.load(fifo)


def test_a_directory_raises_like_open(tmp_path):
    with pytest.raises(IsADirectoryError):
        dynograph.load(tmp_path)


def test_file_objects_are_still_read(tmp_path):
    data = _saved({"a": dynograph.ones(3)})
    assert dynograph.load(io.BytesIO(data))["a"].tolist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------- compressed entries, bombs

@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_archive_recompressed_with_deflate_loads(fmt):
    x = dynograph.arange(1000.0).reshape(10, 100)
    obj = {"x": x, "row": x[3], "t": x.t(), "i": [dynograph.arange(5), dynograph.empty(0)]}
    loaded = dynograph.load(io.BytesIO(_rezip(_saved(obj, fmt))))
    assert np.array_equal(loaded["t"]._data, x._data.T)
    assert loaded["i"][0].tolist() == [0, 1, 2, 3, 4] and loaded["i"][1].shape == (0,)


def test_recompressed_torch_file_from_torch_loads(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.arange(6.0)}, tmp_path / "t.pt")
    data = _rezip((tmp_path / "t.pt").read_bytes())
    assert dynograph.load(io.BytesIO(data))["w"].tolist() == [0, 1, 2, 3, 4, 5]


def test_unknown_compression_method_is_named():
    data = _rezip(_saved({"a": dynograph.ones(3)}), zipfile.ZIP_BZIP2)
    with pytest.raises(CheckpointError, match="compression method 12"):
        dynograph.load(io.BytesIO(data))


BOMB = 64 << 20


def _torch_bomb():
    """A torch checkpoint whose 16-byte storage entry is 64 MiB of deflated zeros (~64 KiB)."""
    data = _saved({"a": dynograph.ones(4)}, "torch")
    return _rezip(data, replace={"archive/data/0": bytes(BOMB)})


def test_zip_bomb_declared_size_is_refused_before_inflating():
    data = _torch_bomb()
    assert len(data) < BOMB // 500
    error, peak = _load_error_and_peak(data)
    assert "'archive/data/0' declares 67108864 bytes, the checkpoint's metadata 16" in error
    assert peak < 1 << 20


def test_zip_bomb_with_a_lying_size_stops_inflating_at_the_declared_size():
    error, peak = _load_error_and_peak(_set_declared_size(_torch_bomb(), "archive/data/0", 16))
    assert "'archive/data/0' inflates to more than the 16 bytes it declares" in error
    assert peak < 2 << 20


def test_deflated_metadata_cannot_claim_more_than_deflate_can_hold():
    data = _rezip(_saved({"a": dynograph.ones(4)}, "torch"))
    data = _set_declared_size(data, "archive/data.pkl", 1 << 31)
    with pytest.raises(CheckpointError, match="more than its .* deflated bytes can hold"):
        dynograph.load(io.BytesIO(data))


# ---------------------------------------------------------------- bit rot

@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_bit_rot_in_tensor_data_fails_the_crc(fmt):
    x = dynograph.arange(4096.0)
    b = bytearray(_saved({"x": x}, fmt))
    b[bytes(b).find(x._data[1000:1016].tobytes()) + 5] ^= 0x10
    with pytest.raises(CheckpointError, match=r"is corrupted: its CRC-32 is [0-9a-f]{8}, the archive "
                                              r"records [0-9a-f]{8}"):
        dynograph.load(io.BytesIO(bytes(b)))


def test_bit_rot_in_a_deflated_entry_fails_the_crc():
    data = _rezip(_saved({"x": dynograph.arange(4096.0)}, "torch"))
    data = _set_crc(data, "archive/data/0", 12345)
    with pytest.raises(CheckpointError, match="'archive/data/0' is corrupted: its CRC-32"):
        dynograph.load(io.BytesIO(data))


def test_mmap_load_does_not_read_pages_for_a_crc(tmp_path):
    x = dynograph.arange(4096.0)
    dynograph.save({"x": x}, tmp_path / "m.pt")
    b = bytearray((tmp_path / "m.pt").read_bytes())
    b[bytes(b).find(x._data[1000:1016].tobytes())] ^= 1
    (tmp_path / "m.pt").write_bytes(bytes(b))
    assert dynograph.load(tmp_path / "m.pt", mmap=True)["x"].shape == (4096,)


# ---------------------------------------------------------------- temporaries of killed saves

_KILLED_SAVE = """
import os, signal, sys
from dynograph.serialization import container
with container._atomic(sys.argv[1]) as fp:
    fp.write(b"half a checkpoint")
    fp.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(os.name != "posix", reason="kill -9 and pid liveness are POSIX")
def test_next_save_removes_temporaries_of_a_killed_save(tmp_path):
    target = tmp_path / "ck.pt"
    dynograph.save({"a": 1}, target)
    run = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(target)])
    assert run.returncode == -9
    assert len(os.listdir(tmp_path)) == 2                       # the target and the stale temp
    assert dynograph.load(target) == {"a": 1}                   # untouched by the killed save
    dynograph.save({"a": 2}, target)
    assert os.listdir(tmp_path) == ["ck.pt"] and dynograph.load(target) == {"a": 2}


@pytest.mark.skipif(os.name != "posix", reason="pid liveness is POSIX")
def test_temporaries_of_live_writers_and_other_files_are_kept(tmp_path):
    prefix = container._temp_prefix("ck.pt")
    keep = [f"{prefix}{os.getppid()}.abcd1234.tmp",              # a live process' save in progress
            ".ck.pt.0123abcd-999999999.abcd1234.tmp",           # another host's writer
            f"{container._temp_prefix('other.pt')}999999999.x.tmp", "notes.txt"]
    for name in keep:
        (tmp_path / name).write_bytes(b"")
    dynograph.save({"a": 1}, tmp_path / "ck.pt")
    assert sorted(os.listdir(tmp_path)) == sorted(keep + ["ck.pt"])


# ---------------------------------------------------------------- malformed safetensors headers

def _safetensors_with(entry):
    import json
    text = json.dumps({"a": entry}).encode()
    return struct.pack("<Q", len(text)) + text + bytes(8)


@pytest.mark.parametrize("entry,text", [
    ({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}, "unsupported dtype"),
    ({"dtype": {"x": 1}, "shape": [2], "data_offsets": [0, 8]}, "unsupported dtype"),
    ({"dtype": "F32", "shape": [0, 2 ** 62, 2 ** 62], "data_offsets": [0, 0]}, "larger than any array"),
    ({"dtype": "F32", "shape": [0, 2 ** 64], "data_offsets": [0, 0]}, "larger than any array"),
    ({"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}, "non-negative integer"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 2 ** 70]}, "outside the"),
    ({"dtype": "F32", "shape": [2], "data_offsets": "0-8"}, "pair"),
    ([1, 2], "must be a JSON object"),
])
def test_malformed_safetensors_headers_raise_safetensor_error(entry, text):
    with pytest.raises(SafetensorError, match=text):
        st.load(_safetensors_with(entry))


# ---------------------------------------------------------------- deeply nested objects

def _nested(depth, kind):
    x = [dynograph.ones(1)]
    for _ in range(depth - 1):
        x = {"list": lambda v: [v], "dict": lambda v: {"k": v}, "tuple": lambda v: (v,)}[kind](x)
    return x


@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_nesting_up_to_the_cap_round_trips_and_beyond_it_is_refused(fmt, kind):
    limit = sys.getrecursionlimit()
    loaded = dynograph.load(io.BytesIO(_saved(_nested(1000, kind), fmt)))
    for _ in range(999):
        loaded = loaded[0] if kind != "dict" else loaded["k"]
    assert loaded[0].tolist() == [1.0]
    with pytest.raises(ValueError, match="nested more than 1000 levels deep"):
        _saved(_nested(1001, kind), fmt)
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("depth", [1002, 100000])
def test_loading_a_header_nested_beyond_the_cap_is_refused(depth):
    header = ('{"format":"dynograph","version":1,"kind":"tree","byteorder":"little","storages":[],'
              '"tensors":[],"object":' + "[" * depth + "]" * depth + "}")
    out = io.BytesIO()
    w = container.ZipWriter(out)
    w.write_bytes("dynograph/header.json", header.encode())
    w.close()
    with pytest.raises(CheckpointError, match="nested more than 1000 levels deep"):
        dynograph.load(io.BytesIO(out.getvalue()))

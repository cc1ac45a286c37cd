"""The safetensors format: an 8-byte little-endian header length, a JSON header, raw data.

    {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
     "__metadata__": {"key": "value"}}

Offsets are relative to the end of the header; tensors are C-contiguous, packed without
gaps or overlaps (the safetensors package rejects files that leave holes).  Files written
here load with the ``safetensors`` package and the other way round.

Every malformed file or buffer (truncated, a header that is not JSON, a bad dtype, shape or
offset, holes, a path that is not a regular file) raises ``SafetensorError``, a
``CheckpointError`` like the safetensors package's error of the same name, and nothing else.
"""
import json
import struct

import numpy as np

from dynograph._tensor import Tensor
from dynograph.runtime import dtypes as D

from . import validate as V
from .container import file_size, reading, writing
from .errors import SafetensorError
from .location import restore

__all__ = ["save_file", "load_file", "save", "load"]

_CODES = {D.bool: "BOOL", D.uint8: "U8", D.int8: "I8", D.int16: "I16", D.int32: "I32", D.int64: "I64",
          D.float16: "F16", D.bfloat16: "BF16", D.float32: "F32", D.float64: "F64"}
_FROM_CODE = {c: d for d, c in _CODES.items()}
_RANK = {d: i for i, d in enumerate([D.bool, D.uint8, D.int8, D.int16, D.float16, D.bfloat16, D.int32,
                                     D.float32, D.float64, D.int64])}
MAX_HEADER = 100 * 1024 * 1024      # the safetensors package's limit too


def _header(tensors, metadata):
    if not isinstance(tensors, dict):
        raise TypeError(f"expected a dict of tensors, got {type(tensors).__name__}")
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("metadata must be a dict of str to str")
    # the order the safetensors package writes: its dtype enum descending, then by name
    items = sorted(tensors.items(), key=lambda kv: (-_RANK.get(kv[1].dtype, -1), kv[0]))
    header, arrays, pos = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, t in items:
        if not isinstance(name, str) or not isinstance(t, Tensor):
            raise TypeError(f"expected str keys and dynograph tensors, got {name!r}: "
                            f"{type(t).__name__}")
        a = t._data if t._data.flags.c_contiguous else t._data.copy(order="C")
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(a.shape),
                        "data_offsets": [pos, pos + a.nbytes]}
        arrays.append(a.reshape(-1).view(np.uint8))
        pos += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)                     # data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text, arrays


def save(tensors, metadata=None):
    """The safetensors bytes of a dict ``{name: tensor}``."""
    head, arrays = _header(tensors, metadata)
    return b"".join([head] + [a.tobytes() for a in arrays])


def save_file(tensors, filename, metadata=None):
    """Write ``tensors`` to ``filename`` in the safetensors format (atomically)."""
    head, arrays = _header(tensors, metadata)
    with writing(filename) as fp:
        fp.write(head)
        for a in arrays:
            fp.write(memoryview(a))


def _parse(buf, name, device):
    """Tensors viewing ``buf`` (a writable uint8 array holding the whole file)."""
    size = buf.nbytes
    V.need(size >= 8, f"{name}: the file is truncated at byte {size} (no header length)", SafetensorError)
    n = int(buf[:8].view("<u8")[0])
    V.need(n <= MAX_HEADER, f"{name}: header of {n} bytes is larger than the {MAX_HEADER} allowed",
           SafetensorError)
    V.need(8 + n <= size, f"{name}: the file is truncated at byte {size}: the header needs {8 + n}",
           SafetensorError)
    try:
        header = json.loads(buf[8:8 + n].tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SafetensorError(f"{name}: the header is not valid JSON ({e})"[:300]) from None
    V.need(type(header) is dict, f"{name}: the header is not a JSON object", SafetensorError)
    metadata = header.pop("__metadata__", None)
    V.need(metadata is None or type(metadata) is dict and all(type(v) is str for v in metadata.values()),
           f"{name}: __metadata__ must map strings to strings", SafetensorError)
    data = buf[8 + n:]
    ranges, specs = [], {}
    for key, entry in header.items():
        what = f"{name}: tensor {key!r}"
        V.exact_keys(entry, ("dtype", "shape", "data_offsets"), what=what, error=SafetensorError)
        V.need(type(entry["dtype"]) is str and entry["dtype"] in _FROM_CODE,
               f"{what} has unsupported dtype {entry['dtype']!r}"[:200], SafetensorError)
        dt = _FROM_CODE[entry["dtype"]]
        shape = V.int_list(entry["shape"], f"{what} shape", SafetensorError)
        numel = V.shape_numel(shape, dt.itemsize, what, SafetensorError)
        begin, end = V.byte_range(entry["data_offsets"], data.nbytes, f"{what} data_offsets",
                                  SafetensorError)
        V.need(numel * dt.itemsize == end - begin, f"{what}: shape {shape} of {entry['dtype']} needs "
               f"{numel * dt.itemsize} bytes, data_offsets give {end - begin}", SafetensorError)
        ranges.append((begin, end, repr(key)))
        specs[key] = (dt, shape, begin, end)
    V.disjoint(ranges, f"{name}: tensors", SafetensorError)
    covered = sum(e - b for b, e, _ in ranges)
    V.need(covered == data.nbytes, f"{name}: the tensors cover {covered} of the {data.nbytes} data "
           "bytes", SafetensorError)
    out = {}
    for key, (dt, shape, begin, end) in specs.items():
        raw = restore(data[begin:end], "cpu", device)
        out[key] = Tensor._wrap(raw.view(dt.np).reshape(tuple(shape)))
    return out


def load(data):
    """The dict ``{name: tensor}`` held by safetensors bytes ``data``."""
    buf = np.frombuffer(bytearray(data), np.uint8)
    return _parse(buf, "<bytes>", None)


def load_file(filename, device="cpu"):
    """The dict ``{name: tensor}`` in the safetensors file ``filename``."""
    with reading(filename, SafetensorError) as (fp, name):
        size = file_size(fp)
        fp.seek(0)
        buf = np.empty(size, np.uint8)
        got = fp.readinto(memoryview(buf))
        V.need(got == size, f"{name}: the file is truncated at byte {got}", SafetensorError)
    return _parse(buf, name, device)

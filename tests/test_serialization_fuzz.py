"""Damaged checkpoints: truncated, bit-flipped and header-mangled files must either load or raise
one of the documented exceptions (CheckpointError and its subclasses), never anything else.

Deterministic (fixed seeds) and fast: a few hundred variants of small files per format.
"""
import copy
import io
import json
import random
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import dynograph
from dynograph import safetensors as st
from dynograph.serialization import CheckpointError
from dynograph.serialization.container import ZipWriter


def _checkpoint():
    x = dynograph.arange(12.0).reshape(3, 4)
    return OrderedDict([
        ("weight", x), ("view", x.t()), ("row", x[1]), ("half", dynograph.ones(3, dtype=dynograph.float16)),
        ("mask", dynograph.tensor([True, False])), ("idx", dynograph.arange(4)),
        ("p", dynograph.nn.Parameter(dynograph.ones(2))),
        ("opt", {"state": {0: {"step": dynograph.tensor(3.0)}}, "param_groups": [{"betas": (0.9, 0.99),
                                                                                  "params": [0]}]}),
        ("misc", [None, 1.5, float("nan"), "s", b"b", 2 + 1j]),
    ])


def _saved(fmt):
    buf = io.BytesIO()
    dynograph.save(_checkpoint(), buf, format=fmt)
    return buf.getvalue()


def _load_cleanly(data):
    """Load ``data``; only CheckpointError may escape."""
    try:
        dynograph.load(io.BytesIO(data))
    except CheckpointError:
        pass


def _variants(data, rng, flips, truncations):
    n = len(data)
    for cut in sorted(rng.sample(range(n), min(truncations, n))):
        yield data[:cut]
    for _ in range(flips):
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        yield bytes(b)
    for _ in range(flips // 4):                         # a random byte range overwritten
        b = bytearray(data)
        i = rng.randrange(n)
        k = rng.randrange(1, 16)
        b[i:i + k] = bytes(rng.randrange(256) for _ in range(k))
        yield bytes(b)


@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_truncated_and_bit_flipped_checkpoints(fmt):
    rng = random.Random(1234)
    data = _saved(fmt)
    dynograph.load(io.BytesIO(data))                    # the intact file loads
    count = 0
    for variant in _variants(data, rng, flips=200, truncations=100):
        _load_cleanly(variant)
        count += 1
    assert count == 350


_POOL = [-1, 0, 1, 2 ** 70, -2 ** 70, 1.5, float("1e308"), "", "float32", "x" * 50, None, True, False,
         [], {}, [0, 1], [[0, 1]], [-1, 4], {"type": "tensor", "index": 0}, {"type": "tensor", "index": 99},
         {"type": "dict", "items": [[[1], 2]]}, {"type": "tuple"}, {"type": "float", "value": "1"},
         {"type": "bytes", "base64": "!!"}, {"type": "device", "value": "tpu"}, {"type": "size", "items": [-2]},
         {"type": "dtype", "name": "complex64"}, [[0, 10 ** 12]], [10 ** 30, 10 ** 30]]


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def _rezip(header, blob):
    out = io.BytesIO()
    w = ZipWriter(out)
    w.write_bytes("dynograph/header.json", json.dumps(header).encode())
    w.write_bytes("dynograph/tensors.bin", blob)
    w.close()
    return out.getvalue()


def test_mangled_headers_with_valid_crc():
    """Header values replaced at random, the zip rebuilt with correct CRCs: the validator, not
    the checksum, must catch every bad value."""
    rng = random.Random(99)
    zf = zipfile.ZipFile(io.BytesIO(_saved("dynograph")))
    header = json.loads(zf.read("dynograph/header.json"))
    blob = zf.read("dynograph/tensors.bin")
    paths = [p for p in _paths(header) if p]
    for _ in range(300):
        h = copy.deepcopy(header)
        for _ in range(rng.choice((1, 1, 3))):
            path = rng.choice(paths)
            node = h
            try:
                for k in path[:-1]:
                    node = node[k]
                node[path[-1]] = copy.deepcopy(rng.choice(_POOL))
            except (KeyError, IndexError, TypeError):    # an earlier edit removed the path
                pass
        _load_cleanly(_rezip(h, blob))


def test_damaged_safetensors():
    rng = random.Random(7)
    data = st.save({"a": dynograph.arange(6.0).reshape(2, 3), "b": dynograph.ones(3, dtype=dynograph.int16),
                    "c": dynograph.tensor([True])}, metadata={"k": "v"})
    assert np.array_equal(st.load(data)["a"]._data, np.arange(6.0, dtype=np.float32).reshape(2, 3))
    for variant in _variants(data, rng, flips=200, truncations=60):
        try:
            st.load(variant)
        except CheckpointError:
            pass

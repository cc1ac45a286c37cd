"""Damaged checkpoints: truncated, bit-flipped and header-mangled files must either load or raise
one of the documented exceptions (CheckpointError and its subclasses), never anything else.

Deterministic (fixed seeds) and fast: a few hundred variants of small files per format.  The
samples and mutations are tools/fuzz_files.py's (``python -m tools.fuzz_files`` runs thousands).
"""
import io
import json
import os
import random
import sys
import zipfile

import numpy as np
import pytest

import dynograph
from dynograph import safetensors as st
from dynograph.serialization import CheckpointError, SafetensorError
from dynograph.serialization.container import ZipWriter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools import fuzz_files  # noqa: E402


def _load_cleanly(data):
    """Load ``data``; only CheckpointError may escape."""
    try:
        dynograph.load(io.BytesIO(data))
    except CheckpointError:
        pass


def _variants(data, rng, flips, truncations):
    for cut in sorted(rng.sample(range(len(data)), min(truncations, len(data)))):
        yield data[:cut]
    for _ in range(flips):
        yield fuzz_files.flip_bits(rng, data)
    for _ in range(flips // 4):
        yield fuzz_files.overwrite_range(rng, data)


@pytest.mark.parametrize("fmt", ["dynograph", "torch"])
def test_truncated_and_bit_flipped_checkpoints(fmt):
    rng = random.Random(1234)
    data = fuzz_files.saved(fmt)
    dynograph.load(io.BytesIO(data))                    # the intact file loads
    count = 0
    for variant in _variants(data, rng, flips=200, truncations=100):
        _load_cleanly(variant)
        count += 1
    assert count == 350


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
    zf = zipfile.ZipFile(io.BytesIO(fuzz_files.saved("dynograph")))
    header = json.loads(zf.read("dynograph/header.json"))
    blob = zf.read("dynograph/tensors.bin")
    for _ in range(300):
        _load_cleanly(_rezip(fuzz_files.edit_json(rng, header), blob))


def test_damaged_safetensors():
    rng = random.Random(7)
    data = fuzz_files.safetensors_sample()
    assert np.array_equal(st.load(data)["a"]._data, np.arange(6.0, dtype=np.float32).reshape(2, 3))
    for variant in _variants(data, rng, flips=200, truncations=60):
        try:
            st.load(variant)
        except SafetensorError:
            pass


@pytest.mark.parametrize("sample", ["dynograph", "dynograph-deflated", "torch", "torch-deflated",
                                    "safetensors"])
def test_every_mutation_kind_within_errors_and_memory(sample):
    """Bit flips, truncations, insertions, header fields and zip size/CRC/offset fields: only the
    documented error, and no allocation beyond the file's declared sizes (tracemalloc)."""
    counts, failures = fuzz_files.fuzz(240, seed=2024, formats=[sample])[sample]
    assert sum(counts.values()) == 240 and len(counts) == len(fuzz_files.MUTATIONS)
    assert [f[:3] for f in failures] == []

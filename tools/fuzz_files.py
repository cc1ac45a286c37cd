"""Fuzz the checkpoint file formats: ``python -m tools.fuzz_files --n 3000 [--seed 0]``.

For each format (dynograph's zip, PyTorch's zip, safetensors, a program saved by
dynograph.export; the two zip formats also as re-compressed with deflate, as a zip tool would)
it makes ``--n`` damaged copies of a small valid file: bit flips, truncations, inserted bytes,
overwritten ranges, header fields replaced (JSON values, pickle bytes, re-archived with valid
CRCs so the validator is what catches them) and zip
entry size, CRC and offset fields edited.  Each copy is loaded under tracemalloc; a failure is any
exception other than the documented ones (``CheckpointError``, for safetensors
``SafetensorError``) or a peak of memory beyond a bound from the file's size and the sizes its
zip directory declares.  Exits 1 if anything failed.  tests/test_serialization_fuzz.py runs a
few hundred copies per format with a fixed seed.
"""
import argparse
import copy
import io
import json
import random
import struct
import sys
import time
import tracemalloc
import zipfile
from collections import Counter, OrderedDict

import dynograph
from dynograph import safetensors as st
from dynograph.serialization import CheckpointError, SafetensorError
from dynograph.serialization.container import ZipWriter

SLACK = 1 << 20                 # Python objects a small header parses into, numpy's own buffers

# values header fields are replaced with: wrong types, negative, huge, unknown names
POOL = [-1, 0, 1, 2 ** 70, -2 ** 70, 1.5, float("1e308"), "", "float32", "F32", "x" * 50, None, True,
        False, [], {}, [0, 1], [[0, 1]], [-1, 4], [0, 2 ** 62, 2 ** 62], ["F32"],
        {"type": "tensor", "index": 0}, {"type": "tensor", "index": 99},
        {"type": "dict", "items": [[[1], 2]]}, {"type": "tuple"}, {"type": "float", "value": "1"},
        {"type": "bytes", "base64": "!!"}, {"type": "device", "value": "tpu"},
        {"type": "size", "items": [-2]}, {"type": "dtype", "name": "complex64"}, [[0, 10 ** 12]],
        [10 ** 30, 10 ** 30]]


# ---------------------------------------------------------------- samples

def checkpoint():
    x = dynograph.arange(12.0).reshape(3, 4)
    return OrderedDict([
        ("weight", x), ("view", x.t()), ("row", x[1]), ("half", dynograph.ones(3, dtype=dynograph.float16)),
        ("mask", dynograph.tensor([True, False])), ("idx", dynograph.arange(4)),
        ("p", dynograph.nn.Parameter(dynograph.ones(2))),
        ("opt", {"state": {0: {"step": dynograph.tensor(3.0)}},
                 "param_groups": [{"betas": (0.9, 0.99), "params": [0]}]}),
        ("misc", [None, 1.5, float("nan"), "s", b"b", 2 + 1j]),
    ])


def saved(fmt):
    buf = io.BytesIO()
    dynograph.save(checkpoint(), buf, format=fmt)
    return buf.getvalue()


def deflated(data):
    """``data`` (a zip) rewritten with every entry deflated."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in src.namelist():
            z.writestr(name, src.read(name))
    return out.getvalue()


def safetensors_sample():
    return st.save({"a": dynograph.arange(6.0).reshape(2, 3), "b": dynograph.ones(3, dtype=dynograph.int16),
                    "c": dynograph.tensor([True])}, metadata={"k": "v"})


def exported_program():
    """A small program saved by dynograph.export.save (a symbolic batch size, a buffer)."""
    from dynograph.export import Dim, export, save
    dynograph.manual_seed(0)
    model = dynograph.nn.Sequential(dynograph.nn.Linear(4, 3), dynograph.nn.BatchNorm1d(3),
                                    dynograph.nn.Softmax(dim=1)).eval()
    buf = io.BytesIO()
    save(export(model, (dynograph.ones(2, 4),), dynamic_shapes=({0: Dim("batch")},)), buf)
    return buf.getvalue()


def load_exported(data):
    """Load a program and run it once (a damaged file that loads must still run or refuse its
    input with the program's own error)."""
    from dynograph.export import load
    program = load(io.BytesIO(data))
    try:
        program.module("interpreter")(dynograph.ones(3, 4))
    except RuntimeError as e:
        if not str(e).startswith("exported program"):
            raise


def samples():
    """``{name: (bytes, load function, allowed error)}``."""
    def load_zip(data):
        dynograph.load(io.BytesIO(data))
    native, torch = saved("dynograph"), saved("torch")
    return {"export": (exported_program(), load_exported, CheckpointError),
            "dynograph": (native, load_zip, CheckpointError),
            "dynograph-deflated": (deflated(native), load_zip, CheckpointError),
            "torch": (torch, load_zip, CheckpointError),
            "torch-deflated": (deflated(torch), load_zip, CheckpointError),
            "safetensors": (safetensors_sample(), st.load, SafetensorError)}


# ---------------------------------------------------------------- mutations

def flip_bits(rng, data):
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 8))):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def truncate(rng, data):
    return data[:rng.randrange(len(data))]


def insert_bytes(rng, data):
    i = rng.randrange(len(data) + 1)
    return data[:i] + rng.randbytes(rng.randrange(1, 32)) + data[i:]


def overwrite_range(rng, data):
    i, k = rng.randrange(len(data)), rng.randrange(1, 16)
    return data[:i] + rng.randbytes(k) + data[i + k:]


def json_paths(node, path=()):
    """Every path to a value inside a JSON document."""
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from json_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from json_paths(v, path + (i,))


def edit_json(rng, doc, edits=None):
    """A deep copy of ``doc`` with one or a few values replaced from ``POOL``."""
    doc = copy.deepcopy(doc)
    paths = [p for p in json_paths(doc) if p]
    for _ in range(edits or rng.choice((1, 1, 3))):
        path = rng.choice(paths)
        node = doc
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = copy.deepcopy(rng.choice(POOL))
        except (KeyError, IndexError, TypeError):    # an earlier edit removed the path
            pass
    return doc


def rearchive(data, edit_entry):
    """The zip ``data`` rebuilt by ZipWriter (valid CRCs) after ``edit_entry(name, bytes)``."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    w = ZipWriter(out)
    for name in src.namelist():
        w.write_bytes(name, edit_entry(name, src.read(name)))
    w.close()
    return out.getvalue()


def edit_header(rng, data):
    """Header fields changed behind a valid archive or length prefix: the JSON header of the
    dynograph format and of safetensors, the pickle of the torch format."""
    if data[:2] != b"PK":
        n = struct.unpack("<Q", data[:8])[0]
        text = json.dumps(edit_json(rng, json.loads(data[8:8 + n]))).encode()
        return struct.pack("<Q", len(text)) + text + data[8 + n:]

    def edit(name, raw):
        if name.endswith("header.json"):
            return json.dumps(edit_json(rng, json.loads(raw))).encode()
        if name.endswith("data.pkl"):
            return rng.choice((flip_bits, overwrite_range, truncate, insert_bytes))(rng, raw)
        return raw
    return rearchive(data, edit)


_ZIP_FIELDS = {b"PK\x03\x04": (14, 18, 22), b"PK\x01\x02": (16, 20, 24, 42)}   # crc, sizes, offset


def edit_zip_field(rng, data):
    """One CRC, size or offset field of a local or central zip header (or safetensors' header
    length) set to a near, zero, huge or random value."""
    if data[:2] != b"PK":
        at, width = 0, 8
    else:
        heads = [(i, f) for magic, fields in _ZIP_FIELDS.items() for f in fields
                 for i in _find_all(data, magic)]
        at, width = sum(rng.choice(heads)), 4
    old = int.from_bytes(data[at:at + width], "little")
    top = (1 << 8 * width) - 1
    new = rng.choice((0, 1, max(old - 1, 0), min(old + 1, top), min(old * 2, top), min(old * 1000, top),
                      top >> 1, top, rng.randrange(top)))
    return data[:at] + new.to_bytes(width, "little") + data[at + width:]


def _find_all(data, magic):
    i = data.find(magic)
    while i >= 0:
        yield i
        i = data.find(magic, i + 1)


MUTATIONS = (flip_bits, truncate, insert_bytes, overwrite_range, edit_header, edit_zip_field)


# ---------------------------------------------------------------- running

def memory_bound(data):
    """What loading ``data`` may allocate: a few times the file, plus the sizes its zip
    directory declares (each no more than deflate can produce from its compressed bytes)."""
    declared = 0
    try:
        for info in zipfile.ZipFile(io.BytesIO(data)).infolist():
            cap = info.compress_size * 1032 + 1024 if info.compress_type else len(data)
            declared += min(info.file_size, cap)
    except Exception:                       # not a readable zip: only the file itself counts
        pass
    return 8 * len(data) + 2 * declared + SLACK


def try_one(data, load, allowed):
    """``None`` if ``load(data)`` loaded or raised ``allowed`` within the memory bound, else a
    description of the failure."""
    tracemalloc.start()
    try:
        load(data)
    except allowed:
        pass
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:300]
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    bound = memory_bound(data)
    return None if peak <= bound else f"allocated {peak} bytes, bound {bound}"


def fuzz(n, seed=0, formats=None):
    """``{format: (Counter of mutation -> outcome counts, [failures])}``."""
    results = {}
    for name, (data, load, allowed) in samples().items():
        if formats and name not in formats:
            continue
        load(data)                          # the intact sample loads
        rng = random.Random(f"{seed}-{name}")
        counts, failures = Counter(), []
        for i in range(n):
            mutate = MUTATIONS[i % len(MUTATIONS)]
            variant = mutate(rng, data)
            failure = try_one(variant, load, allowed)
            counts[mutate.__name__] += 1
            if failure:
                failures.append((i, mutate.__name__, failure, variant))
        results[name] = (counts, failures)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="damaged copies per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", action="append", help="only this sample (repeatable)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    failed = 0
    for name, (counts, failures) in fuzz(args.n, args.seed, args.format).items():
        print(f"{name:20s} {sum(counts.values())} copies "
              f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}): {len(failures)} failures")
        for i, mutation, failure, _ in failures[:10]:
            print(f"    #{i} {mutation}: {failure}")
        failed += len(failures)
    print(f"{time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""dynograph's own checkpoint format: a zip of a JSON header and one raw tensor blob.

    dynograph/header.json   {"format": "dynograph", "version": 1, "kind": "tree",
                             "byteorder": "little",
                             "storages": [[begin, end], ...],        byte ranges in the blob
                             "tensors": [{"storage", "dtype", "offset", "shape", "stride",
                                          "requires_grad", "parameter"}, ...],
                             "object": <the saved object, see below>}
    dynograph/tensors.bin   every storage once, each starting on a 64-byte boundary

Like safetensors, nothing in the file is executable: the object is JSON whose plain values
(null, booleans, strings, ints, finite floats, lists) stand for themselves and whose other
values are tagged objects, ``{"type": "tuple", "items": [...]}``, ``{"type": "dict", "items":
[[key, value], ...]}`` (keys of any type: optimizer states use ints), ``{"type": "tensor",
"index": i}``...  Tensors that view the same memory (a tensor and its slice or transpose)
share one storage, and load back sharing memory.

Objects beyond these (a whole Module, a custom class) are saved with pickle, in a separate
kind of file (``"kind": "pickle"`` and ``dynograph/data.pkl``) that ``load`` refuses unless
``weights_only=False``.
"""
import base64
import builtins
import json
import math
import pickle
import sys
from collections import Counter, OrderedDict

import numpy as np

from dynograph._tensor import Size, Tensor
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import device as Device

from . import validate as V
from .container import ALIGN, ZipWriter
from .errors import CheckpointError, UnsafeCheckpointError
from .location import check_target, restore
from .storage import flat_bytes, locate

FORMAT = "dynograph"
VERSION = 1
HEADER = "dynograph/header.json"
BLOB = "dynograph/tensors.bin"
PICKLE = "dynograph/data.pkl"


class NeedsPickle(Exception):
    """The object holds a value the JSON tree cannot express."""


# ---------------------------------------------------------------- saving

class _Encoder:
    def __init__(self):
        self.roots = []             # storage arrays, kept alive so their ids stay unique
        self.root_index = {}
        self.tensors = []
        self.tensor_index = {}
        self.open = set()           # containers being encoded: a cycle needs pickle

    def encode(self, obj):
        t = type(obj)
        if obj is None or t is builtins.bool or t is str or t is builtins.int:
            return obj
        if t is builtins.float:
            return obj if math.isfinite(obj) else {"type": "float", "value": repr(obj)}
        enc = _ENCODERS.get(t)
        if enc is None:
            if t is Tensor or t is _parameter_class():
                return self.tensor(obj)
            raise NeedsPickle(t)
        if t in (list, tuple, dict, OrderedDict, Counter, set, frozenset):
            if id(obj) in self.open:
                raise NeedsPickle(t)
            if len(self.open) >= V.MAX_DEPTH:
                V.too_deep(ValueError)
            self.open.add(id(obj))
            try:
                return enc(self, obj)
            finally:
                self.open.discard(id(obj))
        return enc(self, obj)

    def items(self, seq):
        return [self.encode(v) for v in seq]

    def mapping(self, obj, kind):
        node = {"type": kind, "items": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        attrs = getattr(obj, "__dict__", None)
        if attrs:
            if set(attrs) != {"_metadata"}:
                raise NeedsPickle(type(obj))
            node["metadata"] = self.encode(attrs["_metadata"])
        return node

    def tensor(self, t):
        i = self.tensor_index.get(id(t))
        if i is None:
            i = self.tensor_index[id(t)] = len(self.tensors)
            self.tensors.append(self.describe(t))
        return {"type": "tensor", "index": i}

    def describe(self, t):
        a = t._data
        root, offset, strides = locate(a)
        si = self.root_index.get(id(root))
        if si is None:
            si = self.root_index[id(root)] = len(self.roots)
            self.roots.append(root)
        item = a.itemsize
        return {"storage": si, "dtype": t.dtype.name, "offset": offset // item,
                "shape": list(a.shape), "stride": [s // item for s in strides],
                "requires_grad": t.requires_grad, "parameter": type(t) is _parameter_class()}


def _parameter_class():
    from dynograph.nn.parameter import Parameter    # nn imports the tensor layer, not this one
    return Parameter


def _complex(enc, z):
    return {"type": "complex", "real": enc.encode(z.real), "imag": enc.encode(z.imag)}


_ENCODERS = {
    list: lambda enc, x: enc.items(x),
    tuple: lambda enc, x: {"type": "tuple", "items": enc.items(x)},
    dict: lambda enc, x: enc.mapping(x, "dict"),
    OrderedDict: lambda enc, x: enc.mapping(x, "ordered_dict"),
    Counter: lambda enc, x: enc.mapping(x, "counter"),        # MultiStepLR's milestones
    set: lambda enc, x: {"type": "set", "items": enc.items(x)},
    frozenset: lambda enc, x: {"type": "frozenset", "items": enc.items(x)},
    complex: _complex,
    bytes: lambda enc, x: {"type": "bytes", "base64": base64.b64encode(x).decode()},
    bytearray: lambda enc, x: {"type": "bytearray", "base64": base64.b64encode(x).decode()},
    D.dtype: lambda enc, x: {"type": "dtype", "name": x.name},
    Device: lambda enc, x: {"type": "device", "value": str(x)},
    Size: lambda enc, x: {"type": "size", "items": [builtins.int(n) for n in x]},
}


def prepare_tree(obj):
    """A function writing ``obj`` as a JSON tree plus tensor blob to a stream; raises NeedsPickle,
    before anything is written, if ``obj`` holds a value the tree cannot express."""
    enc = _Encoder()
    with V.nesting_room():
        tree = enc.encode(obj)
        chunks, size, spans = _layout(enc.roots)
        header = {"format": FORMAT, "version": VERSION, "kind": "tree", "byteorder": sys.byteorder,
                  "storages": spans, "tensors": enc.tensors, "object": tree}
        text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    return lambda fp: _write_tree(text, chunks, size, fp)


def _layout(roots):
    """The blob's chunks (each storage on an ``ALIGN`` boundary), its size and each storage's span."""
    spans, chunks, pos = [], [], 0
    for root in roots:
        data = flat_bytes(root)
        pad = -pos % ALIGN
        if pad:
            chunks.append(bytes(pad))
            pos += pad
        spans.append([pos, pos + data.nbytes])
        chunks.append(memoryview(data))
        pos += data.nbytes
    return chunks, pos, spans


def _write_tree(header, chunks, size, fp):
    zw = ZipWriter(fp)
    zw.write_bytes(HEADER, header)
    zw.write(BLOB, chunks, size)
    zw.close()


def save_pickle(obj, fp, pickle_module, protocol):
    """The separate path for arbitrary objects: a pickle, marked as such in the header."""
    t = type(obj)
    header = {"format": FORMAT, "version": VERSION, "kind": "pickle",
              "type": f"{t.__module__}.{t.__qualname__}"}
    data = pickle_module.dumps(obj, protocol=protocol)
    zw = ZipWriter(fp)
    zw.write_bytes(HEADER, json.dumps(header).encode())
    zw.write_bytes(PICKLE, data)
    zw.close()


# ---------------------------------------------------------------- loading

def _reject_constant(name):
    raise CheckpointError(f"the header holds the non-JSON constant {name}")


def read_header(reader):
    raw = reader.read(HEADER)
    try:
        with V.nesting_room():
            header = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except CheckpointError:
        raise
    except RecursionError:
        V.too_deep()
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(f"{reader.name}: the header is not valid JSON ({e})"[:300]) from None
    V.exact_keys(header, ("format", "version", "kind"),
                 ("byteorder", "storages", "tensors", "object", "type"), "the header")
    V.need(header["format"] == FORMAT, f"{reader.name}: the file is not a dynograph checkpoint")
    V.need(header["version"] == VERSION,
           f"{reader.name}: checkpoint version {header['version']!r} is not supported (this dynograph "
           f"reads version {VERSION})"[:300])
    return header


def load(reader, map_location, pickle_module, weights_only, mapped, pickle_load_args=None):
    header = read_header(reader)
    if header["kind"] == "pickle":
        return _load_pickle(reader, header, map_location, pickle_module, weights_only,
                            pickle_load_args or {})
    V.need(header["kind"] == "tree", f"unknown checkpoint kind {header['kind']!r}"[:200])
    V.exact_keys(header, ("format", "version", "kind", "byteorder", "storages", "tensors", "object"),
                 what="the header")
    V.need(header["byteorder"] in ("little", "big"), f"unknown byteorder {header['byteorder']!r}"[:200])
    storages, tensors = _check_layout(reader, header)
    blob_end = max((e for _, e in storages), default=0)
    raw = reader.array(BLOB, mapped, storages, expected=blob_end) if storages else []
    try:
        built = _build_tensors(raw, tensors, header["byteorder"], map_location)
    except (ValueError, TypeError, OverflowError) as e:    # validated above; a last line of defence
        raise CheckpointError(f"{reader.name}: bad tensor record ({e})"[:300]) from None
    with V.nesting_room():
        return _Decoder(built).decode(header["object"], 0)


def _load_pickle(reader, header, map_location, pickle_module, weights_only, pickle_load_args):
    V.exact_keys(header, ("format", "version", "kind", "type"), what="the header")
    if weights_only:
        raise UnsafeCheckpointError(
            f"{reader.name}: the file holds a pickled Python object ({header['type']}), not just "
            "tensors and containers; loading it could run arbitrary code, so weights_only=True "
            "refuses it. If you trust the file, load it with weights_only=False."[:600])
    check_target(map_location)
    return (pickle_module or pickle).loads(reader.read(PICKLE), **pickle_load_args)


def _check_layout(reader, header):
    """Validate storages and tensor records against the blob before reading any data."""
    storages, records = header["storages"], header["tensors"]
    V.need(type(storages) is list and type(records) is list, "storages and tensors must be lists")
    blob_size = reader.size_of(BLOB) if storages else 0
    spans = [V.byte_range(s, blob_size, f"storage {i}") for i, s in enumerate(storages)]
    V.disjoint([(b, e, f"storage {i}") for i, (b, e) in enumerate(spans)], "storages")
    for i, r in enumerate(records):
        what = f"tensor {i}"
        V.exact_keys(r, ("storage", "dtype", "offset", "shape", "stride", "requires_grad",
                         "parameter"), what=what)
        V.need(V.is_int(r["storage"]) and 0 <= r["storage"] < len(spans),
               f"{what} refers to storage {r['storage']!r}, but the file has {len(spans)}"[:200])
        dt = V.dtype_named(r["dtype"], f"{what} dtype")
        V.nonneg_int(r["offset"], f"{what} offset")
        V.int_list(r["shape"], f"{what} shape")
        V.int_list(r["stride"], f"{what} stride")
        V.need(type(r["requires_grad"]) is bool and type(r["parameter"]) is bool,
               f"{what}: requires_grad and parameter must be booleans")
        V.need(not r["requires_grad"] or dt.is_floating_point,
               f"{what}: a tensor of dtype {dt.name} cannot require gradients")
        b, e = spans[r["storage"]]
        V.strided_extent(r["shape"], r["stride"], r["offset"], dt.itemsize, e - b, what)
    return spans, records


def _build_tensors(raw, records, byteorder, map_location):
    storages = [restore(r, "cpu", map_location) for r in raw]
    out = []
    for r in records:
        dt = V.DTYPES[r["dtype"]]
        item = dt.itemsize
        if 0 in r["shape"]:
            a = np.empty(r["shape"], dt.np)
        else:
            a = np.ndarray(r["shape"], dt.np, buffer=storages[r["storage"]], offset=r["offset"] * item,
                           strides=[s * item for s in r["stride"]])
        if byteorder != sys.byteorder and item > 1:
            a = a.byteswap()
        out.append(_tensor(a, r["requires_grad"], r["parameter"]))
    return out


def _tensor(a, requires_grad, parameter):
    if parameter:
        return _parameter_class()(Tensor._wrap(a), requires_grad)
    t = Tensor._wrap(a)
    if requires_grad:
        t.requires_grad = True
    return t


class _Decoder:
    def __init__(self, tensors):
        self.tensors = tensors

    def decode(self, node, depth):
        t = type(node)
        if node is None or t in (builtins.bool, builtins.int, builtins.float, str):
            return node
        if depth > V.MAX_DEPTH:             # ``node`` is a container inside MAX_DEPTH others
            V.too_deep()
        if t is list:
            return [self.decode(v, depth + 1) for v in node]
        V.need(t is dict and type(node.get("type")) is str, f"unexpected JSON value {node!r}"[:200])
        kind = node["type"]
        spec = _DECODERS.get(kind)
        V.need(spec is not None, f"unknown object type {kind!r}"[:200])
        keys, optional, fn = spec
        V.exact_keys(node, ("type",) + keys, optional, f"a {kind} object")
        try:
            return fn(self, node, depth + 1)
        except CheckpointError:
            raise
        except (TypeError, ValueError, OverflowError, RuntimeError) as e:   # an unhashable key...
            raise CheckpointError(f"bad {kind} object: {e}"[:300]) from None

    def seq(self, node, depth):
        V.need(type(node["items"]) is list, "items must be a list")
        return [self.decode(v, depth) for v in node["items"]]

    def mapping(self, node, depth, cls):
        V.need(type(node["items"]) is list, "items must be a list")
        out = cls()
        for pair in node["items"]:
            V.need(type(pair) is list and len(pair) == 2, "dict items must be [key, value] pairs")
            out[self.decode(pair[0], depth)] = self.decode(pair[1], depth)
        if "metadata" in node:
            out._metadata = self.decode(node["metadata"], depth)
        return out

    def tensor(self, node, depth):
        i = node["index"]
        V.need(V.is_int(i) and 0 <= i < len(self.tensors), f"no tensor {i!r}"[:100])
        return self.tensors[i]


def _float(dec, node, depth):
    V.need(node["value"] in ("nan", "inf", "-inf"), f"bad float {node['value']!r}"[:100])
    return builtins.float(node["value"])


def _number(dec, node, depth, key):
    v = dec.decode(node[key], depth)
    V.need(type(v) in (builtins.int, builtins.float), f"complex {key} must be a number")
    return v


def _bytes(node, cls):
    V.need(type(node["base64"]) is str, "bytes must be base64 text")
    return cls(base64.b64decode(node["base64"], validate=True))


def _device(node):
    V.need(type(node["value"]) is str, "device must be a string")
    return Device(node["value"])


def _size(node):
    return Size(V.int_list(node["items"], "size"))


_DECODERS = {
    "tuple": (("items",), (), lambda d, n, k: tuple(d.seq(n, k))),
    "set": (("items",), (), lambda d, n, k: set(d.seq(n, k))),
    "frozenset": (("items",), (), lambda d, n, k: frozenset(d.seq(n, k))),
    "dict": (("items",), (), lambda d, n, k: d.mapping(n, k, dict)),
    "ordered_dict": (("items",), ("metadata",), lambda d, n, k: d.mapping(n, k, OrderedDict)),
    "counter": (("items",), (), lambda d, n, k: d.mapping(n, k, Counter)),
    "float": (("value",), (), _float),
    "complex": (("real", "imag"), (),
                lambda d, n, k: complex(_number(d, n, k, "real"), _number(d, n, k, "imag"))),
    "bytes": (("base64",), (), lambda d, n, k: _bytes(n, bytes)),
    "bytearray": (("base64",), (), lambda d, n, k: _bytes(n, bytearray)),
    "dtype": (("name",), (), lambda d, n, k: V.dtype_named(n["name"])),
    "device": (("value",), (), lambda d, n, k: _device(n)),
    "size": (("items",), (), lambda d, n, k: _size(n)),
    "tensor": (("index",), (), lambda d, n, k: d.tensor(n, k)),
}

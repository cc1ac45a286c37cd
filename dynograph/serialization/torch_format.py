"""PyTorch's checkpoint format, read and written without importing torch.

``torch.save`` writes a zip: ``<archive>/data.pkl`` (a protocol-2 pickle of the object in
which each storage is a persistent id ``('storage', torch.FloatStorage, '0', 'cpu', numel)``
and each tensor ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, hooks)``), the raw storages ``<archive>/data/<key>``, and small records
(``version``, ``byteorder`` ...).

Reading uses a restricted unpickler: ``find_class`` admits only the globals in ``_ALLOWED``
(tensor and parameter rebuilders, storage types, dtypes, device, Size, OrderedDict and a
few builtins) and maps each to a dynograph equivalent; any other global is refused *before*
it is imported or called, so a pickle's ``__reduce__`` payload never runs.  ``BUILD`` is
limited to setting ``_metadata`` on dicts (state dicts carry it).

Writing uses the pure-Python pickler with dispatch entries that emit torch's opcodes:
``GLOBAL torch._utils _rebuild_tensor_v2`` and the same persistent ids.
"""
import _compat_pickle
import builtins
import pickle
import sys
from collections import Counter, OrderedDict

import numpy as np

from dynograph._tensor import Size, Tensor
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import NoCudaError, device as Device

from . import validate as V
from .container import ZipWriter
from .errors import CheckpointError, UnsafeCheckpointError
from .location import restore
from .storage import flat_bytes, locate

# torch's legacy storage names follow its tensor type names: FloatTensor -> FloatStorage
_STORAGE_NAMES = {d: d.tensor_type[: -len("Tensor")] + "Storage" for d in D.ALL_DTYPES}
_STORAGE_DTYPES = dict({n: d for d, n in _STORAGE_NAMES.items()}, UntypedStorage=D.uint8)
_TORCH_DTYPES = dict(V.DTYPES, **D.ALIASES)
_UNSUPPORTED_DTYPES = ("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf",
                       "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")


def archive_prefix(names):
    """``'archive/'`` when ``names`` are a torch checkpoint's entries, else None."""
    for n in names:
        if n.endswith("/data.pkl") and n.count("/") == 1:
            return n[: -len("data.pkl")]
    return None


# ---------------------------------------------------------------- reading

class _StorageType:
    """What ``GLOBAL torch FloatStorage`` unpickles to: only ever used inside persistent ids."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


class _Storage:
    """A loaded storage: raw bytes plus the element type the pickle declared."""

    def __init__(self, data, dtype):
        self.data = data            # uint8 array
        self.dtype = dtype


def _check(cond, what):
    V.need(cond, what, UnsafeCheckpointError)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    _check(type(storage) is _Storage, "_rebuild_tensor_v2: the first argument is not a storage")
    dt = storage.dtype
    V.nonneg_int(storage_offset, "tensor storage offset")
    size, stride = list(size), list(stride)
    V.int_list(size, "tensor size")
    V.int_list(stride, "tensor stride")
    V.need(type(requires_grad) is builtins.bool, "requires_grad must be a boolean")
    V.strided_extent(size, stride, storage_offset, dt.itemsize, storage.data.nbytes, "tensor")
    if 0 in size:
        a = np.empty(size, dt.np)
    else:
        a = np.ndarray(size, dt.np, buffer=storage.data, offset=storage_offset * dt.itemsize,
                       strides=[s * dt.itemsize for s in stride])
    t = Tensor._wrap(a)
    if requires_grad:
        t.requires_grad = True
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    from dynograph.nn.parameter import Parameter
    _check(isinstance(data, Tensor), "_rebuild_parameter: the data is not a tensor")
    return Parameter(data, builtins.bool(requires_grad))


def _codecs_encode(text, encoding="utf-8"):
    # protocol 2 pickles bytes as _codecs.encode(str, 'latin1')
    _check(type(text) is str and encoding in ("latin1", "latin-1"), "_codecs.encode: bad arguments")
    return text.encode("latin1")


def _torch_device(type, index=None):
    return Device(type, index)


_ALLOWED = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
    ("collections", "Counter"): Counter,
    ("torch", "device"): _torch_device,
    ("torch", "Size"): Size,
    ("builtins", "complex"): complex,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("_codecs", "encode"): _codecs_encode,
}


class _Unpickler(pickle._Unpickler):
    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, load_storage, weights_only, name):
        super().__init__(file, encoding="utf-8")
        self.load_storage = load_storage
        self.weights_only = weights_only
        self.name = name

    def find_class(self, module, name):
        if self.proto < 3:              # protocol 2 spells builtins as __builtin__ and so on
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[module, name]
            else:
                module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = _ALLOWED.get((module, name))
        if found is not None:
            return found
        if module in ("torch", "torch.storage") and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if module == "torch" and name in _TORCH_DTYPES:
            return _TORCH_DTYPES[name]
        if module == "torch" and (name in _UNSUPPORTED_DTYPES or name.startswith("Complex")):
            raise CheckpointError(f"{self.name}: the checkpoint uses torch.{name}, a type dynograph "
                                  "does not have")
        if not self.weights_only:
            return super().find_class(module, name)
        raise UnsafeCheckpointError(
            f"{self.name}: refusing to load object of type {module}.{name}: weights_only=True admits "
            "only tensors, storages, dtypes, devices and plain containers. If you trust the file, "
            "load it with weights_only=False.")

    def persistent_load(self, pid):
        _check(type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"
               and type(pid[1]) is _StorageType and type(pid[2]) is str and type(pid[3]) is str
               and V.is_int(pid[4]) and pid[4] >= 0, f"unsupported persistent id {pid!r}"[:200])
        _, stype, key, location, numel = pid
        return self.load_storage(key, stype.dtype, location, numel)

    def load_build(self):
        # only state dicts' _metadata attribute: BUILD on anything else could set arbitrary fields
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, dict) and type(state) is dict and all(k == "_metadata" for k in state):
            for k, v in state.items():
                setattr(inst, k, v)
            return
        if self.weights_only:
            raise UnsafeCheckpointError(f"{self.name}: refusing to set the state of an object of "
                                        f"type {type(inst).__name__}")
        self.stack.append(state)
        pickle._Unpickler.load_build(self)

    dispatch[pickle.BUILD[0]] = load_build


def load(reader, prefix, map_location, pickle_module, weights_only, mapped):
    """The object in the torch checkpoint ``reader`` (entries under ``prefix``)."""
    swap = False
    if prefix + "byteorder" in reader.infos:
        order = reader.read(prefix + "byteorder", 16)
        V.need(order in (b"little", b"big"), f"unknown byteorder record {order!r}"[:100])
        swap = order.decode() != sys.byteorder
    cache = {}

    def load_storage(key, dtype, location, numel):
        nbytes = numel * dtype.itemsize
        raw = cache.get(key)
        if raw is None:
            entry = prefix + "data/" + key
            V.need(entry in reader.infos, f"{reader.name}: the checkpoint has no storage {key!r}"[:200])
            raw = cache[key] = restore(reader.array(entry, mapped, expected=nbytes)[0], location,
                                       map_location)
        V.need(raw.nbytes >= nbytes, f"storage {key!r} is smaller than declared"[:200])
        data = raw[:nbytes]
        if swap and dtype.itemsize > 1:
            data = data.view(f"u{dtype.itemsize}").byteswap().view(np.uint8)
        return _Storage(data, dtype)

    unpickler = _Unpickler(_BytesReader(reader.read(prefix + "data.pkl")), load_storage,
                           weights_only, reader.name)
    try:
        return unpickler.load()
    except (CheckpointError, NoCudaError):
        raise
    except RecursionError:
        raise CheckpointError(f"{reader.name}: data.pkl is nested too deeply") from None
    except Exception as e:
        if not weights_only and not isinstance(e, (pickle.UnpicklingError, EOFError)):
            raise
        raise CheckpointError(f"{reader.name}: data.pkl is damaged ({type(e).__name__}: {e})"[:300]) \
            from None


def _BytesReader(data):
    import io
    return io.BytesIO(data)


# ---------------------------------------------------------------- writing

class _Global:
    """A reference written as ``GLOBAL module name`` without importing the module."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise TypeError(f"{self.module}.{self.name} is only a name to pickle")


class _StorageRef:
    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_TORCH_DEVICE = _Global("torch", "device")
_TORCH_SIZE = _Global("torch", "Size")


_CONTAINERS = (list, tuple, dict, set, frozenset, OrderedDict, Counter)


class _Pickler(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.roots = []             # (flat bytes, key)
        self.root_keys = {}
        self.globals = {}
        self.depth = 0              # containers being pickled, one inside the other
        self.in_tensor = False      # a tensor's own rebuild arguments do not count

    def save(self, obj, save_persistent_id=True):
        if type(obj) not in _CONTAINERS or self.in_tensor:
            return super().save(obj, save_persistent_id)
        if self.depth >= V.MAX_DEPTH:
            V.too_deep(ValueError)
        self.depth += 1
        try:
            super().save(obj, save_persistent_id)
        finally:
            self.depth -= 1

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            return ("storage", self.glob("torch", _STORAGE_NAMES[obj.dtype]), obj.key, "cpu", obj.numel)
        return None

    def glob(self, module, name):
        g = self.globals.get((module, name))
        if g is None:
            g = self.globals[module, name] = _Global(module, name)
        return g

    def save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    def save_tensor(self, t):
        outer, self.in_tensor = self.in_tensor, True
        try:
            self._save_tensor(t)
        finally:
            self.in_tensor = outer

    def _save_tensor(self, t):
        a = t._data
        root, offset, strides = locate(a)
        item = a.itemsize
        if root.nbytes % item:                  # a dtype view of a buffer torch cannot type
            root, offset, strides = locate(a.copy(order="C"))
        key = self.root_keys.get((id(root), a.dtype))
        if key is None:
            key = self.root_keys[id(root), a.dtype] = str(len(self.roots))
            self.roots.append((flat_bytes(root), key, root))
        ref = _StorageRef(key, t.dtype, root.nbytes // item)
        args = (ref, offset // item, tuple(a.shape), tuple(s // item for s in strides),
                t.requires_grad, OrderedDict())
        if type(t) is Tensor:
            self.save_reduce(_REBUILD_TENSOR, args, obj=t)
        else:
            plain = Tensor._wrap(a)
            self.save_reduce(_REBUILD_PARAMETER, (plain, t.requires_grad, OrderedDict()), obj=t)

    def save_dtype(self, d):
        self.save_global_ref(self.glob("torch", d.name))

    def save_device(self, d):
        self.save_reduce(_TORCH_DEVICE, (str(d),), obj=d)

    def save_size(self, s):
        self.save_reduce(_TORCH_SIZE, (tuple(builtins.int(n) for n in s),), obj=s)

    dispatch[_Global] = save_global_ref
    dispatch[Tensor] = save_tensor
    dispatch[D.dtype] = save_dtype
    dispatch[Device] = save_device
    dispatch[Size] = save_size


def _pickler_class():
    from dynograph.nn.parameter import Parameter
    if Parameter not in _Pickler.dispatch:
        _Pickler.dispatch[Parameter] = _Pickler.save_tensor
    return _Pickler


def encode(obj):
    """``(data.pkl bytes, storages)`` for ``obj``; errors (an unpicklable object) come here,
    before any file is opened."""
    import io
    buf = io.BytesIO()
    p = _pickler_class()(buf)
    with V.nesting_room():
        p.dump(obj)
    return buf.getvalue(), p.roots


def write(payload, fp, archive="archive"):
    """The torch zip layout, records in the order torch writes them."""
    data_pkl, roots = payload
    zw = ZipWriter(fp)
    zw.write_bytes(f"{archive}/data.pkl", data_pkl)
    zw.write_bytes(f"{archive}/.format_version", b"1")
    zw.write_bytes(f"{archive}/.storage_alignment", b"64")
    zw.write_bytes(f"{archive}/byteorder", sys.byteorder.encode())
    for flat, key, _ in roots:
        zw.write(f"{archive}/data/{key}", (memoryview(flat),), flat.nbytes)
    zw.write_bytes(f"{archive}/version", b"3\n")
    zw.close()

"""Reads the CIFAR python batches without running code.

The batches are pickles (Python 2, protocol 2) of dicts holding lists, strings, ints and one
numpy uint8 array. A plain pickle.load would call whatever function the file names; this reader
resolves only the few names that build numpy arrays (and bytes, for pickles written by Python 3),
checks their arguments, and refuses everything else.
"""
import codecs
import io
import pickle

import numpy as np


class UnsafePickleError(pickle.UnpicklingError):
    pass


def _reconstruct(subtype, shape, dtype):
    if subtype is not np.ndarray:
        raise UnsafePickleError(f"only plain numpy arrays may be built, not {subtype!r}")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _dtype(spec, align=False, copy=False):
    dtype = np.dtype(spec, align=bool(align), copy=bool(copy))
    if dtype.hasobject:
        raise UnsafePickleError("arrays of Python objects are not allowed")
    return dtype


def _encode(text, encoding="utf-8"):
    # Python 3 writes bytes as _codecs.encode(str, 'latin1') under protocol 2
    if not isinstance(text, str) or codecs.lookup(encoding).name not in ("latin-1", "iso8859-1", "utf-8"):
        raise UnsafePickleError("only str-to-bytes encoding is allowed")
    return codecs.encode(text, encoding)


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _dtype,
    ("_codecs", "encode"): _encode,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing to load {module}.{name}: this file is not a CIFAR batch "
                "(only dicts, lists, strings, bytes, numbers and numpy arrays are accepted)") from None

    def persistent_load(self, pid):
        raise UnsafePickleError("persistent references are not allowed")


def load_batch(path):
    """The dict stored in one CIFAR batch file; strings decoded as latin-1 as the originals need."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        entry = _RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    except UnsafePickleError as error:
        raise UnsafePickleError(f"{path}: {error}") from None
    if not isinstance(entry, dict):
        raise UnsafePickleError(f"{path}: expected a dict, found {type(entry).__name__}")
    return entry

"""dynograph.save / dynograph.load: checkpoints that loading never executes.

- ``save(obj, f)`` writes dynograph's own format (see format.py): a zip of a JSON structure
  and raw tensor bytes.  Objects outside tensors, numbers, strings and containers (a whole
  Module) are pickled instead, in a file ``load`` refuses unless ``weights_only=False``.
- ``save(obj, f, format="torch")`` writes PyTorch's zip format, which ``torch.load`` reads.
- ``load(f)`` reads both formats; PyTorch files go through an unpickler that admits only
  tensors, storages and plain containers (torch_format.py), without importing torch.
- ``dynograph.safetensors``: the safetensors format (safetensors.py).
"""
import pickle

from . import format as _native
from . import torch_format as _torch
from .container import ZipReader, map_file, reading, writing
from .errors import CheckpointError, SafetensorError, UnsafeCheckpointError

__all__ = ["save", "load", "CheckpointError", "UnsafeCheckpointError", "SafetensorError"]

FORMATS = ("dynograph", "torch")


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False, *, format="dynograph"):
    """Save ``obj`` to ``f`` (a path, written atomically, or a binary file object).

    ``format="dynograph"`` (default): tensors, Parameters, numbers, strings, bytes, None, dtypes,
    devices and (ordered) dicts, lists, tuples and sets of them are stored without pickle; any
    other object is pickled with ``pickle_module`` (loading it then needs ``weights_only=False``).
    ``format="torch"``: PyTorch's checkpoint format, readable by ``torch.load(weights_only=True)``.

    A file for PyTorch must be written with ``format="torch"``::

        dynograph.save(model.state_dict(), "model.pt", format="torch")
        torch.nn.Linear(2, 2).load_state_dict(torch.load("model.pt"))   # in a torch program

    ``torch.load`` cannot read the default format: it fails with
    ``RuntimeError: Expected hasRecord("version") to be true, but got false``.
    ``dynograph.load`` reads both formats.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown checkpoint format {format!r}; expected one of {FORMATS}")
    if not _use_new_zipfile_serialization:
        raise ValueError("dynograph writes only the zip checkpoint format "
                         "(_use_new_zipfile_serialization=True)")
    if format == "torch":
        payload = _torch.encode(obj)            # fails before the file is touched
        with writing(f) as fp:
            _torch.write(payload, fp)
        return
    try:
        writer = _native.prepare_tree(obj)
    except _native.NeedsPickle:
        writer = None
    with writing(f) as fp:
        if writer is not None:
            writer(fp)
        else:
            _native.save_pickle(obj, fp, pickle_module or pickle, pickle_protocol)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, verify_crc=True,
         **pickle_load_args):
    """Load an object saved by ``save`` (or by ``torch.save``) from a path or binary file object.

    ``map_location``: a device, a device string, a dict mapping saved locations
    (``{'cuda:0': 'cpu'}``) or a function ``(storage, location) -> tensor or None``.
    ``weights_only=True`` (the default) never runs code from the file: pickled objects are
    refused.  ``mmap=True`` maps the file instead of reading it (tensors view the file's pages,
    copy-on-write).  ``verify_crc=True`` (the default) checks the CRC-32 the zip records for each
    entry as it is read, so bit rot in tensor data raises ``CheckpointError`` instead of loading;
    it costs about half a millisecond per MB (docs/serialization.md).  Pages of a memory-mapped
    file are never read for it.
    """
    if weights_only is None:
        weights_only = True
    with reading(f) as (fp, name):
        mapped = map_file(fp) if mmap else None
        reader = ZipReader(fp, name, verify_crc=verify_crc)
        names = reader.names()
        if _native.HEADER in names:
            return _native.load(reader, map_location, pickle_module, weights_only, mapped,
                                pickle_load_args)
        prefix = _torch.archive_prefix(names)
        if prefix is not None:
            return _torch.load(reader, prefix, map_location, pickle_module, weights_only, mapped)
        raise CheckpointError(f"{name}: the file is not a dynograph checkpoint (a zip archive "
                              "without dynograph/header.json or PyTorch's data.pkl)")

"""default_collate and default_convert (torch.utils.data._utils.collate): how a list of
samples becomes one batch, and how a single sample's numpy arrays become tensors."""
import collections.abc
import copy
import re

import numpy as np

import dynograph
from .dataset import TensorBatch

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, "
    "dicts or lists; found {}")


def default_convert(data):
    """Numpy arrays (also inside mappings, namedtuples and sequences) become tensors; the
    rest is left as it is.  The collate function used when auto-batching is off."""
    elem_type = type(data)
    if isinstance(data, dynograph.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return dynograph.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):          # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]                      # torch returns a list
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _collate_mapping(batch, elem, collate_fn_map):
    def merged(key):
        return collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update({key: merged(key) for key in elem})
            return clone
        return type(elem)({key: merged(key) for key in elem})
    except TypeError:
        return {key: merged(key) for key in elem}


def _collate_sequence(batch, elem, collate_fn_map):
    it = iter(batch)
    elem_size = len(next(it))
    if not all(len(e) == elem_size for e in it):
        raise RuntimeError("each element in list of batch should be of equal size")
    transposed = list(zip(*batch))
    if isinstance(elem, tuple):
        return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, samples in enumerate(transposed):
                clone[i] = collate(samples, collate_fn_map=collate_fn_map)
            return clone
        return type(elem)([collate(samples, collate_fn_map=collate_fn_map) for samples in transposed])
    except TypeError:
        return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a list of samples) by the structure of its first element:
    ``collate_fn_map`` maps element types to collate functions; mappings, namedtuples and
    sequences are collated field by field."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(batch, elem, collate_fn_map)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):          # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        return _collate_sequence(batch, elem, collate_fn_map)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Tensors are stacked along a new first dim into one contiguous tensor."""
    batch = list(batch)
    first = batch[0]._data
    if all(type(t) is dynograph.Tensor and not t.requires_grad and t._data.dtype == first.dtype
           and t._data.shape == first.shape for t in batch):
        # the common case (same shape and dtype, no autograd): numpy's stack directly, without
        # a dispatch per sample (collation runs outside any traced or differentiated code)
        return dynograph.Tensor._wrap(np.stack([t._data for t in batch]))
    return dynograph.stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([dynograph.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return dynograph.as_tensor(np.array(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return dynograph.tensor(list(batch), dtype=dynograph.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return dynograph.tensor(list(batch))


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {dynograph.Tensor: collate_tensor_fn}
default_collate_fn_map[np.ndarray] = collate_numpy_array_fn
# numpy scalars (np.float32(1.0), np.int64(3) ...): not strings or objects
default_collate_fn_map[(np.bool_, np.number)] = collate_numpy_scalar_fn
default_collate_fn_map[float] = collate_float_fn
default_collate_fn_map[int] = collate_int_fn
default_collate_fn_map[(str, bytes)] = collate_str_fn


def default_collate(batch):
    """Turn a list of samples into a batch: tensors and numpy arrays are stacked
    (dim 0 new), Python floats become float64 tensors and ints int64 tensors, strings and
    bytes stay lists, and mappings, namedtuples, tuples and lists are collated field by
    field (tuples become lists, as in torch)."""
    if type(batch) is TensorBatch:
        # TensorDataset's batched fetch: the columns are already the stacked batch
        return list(batch.columns)
    return collate(batch, collate_fn_map=default_collate_fn_map)

"""``map_location``: where each loaded storage goes (a device, a string, a dict or a function)."""
from dynograph._tensor import Tensor
from dynograph.runtime.device import as_device, device

from .errors import CheckpointError


def restore(storage, location, map_location):
    """The numpy array to use for ``storage`` saved at ``location`` ('cpu', 'cuda:0' ...).

    A function ``map_location(storage, location)`` gets the storage as a flat tensor and may
    return a tensor to use instead (or None for the default); every other form names a device,
    and a CUDA device raises dynograph's no-CUDA error.
    """
    try:
        device(location)
    except (RuntimeError, TypeError):
        raise CheckpointError(f"unknown storage location {location!r}"[:100]) from None
    if callable(map_location) and not isinstance(map_location, (str, device)):
        out = map_location(Tensor._wrap(storage), location)
        if out is None:
            as_device(location)
            return storage
        if not isinstance(out, Tensor) or out._data.dtype != storage.dtype or \
                out._data.shape != storage.shape:
            raise CheckpointError("map_location function must return None or a tensor like the storage "
                                  f"it received ({storage.dtype}, {storage.size} elements)")
        return out._data
    target = location
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif map_location is not None:
        target = map_location
    as_device(target)
    return storage


def check_target(map_location):
    """Reject a map_location naming an unavailable device even when nothing is mapped."""
    if map_location is None or callable(map_location) and not isinstance(map_location, (str, device)):
        return
    if isinstance(map_location, dict):
        for target in map_location.values():
            as_device(target)
    else:
        as_device(map_location)

"""Devices: ``device("cpu")``, ``device("cuda:0")``; parsing and one error for missing CUDA."""

__all__ = ["device", "CPU", "as_device", "NoCudaError"]


class NoCudaError(RuntimeError):
    pass


class device:
    """Where a tensor lives.  Equal devices compare equal and hash alike."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and index is None:
            type, index = "cuda", type
        elif isinstance(type, str) and ":" in type:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}:{idx}'")
            index = int(idx)
        if type not in ("cpu", "cuda", "meta"):
            raise RuntimeError(
                "Expected one of cpu, cuda, meta device type at start of device string: " + str(type))
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        # as in torch, a device equals only a device: device("cpu") == "cpu" is False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")


def as_device(d):
    """Normalize a device argument (None, str, int, device) and reject what cannot run here."""
    if d is None or d is CPU:
        return CPU
    d = d if isinstance(d, device) else device(d)
    if d.type == "cpu":
        return CPU
    if d.type == "cuda":
        from . import cuda_driver       # imports pycuda, so only once CUDA is asked for
        cuda_driver.require()           # the reason CUDA is unavailable, if it is
        if d.index is not None and d.index >= cuda_driver.device_count():
            raise RuntimeError(f"CUDA error: invalid device ordinal (device {d} of "
                               f"{cuda_driver.device_count()})")
        return d
    raise RuntimeError(f"dynograph: device type '{d.type}' is not supported for tensors")

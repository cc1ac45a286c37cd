"""dynograph.cuda: CUDA device queries.

This build has no CUDA runtime yet: ``is_available()`` is False and every attempt to
put a tensor on a CUDA device raises one clear error (see runtime/device.py).
"""
from dynograph.runtime.device import as_device

__all__ = ["is_available", "device_count", "current_device", "manual_seed", "manual_seed_all",
           "synchronize", "empty_cache", "get_device_name"]


def is_available():
    return False


def device_count():
    return 0


def current_device():
    as_device("cuda")


def get_device_name(device=None):
    """The name of a CUDA device; without one, the error of any CUDA use."""
    as_device("cuda" if device is None else device)


def manual_seed(seed):
    """Seeding CUDA generators is a no-op without a CUDA device (as in torch)."""


manual_seed_all = manual_seed


def synchronize(device=None):
    as_device("cuda" if device is None else device)


def empty_cache():
    """Nothing is cached without a CUDA device."""

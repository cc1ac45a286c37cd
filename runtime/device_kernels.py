"""Kernels for eager ops on CUDA tensors: the hook through which the CUDA code generator lends the
eager core (dynograph/_device.py) its single-op kernels.

The eager core sits below the backends and cannot import one: a higher layer (compiler/backends.py)
installs a *provider* returning an object with ``run(op, arrays, attrs, index)`` (the op's result
arrays on device ``index``, or None where the op has no kernel there); the provider runs when
the first op on a cuda tensor asks.
"""
import threading

__all__ = ["install", "executor"]

_provider = None
_executor = None
_lock = threading.Lock()


def install(provider):
    """Make ``provider()`` the source of the kernels of eager ops on cuda tensors."""
    global _provider, _executor
    with _lock:
        _provider, _executor = provider, None


def executor():
    """The installed provider's executor (made on first use), or None where none is installed."""
    global _executor
    if _executor is None and _provider is not None:
        with _lock:
            if _executor is None:
                _executor = _provider()
    return _executor

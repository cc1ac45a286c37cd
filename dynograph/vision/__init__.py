"""dynograph.vision: torchvision's counterpart (transforms, datasets, models, io, utils).

Submodules load on first use, so a missing optional piece (or Pillow) never breaks the others.
"""
import importlib

_SUBMODULES = ("transforms", "utils", "io", "datasets", "models")
_image_backend = "PIL"


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES))


def get_image_backend():
    """Name of the package used to load images (always "PIL" here)."""
    return _image_backend


def set_image_backend(backend):
    if backend != "PIL":
        raise ValueError(f"Invalid backend '{backend}'. Options are 'PIL'")

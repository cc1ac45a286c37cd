"""Image transforms (torchvision.transforms): classes here, functional forms in .functional."""
from . import functional
from .functional import InterpolationMode
from .transforms import *  # noqa: F401,F403
from .transforms import __all__ as _transform_names

__all__ = ["functional", "InterpolationMode", *_transform_names]

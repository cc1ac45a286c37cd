"""dynograph.utils: data loading (dynograph.utils.data) and other helpers."""
from . import data  # noqa: F401

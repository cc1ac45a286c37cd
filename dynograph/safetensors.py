"""``dynograph.safetensors``: the safetensors format (see dynograph/serialization/safetensors.py)."""
from dynograph.serialization.safetensors import load, load_file, save, save_file  # noqa: F401

__all__ = ["save_file", "load_file", "save", "load"]

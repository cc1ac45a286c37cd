"""The exceptions save/load raise: one base class, so callers can catch every bad file at once."""
import pickle

__all__ = ["CheckpointError", "UnsafeCheckpointError", "SafetensorError"]


class CheckpointError(RuntimeError):
    """A checkpoint file is malformed, truncated, or not a checkpoint at all."""


class UnsafeCheckpointError(CheckpointError, pickle.UnpicklingError):
    """Loading the file would need to run code (an arbitrary pickled object)."""


class SafetensorError(CheckpointError):
    """A safetensors file or buffer is malformed (the safetensors package's error name)."""

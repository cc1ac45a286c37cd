"""Interpolation, grid sampling and pixel shuffling."""

__all__ = []

"""Convolutions and their transposes, unfold and fold."""

__all__ = []

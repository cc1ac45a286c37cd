"""Losses beyond the basic ones in functional.py."""

__all__ = []

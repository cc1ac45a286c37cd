"""Scaled dot-product and multi-head attention."""

__all__ = []

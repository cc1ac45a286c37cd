"""Batch, layer, group and instance normalization, and embeddings."""

__all__ = []

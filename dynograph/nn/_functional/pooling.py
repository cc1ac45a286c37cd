"""Max, average, adaptive and unpooling."""

__all__ = []

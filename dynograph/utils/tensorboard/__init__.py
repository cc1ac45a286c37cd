"""TensorBoard logging, as ``torch.utils.tensorboard``: ``SummaryWriter`` writes event files.

The ``tensorboard`` package is an optional extra; its event writer and protocol buffers do the
encoding.  ``import dynograph`` never imports this package.
"""
try:
    import tensorboard  # noqa: F401
except ImportError as e:
    raise ImportError('dynograph.utils.tensorboard needs the tensorboard package: '
                      'pip install "dynograph[tensorboard]"') from e

from .writer import FileWriter, SummaryWriter  # noqa: E402

__all__ = ["FileWriter", "SummaryWriter"]

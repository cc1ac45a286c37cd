"""The errors of dynograph.export."""


class ExportError(RuntimeError):
    """A function or module that cannot be exported as asked (the message says why)."""

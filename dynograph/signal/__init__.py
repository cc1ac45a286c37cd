"""``dynograph.signal``: signal-processing helpers (``dynograph.signal.windows``)."""
from . import windows  # noqa: F401

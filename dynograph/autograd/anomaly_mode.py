"""Anomaly detection: remember where each backward node's forward op was called, and stop
at the first backward node that produces NaN."""
import sys
import traceback
import warnings

from .grad_mode import _DecoratorContextManager


class _Anomaly:
    enabled = False
    check_nan = True


ANOMALY = _Anomaly()


def is_anomaly_enabled():
    return ANOMALY.enabled


def is_anomaly_check_nan_enabled():
    return ANOMALY.check_nan


class detect_anomaly(_DecoratorContextManager):
    """Context manager / decorator that turns anomaly detection on (torch.autograd.detect_anomaly)."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self._args = (check_nan,)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = (ANOMALY.enabled, ANOMALY.check_nan)
        ANOMALY.enabled, ANOMALY.check_nan = True, self.check_nan

    def __exit__(self, *exc):
        ANOMALY.enabled, ANOMALY.check_nan = self.prev


class set_detect_anomaly(_DecoratorContextManager):
    """Turns anomaly detection on or off; as a context manager, restores the old mode on exit."""

    def __init__(self, mode, check_nan=True):
        self.prev = (ANOMALY.enabled, ANOMALY.check_nan)
        self._args = (mode, check_nan)
        ANOMALY.enabled, ANOMALY.check_nan = bool(mode), check_nan

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        ANOMALY.enabled, ANOMALY.check_nan = self.prev


def forward_trace():
    """The user's stack at the moment a forward op records its node (library frames dropped)."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        if not f.f_globals.get("__name__", "").startswith("dynograph"):
            frames.append((f, f.f_lineno))
        f = f.f_back
    return "".join(traceback.StackSummary.extract(reversed(frames)).format())


def _where(node):
    trace = getattr(node, "_forward_trace", None)
    return f" Traceback of forward call that caused the error:\n{trace}" if trace else ""


def warn_forward_trace(node):
    """torch's warning when ``node``'s backward fails under anomaly mode: where its forward ran."""
    warnings.warn(f"Error detected in {node.name()}.{_where(node)}", stacklevel=3)


def check_node(node, grads):
    """Raise if ``node`` returned NaN, naming it and where its forward op was called."""
    for i, g in enumerate(grads):
        if g is None or g._data.dtype.kind != "f":
            continue
        if (g._data != g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output."
                               + _where(node).replace(" Traceback", "\nTraceback"))

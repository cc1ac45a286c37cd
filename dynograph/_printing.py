"""Printing tensors exactly as PyTorch does: ``repr``/``str`` and the print options.

The layout rules follow PyTorch's printer:

- one formatter per tensor decides, from the (summarized) values, whether floats print
  as integers (``1.``), fixed point or scientific notation, and the common column width;
- nested dimensions print as nested brackets, a blank line per extra dimension between
  blocks, each level indented one column deeper; rows wrap at ``linewidth``;
- tensors with more than ``threshold`` elements are summarized to ``edgeitems`` items at
  each end of every dimension, with ``...`` in between;
- suffixes (``dtype=``, ``requires_grad=True``, ``grad_fn=<...>``) follow the contents and
  move to a new line when they would overflow ``linewidth``.

Everything is computed with numpy on the tensor's buffer, so printing never records
autograd and costs little even for huge tensors (only the printed edges are converted).
"""
import contextlib
import math

import numpy as np

from dynograph.runtime import dtypes as D
from dynograph.runtime.device import CPU
from ._tensor import Tensor, tensor_method
from ._trace_hook import TRACE

__all__ = ["set_printoptions", "get_printoptions"]


class _PrintOptions:
    """The current print options (PyTorch's ``PRINT_OPTS``)."""

    __slots__ = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")

    def __init__(self):
        self.precision = 4
        self.threshold = 1000
        self.edgeitems = 3
        self.linewidth = 80
        self.sci_mode = None


_OPTS = _PrintOptions()

# profile name -> (precision, threshold, edgeitems, linewidth)
_PROFILES = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set the options used to print tensors (same meaning as numpy's print options).

    Args:
        precision: digits after the decimal point for floating point values (default 4).
        threshold: number of elements above which a tensor is summarized (default 1000).
        edgeitems: items kept at each end of every dimension when summarizing (default 3).
        linewidth: characters per line before wrapping (default 80).
        profile: ``'default'``, ``'short'`` or ``'full'``; the other arguments override it.
        sci_mode: force (True) or forbid (False) scientific notation; None (the default)
            chooses from the values.  Like PyTorch, every call sets it, so it resets to None
            unless given.
    """
    if profile is not None and profile in _PROFILES:
        _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = _PROFILES[profile]
    if precision is not None:
        _OPTS.precision = precision
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTS.linewidth = linewidth
    _OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options as a dict that ``set_printoptions(**d)`` accepts."""
    return {name: getattr(_OPTS, name) for name in _PrintOptions.__slots__}


@contextlib.contextmanager
def printoptions(**kwargs):
    """Temporarily change the print options (arguments as for ``set_printoptions``)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


# ------------------------------------------------------------------ values

def _float64(a):
    """``a`` as float64 (exact for every floating dtype; bfloat16 goes through float32)."""
    if D.is_bfloat16(a.dtype):
        a = a.astype(np.float32)
    return a.astype(np.float64)


def _py_values(a, floating):
    """The elements of a 1-D or 0-d array as Python numbers (what ``tolist`` gives torch)."""
    if a.dtype.kind == "c":
        return a.astype(np.complex128).tolist()
    return _float64(a).tolist() if floating else a.tolist()


def _edge_index(n, edge):
    return np.r_[0:edge, n - edge:n]


def _summarized(a, edge):
    """The elements a summarized print shows: ``edge`` items at both ends of every dim."""
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        # edge == 0 keeps everything here, as PyTorch's a[:0] + a[-0:] does
        return a[_edge_index(a.shape[0], edge)] if edge and a.shape[0] > 2 * edge else a
    if not edge:
        return a[:0]
    for axis, n in enumerate(a.shape):
        if n > 2 * edge:
            a = np.take(a, _edge_index(n, edge), axis=axis)
    return a


def _sign_extremes(v):
    """The values with the smallest and largest magnitude of each sign.

    The printed width of a number grows with its magnitude (fixed point) or with the
    digits of its exponent (scientific), so the widest string is always one of these.
    """
    out = []
    for part in (v[v > 0], v[v < 0]):
        if part.size:
            out.extend((float(part.min()), float(part.max())))
    return out


class _Formatter:
    """Chooses the notation and column width shared by all elements of one tensor."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        self.precision = _OPTS.precision
        if values.size == 0:
            return
        if not floating:
            if values.dtype == np.bool_:
                self.max_width = 4 if values.all() else 5
            else:
                self.max_width = max(len(str(int(values.max()))), len(str(int(values.min()))), 1)
            return
        v = _float64(values).ravel()
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            return
        mag = np.abs(v)
        lo, hi = mag.min(), mag.max()
        self.int_mode = bool(np.all(v == np.ceil(v)))
        if _OPTS.sci_mode is None:
            with np.errstate(over="ignore"):
                self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        else:
            self.sci_mode = _OPTS.sci_mode
        if self.sci_mode:
            spec, extra = f".{self.precision}e", 0
        elif self.int_mode:
            spec, extra = ".0f", 1            # room for the trailing "."
        else:
            spec, extra = f".{self.precision}f", 0
        widest = max(len(format(x, spec)) for x in _sign_extremes(v)) + extra
        self.max_width = max(self.max_width, widest)

    def format(self, value):
        """One element (a Python number), right-aligned to the common width."""
        if self.floating:
            if self.sci_mode:
                ret = format(value, f"{self.max_width}.{self.precision}e")
            elif self.int_mode:
                ret = format(value, ".0f")
                if math.isfinite(value):
                    ret += "."
            else:
                ret = format(value, f".{self.precision}f")
        else:
            ret = str(value)
        return ret.rjust(self.max_width)


class _ComplexFormatter:
    """Complex elements: the real parts and the imaginary parts each have a formatter, and
    print as ``re+imj`` (PyTorch's layout, widths included)."""

    floating = True

    def __init__(self, values):
        self.re = _Formatter(values.real, True)
        self.im = _Formatter(values.imag, True)
        self.max_width = self.re.max_width + self.im.max_width + 1     # and the "j"

    def format(self, value):
        re = self.re.format(value.real)
        im = (self.im.format(value.imag) + "j").lstrip()
        return re + im if im[0] in "+-" else re + "+" + im


# ------------------------------------------------------------------ layout

def _vector_str(a, indent, summarize, fmt):
    edge = _OPTS.edgeitems
    per_line = max(1, math.floor((_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([fmt.format(x) for x in _py_values(a[:edge], fmt.floating)] + [" ..."]
                + [fmt.format(x) for x in _py_values(a[-edge:], fmt.floating)])
    else:
        data = [fmt.format(x) for x in _py_values(a, fmt.floating)]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(_py_values(a, fmt.floating))
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n, edge = a.shape[0], _OPTS.edgeitems
    if summarize and n > 2 * edge:
        rows = ([_nested_str(a[i], indent + 1, summarize, fmt) for i in range(edge)] + ["..."]
                + [_nested_str(a[i], indent + 1, summarize, fmt) for i in range(n - edge, n)])
    else:
        rows = [_nested_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _contents_str(a, floating, indent):
    """The bracketed contents of a non-empty array."""
    summarize = a.size > _OPTS.threshold
    shown = _summarized(a, _OPTS.edgeitems) if summarize else a
    fmt = _ComplexFormatter(shown) if a.dtype.kind == "c" else _Formatter(shown, floating)
    return _nested_str(a, indent, summarize, fmt)


# Line breaks are decided as if dtypes printed as "torch.<name>", so that every repr is
# PyTorch's, line for line, with only the module name changed.
_NAME_EXTRA = len(D.MODULE_NAME) - len("torch")


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1       # PyTorch's count, kept as is
    for suffix in suffixes:
        width = len(suffix) - _NAME_EXTRA * suffix.startswith("dtype=")
        if last_line_len + width + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + width
        else:
            parts.append(", " + suffix)
            last_line_len += width + 2
    parts.append(")")
    return "".join(parts)


@tensor_method(name="__repr__")
def _repr(self, *, tensor_contents=None):
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break('printing a tensor reads its values')
    return tensor_repr(self, tensor_contents=tensor_contents)


def tensor_repr(t, *, tensor_contents=None):
    """``repr(t)`` as PyTorch writes it, e.g. ``tensor([1., 2.], requires_grad=True)``.

    ``tensor_contents``, when given, replaces the bracketed values (used by subclasses).
    """
    prefix = "tensor(" if type(t) is Tensor or t._is_param else f"{type(t).__name__}("
    indent = len(prefix)
    a = t._host_data()          # a cuda tensor prints from a host copy
    dt = t.dtype
    suffixes = []
    if t.device != CPU:
        suffixes.append(f"device='{t.device}'")
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        # no values to tell an integer tensor from a float one: the dtype must show
        if dt is not D.get_default_dtype():
            suffixes.append(f"dtype={dt}")
        body = "[]"
    else:
        if not _OPTS.edgeitems:
            suffixes.append(f"size={tuple(a.shape)}")
        default = D.get_default_dtype()
        if dt not in (default, default.to_complex(), D.int64, D.bool):
            suffixes.append(f"dtype={dt}")
        body = None if tensor_contents is not None else \
            _contents_str(a, dt.is_floating_point, indent)
    if tensor_contents is not None:
        body = tensor_contents
    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name().rsplit('::', 1)[-1]}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)

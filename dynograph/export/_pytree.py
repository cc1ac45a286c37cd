"""The structure of an exported program's inputs and outputs, as JSON-able data.

A spec is ``None`` for a leaf, ``["tuple", [specs]]``, ``["list", [specs]]`` or
``["dict", [[key, spec], ...]]`` (keys are strings or ints).  Named tuples are read as
tuples: the program must not need the class that defined them.
"""
import math

from .errors import ExportError


def is_constant(x):
    """Whether ``x`` is a value an exported program can hold as it is (JSON-able)."""
    if x is None or isinstance(x, (bool, int, str)):
        return True
    return isinstance(x, float) and math.isfinite(x)


def flatten(tree):
    """(leaves, spec) of nested tuples, lists and dicts."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if isinstance(tree, tuple):
        return ["tuple", [_flatten(x, leaves) for x in tree]]
    if isinstance(tree, list):
        return ["list", [_flatten(x, leaves) for x in tree]]
    if isinstance(tree, dict):
        for k in tree:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ExportError(f"dictionary key {k!r}: an exported program takes dicts with "
                                  "string or integer keys")
        return ["dict", [[k, _flatten(v, leaves)] for k, v in tree.items()]]
    leaves.append(tree)
    return None


def unflatten(spec, leaves):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, items = spec
    if kind == "dict":
        return {k: _unflatten(s, it) for k, s in items}
    values = [_unflatten(s, it) for s in items]
    return tuple(values) if kind == "tuple" else values


def count(spec):
    if spec is None:
        return 1
    kind, items = spec
    return sum(count(s if kind != "dict" else s[1]) for s in items)


def from_compiler_spec(spec):
    """The compiler's output structure ((type, items) pairs) as a spec."""
    if spec is None:
        return None
    kind, items = spec
    if kind is dict:
        for k, _ in items:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ExportError(f"the function returns a dict with key {k!r}: an exported "
                                  "program returns dicts with string or integer keys")
        return ["dict", [[k, from_compiler_spec(s)] for k, s in items]]
    if kind is list:
        return ["list", [from_compiler_spec(s) for s in items]]
    if issubclass(kind, tuple):
        return ["tuple", [from_compiler_spec(s) for s in items]]
    raise ExportError(f"the function returns a {kind.__name__}: an exported program returns "
                      "tensors and tuples, lists and dicts of them")


def describe(spec):
    """The structure as text: (*, [*, *], {'k': *})."""
    if spec is None:
        return "*"
    kind, items = spec
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {describe(s)}" for k, s in items) + "}"
    inner = ", ".join(describe(s) for s in items)
    return f"[{inner}]" if kind == "list" else f"({inner}{',' if len(items) == 1 else ''})"


def validate(spec, depth=0):
    """Whether ``spec`` (read from a file) is a well-formed spec."""
    if spec is None:
        return True
    if depth > 100 or not isinstance(spec, (list, tuple)) or len(spec) != 2:
        return False
    kind, items = spec
    if kind not in ("tuple", "list", "dict") or not isinstance(items, (list, tuple)):
        return False
    if kind == "dict":
        return all(isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], (str, int))
                   and not isinstance(p[0], bool) and validate(p[1], depth + 1) for p in items)
    return all(validate(s, depth + 1) for s in items)

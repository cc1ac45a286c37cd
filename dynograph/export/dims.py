"""``Dim``: a dimension whose size is not fixed, as ``dynamic_shapes`` names it.

dynograph's programs have one symbolic size, ``s0`` (the batch size, which may be any
dimension of any input): every dimension ``dynamic_shapes`` marks must be the same ``Dim``.
"""
import inspect

from .errors import ExportError


class Dim:
    """``Dim(name, min=None, max=None)``: a symbolic size of at least ``min`` (default 2: sizes 0
    and 1 are always specialized) and at most ``max`` (default unbounded)."""

    def __init__(self, name, *, min=None, max=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim's name must be a Python identifier, got {name!r}")
        lo = 2 if min is None else int(min)
        if lo < 2:
            raise ValueError(f"Dim {name}: min={lo}, but sizes 0 and 1 are specialized; use min >= 2")
        if max is not None and int(max) < lo:
            raise ValueError(f"Dim {name}: max={max} is below min={lo}")
        self.name, self.min, self.max = name, lo, None if max is None else int(max)

    def __repr__(self):
        return f"Dim({self.name!r}, min={self.min}, max={self.max})"


Dim.AUTO = Dim.DYNAMIC = Dim("batch")


def dims_from_spec(dynamic_shapes, args, kwargs, fn):
    """[(flat leaf index, dim, Dim)] from torch.export's ``dynamic_shapes`` forms: a dict keyed
    by parameter name, or a tuple/list in the order of the arguments; each entry None, a dict
    ``{dim: Dim}`` or a tuple/list with a Dim or None per dimension (nested like the input)."""
    if dynamic_shapes is None:
        return []
    trees = list(args) + list(kwargs.values())
    if isinstance(dynamic_shapes, dict):
        try:
            params = list(inspect.signature(getattr(fn, "forward", fn)).parameters)
        except (TypeError, ValueError):
            params = []
        names = [params[i] if i < len(params) else f"arg{i}" for i in range(len(args))]
        names += list(kwargs)
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise ExportError(f"dynamic_shapes names {unknown[0]!r}, which is not an input; the "
                              f"inputs are {', '.join(names)}")
        specs = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(trees):
            raise ExportError(f"dynamic_shapes has {len(dynamic_shapes)} entries for "
                              f"{len(trees)} inputs")
        specs = list(dynamic_shapes)
    else:
        raise ExportError("dynamic_shapes must be a dict (by input name) or a tuple/list (by "
                          f"position), got {type(dynamic_shapes).__name__}")
    found, counter = [], [0]
    for tree, spec in zip(trees, specs):
        _walk(tree, spec, found, counter)
    return found


def _walk(tree, spec, found, counter):
    if isinstance(tree, (tuple, list, dict)):
        items = list(tree.values()) if isinstance(tree, dict) else list(tree)
        if spec is None:
            subs = [None] * len(items)
        elif isinstance(tree, dict) and isinstance(spec, dict):
            subs = [spec.get(k) for k in tree]
        elif isinstance(spec, (tuple, list)) and len(spec) == len(items):
            subs = list(spec)
        else:
            raise ExportError(f"dynamic_shapes entry {spec!r} does not match the structure of "
                              "its input")
        for x, s in zip(items, subs):
            _walk(x, s, found, counter)
        return
    leaf = counter[0]
    counter[0] += 1
    if spec is None:
        return
    if isinstance(spec, dict):
        pairs = list(spec.items())
    elif isinstance(spec, (tuple, list)):
        pairs = list(enumerate(spec))
    else:
        raise ExportError(f"dynamic_shapes entry for a tensor must be a dict {{dim: Dim}} or a "
                          f"tuple of Dim/None, got {spec!r}")
    for d, dim in pairs:
        if dim is None:
            continue
        if not isinstance(dim, Dim) or not isinstance(d, int):
            raise ExportError(f"dynamic_shapes: dimension {d!r} maps to {dim!r}, expected a "
                              "dynograph.export.Dim")
        found.append((leaf, d, dim))

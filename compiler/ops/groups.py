"""Sets of op names derived from the op table's facets, for code that looks ops up by name
(rewrite rules keyed by op).  Passes and backends never keep their own lists of op names:
they read a facet of the op (``REGISTRY[name].reindex``) or one of these sets.

Computed once, after every op module has registered its primitives (compiler/ops/__init__.py
imports this module last)."""
from .core import REGISTRY


def ops_where(**facets):
    """The names of the ops whose facets have the given values (``kind="reduction"``)."""
    return frozenset(name for name, op in REGISTRY.items()
                     if all(getattr(op, k) == v for k, v in facets.items()))


PERMUTE = ops_where(reindex="permute")          # t, transpose, permute
RESHAPE = ops_where(reindex="reshape")          # view, unsafe_view
REINDEX = frozenset(n for n, op in REGISTRY.items() if op.reindex is not None)
CONSTANT = ops_where(constant=True)             # full, arange, linspace, logspace, eye
READS_LAYOUT = ops_where(reads_layout=True)     # view, view_dtype, as_strided, unfold...
DATA_DEPENDENT = ops_where(data_dependent=True)     # nonzero, unique, masked_select...
# reductions a fused kernel computes (the others are separate nodes)
KERNEL_REDUCTIONS = frozenset(n for n, op in REGISTRY.items()
                              if op.kind == "reduction" and op.lowering is not None)

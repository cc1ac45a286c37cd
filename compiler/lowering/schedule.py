"""How a kernel's loops are laid out, decided once for every code generator.

A ``Schedule`` is computed from a ``Kernel`` (kernel.py) and says, without naming any target:

* the collapsed loop nest: size-1 axes dropped and adjacent axes merged where every buffer
  walks them as one (an elementwise kernel over contiguous tensors becomes one flat loop);
* the kept (outer) axes and the reduce axes; ``lead``, the kept axes but the innermost, whose
  flattened range (of length ``extent``) a launch may split across threads or thread blocks;
* ``columnwise``: reductions whose innermost axis is kept (a bias gradient: a sum over rows)
  run column-wise, ``COLUMNS`` columns accumulated side by side, because a plain nest would
  stride through memory along the reduce axes;
* ``groups``: the reductions in runs that share one loop nest; a run ends before a reduction
  whose value reads the total of one in the run (softmax's sum reads its max), and arg
  reductions run alone;
* the stores split into those made once per kept index (``outer_stores``) and those that vary
  along the reduce axes (``inner_stores``).

Reductions accumulate in blocks of ``BLOCK`` elements along the innermost reduce axis, each
block summed into its own partial before joining the total (16M float32 ones sum to 16777216
exactly, and the partial may be vectorized).
"""
from dataclasses import dataclass

BLOCK = 1024
COLUMNS = 64        # columns a column-wise reduction accumulates side by side
ARG_COMBINES = ("argmax", "argmin", "argmax_pool")      # reductions to a position


@dataclass
class Schedule:
    domain: list            # collapsed loop sizes
    red_axes: tuple         # which of them are reduced
    outer_axes: list        # the kept ones, outermost first
    load_strides: list      # per load of the kernel, strides over the collapsed axes
    store_strides: list     # per store
    lead: list              # the kept axes flattened into the range launches split
    extent: int             # the length of that range
    columnwise: bool
    groups: list            # lists of reduction indices sharing one loop nest
    outer_stores: list      # (store, strides) made once per kept index
    inner_stores: list      # (store, strides) varying along the reduce axes


def collapse(kernel):
    """(domain, reduce axes, load strides, store strides) with size-1 axes dropped and
    adjacent axes merged where every buffer walks them as one."""
    domain = list(kernel.domain)
    red = set(kernel.reduce_axes)
    strides = [list(ld.strides) for ld in kernel.loads] + [list(s.strides) for s in kernel.stores]
    keep = [a for a in range(len(domain)) if domain[a] != 1]
    domain = [domain[a] for a in keep]
    flags = [a in red for a in keep]
    strides = [[s[a] for a in keep] for s in strides]
    a = len(domain) - 2
    while a >= 0:
        if flags[a] == flags[a + 1] and all(s[a] == s[a + 1] * domain[a + 1] for s in strides):
            domain[a] *= domain[a + 1]
            del domain[a + 1], flags[a + 1]
            for s in strides:
                s[a] = s[a + 1]
                del s[a + 1]
        a -= 1
    n = len(kernel.loads)
    red_axes = tuple(i for i, f in enumerate(flags) if f)
    return domain, red_axes, strides[:n], strides[n:]


def _reads_acc(kernel, i, accs):
    e = kernel.exprs[i]
    if e.op == "acc":
        return e.attr in accs
    return any(_reads_acc(kernel, a, accs) for a in e.args)


def reduction_groups(kernel):
    groups = []
    for j, red in enumerate(kernel.reductions):
        arg = red.combine in ARG_COMBINES
        if groups and not arg and not groups[-1][1] and \
                not _reads_acc(kernel, red.value, set(groups[-1][0])):
            groups[-1][0].append(j)
        else:
            groups.append(([j], arg))
    return [g for g, _ in groups]


def schedule(kernel):
    """The Schedule of ``kernel`` (cached on it: kernels are immutable descriptions)."""
    cached = getattr(kernel, "_schedule", None)
    if cached is not None:
        return cached
    domain, red_axes, load_strides, store_strides = collapse(kernel)
    outer_axes = [a for a in range(len(domain)) if a not in red_axes]
    outer_stores, inner_stores = [], []
    for s, strides in zip(kernel.stores, store_strides):
        # a store varies along the reduce axes when its value or its address does
        if kernel.exprs[s.value].level or any(strides[a] for a in red_axes):
            inner_stores.append((s, strides))
        else:
            outer_stores.append((s, strides))
    # the launch range: every kept axis but the innermost (whose loop stays plain, to be
    # vectorized or tiled), flattened, so that even a kernel whose outermost axis is short
    # (a weight gradient's few output channels) splits into many pieces
    lead = outer_axes[:-1] if len(outer_axes) > 1 else outer_axes
    extent = 1
    for a in lead:
        extent *= domain[a]
    columnwise = bool(kernel.reductions) and bool(outer_axes) and outer_axes[-1] == len(domain) - 1
    result = Schedule(domain, red_axes, outer_axes, load_strides, store_strides, lead, extent,
                      columnwise, reduction_groups(kernel), outer_stores, inner_stores)
    kernel._schedule = result
    return result

"""Fusion: groups of elementwise ops, views, casts, constants and reductions become one
``fused`` node each, holding the group as a subgraph: a kernel for the code generators.

    %7: f32[8,5], %8: f32[8,1] = fused(%3, %4, name='k0') {
      input %0: f32[8,5] a0
      ...
      return %5, %6
    }

The subgraph's inputs are the values the group reads, its outputs the values used outside the
group (several when one kernel produces, say, a parameter and its momentum buffer).

Roles of nodes:

* view: ops with a ``reindex`` facet (``view``, ``expand``, ``permute``, ``t``, ``squeeze``...:
  index arithmetic);
* reduce: reductions with a lowering (``sum``, ``mean``, ``amax``, ``argmax``, ``var``...; one
  result);
* const: ops with a lowering and no tensor input (``full``);
* compute: every other op with a lowering (elementwise ops, ``to_copy``, ``clone``);
* anything else (``mm``, convolution, gather/scatter and indexing, random draws, ``cat``...)
  is a barrier and stays a node of its own.

Cheap values that depend only on graph inputs (``full`` constants, views of inputs, scalar
arithmetic on inputs such as ``-lr``) are *copied* into every group that reads them instead of
joining one group: several parameter updates reading ``-lr`` stay separate kernels.

Grouping walks the nodes in order; a fusible node joins the groups of the fusible nodes it
reads, largest first, when the merged group stays legal:

* one reduction shape per group: every reduction has the same input shape and reduced dims
  (softmax: amax, exp, sum, div over the same rows), and no member is larger than the
  reductions' input (what consumes a reduction's result is computed in the same domain);
* without reductions, the groups merged have the same number of elements, or one of them is
  a scalar (1 element): unrelated shapes do not share a kernel;
* no cycle: no group outside the merged one may both depend on it and feed it.  Each group
  keeps the set of nodes it transitively depends on (a bit set over node positions), and the
  nodes it reads and is read by; merging adds the merged group's dependencies to every group
  depending on it (found through the readers), and a cycle is asked of the merged groups'
  direct producers only, where asking every group made planning grow with the square of the
  graph (a transformer's training step with 2, 6 and 12 layers, 1k to 5k nodes: 17, 147 and
  550 ms, now 7, 27 and 73 ms);
* a value computed from a reduction's result has the reduction's kept elements or fewer, or
  the whole domain (group norm's statistics expanded to each channel of a group, (N, G, C/G, 1)
  in a kernel over (N, G, C/G * H * W), span part of a reduced axis: its group ran op by op);
* a reshape that merges or splits dims ((32, 64, 80) -> (2048, 80), around a Linear layer on
  a 3-d input) never shares a group with the value it reshapes: a kernel's loop nest gives each
  value's dims axes of their own, so it reads such a reshape only from one of its arguments,
  whose strides the reshape folds into (a group that broke this ran op by op: 9 of a char
  transformer step's 53 kernels, with 50 single-op kernels to compile).

A view joins a group only when some reader of it is fusible (a view read only by a matrix
product stays a view).  Groups of views and constants only stay plain nodes.
"""
import heapq

from ..ir import Graph, Input, Node, TensorType, Value, remap
from ..ops import REGISTRY
from ..ops.core import wrap_dims
from .dce import has_effect

def role(node):
    """'compute', 'view', 'reduce', 'const', or None for a barrier (from the op's facets)."""
    op = REGISTRY.get(node.op)
    if op is None or len(node.outs) != 1 or not isinstance(node.outs[0].type, TensorType):
        return None
    if any(not isinstance(v.type, TensorType) for v in node.input_values()):
        return None
    if op.reindex is not None:
        return "view"
    if op.lowering is None:
        return None
    if op.kind == "reduction":
        return "reduce"
    return "compute" if node.input_values() else "const"


class _Group:
    __slots__ = ("members", "mask", "anc", "preds", "succs", "reshapes", "reduction",
                 "reduced_numel", "numel", "fusible", "sizes")

    def __init__(self, index, node, kind, anc, preds):
        self.members = [index]
        self.mask = 1 << index
        self.anc = anc                  # bit set of the nodes this group depends on
        self.preds = preds              # the nodes outside it whose values its members read
        self.succs = set()              # the nodes outside it planned so far that read it
        self.reshapes = []              # (reshape regrouping dims, the node its source is from)
        self.fusible = kind is not None
        self.numel = node.outs[0].type.numel if self.fusible else 0
        self.sizes = {self.numel}       # its members' element counts
        self.reduction = None           # (input shape, reduced dims) of its reductions
        self.reduced_numel = 0
        if kind == "reduce":
            x = node.args[0]
            shape = tuple(x.type.shape)
            dims = node.attrs.get("dim")
            self.reduction = (shape, frozenset(wrap_dims(dims, len(shape))))
            self.reduced_numel = x.type.numel
            self.numel = max(self.numel, self.reduced_numel)


def regroups_dims(node):
    """Whether ``node`` is a reshape that merges or splits dims ((32, 64, 80) -> (2048, 80)),
    not one that only adds or drops dims of size 1."""
    if REGISTRY[node.op].reindex != "reshape":
        return False
    src, out = node.args[0].type.shape, node.outs[0].type.shape
    return [n for n in src if n != 1] != [n for n in out if n != 1]


def _compatible(a, b):
    """Whether groups ``a`` and ``b`` may form one kernel (cycles are checked elsewhere)."""
    if a.reduction is not None and b.reduction is not None and a.reduction != b.reduction:
        return False
    reduction = a.reduction or b.reduction
    if reduction is not None:
        limit = a.reduced_numel or b.reduced_numel
        return max(a.numel, b.numel) <= limit
    return a.numel == b.numel or min(a.numel, b.numel) == 1


class _Planner:
    """Assigns every node to a group; see the module docstring for the rules."""

    def __init__(self, graph):
        self.graph = graph
        self.nodes = graph.nodes
        self.roles = [role(n) for n in graph.nodes]
        self.producer = {v: i for i, n in enumerate(graph.nodes) for v in n.outs}
        self.readers = {}
        for i, n in enumerate(graph.nodes):
            for v in n.input_values():
                self.readers.setdefault(v, []).append(i)
        self.duplicable = self._duplicable()
        self.group_of = {}              # node index -> _Group
        self.groups = {}                # the groups in the order they were made (a dict: merged
                                        # groups leave it in O(1))

    def _duplicable(self):
        inputs = {inp.value for inp in self.graph.inputs}
        free = set(inputs)
        dup = set()
        for i, n in enumerate(self.nodes):
            r = self.roles[i]
            if r is None or not all(v in free for v in n.input_values()):
                continue
            if r == "const" or r == "view" or (r == "compute" and n.outs[0].type.numel <= 1):
                dup.add(i)
                free.update(n.outs)
        return dup

    def plan(self):
        for i, node in enumerate(self.nodes):
            if i in self.duplicable:
                continue
            kind = self.roles[i]
            if kind == "view" and not any(self.roles[j] is not None
                                          for v in node.outs for j in self.readers.get(v, ())):
                kind = None             # a view only barriers read: no kernel for it
            preds = self._producers(node)
            sources = []
            for p in preds:
                g = self.group_of[p]
                if g not in sources:
                    sources.append(g)
            anc = 0
            for g in sources:
                anc |= g.anc | g.mask
                g.succs.add(i)
            group = _Group(i, node, kind, anc, preds)
            self.groups[group] = None
            self.group_of[i] = group
            if kind is None:
                continue
            if kind == "view" and regroups_dims(node):
                group.reshapes.append((i, self.producer.get(node.args[0])))
            for g in sorted((g for g in sources if g.fusible), key=lambda g: -g.numel):
                if _compatible(group, g) and not self._regroups_inside(group, g) and \
                        self._placeable(group, g) and not self._makes_cycle(group, g):
                    group = self._merge(group, g)
        return list(self.groups)

    def _placeable(self, a, b):
        """Whether every value of the merged group computed from a reduction's result has a
        place in the kernel: the reduction's kept elements or fewer (read where the result
        is), or the whole domain.  One in between spans part of a reduced axis, which no loop
        of the kernel walks: group norm's statistics expanded to the channels of each group,
        (N, G, C/G, 1) in a kernel over (N, G, C/G * H * W), made its group run op by op."""
        reduction = a.reduction or b.reduction
        if reduction is None:
            return True
        shape, dims = reduction
        full = a.reduced_numel or b.reduced_numel
        reduced = 1
        for d in dims:
            reduced *= shape[d]
        if not reduced:
            return True
        kept = full // reduced
        if not any(kept < n < full for n in a.sizes | b.sizes):
            return True                 # (most merges: no member of such a size to look at)
        level = set()                   # members computed from a reduction's result
        for m in sorted(a.members + b.members):
            if self.roles[m] == "reduce":
                level.add(m)
                continue
            node = self.nodes[m]
            if any(self.producer.get(v) in level for v in node.input_values()):
                level.add(m)
                if kept < node.outs[0].type.numel < full:
                    return False
        return True

    def _regroups_inside(self, a, b):
        """Whether merging ``a`` and ``b`` puts a reshape that merges or splits dims in one
        kernel with the value it reshapes: a kernel's loop nest gives each value's dims their
        own axes, so such a reshape is read only from outside (its source then a kernel
        argument whose strides it folds into), else the kernel could not be described and
        would run op by op."""
        mask = a.mask | b.mask
        return any(p is not None and (mask >> p) & 1 for _, p in a.reshapes + b.reshapes)

    def _producers(self, node):
        """The planned nodes (not copied values) whose results ``node`` reads, in order."""
        found = []
        for v in node.input_values():
            p = self.producer.get(v)
            if p is not None and p not in self.duplicable and p not in found:
                found.append(p)
        return found

    def _makes_cycle(self, a, b):
        """Whether a path joins ``a`` and ``b`` through another group (merging them would make
        a kernel wait for itself).  Such a path ends in a group feeding one of them directly
        that depends on the other, so only their direct producers are asked (their ``anc`` is
        closed over groups: a group depending on any node of a group depends on all of it)."""
        members = a.mask | b.mask
        if not (a.anc | b.anc) & ~members:
            return False
        for x, y in ((a, b), (b, a)):
            for p in x.preds:
                g = self.group_of[p]
                if g is not y and g.anc & y.mask:
                    return True
        return False

    def _merge(self, a, b):
        """Merge ``a`` (the newest group) into ``b``; returns the merged group."""
        b.members = sorted(b.members + a.members)
        b.mask |= a.mask
        mask = b.mask
        b.anc = (b.anc | a.anc) & ~mask
        b.preds = [p for p in dict.fromkeys(b.preds + a.preds) if not (mask >> p) & 1]
        b.succs = {s for s in b.succs | a.succs if not (mask >> s) & 1}
        b.reshapes = b.reshapes + a.reshapes
        if a.reduction is not None:
            b.reduction, b.reduced_numel = a.reduction, a.reduced_numel
        b.numel = max(a.numel, b.numel)
        b.sizes |= a.sizes
        del self.groups[a]
        for i in a.members:
            self.group_of[i] = b
        # every planned group depending on the merged one now depends on what it depends on:
        # they are found through the readers, not by asking every group.  A group that
        # already depends on all of it needs no visit, nor do the groups after it (each
        # group's ``anc`` holds its producers' ``anc`` and members)
        grown = b.anc | mask
        stack = [b]
        while stack:
            for s in stack.pop().succs:
                g = self.group_of[s]
                if g.anc & grown != grown:
                    g.anc |= grown
                    stack.append(g)
        return b


# ---------------------------------------------------------------- building the new graph

def fusion(graph):
    """Replace groups of fusible nodes by ``fused`` nodes holding them as subgraphs."""
    return _Builder(graph).build()


class _Builder:
    """Turns the planner's groups into nodes: fused kernels, plain nodes, and the copied
    values that must also exist outside the kernels."""

    def __init__(self, graph):
        self.graph = graph
        self.planner = _Planner(graph)
        self.groups = self.planner.plan()
        self.escaping = set(graph.outputs) | {v for _, v in graph.updates}
        self.member_of = {i: g for g in self.groups for i in g.members}
        self.kernels = []

    def _fused(self, g):
        return g.fusible and any(self.planner.roles[i] in ("compute", "reduce") for i in g.members)

    def build(self):
        planner, nodes = self.planner, self.graph.nodes
        fused = {g for g in self.groups if self._fused(g)}     # (asked once per group)
        needed = set()
        for i, node in enumerate(nodes):         # copied values read by unfused nodes
            g = self.member_of.get(i)
            if g is not None and g not in fused:
                self._need_inputs(node, needed)
        # a copied value that is also returned or written back becomes one more output of
        # the first kernel that computes it, else a node of its own
        self.claimable = {i for i in planner.duplicable if i not in needed
                          and any(v in self.escaping for v in nodes[i].outs)}
        self.claimed = set()
        emitted = []
        for g in self.groups:
            if g in fused:
                node = self._kernel(g.members, self.member_of)
                if node is not None:
                    emitted.append((g.members[0], node))
        for g in self.groups:           # after the kernels: a value a kernel claimed is theirs
            if g not in fused:
                emitted.extend((i, nodes[i]) for i in g.members if i not in self.claimed)
        for i in sorted(self.claimable - self.claimed):
            self._need(i, needed)
        for i in sorted(needed):        # kernels first: they may claim a needed value
            if planner.roles[i] == "compute":
                node = self._kernel([i], {})
                if node is not None:
                    emitted.append((i, node))
        emitted.extend((i, nodes[i]) for i in sorted(needed)
                       if planner.roles[i] != "compute" and i not in self.claimed)
        ordered = _schedule(emitted)
        made = {id(n) for n in self.kernels}
        for k, node in enumerate(n for n in ordered if id(n) in made):
            node.attrs["name"] = f"k{k}"         # kernels are named in program order
        return self.graph.replace(nodes=ordered)

    def _need_inputs(self, node, needed):
        for v in node.input_values():
            p = self.planner.producer.get(v)
            if p in self.planner.duplicable:
                self._need(p, needed)

    def _need(self, i, needed):
        if i in needed:
            return
        needed.add(i)
        if self.planner.roles[i] != "compute":  # a plain view or constant reads its inputs
            self._need_inputs(self.planner.nodes[i], needed)

    def _kernel(self, members, member_of):
        """The ``fused`` node computing ``members``; None when nothing outside reads them."""
        planner, nodes = self.planner, self.planner.nodes
        group = member_of.get(members[0])
        # the copied values the members read, and the copied values those read (a loop, not a
        # recursive closure: that was a reference cycle holding the planner until a collection)
        copied = set()
        wanted = [v for i in members for v in nodes[i].input_values()]
        while wanted:
            p = planner.producer.get(wanted.pop())
            if p is not None and p in planner.duplicable and p not in copied and p not in members:
                copied.add(p)
                wanted.extend(nodes[p].input_values())
        # a copied value that escapes is the output of one kernel only: the one that claimed it
        outs = [v for i in members if i not in self.claimed for v in nodes[i].outs
                if v in self.escaping or group is None
                or any(member_of.get(j) is not group for j in planner.readers.get(v, ()))]
        self.claimed.update(i for i in members if i in self.claimable)
        for p in sorted(copied & (self.claimable - self.claimed)):
            self.claimed.add(p)
            outs.extend(nodes[p].outs)
        if not outs:
            return None
        sub, args = _subgraph(nodes, sorted(copied | set(members)), outs)
        node = Node("fused", args, {"graph": sub, "name": ""}, tuple(outs),
                    nodes[members[-1]].source)
        self.kernels.append(node)
        return node


def _subgraph(nodes, inside, outs):
    """(subgraph computing ``outs`` with the nodes at positions ``inside``, the outer values
    it reads).  The subgraph has values of its own."""
    env, inputs, args, body = {}, [], [], []
    defined = {v for i in inside for v in nodes[i].outs}
    for i in inside:
        node = nodes[i]
        for v in node.input_values():
            if v not in defined and v not in env:
                env[v] = Value(v.type)
                inputs.append(Input(env[v], "input", f"a{len(inputs)}"))
                args.append(v)
        for v in node.outs:
            env[v] = Value(v.type)
        body.append(Node(node.op, remap(node.args, env),
                         {k: remap(a, env) for k, a in node.attrs.items()},
                         tuple(env[v] for v in node.outs), node.source))
    return Graph(inputs=inputs, nodes=body, outputs=[env[v] for v in outs]), tuple(args)


def _schedule(emitted):
    """The emitted nodes in an order where every value is defined before it is read: ready
    nodes go first by the position of their first original member."""
    producer = {}
    for k, (_, node) in enumerate(emitted):
        for v in node.outs:
            producer[v] = k
    # effects keep their order: each waits for the previous one (random draws share a
    # generator; every process runs its collectives in the same order)
    draws = sorted((key, k) for k, (key, node) in enumerate(emitted) if has_effect(node))
    after = {k: prev for (_, prev), (_, k) in zip(draws, draws[1:])}
    waiting = [0] * len(emitted)
    readers = [[] for _ in emitted]
    for k, (_, node) in enumerate(emitted):
        deps = {producer[v] for v in node.input_values() if v in producer}
        if k in after:
            deps.add(after[k])
        waiting[k] = len(deps)
        for d in deps:
            readers[d].append(k)
    ready = [(emitted[k][0], k) for k in range(len(emitted)) if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(emitted[k][1])
        for r in readers[k]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, (emitted[r][0], r))
    if len(order) != len(emitted):
        raise AssertionError("fusion: the grouped graph has a cycle")
    return order

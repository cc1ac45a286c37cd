"""DistributedDataParallel (torch.nn.parallel.DistributedDataParallel) on dynograph.distributed."""
import contextlib

import numpy as np

from dynograph import distributed as dist      # no MPI yet: mpi4py loads on first use
from dynograph._trace_hook import TRACE
from ..modules.module import Module
from ._reducer import Reducer


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of a process group: every rank holds a replica of
    ``module``, runs it on its own part of the batch, and after ``backward()`` every replica's
    ``.grad`` holds the average over the ranks, so identical optimizer steps keep the replicas
    identical.

    At construction the parameters' shapes are checked across ranks and rank 0's parameters and
    buffers are copied to all ranks.  Gradients are averaged in buckets of ``bucket_cap_mb``
    (see ``_reducer``), overlapping communication with the rest of backward.
    ``broadcast_buffers`` copies rank 0's buffers (BatchNorm statistics) before each forward.
    Inside ``no_sync()`` gradients only accumulate locally; the first backward after it
    averages the accumulated gradients.  With ``find_unused_parameters`` each forward's graph is
    searched for the parameters it does not use, so their buckets do not wait for them.

    With ``dynograph.compile``: compile the forward (``dynograph.compile(ddp_model)``, or a
    function returning the loss) and call ``backward()`` outside; the all-reduces then run in
    backward right after the compiled gradient graph.  A compiled function that runs
    ``backward()`` inside falls back to eager with a warning naming DistributedDataParallel.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False):
        super().__init__()
        from dynograph.distributed._group import resolve
        if device_ids is not None or output_device is not None:
            raise ValueError("DistributedDataParallel device_ids and output_device arguments only "
                             "work with single-device/multiple-device GPU modules; for a CPU module "
                             "leave them None")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any "
                               "parameter that requires a gradient.")
        self.module = module
        self.process_group = resolve(process_group)
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        named = []
        seen = set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        self._param_names = {id(p): name for name, p in named}
        params = [p for _, p in named]
        _verify_same_model(self.process_group, named, dist)
        if init_sync:
            self._sync_module_states()
        self.reducer = Reducer(self, params, self.process_group, self.bucket_bytes_cap)

    # ---------------------------------------------------------------- state from rank 0

    def _sync_module_states(self):
        """Rank 0's parameters and buffers to every rank: one broadcast per dtype."""
        tensors = [p for p in self.module.parameters()] + [b for b in self.module.buffers()]
        _broadcast_coalesced(self.process_group, tensors)

    def forward(self, *inputs, **kwargs):
        from dynograph.autograd.grad_mode import is_grad_enabled
        traced = TRACE.tracer is not None
        if self.reducer.in_progress and self.require_backward_grad_sync and is_grad_enabled() and not traced:
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new "
                "one. This error indicates that your module has parameters that were not used in "
                "producing loss. You can enable unused parameter detection by passing the keyword "
                "argument `find_unused_parameters=True` to "
                "`dynograph.nn.parallel.DistributedDataParallel`, and by making sure all `forward` "
                "function outputs participate in calculating loss. Parameters that did not receive "
                "a gradient: " + ", ".join(self._param_names[id(p)] for p in self.reducer.params
                                         if id(p) not in self.reducer.ready))
        buffers = [b for b in self.module.buffers()]
        if self.broadcast_buffers and buffers and self.require_forward_param_sync:
            if traced:
                TRACE.tracer.graph_break(
                    "DistributedDataParallel(broadcast_buffers=True) copies rank 0's buffers before "
                    "each forward, which the compiled graph does not replay; pass "
                    "broadcast_buffers=False to compile it")
            _broadcast_coalesced(self.process_group, buffers)
        out = self.module(*inputs, **kwargs)
        if self.find_unused_parameters and is_grad_enabled() and self.require_backward_grad_sync:
            if traced:
                TRACE.tracer.graph_break(
                    "DistributedDataParallel(find_unused_parameters=True) searches each forward's "
                    "autograd graph, which a compiled replay does not build")
            self.reducer.prepare(_unused_parameters(out, self.reducer.params))
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backward passes inside accumulate locally, without all-reduce."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _verify_same_model(pg, named, dist):
    """Every rank has the same parameter shapes and dtypes, or raise naming the difference."""
    mine = [(name, tuple(p.shape), str(p.dtype)) for name, p in named]
    everyone = [None] * pg.size()
    dist.all_gather_object(everyone, mine, group=pg)
    ref = everyone[0]
    for r, theirs in zip(pg.ranks, everyone):
        if len(theirs) != len(ref):
            raise RuntimeError(f"DDP expects same model across all ranks, but Rank {pg.ranks[0]} has "
                               f"{len(ref)} params, while rank {r} has inconsistent {len(theirs)} params.")
        for (n0, s0, d0), (n1, s1, d1) in zip(ref, theirs):
            if s0 != s1 or d0 != d1:
                raise RuntimeError(f"DDP expects same model across all ranks, but rank {pg.ranks[0]}'s "
                                   f"parameter {n0} is {d0}{list(s0)} while rank {r}'s {n1} is "
                                   f"{d1}{list(s1)}.")


def _broadcast_coalesced(pg, tensors):
    from dynograph import no_grad, from_numpy
    groups = {}
    for t in tensors:
        groups.setdefault(t._data.dtype, []).append(t)
    for dtype, ts in groups.items():
        flat = np.concatenate([t._data.reshape(-1) for t in ts]) if ts else np.empty(0, dtype)
        dist.broadcast(from_numpy(flat), src=pg.ranks[0], group=pg)
        k = 0
        with no_grad():
            for t in ts:
                np.copyto(t._data, flat[k:k + t._data.size].reshape(t._data.shape))
                t._bump_version()
                k += t._data.size


def _unused_parameters(out, params):
    """The parameters of ``params`` that the autograd graph of ``out`` does not reach."""
    from dynograph._tensor import Tensor
    roots = []

    def collect(x):
        if isinstance(x, Tensor):
            if x.grad_fn is not None:
                roots.append(x.grad_fn)
            elif x.requires_grad:
                reached.add(id(x))
        elif isinstance(x, (list, tuple)):
            for y in x:
                collect(y)
        elif isinstance(x, dict):
            for y in x.values():
                collect(y)

    reached = set()
    collect(out)
    seen = set()
    stack = roots
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            reached.add(id(var))
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return [p for p in params if id(p) not in reached]

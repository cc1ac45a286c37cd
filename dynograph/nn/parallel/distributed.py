"""DistributedDataParallel (torch.nn.parallel.DistributedDataParallel) on dynograph.distributed."""
import contextlib

import numpy as np

import dynograph
from dynograph import distributed as dist      # no MPI yet: mpi4py loads on first use
from dynograph._trace_hook import TRACE
from dynograph.distributed.algorithms.join import Join, Joinable, JoinHook
from ..modules.module import Module
from . import _traced as traced_ddp
from ._reducer import Reducer


class DistributedDataParallel(Module, Joinable):
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
    ``register_comm_hook(state, hook)`` replaces the averaging all-reduce of each bucket by
    ``hook`` (see dynograph.distributed.algorithms.ddp_comm_hooks), and ``join()`` trains on
    inputs of different lengths across ranks.

    With ``dynograph.compile``: a compiled training step (forward, ``backward()``, optimizer
    step) holds each bucket's all-reduce as a collective node of its graph (``_traced.py``); a
    compiled forward with ``backward()`` outside runs the all-reduces in the eager backward,
    right after the compiled gradient graph.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False):
        super().__init__()
        Joinable.__init__(self)
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
        self._divide_by_initial_world_size = True
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

    def _sync_module_states(self, src=None, buffers=True):
        """Rank ``src``'s (default: rank 0's) parameters and buffers to every rank: one
        broadcast per dtype."""
        tensors = list(self.module.parameters()) + (list(self.module.buffers()) if buffers else [])
        _broadcast_coalesced(self.process_group, tensors, src)

    def forward(self, *inputs, **kwargs):
        from dynograph.autograd.grad_mode import is_grad_enabled
        traced = TRACE.tracer is not None
        if traced:
            traced_ddp.guard_sync(self, TRACE.tracer)
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
        joining = self._join_config.enable
        if joining and traced:
            TRACE.tracer.graph_break(
                "DistributedDataParallel.join() tells the other ranks before each forward that this "
                "rank still trains, which the compiled graph does not replay")
        # under join(): this rank still trains (a rank that ran out of inputs meets it with 0)
        counting = Join.notify_join_context(self)
        buffers = [b for b in self.module.buffers()]
        if self._syncs_buffers(buffers):
            if traced:
                TRACE.tracer.graph_break(
                    "DistributedDataParallel(broadcast_buffers=True) copies rank 0's buffers before "
                    "each forward, which the compiled graph does not replay; pass "
                    "broadcast_buffers=False to compile it")
            # under join() rank 0 may have stopped: the highest rank still training is the source
            src = self._find_common_rank(self._rank, True) if joining else None
            _broadcast_coalesced(self.process_group, buffers, src)
        syncing = None
        if joining:     # tells the joined ranks whether this iteration's backward all-reduces
            syncing = dist.all_reduce(dynograph.ones(1) if self._will_sync_backward() else dynograph.zeros(1),
                                      group=self.process_group, async_op=True)
        out = self.module(*inputs, **kwargs)
        if syncing is not None:
            syncing.wait()
        if counting is not None:
            self.reducer.ranks_training = int(counting.result()[0].item())
        elif self.reducer.ranks_training is not None:
            self.reducer.ranks_training = None      # out of join(): the whole world trains
        if self.find_unused_parameters and is_grad_enabled() and self.require_backward_grad_sync:
            unused = _unused_parameters(out, self.reducer.params)
            if traced:
                traced_ddp.check_unused(self, TRACE.tracer, unused)
            self.reducer.prepare(unused)
        return out

    def _syncs_buffers(self, buffers):
        return self.broadcast_buffers and bool(buffers) and self.require_forward_param_sync

    def _will_sync_backward(self):
        from dynograph.autograd.grad_mode import is_grad_enabled
        return self.require_backward_grad_sync and is_grad_enabled()

    @property
    def _rank(self):
        return self.process_group.rank()

    def _find_common_rank(self, rank, candidate):
        """The highest rank of those passing ``candidate=True`` (one all-reduce)."""
        t = dynograph.tensor([rank if candidate else -1])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.process_group)
        if t.item() == -1:
            raise ValueError("BUG! Expected rank_cond to be true for at least one process.")
        return self.process_group.ranks[int(t.item())]

    # ---------------------------------------------------------------- communication hooks

    def register_comm_hook(self, state, hook):
        """Average each bucket's gradients with ``hook(state, bucket)`` instead of the built-in
        all-reduce.  ``bucket`` is a ``dist.GradBucket`` of the local gradients (not divided
        by the world size); the hook returns a ``dynograph.futures.Future`` whose value is the
        bucket's new flat tensor, which DDP writes into ``.grad``.  Hooks run as the buckets
        fill during backward, in the same order on every rank; not under ``no_sync()``.  A
        hook can be registered once."""
        _check_comm_hook(hook)
        self.reducer.register_comm_hook(state, hook)

    # ---------------------------------------------------------------- Join

    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """Context manager for training on inputs of different lengths across ranks: a rank
        that leaves the loop early keeps meeting the others' all-reduces, contributing zero
        gradients, until every rank is done; then the model of the (highest) last rank to
        finish is copied to all.  Gradients are divided by the initial world size
        (``divide_by_initial_world_size=True``) or by the number of ranks still training.
        ``throw_on_early_termination=True`` makes every rank raise RuntimeError as soon as one
        runs out of inputs instead."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        """The JoinHook that shadows this DDP's forward and backward collectives on a rank that
        ran out of inputs; ``divide_by_initial_world_size`` (default True) as in ``join()``."""
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return dynograph.device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backward passes inside accumulate locally, without all-reduce."""
        if TRACE.tracer is not None:        # a compiled step depends on the flag as it was before
            traced_ddp.guard_sync(self, TRACE.tracer)
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


class _DDPJoinHook(JoinHook):
    """A joined rank's side of the others' DDP iterations (see DistributedDataParallel.join)."""

    def __init__(self, ddp, divide_by_initial_world_size):
        if not isinstance(ddp, DistributedDataParallel):
            raise TypeError("DDP join hook requires passing in a DistributedDataParallel instance "
                            f"as the state, got {type(ddp).__name__}")
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self):
        """Meets one forward and backward of the ranks still training, collective by collective."""
        ddp = self.ddp
        buffers = [b for b in ddp.module.buffers()]
        if ddp._syncs_buffers(buffers):
            _broadcast_coalesced(ddp.process_group, buffers, ddp._find_common_rank(ddp._rank, False))
        syncing = dynograph.zeros(1)
        dist.all_reduce(syncing, group=ddp.process_group)
        if syncing.item():
            ddp.reducer.shadow_backward()

    def post_hook(self, is_last_joiner):
        """Every rank takes the model of the highest rank among the last to join."""
        ddp = self.ddp
        src = ddp._find_common_rank(ddp._rank, is_last_joiner)
        ddp._sync_module_states(src, buffers=ddp.broadcast_buffers)


def _check_comm_hook(hook):
    """A hook is a callable ``hook(state, bucket)``; annotations, where given, are torch's."""
    import inspect
    import typing
    from dynograph.futures import Future
    if not callable(hook):
        raise TypeError("Communication hook must be callable.")
    try:
        sig = inspect.signature(hook)
    except (TypeError, ValueError):
        return          # a builtin without a signature: called as hook(state, bucket)
    try:
        sig.bind(None, None)
    except TypeError:
        raise TypeError(f"Communication hook must take two arguments (state, bucket), but "
                        f"{getattr(hook, '__qualname__', hook)} has the signature {sig}") from None
    params = list(sig.parameters.values())
    bucket = sig.parameters.get("bucket", params[1] if len(params) > 1 else None)
    given = bucket.annotation if bucket is not None else inspect.Parameter.empty
    if given is not inspect.Parameter.empty and not isinstance(given, str) and given is not dist.GradBucket:
        raise ValueError("Communication hook: bucket annotation should be dist.GradBucket.")
    given = sig.return_annotation      # (a string under `from __future__ import annotations`)
    if given is not inspect.Signature.empty and not isinstance(given, str) and \
            given is not Future and typing.get_origin(given) is not Future:
        raise ValueError("Communication hook: return annotation should be "
                         "dynograph.futures.Future[dynograph.Tensor].")


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


def _broadcast_coalesced(pg, tensors, src=None):
    from dynograph import no_grad, from_numpy
    groups = {}
    for t in tensors:
        groups.setdefault(t._data.dtype, []).append(t)
    for dtype, ts in groups.items():
        flat = np.concatenate([t._data.reshape(-1) for t in ts]) if ts else np.empty(0, dtype)
        dist.broadcast(from_numpy(flat), src=pg.ranks[0] if src is None else src, group=pg)
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

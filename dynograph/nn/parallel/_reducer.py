"""The gradient reducer behind DistributedDataParallel.

Parameters are packed, in reverse registration order (roughly the order backward produces
their gradients), into buckets of at most ``bucket_cap_mb`` (the first one 1 MB, so the first
all-reduce starts early), one dtype per bucket.  A post-accumulate-grad hook on each parameter
copies its finished ``.grad`` into its bucket slot; when a bucket is full it is divided by the
world size and a non-blocking all-reduce starts, while backward goes on computing the rest.
Buckets start strictly in index order on every rank, as MPI needs.  When the last parameter
is in, every all-reduce is waited on and the averages go back into ``.grad`` (or ``.grad``
becomes a view of the bucket, with ``gradient_as_bucket_view``).  While a compiled training
step is traced, the hooks record the same work as graph ops instead (``_traced.py``).

A communication hook (``register_comm_hook``) replaces the division and all-reduce: it gets
each ready bucket as a ``dist.GradBucket`` of the local gradients and returns a Future of the
bucket's new values.  Under ``Join`` a rank that ran out of inputs meets the others' bucket
all-reduces with zeros (``shadow_backward``), and the divisor is the initial world size or the
number of ranks still training.
"""
import time

import numpy as np

from dynograph._trace_hook import TRACE
from . import _traced as traced

FIRST_BUCKET_BYTES = 1024 * 1024


class Bucket:
    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params
        sizes = [p._data.size for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        self.flat = np.zeros(self.offsets[-1], dtype)
        self.views = [None] * len(params)     # the .grad tensors that are views of ``flat``
        self.pending = len(params)
        self.request = None
        self.future = None                    # with a comm hook: the Future of its new values

    def slot(self, i):
        return self.flat[self.offsets[i]:self.offsets[i + 1]]


def assign_buckets(params, cap_bytes, first_cap_bytes):
    """Lists of parameters, reverse order, split by dtype and size (torch's assignment)."""
    buckets, open_ = [], {}
    order = {id(p): k for k, p in enumerate(reversed(params))}
    for p in reversed(params):
        key = p._data.dtype
        cur = open_.get(key)
        cap = first_cap_bytes if not buckets and cur is None else cap_bytes
        if cur is None:
            cur = open_[key] = [[], 0, cap]
        cur[0].append(p)
        cur[1] += p._data.nbytes
        if cur[1] >= cur[2]:
            buckets.append(cur[0])
            del open_[key]
    buckets.extend(v[0] for v in open_.values())
    return sorted(buckets, key=lambda b: order[id(b[0])])     # by their first gradient, as torch


class Reducer:
    def __init__(self, ddp, params, pg, cap_bytes, first_cap_bytes=FIRST_BUCKET_BYTES):
        self.ddp = ddp
        self.pg = pg
        self.params = params
        first = min(first_cap_bytes, cap_bytes)
        self.buckets = [Bucket(i, ps, ps[0]._data.dtype)
                        for i, ps in enumerate(assign_buckets(params, cap_bytes, first))]
        self.where = {}
        for b in self.buckets:
            for i, p in enumerate(b.params):
                self.where[id(p)] = (b, i)
        self.handles = [p.register_post_accumulate_grad_hook(self._hook) for p in params]
        self.comm_hook = None       # (state, hook) once registered
        self.ranks_training = None  # under Join: the ranks that ran this iteration's forward
        self._reset()

    def _reset(self):
        self.ready = set()
        self.next_bucket = 0
        self.used = None            # find_unused_parameters: 1 per parameter used locally
        self.used_request = None
        self.div_factor = None
        for b in self.buckets:
            b.pending = len(b.params)
            b.request = None
            b.future = None

    @property
    def in_progress(self):
        return bool(self.ready)

    # ---------------------------------------------------------------- one backward

    def prepare(self, unused):
        """find_unused_parameters: parameters the forward's graph did not reach count as
        ready now (their slot holds their .grad, or zeros)."""
        self.used = np.ones(len(self.params), np.uint8)
        index = {id(p): k for k, p in enumerate(self.params)}
        for p in unused:
            self.used[index[id(p)]] = 0
            self._mark(p)

    def _hook(self, p):
        if TRACE.tracer is not None and traced.hook(self, p, TRACE.tracer):
            return                  # a compiled step's trace: the averages are graph ops
        if not self.ddp.require_backward_grad_sync:
            return
        self._mark(p)
        if len(self.ready) == len(self.params):
            self._finish()

    _hook.traceable = True          # under a trace its work is recorded (or it breaks the graph)

    def _mark(self, p):
        if id(p) in self.ready:
            name = self.ddp._param_names.get(id(p), "?")
            raise RuntimeError(
                f"Expected to mark a variable ready only once. This error is caused by a parameter "
                f"({name}) that received a gradient twice in one reduction: a second backward "
                "before the first one's reduction finished, or a parameter used by a reentrant "
                "or checkpointed part of the model. Make sure each forward is followed by one "
                "backward, or use no_sync() for the passes that only accumulate.")
        self.ready.add(id(p))
        b, i = self.where[id(p)]
        g = p._grad
        if g is None:
            b.slot(i)[...] = 0
        elif b.views[i] is None or g is not b.views[i]:
            b.slot(i)[...] = g._data.reshape(-1)
        b.pending -= 1
        self._launch_ready()

    def _launch_ready(self):
        from dynograph.distributed._mpi import buffer, mpi, reduce_op
        MPI = mpi()
        n = self.pg.size()
        flying = [b.request for b in self.buckets[:self.next_bucket] if b.request is not None]
        if flying:
            MPI.Request.Testall(flying)     # MPI moves data only when polled: let it, between hooks
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            b = self.buckets[self.next_bucket]
            if self.comm_hook is not None:
                b.future = self.run_comm_hook(self.grad_bucket(b, b.flat))
            else:
                b.flat /= self._div_factor(n)     # torch divides before summing
                b.request = self.pg.comm.Iallreduce(MPI.IN_PLACE, buffer(b.flat),
                                                    reduce_op("sum", b.flat.dtype))
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets) and self.used is not None and self.used_request is None:
            self.used_request = self.pg.comm.Iallreduce(MPI.IN_PLACE, [self.used, MPI.UINT8_T], MPI.MAX)

    def _finish(self):
        from dynograph.distributed._mpi import wait
        from dynograph._tensor import Tensor
        pg = self.pg
        deadline = time.monotonic() + pg.timeout
        for b in self.buckets:
            if b.future is not None:
                self._take_hook_result(b, b.future.wait())
                continue
            wait(b.request, deadline, f"all_reduce of DistributedDataParallel bucket {b.index}",
                 lambda b=b: f"after {pg.timeout:g} s ({b.flat.size} {b.flat.dtype} gradient values)")
        used = None
        if self.used is not None:
            wait(self.used_request, deadline, "all_reduce of DistributedDataParallel's used parameters",
                 lambda: f"after {pg.timeout:g} s")
            used = {id(p): bool(u) for p, u in zip(self.params, self.used)}
        as_view = self.ddp.gradient_as_bucket_view
        for b in self.buckets:
            for i, p in enumerate(b.params):
                if used is not None and not used[id(p)]:
                    continue                        # no rank used it: .grad stays as it was
                value = b.slot(i).reshape(p._data.shape)
                if as_view:
                    if b.views[i] is None:
                        b.views[i] = Tensor._wrap(value)
                    if p._grad is not b.views[i]:
                        p._grad = b.views[i]
                    p._grad._bump_version()
                elif p._grad is None:
                    p._grad = Tensor._wrap(value.copy())
                else:
                    np.copyto(p._grad._data, value)
                    p._grad._bump_version()
        self._reset()

    def _div_factor(self, n):
        """The world size, or under Join(divide_by_initial_world_size=False) the number of
        ranks that ran this iteration's forward."""
        if self.div_factor is None:
            self.div_factor = n
            if self.ranks_training is not None and not self.ddp._divide_by_initial_world_size:
                self.div_factor = self.ranks_training
        return self.div_factor

    # ---------------------------------------------------------------- communication hooks

    def register_comm_hook(self, state, hook):
        if self.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        self.comm_hook = (state, hook)

    def grad_bucket(self, b, flat):
        from dynograph._tensor import Tensor
        from dynograph.distributed import GradBucket
        return GradBucket(b.index, Tensor._wrap(flat), b.params, b.offsets,
                          b.index == len(self.buckets) - 1)

    def run_comm_hook(self, bucket):
        from dynograph.futures import Future
        state, hook = self.comm_hook
        fut = hook(state, bucket)
        if not isinstance(fut, Future):
            raise RuntimeError("DDP communication hook's callback must return a "
                               "dynograph.futures.Future object, but got "
                               f"{type(fut).__module__}.{type(fut).__qualname__}")
        return fut

    def _take_hook_result(self, b, value):
        """The hook's reduced values into the bucket (unless the hook reduced it in place)."""
        from dynograph._tensor import Tensor
        if not isinstance(value, Tensor):
            raise RuntimeError("DDP communication hook's Future must hold one tensor (the bucket's "
                               f"new flat gradients), but it holds {type(value).__name__}")
        if tuple(value.shape) != b.flat.shape:
            raise RuntimeError(f"DDP communication hook's result for bucket {b.index} has shape "
                               f"{list(value.shape)}, but the bucket's buffer has shape {list(b.flat.shape)}")
        a = value._data
        same = (a.dtype == b.flat.dtype and a.__array_interface__["data"][0] == b.flat.ctypes.data
                and a.strides == b.flat.strides)
        if not same:
            np.copyto(b.flat, a, casting="unsafe")

    # ---------------------------------------------------------------- Join

    def shadow_backward(self):
        """A rank that ran out of inputs meets one backward of the others: every bucket's
        all-reduce (or comm hook) in their order, with zeros; then the used-parameter map's."""
        from dynograph.distributed._mpi import buffer, mpi, reduce_op, wait
        MPI = mpi()
        pg = self.pg
        pending = []
        zeros = [np.zeros_like(b.flat) for b in self.buckets]    # alive until MPI is done with them
        for b, z in zip(self.buckets, zeros):
            if self.comm_hook is not None:
                pending.append(self.run_comm_hook(self.grad_bucket(b, z)))
            else:
                pending.append(pg.comm.Iallreduce(MPI.IN_PLACE, buffer(z), reduce_op("sum", z.dtype)))
        deadline = time.monotonic() + pg.timeout
        for b, p in zip(self.buckets, pending):
            if not isinstance(p, MPI.Request):
                p.wait()
                continue
            wait(p, deadline, f"all_reduce of DistributedDataParallel bucket {b.index} (joined rank)",
                 lambda: f"after {pg.timeout:g} s")
        if self.ddp.find_unused_parameters:
            used = np.zeros(len(self.params), np.uint8)
            wait(pg.comm.Iallreduce(MPI.IN_PLACE, [used, MPI.UINT8_T], MPI.MAX), deadline,
                 "all_reduce of DistributedDataParallel's used parameters (joined rank)",
                 lambda: f"after {pg.timeout:g} s")

    def remove(self):
        for h in self.handles:
            h.remove()

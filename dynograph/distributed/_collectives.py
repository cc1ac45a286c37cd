"""Collectives on dynograph tensors (torch.distributed's signatures), in place.

Every collective first checks, with one small all-gather of each rank's call signature
(collective, dtype, shape, root, reduce op), that all ranks called the same thing; a mismatch
raises on every rank naming the ranks and their shapes, instead of MPI reading past a buffer
or waiting forever.  The data then moves with a non-blocking MPI call that is waited on with
the group's timeout.
"""
import time

import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.runtime import dtypes
from ._group import NON_GROUP_MEMBER, STATE, resolve
from ._mpi import DTYPE_CODE, buffer, mpi, reduce_op, wait
from ._work import Work


class ReduceOp:
    """torch.distributed.ReduceOp: how all_reduce, reduce and reduce_scatter combine."""

    class RedOpType(str):
        def __repr__(self):
            return f"<RedOpType.{self.upper()}: {_OP_CODES[self]}>"

    SUM = RedOpType("sum")
    AVG = RedOpType("avg")
    PRODUCT = RedOpType("product")
    MIN = RedOpType("min")
    MAX = RedOpType("max")


_OP_CODES = {"sum": 0, "product": 1, "min": 2, "max": 3, "avg": 7}
# collective name -> its code in the signature: fixed, so every rank encodes alike
_CALLS = {name: i + 1 for i, name in enumerate((
    "all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor", "broadcast", "all_gather",
    "all_gather_into_tensor", "gather", "scatter", "all_to_all", "all_to_all_single",
    "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"))}
MAX_DIMS = 8        # dimensions a signature spells out; the rest is covered by the shape's hash


def not_member(group):
    return group is NON_GROUP_MEMBER


def shape_text(dtype_code, dims, ndim=None):
    name = dtypes.ALL_DTYPES[dtype_code].name
    more = ", ..." if ndim is not None and ndim > len(dims) else ""
    return f"{name}[{', '.join(str(d) for d in dims)}{more}]"


def array_of(t, what, arg="tensor"):
    from dynograph._tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"dynograph.distributed.{what}: {arg} must be a dynograph Tensor, "
                        f"got {type(t).__name__}")
    if not t._data.flags.c_contiguous:
        raise ValueError(f"dynograph.distributed.{what}: Tensors must be contiguous "
                         f"({arg} of shape {list(t.shape)} is a strided view; pass .contiguous())")
    return t._data


def not_traced(what):
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break(f"dynograph.distributed.{what} communicates with other "
                                 "processes, which the compiled graph does not replay")


def describe_call(pg, what, array=None):
    def text():
        part = "" if array is None else f" with {dtypes.from_numpy_dtype(array.dtype).name}" \
                                        f"{list(array.shape)}"
        return (f"after {pg.timeout:g} s on rank {STATE.world.rank()} (group rank {pg.rank()} "
                f"of {pg.size()}){part}")
    return text


def signature(what, array=None, root=-1, op=None, dtype=None):
    """[collective, dtype, root, op, ndim, shape hash, dims...] of one rank's call."""
    sig = np.full(6 + MAX_DIMS, -1, dtype=np.int64)
    sig[0] = _CALLS[what]
    sig[2] = root
    sig[3] = -1 if op is None else _OP_CODES[op]
    if array is not None:
        sig[1] = DTYPE_CODE[dtypes.from_numpy_dtype(array.dtype).name]
        sig[4], sig[5] = array.ndim, hash(array.shape)     # ints hash alike in every process
        dims = array.shape[:MAX_DIMS]
        sig[6:6 + len(dims)] = dims
    elif dtype is not None:
        sig[1] = DTYPE_CODE[dtype.name]
    return sig


def agree(pg, what, sig, deadline, roles="tensor"):
    """All ranks of ``pg`` called ``what`` with the same signature, or raise naming them
    (``roles`` "list": the signature's first dimension is a list's length)."""
    MPI = mpi()
    everyone = np.empty((pg.size(), sig.size), dtype=np.int64)
    req = pg.comm.Iallgather([sig, MPI.INT64_T], [everyone, MPI.INT64_T])
    wait(req, deadline, what, describe_call(pg, what))
    if (everyone == sig).all():
        return
    names = {v: k for k, v in _CALLS.items()}
    ops = {v: k for k, v in _OP_CODES.items()}
    same_call = (everyone[:, 0] == sig[0]).all()
    per_rank = []
    for r, s in zip(pg.ranks, everyone):
        text = f"rank {r}" + ("" if same_call else f" called {names.get(int(s[0]), 'another collective')}")
        verb = "has" if same_call else "with"
        if roles == "list":
            text += f" {verb} a list of {int(s[6])}"
        elif s[4] >= 0:
            text += f" {verb} {shape_text(int(s[1]), s[6:6 + min(int(s[4]), MAX_DIMS)], int(s[4]))}"
        elif s[1] >= 0:
            text += f" {verb} {dtypes.ALL_DTYPES[int(s[1])].name}"
        extra = ([f"root rank {pg.ranks[int(s[2])]}"] if 0 <= s[2] < pg.size() else []) + \
            ([f"op {ops[int(s[3])].upper()}"] if s[3] != -1 else [])
        per_rank.append(text + (f" ({', '.join(extra)})" if extra else ""))
    rule = "a list of the same length, and the same root" if roles == "list" else \
        "a tensor of the same shape and dtype, and the same root and op"
    raise RuntimeError(f"dynograph.distributed.{what}: the ranks' calls do not match: "
                       f"{'; '.join(per_rank)} (every rank must pass {rule})")


def _run(pg, what, sig, start, finish, async_op, tensors, array=None):
    """Check the signature, start the MPI call, and wait (or hand back a Work)."""
    not_traced(what)
    deadline = time.monotonic() + pg.timeout
    if sig is not None:
        agree(pg, what, sig, deadline)
    requests = start()
    work = Work(what, describe_call(pg, what, array), requests, deadline, finish, tensors)
    if async_op:
        return work
    work.wait()
    return None


def written(*tensors):
    for t in tensors:
        t._bump_version()


def _check_op(op, array, what):
    if op not in _OP_CODES:
        raise ValueError(f"dynograph.distributed.{what}: unknown op {op!r}; use dist.ReduceOp")
    if op == "avg" and array.dtype.kind in "biu":
        raise ValueError(f"dynograph.distributed.{what}: ReduceOp.AVG needs a floating-point "
                         f"tensor, got {dtypes.from_numpy_dtype(array.dtype).name}")
    if op in ("max", "min") and array.dtype.kind == "c":
        raise ValueError(f"dynograph.distributed.{what}: ReduceOp.{op.upper()} is not defined for "
                         f"complex tensors ({dtypes.from_numpy_dtype(array.dtype).name})")


def _mpi_op(op, array):
    return reduce_op("sum" if op == "avg" else op, array.dtype)


def _average(array, n):
    np.divide(array, n, out=array, casting="unsafe")


def root_rank(pg, given, group_given, what, arg, default=None):
    """The group rank meant by a global rank ``given`` or a group rank ``group_given``."""
    if given is not None and group_given is not None:
        raise ValueError(f"dynograph.distributed.{what}: pass {arg} or group_{arg}, not both")
    if group_given is not None:
        if not 0 <= group_given < pg.size():
            raise ValueError(f"dynograph.distributed.{what}: group_{arg} {group_given} is not a rank of "
                             f"the group (0 .. {pg.size() - 1})")
        return group_given
    if given is None:
        if default is None:
            raise ValueError(f"dynograph.distributed.{what}: either {arg} or group_{arg} must be given")
        given = default
    return pg.group_rank(given, arg)


# ------------------------------------------------------------------ reductions


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group with ``op``; every rank gets the result in place."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "all_reduce")
    _check_op(op, a, "all_reduce")
    MPI = mpi()

    def finish():
        if op == "avg":
            _average(a, pg.size())
        written(tensor)

    return _run(pg, "all_reduce", signature("all_reduce", a, op=op),
                lambda: pg.comm.Iallreduce(MPI.IN_PLACE, buffer(a), _mpi_op(op, a)),
                finish, async_op, [tensor], a)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` across the group into rank ``dst``'s tensor (others keep theirs)."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "reduce")
    _check_op(op, a, "reduce")
    root = root_rank(pg, dst, group_dst, "reduce", "dst")
    MPI = mpi()
    mine = pg.rank() == root

    def start():
        if mine:
            return pg.comm.Ireduce(MPI.IN_PLACE, buffer(a), _mpi_op(op, a), root)
        return pg.comm.Ireduce(buffer(a), None, _mpi_op(op, a), root)

    def finish():
        if mine:
            if op == "avg":
                _average(a, pg.size())
            written(tensor)

    return _run(pg, "reduce", signature("reduce", a, root, op), start, finish, async_op, [tensor], a)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce the i-th tensor of every rank's ``input_list`` into rank i's ``output``."""
    if not_member(group):
        return None
    pg = resolve(group)
    out = array_of(output, "reduce_scatter", "output")
    _check_op(op, out, "reduce_scatter")
    pieces = _list_like(input_list, out, pg, "reduce_scatter", "input_list")
    send = np.stack(pieces) if pieces else np.empty((0,) + out.shape, out.dtype)
    return _reduce_scatter(pg, "reduce_scatter", output, out, send, op, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world size times ``output``'s elements) and scatter it in equal parts."""
    if not_member(group):
        return None
    pg = resolve(group)
    out = array_of(output, "reduce_scatter_tensor", "output")
    inp = array_of(input, "reduce_scatter_tensor", "input")
    _check_op(op, out, "reduce_scatter_tensor")
    _same_dtype(inp, out, "reduce_scatter_tensor")
    if inp.size != out.size * pg.size():
        raise ValueError(f"dynograph.distributed.reduce_scatter_tensor: input tensor must be the "
                         f"same size as output size times world size (input {list(inp.shape)}, "
                         f"output {list(out.shape)}, world size {pg.size()})")
    return _reduce_scatter(pg, "reduce_scatter_tensor", output, out, inp, op, async_op)


def _reduce_scatter(pg, what, output, out, send, op, async_op):
    def finish():
        if op == "avg":
            _average(out, pg.size())
        written(output)

    return _run(pg, what, signature(what, out, op=op),
                lambda: pg.comm.Ireduce_scatter_block(buffer(send), buffer(out), _mpi_op(op, out)),
                finish, async_op, [output], out)


# ------------------------------------------------------------------ data movement


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy rank ``src``'s ``tensor`` into every other rank's ``tensor``."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "broadcast")
    root = root_rank(pg, src, group_src, "broadcast", "src")
    return _run(pg, "broadcast", signature("broadcast", a, root),
                lambda: pg.comm.Ibcast(buffer(a), root),
                lambda: written(tensor), async_op, [tensor], a)


def _same_dtype(a, b, what):
    if a.dtype != b.dtype:
        raise ValueError(f"dynograph.distributed.{what}: all tensors must have the same dtype, got "
                         f"{_text(a)} and {_text(b)}")


def _list_like(tensors, like, pg, what, arg):
    """The arrays of ``tensors``: one per rank of ``pg``, each of ``like``'s shape and dtype."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != pg.size():
        n = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"dynograph.distributed.{what}: {arg} must be a list of {pg.size()} "
                         f"tensors (one per rank), got {n}")
    arrays = []
    for i, t in enumerate(tensors):
        from dynograph._tensor import Tensor
        if not isinstance(t, Tensor):
            raise TypeError(f"dynograph.distributed.{what}: {arg}[{i}] must be a dynograph Tensor")
        if t._data.shape != like.shape or t._data.dtype != like.dtype:
            raise ValueError(f"dynograph.distributed.{what}: {arg}[{i}] is "
                             f"{_text(t._data)} but the tensor is {_text(like)}; they must match")
        arrays.append(t._data)
    return arrays


def _text(a):
    return f"{dtypes.from_numpy_dtype(a.dtype).name}{list(a.shape)}"


def _scatter_into(tensors, stacked):
    def finish():
        for t, part in zip(tensors, stacked):
            np.copyto(t._data, part)
        written(*tensors)
    return finish


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into each rank's ``tensor_list`` (rank order)."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "all_gather")
    _list_like(tensor_list, a, pg, "all_gather", "tensor_list")
    recv = np.empty((pg.size(),) + a.shape, a.dtype)
    return _run(pg, "all_gather", signature("all_gather", a),
                lambda: pg.comm.Iallgather(buffer(a), buffer(recv)),
                _scatter_into(list(tensor_list), recv), async_op, list(tensor_list), a)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated (or stacked) into ``output_tensor``."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(input_tensor, "all_gather_into_tensor", "input_tensor")
    out = array_of(output_tensor, "all_gather_into_tensor", "output_tensor")
    _same_dtype(out, a, "all_gather_into_tensor")
    if out.size != a.size * pg.size():
        raise ValueError(f"dynograph.distributed.all_gather_into_tensor: output tensor size must be "
                         f"equal to world_size times input tensor size (output {list(out.shape)}, "
                         f"input {list(a.shape)}, world size {pg.size()})")
    return _run(pg, "all_gather_into_tensor", signature("all_gather_into_tensor", a),
                lambda: pg.comm.Iallgather(buffer(a), buffer(out)),
                lambda: written(output_tensor), async_op, [output_tensor], a)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Every rank's ``tensor`` into rank ``dst``'s ``gather_list``."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "gather")
    root = root_rank(pg, dst, group_dst, "gather", "dst", default=0)
    mine = pg.rank() == root
    if mine:
        _list_like(gather_list, a, pg, "gather", "gather_list")
        recv = np.empty((pg.size(),) + a.shape, a.dtype)
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    else:
        recv = None
    return _run(pg, "gather", signature("gather", a, root),
                lambda: pg.comm.Igather(buffer(a), buffer(recv) if mine else None, root),
                _scatter_into(list(gather_list), recv) if mine else None, async_op,
                list(gather_list or ()), a)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """The i-th tensor of rank ``src``'s ``scatter_list`` into rank i's ``tensor``."""
    if not_member(group):
        return None
    pg = resolve(group)
    a = array_of(tensor, "scatter")
    root = root_rank(pg, src, group_src, "scatter", "src", default=0)
    mine = pg.rank() == root
    if mine:
        send = np.stack(_list_like(scatter_list, a, pg, "scatter", "scatter_list"))
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    return _run(pg, "scatter", signature("scatter", a, root),
                lambda: pg.comm.Iscatter(buffer(send) if mine else None, buffer(a), root),
                lambda: written(tensor), async_op, [tensor], a)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank i's ``input_tensor_list[j]`` into rank j's ``output_tensor_list[i]``; the pieces
    may differ in size, but each must match the one it meets on the other rank."""
    if not_member(group):
        return None
    pg = resolve(group)
    n = pg.size()
    for arg, lst in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"dynograph.distributed.all_to_all: {arg} must be a list of {n} tensors")
    ins = [array_of(t, "all_to_all", "input_tensor_list") for t in input_tensor_list]
    outs = [t._data for t in output_tensor_list]
    for a in ins + outs:
        _same_dtype(a, ins[0], "all_to_all")
    send = np.concatenate([a.reshape(-1) for a in ins])
    recv = np.empty(sum(a.size for a in outs), ins[0].dtype)
    finish = _split_into(list(output_tensor_list), recv)
    return _all_to_all(pg, "all_to_all", send, [a.size for a in ins], recv,
                       [a.size for a in outs], [a.shape for a in outs], finish, async_op,
                       list(output_tensor_list))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """all_to_all on one tensor each, split along dim 0 (evenly, or by the split sizes)."""
    if not_member(group):
        return None
    pg = resolve(group)
    n = pg.size()
    out = array_of(output, "all_to_all_single", "output")
    inp = array_of(input, "all_to_all_single", "input")
    _same_dtype(out, inp, "all_to_all_single")

    def splits(a, sizes, arg):
        if not sizes:
            if a.shape[0] % n:
                raise ValueError(f"dynograph.distributed.all_to_all_single: {arg} has {a.shape[0]} "
                                 f"rows, which do not split evenly over {n} ranks")
            sizes = [a.shape[0] // n] * n
        if len(sizes) != n or sum(sizes) != a.shape[0]:
            raise ValueError(f"dynograph.distributed.all_to_all_single: {arg}_split_sizes {list(sizes)} "
                             f"must have {n} entries summing to {a.shape[0]}")
        row = a.size // max(a.shape[0], 1)
        return [s * row for s in sizes]

    sc, rc = splits(inp, input_split_sizes, "input"), splits(out, output_split_sizes, "output")
    return _all_to_all(pg, "all_to_all_single", inp.reshape(-1), sc, out.reshape(-1), rc,
                       None, lambda: written(output), async_op, [output])


def _split_into(tensors, flat):
    def finish():
        k = 0
        for t in tensors:
            np.copyto(t._data, flat[k:k + t._data.size].reshape(t._data.shape))
            k += t._data.size
        written(*tensors)
    return finish


def _all_to_all(pg, what, send, send_counts, recv, recv_counts, recv_shapes, finish, async_op, tensors):
    """Check the counts each pair agrees on, then one MPI_Ialltoallv."""
    not_traced(what)
    MPI = mpi()
    deadline = time.monotonic() + pg.timeout
    agree(pg, what, signature(what, dtype=dtypes.from_numpy_dtype(send.dtype)), deadline)
    mine = np.array(send_counts, dtype=np.int64)
    theirs = np.empty_like(mine)
    wait(pg.comm.Ialltoall([mine, MPI.INT64_T], [theirs, MPI.INT64_T]), deadline, what,
         describe_call(pg, what))
    bad = [i for i in range(pg.size()) if theirs[i] != recv_counts[i]]
    if bad:
        i = bad[0]
        expect = f"output piece {i} of shape {list(recv_shapes[i])}" if recv_shapes else \
            f"{recv_counts[i]} elements in output piece {i}"
        raise RuntimeError(f"dynograph.distributed.{what}: rank {pg.ranks[i]} sends {theirs[i]} "
                           f"elements to rank {STATE.world.rank()}, which has {expect}")
    wire = buffer(send)[1]

    def displs(counts):
        return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64).tolist()

    def start():
        return pg.comm.Ialltoallv([buffer(send)[0], (list(send_counts), displs(send_counts)), wire],
                                  [buffer(recv)[0], (list(recv_counts), displs(recv_counts)), wire])

    work = Work(what, describe_call(pg, what, send), start(), deadline, finish, tensors)
    if async_op:
        return work
    work.wait()
    return None


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group reached the barrier (or the timeout passed)."""
    if not_member(group):
        return None
    pg = resolve(group)
    return _run(pg, "barrier", None, pg.comm.Ibarrier, None, async_op, [])


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """barrier with its own timeout (a timedelta)."""
    work = barrier(group, async_op=True)
    if work is not None:
        work.wait(timeout)

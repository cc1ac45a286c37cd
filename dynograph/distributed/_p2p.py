"""Point-to-point: send/recv and their non-blocking forms.

Each message is a small header (dtype, shape, a sequence number) followed by the data, on two
communicators of their own, so the receiver checks the sender's tensor against its own and
names both on a mismatch instead of reading a wrong-sized message.  The header goes with the
user's tag; the data with the sequence number as its tag, so a receive that learns its sender
from the header (``src=None``) takes exactly that message's data, whatever order receives are
waited on.
"""
import time

import numpy as np

from ._collectives import MAX_DIMS, array_of, describe_call, not_member, not_traced, shape_text, written
from ._group import STATE, resolve
from ._mpi import DTYPE_CODE, buffer, mpi, wait
from ._work import Work
from dynograph.runtime import dtypes


_HEADER = 3 + MAX_DIMS      # dtype, ndim, sequence number, dims
_SEQUENCE_SPAN = 32767      # the smallest tag bound MPI guarantees


def _header(a, seq):
    h = np.full(_HEADER, -1, dtype=np.int64)
    h[0], h[1], h[2] = DTYPE_CODE[dtypes.from_numpy_dtype(a.dtype).name], a.ndim, seq
    h[3:3 + min(a.ndim, MAX_DIMS)] = a.shape[:MAX_DIMS]
    return h


def _next_sequence(pg, peer):
    pg.send_sequence[peer] = (pg.send_sequence.get(peer, -1) + 1) % _SEQUENCE_SPAN
    return pg.send_sequence[peer]


def _peer(pg, given, group_given, what, arg):
    if given is not None and group_given is not None:
        raise ValueError(f"dynograph.distributed.{what}: pass {arg} or group_{arg}, not both")
    if group_given is not None:
        r = group_given
    elif given is None:
        raise ValueError(f"dynograph.distributed.{what}: either {arg} or group_{arg} must be given")
    else:
        r = pg.group_rank(given, arg)
    if not 0 <= r < pg.size():
        raise ValueError(f"dynograph.distributed.{what}: group_{arg} {r} is not a rank of the group")
    if r == pg.rank():
        raise ValueError(f"Invalid {arg} rank: {arg} rank should not be the same as the rank of "
                         "the current process.")
    return r


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Start sending ``tensor`` to rank ``dst``; returns a Work."""
    if not_member(group):
        return None
    pg = resolve(group)
    not_traced("isend")
    a = array_of(tensor, "isend")
    peer = _peer(pg, dst, group_dst, "isend", "dst")
    heads, data = pg.p2p
    seq = _next_sequence(pg, peer)
    h = _header(a, seq)
    MPI = mpi()
    reqs = [heads.Isend([h, MPI.INT64_T], peer, tag), data.Isend(buffer(a), peer, seq)]
    return Work("send", describe_call(pg, "send", a), reqs, time.monotonic() + pg.timeout, tensors=[tensor])


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` and wait until the buffer may be reused."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Start receiving into ``tensor`` from rank ``src`` (None: any rank); returns a Work whose
    ``wait()`` checks the sender's dtype and shape."""
    if not_member(group):
        return None
    pg = resolve(group)
    not_traced("irecv")
    a = array_of(tensor, "irecv")
    MPI = mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _peer(pg, src, group_src, "irecv", "src")
    heads, data = pg.p2p
    h = np.empty(_HEADER, dtype=np.int64)
    status = MPI.Status()
    describe = describe_call(pg, "recv", a)
    deadline = time.monotonic() + pg.timeout
    work = Work("recv", describe, [heads.Irecv([h, MPI.INT64_T], peer, tag)], deadline, tensors=[tensor],
                statuses=[status])

    def finish():
        sender = status.Get_source()
        work.source = pg.ranks[sender]
        theirs = h[3:3 + min(int(h[1]), MAX_DIMS)]
        code = DTYPE_CODE[dtypes.from_numpy_dtype(a.dtype).name]
        same = int(h[0]) == code and tuple(theirs) == a.shape
        # the data comes anyway (into a scratch buffer when it does not fit), so no stray
        # message is left behind
        target = a if same else np.empty(tuple(int(d) for d in theirs), dtypes.ALL_DTYPES[int(h[0])].np)
        wait(data.Irecv(buffer(target), sender, int(h[2])), deadline, "recv", describe)
        if not same:
            raise RuntimeError(f"dynograph.distributed.recv: rank {work.source} sent "
                               f"{shape_text(int(h[0]), theirs)} but rank {STATE.world.rank()}'s tensor "
                               f"is {shape_text(code, a.shape)}")
        written(tensor)

    work._finish = finish
    return work


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (None: any rank); returns the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    return work.source

"""Process groups: the default (world) group made by init_process_group, and subgroups."""
import atexit
import datetime
import sys

from dynograph.runtime import config
from ._mpi import DistError, mpi

default_pg_timeout = datetime.timedelta(minutes=30)     # torch's default for CPU backends


class Backend(str):
    """Backend names (torch.distributed.Backend); dynograph has one: MPI."""
    UNDEFINED = "undefined"
    MPI = "mpi"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: {type(name)}")
        value = name.lower()
        if value != cls.MPI:
            raise ValueError(f"dynograph.distributed: backend {name!r} is not available; "
                             "the only backend is 'mpi' (MPI through mpi4py)")
        return str.__new__(cls, value)


class ProcessGroup:
    """A set of ranks with an MPI communicator of its own.  ``ranks`` are global ranks in
    group-rank order; a process outside the group holds one with ``comm=None``."""

    def __init__(self, comm, ranks, timeout):
        self.comm = comm
        # point-to-point headers and data get communicators of their own (made here: Dup is
        # collective over the group)
        self.p2p = (comm.Dup(), comm.Dup())
        self.send_sequence = {}         # peer -> the last data tag sent to it
        self.ranks = ranks
        self.timeout = timeout

    def rank(self):
        return self.comm.Get_rank() if self.comm is not None else -1

    def size(self):
        return len(self.ranks)

    def group_rank(self, global_rank, what):
        """The rank in this group of global rank ``global_rank`` (a src/dst argument)."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"dynograph.distributed: {what} rank {global_rank} is not part of "
                             f"the group (its ranks are {self.ranks})") from None

    def name(self):
        return "world" if self is STATE.world else f"group{self.ranks}"

    def __repr__(self):
        return f"ProcessGroup(ranks={self.ranks}, backend='mpi')"


class _State:
    world = None
    groups = []


STATE = _State()


class _NonGroupMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


NON_GROUP_MEMBER = _NonGroupMember()


class _GroupMember:
    """torch.distributed.GroupMember: WORLD is the default group, NON_GROUP_MEMBER what
    new_group gives a rank outside it (collectives on it do nothing there, as in torch)."""

    @property
    def WORLD(self):
        return STATE.world

    NON_GROUP_MEMBER = NON_GROUP_MEMBER


GroupMember = _GroupMember()


def is_available():
    """True when the MPI backend can be used: mpi4py is installed (MPI itself is loaded on
    init_process_group)."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available():
    return is_available()


def is_initialized():
    return STATE.world is not None


def _timeout_seconds(timeout):
    if timeout is None:
        seconds = config.get("DIST_TIMEOUT")
        return seconds if seconds is not None else default_pg_timeout.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the processes started by ``mpiexec`` (or ``dynograph-run``) into the default group.

    Ranks and the world size come from MPI; ``rank``/``world_size``, when given, must agree.
    ``timeout`` bounds every collective: a rank that died or hangs makes the others raise
    DistBackendError naming the collective instead of waiting forever (default 30 minutes,
    or DYNOGRAPH_DIST_TIMEOUT seconds when set).
    """
    Backend(backend if backend is not None else "mpi")
    if STATE.world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None:
        raise ValueError("dynograph.distributed: the MPI backend finds its peers through "
                         "mpiexec; it takes no store")
    if init_method not in (None, "env://") and not str(init_method).startswith(("tcp://", "file://")):
        raise ValueError(f"dynograph.distributed: unknown init_method {init_method!r}")
    seconds = _timeout_seconds(timeout)
    MPI = mpi()
    comm = MPI.COMM_WORLD.Dup()     # a communicator of our own: user mpi4py code cannot mix in
    size, me = comm.Get_size(), comm.Get_rank()
    for name, given, actual in (("world_size", world_size, size), ("rank", rank, me)):
        if given is not None and given != -1 and given != actual:
            comm.Free()
            raise ValueError(f"dynograph.distributed.init_process_group: {name}={given} was "
                             f"given, but MPI started this process as {name} {actual} "
                             f"(launch with mpiexec -n N or dynograph-run -n N)")
    STATE.world = ProcessGroup(comm, list(range(size)), seconds)
    STATE.groups = [STATE.world]
    _abort_on_uncaught_exception()


def _abort_on_uncaught_exception():
    """An exception that ends one rank aborts the whole job: without this the other ranks
    would wait in their next collective until the timeout (as ``python -m mpi4py`` does)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        if STATE.world is not None and STATE.world.size() > 1 and kind is not KeyboardInterrupt:
            sys.stderr.flush()
            mpi().COMM_WORLD.Abort(1)

    sys.excepthook = hook


def destroy_process_group(group=None):
    """Free ``group`` (default: every group, and the default group is gone)."""
    if STATE.world is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    victims = list(STATE.groups) if group is None or group is STATE.world else [group]
    for g in victims:
        if g.comm is not None:
            for c in (g.comm,) + g.p2p:
                c.Free()
            g.comm = None
        if g in STATE.groups:
            STATE.groups.remove(g)
    if group is None or group is STATE.world:
        STATE.world = None
        STATE.groups = []


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of ``ranks`` (default: all).  Every rank of the world must call it, as in torch;
    a rank outside ``ranks`` gets GroupMember.NON_GROUP_MEMBER."""
    world = default_group()
    if backend is not None:
        Backend(backend)
    ranks = sorted(range(world.size()) if ranks is None else (int(r) for r in ranks))
    if len(set(ranks)) != len(ranks) or any(r < 0 or r >= world.size() for r in ranks):
        raise ValueError(f"dynograph.distributed.new_group: ranks {ranks} must be distinct ranks "
                         f"of the world (0 .. {world.size() - 1})")
    me = world.rank()
    member = me in ranks
    comm = world.comm.Split(0 if member else mpi().UNDEFINED, ranks.index(me) if member else 0)
    if not member:
        return GroupMember.NON_GROUP_MEMBER
    seconds = world.timeout if timeout is None else _timeout_seconds(timeout)
    g = ProcessGroup(comm, ranks, seconds)
    STATE.groups.append(g)
    return g


def default_group():
    if STATE.world is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    return STATE.world


def resolve(group):
    """The ProcessGroup a collective runs on (None: the default group)."""
    world = default_group()
    if group is None:
        return world
    if not isinstance(group, ProcessGroup) or group.comm is None:
        raise DistError(f"dynograph.distributed: {group!r} is not a live process group")
    return group


def get_rank(group=None):
    """This process's rank in ``group`` (-1 when it is not a member, as torch)."""
    if group is None:
        return default_group().rank()
    return resolve(group).rank() if group is not NON_GROUP_MEMBER else -1


def get_world_size(group=None):
    return resolve(group).size()


def get_backend(group=None):
    resolve(group)
    return Backend.MPI


def get_process_group_ranks(group):
    return list(resolve(group).ranks)


def get_global_rank(group, group_rank):
    return resolve(group).ranks[group_rank]


def get_group_rank(group, global_rank):
    return resolve(group).group_rank(global_rank, "global")


@atexit.register
def _free_at_exit():
    # communicators are freed before mpi4py finalizes MPI
    if STATE.world is not None:
        try:
            destroy_process_group()
        except Exception:
            pass

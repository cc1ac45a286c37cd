"""The DataLoader's iterator over worker processes (torch's MultiProcessingDataLoaderIter).

Worker processes start with ``multiprocessing_context`` (a start-method name or a context).
The default is torch's: multiprocessing's default context, so 'fork' on Linux before Python
3.14, 'forkserver' from 3.14, 'spawn' on macOS and Windows, or whatever
``multiprocessing.set_start_method`` chose.  With 'fork' the workers inherit the dataset,
collate_fn and worker_init_fn as they are (lambdas, local classes, a script without an
``if __name__ == "__main__":`` guard all work); with 'spawn' and 'forkserver' these travel
pickled and the main script is imported again in each worker, so failures there are
reported with the object or the guard to fix.  Every worker ends with the main process,
whatever the dataset is doing (``_worker.exit_with_parent``).

Each worker has its own index pipe; all answer on one result pipe.  The main process keeps
``prefetch_factor`` tasks per worker in flight and hands the batches back in sampler order
(a reorder buffer keyed by task number).  It waits on the result pipe and on the workers'
process sentinels together, so a worker that dies is reported at once.
"""
import itertools
import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
import weakref
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler

from ._sharing import sharing_session
from ._worker import ExceptionWrapper, IterableDatasetStopIteration, ResumeIteration, worker_loop
from .dataloader import _BaseDataLoaderIter, _DatasetKind

PIPE_BYTES = 1 << 22         # wanted kernel buffer of the result pipe (capped by the system)
SHUTDOWN_TIMEOUT = 2.0       # seconds workers get to exit cleanly before they are terminated
EXIT_WAIT = 10.0             # seconds a worker that closed its pipe gets to be seen dead


def _default_context():
    """torch's default: multiprocessing's default context (honours set_start_method)."""
    return mp.get_context()


def _parent_watch(ctx):
    """The argument of ``_worker.exit_with_parent`` for the workers about to start: this
    pid where the kernel's parent-death signal can serve, else None."""
    if ctx.get_start_method() == "forkserver" or threading.current_thread() is not threading.main_thread():
        return None
    return os.getpid()


def _preload_forkserver(ctx):
    """Have a not-yet-started fork server import dynograph, so its workers start warm."""
    if ctx.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver
    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", 0) is None:
        modules = list(getattr(server, "_preload_modules", ["__main__"]))
        if __package__ not in modules:
            ctx.set_forkserver_preload(modules + [__package__])


def _widen_pipe(conn):
    """Give the result pipe a bigger kernel buffer where Linux allows (F_SETPIPE_SZ): a
    batch then crosses in one write and one read instead of 64 KiB turns between the
    processes."""
    try:
        import fcntl
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(int(f.read()), PIPE_BYTES)
        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ValueError, ImportError):
        pass                              # not Linux, or not allowed: the default buffer works


class _Workers:
    """The worker processes and pipes of one iterator.  Kept apart from the iterator so a
    weakref finalizer (run on garbage collection and at exit) can shut them down."""

    def __init__(self):
        self.processes, self.index_conns = [], []
        self.result_conn = self.result_lock = None
        self.closed = False
        self.owner = os.getpid()          # a forked child holds a copy: never its to shut down

    def shutdown(self, graceful=True):
        """Ask every worker to stop, wait a little, then terminate (and kill) stragglers.
        Not ``graceful`` (a worker died, perhaps holding the result pipe's lock or halfway
        through a message): terminate them all at once."""
        if self.closed or os.getpid() != self.owner:
            return
        self.closed = True
        for conn in self.index_conns if graceful else ():
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (SHUTDOWN_TIMEOUT if graceful else 0.0)
        alive = [w for w in self.processes if w.is_alive()]
        while alive and time.monotonic() < deadline:
            self._drain()                     # unblock workers waiting to write a batch
            connection.wait([w.sentinel for w in alive], timeout=0.05)
            alive = [w for w in alive if w.is_alive()]
        for w in alive:
            w.terminate()
            w.join(1.0)
            if w.is_alive():
                w.kill()
        for w in self.processes:
            w.join(1.0)
        for conn in self.index_conns + [self.result_conn]:
            if conn is not None:
                conn.close()

    def _drain(self):
        try:
            while self.result_conn.poll(0):
                self.result_conn.recv_bytes()
        except (OSError, EOFError):
            pass


class MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        ctx = loader.multiprocessing_context or _default_context()
        self._start_method = ctx.get_start_method()
        _preload_forkserver(ctx)
        self._workers = workers = _Workers()
        self._finalizer = weakref.finalize(self, workers.shutdown)
        workers.result_conn, result_writer = ctx.Pipe(duplex=False)
        _widen_pipe(result_writer)
        # the parent keeps the lock alive: its semaphore must outlive the workers' start
        workers.result_lock = result_lock = ctx.Lock()
        iterable = self._dataset_kind == _DatasetKind.Iterable
        parent = _parent_watch(ctx)
        child_ends = [result_writer]
        try:
            with sharing_session():           # the dataset's big tensors: one shared copy
                for worker_id in range(self._num_workers):
                    index_reader, index_writer = ctx.Pipe(duplex=False)
                    child_ends.append(index_reader)
                    workers.index_conns.append(index_writer)
                    w = ctx.Process(target=worker_loop, daemon=True, args=(
                        iterable, self._dataset, index_reader, result_lock, result_writer,
                        self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                        loader.worker_init_fn, worker_id, self._num_workers, parent))
                    self._start(w, loader)
                    workers.processes.append(w)
        except BaseException:
            self._abort()                     # the workers already started end now
            raise
        finally:
            for conn in child_ends:           # the children hold their own copies now
                conn.close()
        self._reset(loader, first_iter=True)

    def _start(self, w, loader):
        """Start worker ``w``; a failure names its cause and the fix."""
        try:
            w.start()
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise _pickling_error(e, self._start_method, {
                "collate_fn": self._collate_fn, "worker_init_fn": loader.worker_init_fn,
                "dataset": self._dataset}) from e
        except (BrokenPipeError, ConnectionResetError, EOFError):
            # the child (or the fork server) ended while it was being sent its arguments
            raise RuntimeError("DataLoader worker failed to start: it exited before it was "
                               f"running.{_main_guard_hint(self._start_method)}") from None

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0                    # next task number to hand out
        self._rcvd_idx = 0                    # next task number to give back
        self._task_info = {}                  # task -> (worker,) or (worker, data)
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            self._resume_workers()
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _resume_workers(self):
        """Persistent workers at a new epoch: restart their fetchers and drop what the
        previous epoch left in flight (it arrives before each worker's acknowledgement)."""
        for conn in self._workers.index_conns:
            conn.send(ResumeIteration())
        remaining = self._num_workers
        while remaining > 0:
            idx, _ = self._get_data()
            if isinstance(idx, ResumeIteration):
                remaining -= 1

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        # out of order, a worker's share of the tasks in flight is capped, so a slow worker
        # does not collect them all
        share = self._prefetch_factor * self._num_workers // max(1, sum(self._workers_status))
        for _ in range(self._num_workers):    # the next worker still serving
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id] and \
                    (self._in_order or self._workers_num_tasks[worker_id] < share):
                break
        else:
            return
        self._send(worker_id, (self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._workers_num_tasks[worker_id] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _send(self, worker_id, message):
        try:
            self._workers.index_conns[worker_id].send(message)
        except (BrokenPipeError, ConnectionResetError):
            # the worker closed its end, so it is exiting: report that once it is seen dead
            w = self._workers.processes[worker_id]
            connection.wait([w.sentinel], timeout=EXIT_WAIT)
            self._check_workers()
            raise RuntimeError(f"DataLoader worker (pid {w.pid}) closed its pipe") from None

    def _check_workers(self):
        """Raise (after shutting down) if a worker still serving has died."""
        failed = [w for i, w in enumerate(self._workers.processes)
                  if self._workers_status[i] and not w.is_alive()]
        if not failed:
            return
        self._abort()
        details = "; ".join(_exit_description(w) for w in failed)
        pids = ", ".join(str(w.pid) for w in failed)
        # exit code 1: Python failed, perhaps while importing the main script again
        hint = _main_guard_hint(self._start_method) if any(w.exitcode == 1 for w in failed) else ""
        raise RuntimeError(f"DataLoader worker (pid {pids}) exited unexpectedly ({details}). "
                           f"Rerunning with num_workers=0 may give a better error trace.{hint}")

    def _abort(self):
        """Terminate the workers at once (one failed: the others may hold its locks)."""
        self._finalizer.detach()
        self._workers.shutdown(graceful=False)

    def _get_data(self):
        """The next ``(task_idx, data)`` from any worker, watching for dead workers and
        for ``timeout``."""
        if self._workers.closed:
            raise RuntimeError("DataLoader workers have been shut down")
        reader = self._workers.result_conn
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            sentinels = [w.sentinel for i, w in enumerate(self._workers.processes) if self._workers_status[i]]
            ready = connection.wait([reader] + sentinels, timeout=wait)
            if reader in ready or reader.poll(0):
                try:
                    return pickle.loads(reader.recv_bytes())
                except (EOFError, OSError):
                    # every worker closed its end: they are exiting; report why, not the pipe
                    connection.wait(sentinels, timeout=5)
                    self._check_workers()
                    raise RuntimeError("DataLoader workers closed their result pipe unexpectedly") from None
            self._check_workers()
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_data(self):
        while True:
            # skip tasks already handed out (out of order) or of workers whose iterable ended
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:   # already buffered
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, IterableDatasetStopIteration):
                self._worker_ended(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx and self._in_order:
                self._task_info[idx] += (data,)        # early: wait for its turn
                continue
            worker_id = self._task_info.pop(idx)[0]
            if idx == self._rcvd_idx:
                self._rcvd_idx += 1
            return self._process_data(data, worker_id)

    def _worker_ended(self, worker_id):
        """A worker's iterable dataset is exhausted: it serves no more tasks this epoch."""
        self._workers_status[worker_id] = False
        if not self._persistent_workers:
            try:
                self._workers.index_conns[worker_id].send(None)
            except OSError:
                pass

    def _process_data(self, data, worker_id):
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        self._finalizer()

    def __del__(self):
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()


def _exit_description(w):
    code = w.exitcode
    if code is not None and code < 0:
        import signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by signal: {name}"
    return f"exit code {code}"


# ---------------------------------------------------------------- start failures

FORK_FIX = "or pass multiprocessing_context='fork' (Linux and macOS)"


def _pickling_error(error, method, arguments):
    """``error`` (raised while a worker's arguments were pickled) again, naming the argument
    that cannot be pickled, the start method and the fixes; ``error`` itself where no
    single argument is to blame."""
    for name, obj in arguments.items():
        try:
            ForkingPickler.dumps(obj)
        except Exception as e:
            what = f"{name} {obj!r}" if callable(obj) else f"{name} (a {type(obj).__qualname__})"
            message = (f"DataLoader: the {what} cannot be pickled ({type(e).__name__}: {e}), and "
                       f"workers started with '{method}' receive it pickled.  Define it (and what it "
                       f"holds) at module level, not as a lambda or a local function or class, "
                       f"{FORK_FIX}, which does not pickle it.")
            try:
                return type(error)(message)
            except Exception:
                return RuntimeError(message)
    return error


def _main_guard_hint(method):
    """Why a 'spawn' or 'forkserver' worker may fail at once: it imports the main script
    again, and code at the script's top level that starts workers runs again there."""
    if method == "fork" or not _running_main_script():
        return ""
    return (f"  Workers started with '{method}' import the main script again: if it iterates a "
            f"DataLoader at its top level, put that code under `if __name__ == \"__main__\":`, {FORK_FIX}.")


def _running_main_script():
    """True while the top-level code of a main script (which a worker would import) runs."""
    main = sys.modules.get("__main__")
    if not getattr(main, "__file__", None):
        return False
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            return True
        frame = frame.f_back
    return False

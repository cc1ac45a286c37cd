"""The DataLoader's iterator over worker processes (torch's _MultiProcessingDataLoaderIter).

Worker processes start with ``multiprocessing_context`` (a start-method name or a context).
The default is 'forkserver' where the platform has it (Linux) and 'spawn' elsewhere: both
start workers from a clean, single-threaded process, so a parent that runs threads (BLAS
pools, the result reader of another loader, user threads) cannot leave a lock held in a
forked child.  With 'forkserver' the server process imports dynograph once, so each worker
starts without re-importing it.  As with 'spawn', what the workers need (dataset class,
collate_fn, worker_init_fn) must be importable: defined in a module, or in a script under
``if __name__ == "__main__":``.  An interactive session (a notebook, the REPL) has no main
file to import, so there the default is 'fork', as in torch on Linux.

Each worker has its own index pipe; all answer on one result pipe.  The main process keeps
``prefetch_factor`` tasks per worker in flight and hands the batches back in sampler order
(a reorder buffer keyed by task number).  It waits on the result pipe and on the workers'
process sentinels together, so a worker that dies is reported at once.
"""
import itertools
import multiprocessing as mp
import pickle
import sys
import time
import weakref
from multiprocessing import connection

from ._sharing import sharing_session
from ._worker import ExceptionWrapper, _IterableDatasetStopIteration, _ResumeIteration, _worker_loop
from .dataloader import _BaseDataLoaderIter, _DatasetKind

PIPE_BYTES = 1 << 22         # wanted kernel buffer of the result pipe (capped by the system)
SHUTDOWN_TIMEOUT = 2.0       # seconds workers get to exit cleanly before they are terminated


def _default_context():
    methods = mp.get_all_start_methods()
    # a REPL or notebook (not just a main without a file: pytest-xdist workers have one,
    # and they run threads, which fork must not copy)
    interactive = hasattr(sys, "ps1") or sys.flags.interactive or "IPython" in sys.modules
    if interactive and "fork" in methods:
        return mp.get_context("fork")      # classes defined in the session reach workers only so
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


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

    def shutdown(self, graceful=True):
        """Ask every worker to stop, wait a little, then terminate (and kill) stragglers.
        Not ``graceful`` (a worker died, perhaps holding the result pipe's lock or halfway
        through a message): terminate them all at once."""
        if self.closed:
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


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        ctx = loader.multiprocessing_context or _default_context()
        _preload_forkserver(ctx)
        self._workers = workers = _Workers()
        self._finalizer = weakref.finalize(self, workers.shutdown)
        workers.result_conn, result_writer = ctx.Pipe(duplex=False)
        _widen_pipe(result_writer)
        # the parent keeps the lock alive: its semaphore must outlive the workers' start
        workers.result_lock = result_lock = ctx.Lock()
        iterable = self._dataset_kind == _DatasetKind.Iterable
        child_ends = [result_writer]
        try:
            with sharing_session():           # the dataset's big tensors: one shared copy
                for worker_id in range(self._num_workers):
                    index_reader, index_writer = ctx.Pipe(duplex=False)
                    child_ends.append(index_reader)
                    workers.index_conns.append(index_writer)
                    w = ctx.Process(target=_worker_loop, daemon=True, args=(
                        iterable, self._dataset, index_reader, result_lock, result_writer,
                        self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                        loader.worker_init_fn, worker_id, self._num_workers))
                    w.start()                 # may fail: an unpicklable dataset or collate_fn
                    workers.processes.append(w)
        finally:
            for conn in child_ends:           # the children hold their own copies now
                conn.close()
        self._reset(loader, first_iter=True)

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
            conn.send(_ResumeIteration())
        remaining = self._num_workers
        while remaining > 0:
            idx, _ = self._get_data()
            if isinstance(idx, _ResumeIteration):
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
            self._check_workers()
            raise

    def _check_workers(self):
        """Raise (after shutting down) if a worker still serving has died."""
        failed = [w for i, w in enumerate(self._workers.processes)
                  if self._workers_status[i] and not w.is_alive()]
        if not failed:
            return
        self._finalizer.detach()
        self._workers.shutdown(graceful=False)
        details = "; ".join(_exit_description(w) for w in failed)
        pids = ", ".join(str(w.pid) for w in failed)
        raise RuntimeError(f"DataLoader worker (pid {pids}) exited unexpectedly ({details}). "
                           "Rerunning with num_workers=0 may give a better error trace.")

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
                return pickle.loads(reader.recv_bytes())
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
            if isinstance(data, _IterableDatasetStopIteration):
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

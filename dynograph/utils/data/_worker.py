"""What runs inside a DataLoader worker process (torch.utils.data._utils.worker): seeding,
``get_worker_info``, the fetch loop, and how exceptions and tensors cross back to the main
process."""
import ctypes
import multiprocessing as mp
import os
import pickle
import random
import signal
import sys
import threading
import traceback
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler

import numpy as np

import dynograph
from . import _sharing  # noqa: F401  (registers how tensors are pickled)
from ._fetch import create_fetcher

__all__ = ["WorkerInfo", "get_worker_info"]

STATUS_CHECK_INTERVAL = 1.0   # seconds between a worker's checks that its parent still lives
PR_SET_PDEATHSIG = 1          # prctl option (linux/prctl.h): a signal for when the parent dies


class WorkerInfo:
    """Read-only facts about the current worker: ``id``, ``num_workers``, ``seed``, ``dataset``."""

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        items = [f"{k}={getattr(self, k)}" for k in self.__keys]
        return f"{self.__class__.__name__}({', '.join(items)})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker: its WorkerInfo (``id``, ``num_workers``, ``seed`` and its copy
    of the ``dataset``); in the main process: None."""
    return _worker_info


def _generate_state(base_seed, worker_id):
    """numpy's seed for a worker: torch's hash of (base_seed, worker_id) into 4 words
    (after numpy's SeedSequence), so workers get unrelated numpy streams."""
    mask32 = 0xFFFFFFFF
    entropy = [worker_id, base_seed & mask32, base_seed >> 32, 0]
    const_a = [0x43b0d7e5]

    def hash32(value):
        value = (value ^ const_a[0]) & mask32
        const_a[0] = (const_a[0] * 0x931e8875) & mask32
        value = (value * const_a[0]) & mask32
        return (value ^ (value >> 16)) & mask32

    def mix(x, y):
        result = ((0xca01f9dd * x) - (0x4973f715 * y)) & mask32
        return (result ^ (result >> 16)) & mask32

    pool = [hash32(e) for e in entropy]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash32(pool[i_src]))
    const_b, state = 0x8b51f9dd, []
    for value in pool:
        value = (value ^ const_b) & mask32
        const_b = (const_b * 0x58f38ded) & mask32
        value = (value * const_b) & mask32
        state.append((value ^ (value >> 16)) & mask32)
    return state


def seed_worker(base_seed, worker_id):
    """Seed ``random``, dynograph's global generator and numpy's global generator of a
    worker from the loader's ``base_seed``, as torch does (seed = base_seed + worker_id)."""
    seed = base_seed + worker_id
    random.seed(seed)
    dynograph.manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    return seed


class KeyErrorMessage(str):
    """A KeyError's message shown as is (KeyError would print the repr of its argument)."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker, with its traceback as text, re-raised in the main
    process by ``reraise``."""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_name = exc_info[0].__name__
        self.exc_type = exc_info[0] if _picklable(exc_info[0]) else None
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        """Raise the exception again here: same type when it can be built from a message,
        RuntimeError with the same text otherwise."""
        msg = f"Caught {self.exc_name} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is None:
            raise RuntimeError(msg)
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


def _picklable(obj):
    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False


class IterableDatasetStopIteration:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class ResumeIteration:
    """Sent to persistent workers at a new epoch: restart the dataset's iterator."""


def _send(lock, conn, obj):
    """Pickle here (so a pickling error is ours to report), then write under the lock."""
    payload = ForkingPickler.dumps(obj, protocol=5)     # arrays go in without an extra copy
    with lock:
        conn.send_bytes(payload)


# ---------------------------------------------------------------- ending with the parent

def exit_with_parent(parent_pid):
    """End this worker as soon as the main process dies, even while the dataset blocks (the
    fetch loop only looks between tasks).  Where ``parent_pid`` (the main process) started
    us from its main thread, Linux's parent-death signal kills us; it cannot serve otherwise,
    as it follows the *thread* that started the worker and the fork server (the parent of
    'forkserver' workers) lives as long as they do.  Then (``parent_pid`` None) a thread
    watches the main process's sentinel pipe.  Not in a child process: nothing to do."""
    if mp.parent_process() is None:
        return
    if parent_pid is not None and _set_parent_death_signal():
        if os.getppid() != parent_pid:     # it died before prctl: no signal will come
            os._exit(0)
        return
    threading.Thread(target=_exit_when_parent_ends, name="dynograph-parent-watch", daemon=True).start()


def _set_parent_death_signal():
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_when_parent_ends():
    connection.wait([mp.parent_process().sentinel])
    os._exit(0)


# ---------------------------------------------------------------- the worker loop

def _fetch_one(fetcher, idx, index, iterable, worker_id):
    """Data for one task: the batch, the end-of-stream marker, or a wrapped exception."""
    try:
        return fetcher.fetch(index), False
    except StopIteration:
        if iterable:
            return IterableDatasetStopIteration(worker_id), True
        return ExceptionWrapper(where=f"in DataLoader worker process {worker_id}"), False
    except Exception:
        where = f"in DataLoader worker process {worker_id}"
        if fetcher.current is not None:
            where += f" (sample index {fetcher.current})"
        return ExceptionWrapper(where=where), False


def worker_loop(iterable, dataset, index_conn, result_lock, result_conn, auto_collation, collate_fn,
                 drop_last, base_seed, init_fn, worker_id, num_workers, parent_pid=None):
    """Serve ``(task_idx, index)`` requests from ``index_conn`` until ``None`` arrives or
    the parent process goes away; each answer is ``(task_idx, data)`` on ``result_conn``.
    ``parent_pid``: see ``exit_with_parent``."""
    global _worker_info
    exit_with_parent(parent_pid)
    try:
        seed = seed_worker(base_seed, worker_id)
        # as torch: a worker computes on one thread (workers share the cores with each other and
        # with the main process, whose kernel threads spin between kernels)
        dynograph.set_num_threads(1)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_exception, fetcher = None, None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        iteration_end = False
        while True:
            if not index_conn.poll(STATUS_CHECK_INTERVAL):
                # orphaned: the main process is gone. Its sentinel pipe tells, whatever the
                # start method, even if it died before this worker got here (a pid would not)
                if not mp.parent_process().is_alive():
                    break
                continue
            r = index_conn.recv()
            if r is None:
                break
            if isinstance(r, ResumeIteration):
                iteration_end = False
                fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                _send(result_lock, result_conn, (r, None))
                continue
            if iteration_end:
                continue
            idx, index = r
            if init_exception is not None:      # no fetcher: every task gets the init error
                data = init_exception
            else:
                data, iteration_end = _fetch_one(fetcher, idx, index, iterable, worker_id)
            try:
                _send(result_lock, result_conn, (idx, data))
            except Exception:                    # the batch could not be pickled
                wrapped = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
                _send(result_lock, result_conn, (idx, wrapped))
            del data, idx, index, r
    except KeyboardInterrupt:
        pass                                     # the main process raises it anyway
    except (BrokenPipeError, EOFError, OSError):
        pass                                     # the main process closed the pipes: shut down

"""Work: the handle a collective returns with ``async_op=True``."""
import time

from ._mpi import mpi, wait

# Works whose MPI operation may still run.  MPI reads and writes their buffers until it ends,
# and a caller may drop the handle (as torch allows: the tensors get the result anyway), so
# they stay referenced here until completed; each new Work completes the finished ones.
_IN_FLIGHT = set()


def _track(work):
    # (Works with statuses, receives from any rank, complete only in their own wait, which
    # reads the sender from the statuses)
    done = [w for w in _IN_FLIGHT if w._statuses is None and mpi().Request.Testall(w._request_list())]
    _IN_FLIGHT.difference_update(done)
    _IN_FLIGHT.add(work)
    for w in done:
        w.wait()        # runs their finish and future callbacks (no wait left: MPI is done)


class Work:
    """An MPI operation in flight.  ``wait()`` completes it (raising DistBackendError when the
    group's timeout passes first) and then runs ``finish`` (copies out of temporary buffers,
    AVG's division), so the tensors hold the result once ``wait()`` returns."""

    def __init__(self, what, describe, requests, deadline, finish=None, tensors=(), statuses=None):
        self._what, self._describe = what, describe
        self._requests, self._deadline = requests, deadline
        self._finish, self._tensors = finish, list(tensors)
        self._statuses = statuses
        self._done = False
        self._exception = None
        self._future = None
        _track(self)

    def wait(self, timeout=None):
        """Block until the operation finished; True, as torch.  ``timeout`` (a timedelta)
        shortens the group's timeout for this wait."""
        if self._done:
            if self._exception is not None:
                raise self._exception
            return True
        deadline = self._deadline
        if timeout is not None:
            deadline = min(deadline, time.monotonic() + timeout.total_seconds())
        try:
            wait(self._requests, deadline, self._what, self._describe, self._statuses)
        except Exception as e:
            self._exception = e
            self._done = True
            _IN_FLIGHT.discard(self)
            if self._future is not None:
                self._future.set_exception(e)
            raise
        self._done = True
        _IN_FLIGHT.discard(self)
        if self._finish is not None:
            self._finish()
        if self._future is not None:
            self._future.set_result(self._tensors)
        return True

    def _request_list(self):
        return self._requests if isinstance(self._requests, list) else [self._requests]

    def is_completed(self):
        if not self._done and mpi().Request.Testall(self._request_list(), self._statuses):
            self.wait()
        return self._done

    def is_success(self):
        return self._done and self._exception is None

    def exception(self):
        return self._exception

    def result(self):
        self.wait()
        return self._tensors

    def get_future(self):
        """A dynograph.futures.Future completed with the output tensors (a list, as
        ``result()``) when the operation completes; waiting on it drives the operation."""
        if self._future is None:
            from dynograph.futures import Future
            self._future = Future()
            self._future._progress = self._progress
            if self._done:
                if self._exception is not None:
                    self._future.set_exception(self._exception)
                else:
                    self._future.set_result(self._tensors)
        return self._future

    def _progress(self, block):
        try:
            if block:
                self.wait()
            else:
                self.is_completed()
        except Exception:
            pass            # the Future holds the exception

    def synchronize(self):
        self.wait()

    def __repr__(self):
        state = "completed" if self._done else "pending"
        return f"<dynograph.distributed.Work {self._what} ({state})>"

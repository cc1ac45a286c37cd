"""dynograph.futures: torch.futures' Future, collect_all and wait_all.

A Future holds the result (or the exception) of work that completes later: a collective
started with ``async_op=True`` (``Work.get_future()``), a DDP communication hook, or anything a
user completes with ``set_result`` from another thread.  Callbacks added with ``then`` or
``add_done_callback`` run once, in the thread that completes the Future (at once when it is
already complete).

MPI moves data only while some rank polls it, so a Future that stands for MPI work carries a
``progress`` function: ``wait()`` calls it to drive the work to completion, and ``done()`` to
poll it.  A Future made by ``then`` forwards both to its parent.
"""
import logging
import threading
from typing import Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


class Future(Generic[T]):
    """The result of an asynchronous computation (torch.futures.Future)."""

    def __init__(self, *, devices=None):
        from dynograph.runtime.device import device
        self._devices = [device(d) for d in (devices or [])]
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._error = None
        self._callbacks = []
        self._progress = None     # progress(block): drive (block=True) or poll the work behind it

    def done(self):
        """True once the Future holds a result or an exception."""
        if not self._done and self._progress is not None:
            self._progress(False)
        return self._done

    def wait(self):
        """Block until the Future completes; its value, or raise its exception."""
        if not self._done and self._progress is not None:
            self._progress(True)
        with self._cond:
            while not self._done:
                self._cond.wait()
        return self.value()

    def value(self):
        """The value of a completed Future (raises its exception if it holds one)."""
        if not self._done:
            raise RuntimeError("Future.value() was called on a Future that has not completed; "
                               "call wait() first, or read the value inside a callback")
        if self._error is not None:
            raise self._error
        return self._value

    def then(self, callback):
        """A new Future holding ``callback(self)``'s return value (or the exception it raised),
        completed when ``callback`` has run after this Future completed."""
        _check_callable(callback, "then")
        child = Future(devices=self._devices)
        child._progress = self._drive

        def run(fut):
            try:
                result = callback(fut)
            except Exception as e:
                child._complete(None, _callback_error(e))
            else:
                child._complete(result, None)

        self._add(run)
        return child

    def add_done_callback(self, callback):
        """Run ``callback(self)`` when this Future completes; its errors are logged, not raised
        (use ``then`` to observe them)."""
        _check_callable(callback, "add_done_callback")

        def run(fut):
            try:
                callback(fut)
            except Exception as e:
                _log.error("%s", _callback_error(e), exc_info=e)

        self._add(run)

    def set_result(self, result):
        """Complete the Future with ``result`` and run its callbacks."""
        self._complete(result, None)

    def set_exception(self, result):
        """Complete the Future with the exception ``result``: wait() and value() raise it."""
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(None, result)

    # ---------------------------------------------------------------- internals

    def _drive(self, block):
        if not self._done and self._progress is not None:
            self._progress(block)

    def _add(self, run):
        with self._cond:
            if not self._done:
                self._callbacks.append(run)
                return
        run(self)

    def _complete(self, value, error):
        with self._cond:
            if self._done:
                raise RuntimeError("Attempting to mark a completed Future as complete again. Note "
                                   "that a Future can only be marked completed once.")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for run in callbacks:
            run(self)


def _check_callable(callback, what):
    if not callable(callback):
        raise TypeError(f"Future.{what}() takes a callable of one argument (the Future), "
                        f"got {type(callback).__name__}")


def _callback_error(e):
    error = RuntimeError(f"Got the following error when running the callback: "
                         f"{type(e).__name__}: {e}")
    error.__cause__ = e
    return error


def collect_all(futures):
    """A Future of the list ``futures``, completed when all of them are (with the first one's
    exception, in list order, if any failed)."""
    futures = list(futures)
    for i, f in enumerate(futures):
        if not isinstance(f, Future):
            raise TypeError(f"collect_all() takes a list of dynograph.futures.Future, got "
                            f"{type(f).__name__} at index {i}")
    combined = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            failed = next((f._error for f in futures if f._error is not None), None)
            combined._complete(None if failed else futures, failed)

    def progress(block):
        for f in futures:
            if block:
                f._drive(True)
            elif not f.done():
                return

    combined._progress = progress
    if not futures:
        combined.set_result([])
    for f in futures:
        f._add(one_done)
    return combined


def wait_all(futures):
    """Wait for every Future of ``futures``; the list of their values (raises the first error)."""
    return [f.wait() for f in collect_all(futures).wait()]

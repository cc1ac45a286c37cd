"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
import functools
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False


STATE = _State()


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference


class _DecoratorContextManager:
    """A context manager that also decorates functions (and generator functions)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)
        return wrapper

    _args = ()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Also a decorator without parentheses: ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):
    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class enable_grad(_NoParamDecoratorContextManager):
    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode on construction (like torch), restores it on exit."""

    def __init__(self, mode):
        self.prev = STATE.grad_enabled
        self.mode = bool(mode)
        self._args = (mode,)
        STATE.grad_enabled = self.mode

    def __enter__(self):
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev

    def __call__(self, fn):
        # constructing the decorator already switched the mode: undo that, apply per call
        STATE.grad_enabled = self.prev
        return super().__call__(fn)

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    def __new__(cls, mode=True):
        if callable(mode):                  # bare @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._args = (mode,)

    def __enter__(self):
        self.prev = (STATE.grad_enabled, STATE.inference)
        if self.mode:
            STATE.grad_enabled, STATE.inference = False, True

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self.prev

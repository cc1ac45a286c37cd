"""Heavy dependencies imported on first use, so that ``import dynograph`` stays light.

``special = LazyModule("scipy.special")`` stands for the module: reading an attribute
imports it.  Tables built at import time name a function without touching the module:
``special.later("erf")`` is a function that imports it at its first call.
tests/test_import_time.py lists the modules ``import dynograph`` must not load.
"""
import importlib


class LazyModule:
    """A module imported when one of its attributes is first read."""

    __slots__ = ("_name", "_module")

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        # reached for the module's attributes only (this object's own are slots and methods)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def later(self, attr):
        """The module's function ``attr``, looked up (and the module imported) at its first call."""
        fn = None

        def call(*args, **kwargs):
            nonlocal fn
            if fn is None:
                fn = getattr(self, attr)
            return fn(*args, **kwargs)

        call.__name__ = call.__qualname__ = attr
        return call

    def __repr__(self):
        return f"<module {self._name!r}, imported on first use>"

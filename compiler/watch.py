"""Watching the Python code a trace runs: guards at the sources of what it read, and side
effects it made.

A trace records tensor operations; the Python around them (``if CFG.flag``, ``x * self.scale``,
``self.bn.momentum``) is specialized away.  So every Python value that code read must be a
guard, however deep in the call stack it was read.  While a function is traced, a trace hook
sees each Python frame that starts.  For each frame of the user's code (and of the nn modules,
whose ``forward`` reads attributes such as ``Dropout.p``), the frame's bytecode is scanned once
for *sources*: a global, a closure variable or an argument, followed by attribute loads and
constant subscripts (``CFG.scale``, ``LST[0]``, ``self.bn.momentum``).  When a line holding a
source runs (line events of that frame: a read in a branch not taken needs no guard), the
source and each of its prefixes are evaluated and become guards: Python scalars by value
(telling -0.0 from 0.0), containers by their items, everything else by identity.  A profile
hook sees the builtins the code calls (``print``, random generators, clocks).

Evaluating a source never runs user code: attributes are read from instance and class
dictionaries (a property is guarded as the class's property object; its getter runs as a frame
of its own and is watched like any other), items only from plain lists, tuples and dicts.

Side effects: the state of every object and container that a source reached is noted when
first seen and compared at the end of the trace; a difference (``self.calls += 1``, a list
append, a write into a dict argument) means the call changed Python state that a replay would
not change, so the trace becomes a graph break.  So do calls of ``print``, of Python's and
numpy's random generators and of the clock from the traced code.
"""
import dis
import gc
import importlib
import itertools
import os
import random
import sys
import sysconfig
import time
import types
import weakref

import numpy as np

from dynograph._trace_hook import TRACE

MISSING = object()

# code whose reads are not guarded: the compiler, the eager core and optimizers (their
# hyper-parameters are guarded by the tracer), the standard library and numpy
_HERE = os.path.dirname(os.path.abspath(__file__))
_STDLIB = os.path.join(os.path.abspath(sysconfig.get_paths()["stdlib"]), "")
_SITE = tuple(os.path.join(os.path.abspath(sysconfig.get_paths()[k]), "") for k in ("purelib", "platlib"))
_OWN = tuple(os.path.join(os.path.abspath(d), "") for d in (_HERE, os.path.join(_HERE, "..", "runtime")))
_UNWATCHED = (os.path.join(os.path.dirname(np.__file__), ""),)
_WATCHED_INSIDE = ("nn" + os.sep + "modules" + os.sep,)
_WATCHED_MODULES = ("dynograph.nn.modules",)
_CONSTRUCTORS = ("__init__", "__new__", "__post_init__")
# attribute access itself: the frame that asked for the attribute guards it
_ACCESSORS = ("__getattr__", "__getattribute__", "__setattr__", "__delattr__")

# the import system's function that loads a module not yet in sys.modules
_LOAD_MODULE = importlib._bootstrap._find_and_load.__code__
_MAX_ITEMS = 64                     # containers larger than this are guarded by identity


def _package_dirs():
    import dynograph
    return tuple(os.path.join(os.path.abspath(p), "") for p in dynograph.__path__)


class _Files:
    """Which code is watched: decided by the module it belongs to (code generated at run time,
    like a dataclass's ``__init__``, has no file of its own) and else by its file."""

    def __init__(self):
        self.package = _package_dirs()
        self.cache = {}
        # code -> (the globals it ran with, whether a frame of it is watched): the trace hook
        # asks for every frame that starts (ops, autograd, optimizers), so one lookup answers
        self.starts = {}
        self.users = {}                 # code -> (its globals, whether it is the user's)

    def watched(self, frame):
        return self.kind(frame) == WATCHED

    def kind(self, frame):
        """WATCHED, OWN (dynograph's own code, not watched) or OTHER: decided by the frame's
        module, else by its file."""
        filename = frame.f_code.co_filename
        module = frame.f_globals.get("__name__") or ""
        hit = self.cache.get((filename, module))
        if hit is None:
            path = os.path.abspath(filename)
            if module == "dynograph" or module.startswith("dynograph."):
                hit = WATCHED if module.startswith(_WATCHED_MODULES) else OWN
            elif path.startswith(self.package):
                hit = WATCHED if any(part in path for part in _WATCHED_INSIDE) else OWN
            elif path.startswith(_OWN):
                hit = OWN
            else:
                stdlib = path.startswith(_STDLIB) and not path.startswith(_SITE)
                hit = OTHER if filename.startswith("<frozen") or stdlib or \
                    path.startswith(_UNWATCHED) else WATCHED
            self.cache[(filename, module)] = hit
        return hit

    def classify(self, frame):
        """What the trace hook makes of a frame that starts: WATCHED (watched code, other
        than attribute access itself: followed), OWN (dynograph's own code: the profile hook
        is off inside) or OTHER."""
        code = frame.f_code
        hit = self.starts.get(code)
        if hit is not None and hit[0] is frame.f_globals:
            return hit[1]
        kind = self.kind(frame)
        if kind == WATCHED and code.co_name in _ACCESSORS:
            kind = OTHER
        self.starts[code] = (frame.f_globals, kind)
        return kind

    def inside_package(self, filename):
        return os.path.abspath(filename).startswith(self.package)

    def user_code(self, frame):
        """Whether ``frame`` runs the user's code (watched, and not dynograph's own).  Asked at
        every ``Tensor.shape`` of a trace: answered per code object, as ``classify``."""
        code = frame.f_code
        hit = self.users.get(code)
        if hit is not None and hit[0] is frame.f_globals:
            return hit[1]
        mine = self.watched(frame) and not self.inside_package(code.co_filename)
        self.users[code] = (frame.f_globals, mine)
        return mine


OTHER, WATCHED, OWN = 0, 1, 2     # what classify says of a frame's code

_FILES = []


def _files():
    """The one _Files of the process (its answers depend on files and modules only, so every
    trace shares them)."""
    if not _FILES:
        _FILES.append(_Files())
    return _FILES[0]


# ---------------------------------------------------------------- sources in bytecode

_SCAN_CACHE = {}


def sources_of(code):
    """The sources a code object reads: [(root, steps, line)], where root is
    ('global' | 'cell' | 'local', name) and steps a tuple of ('attr', name) / ('item', const)."""
    found = _SCAN_CACHE.get(code)
    if found is None:
        found = _SCAN_CACHE[code] = _scan(code)
    return found


_BY_LINE = {}


def sources_by_line(code):
    """``sources_of(code)`` grouped by the line that reads them."""
    found = _BY_LINE.get(code)
    if found is None:
        found = {}
        for source in sources_of(code):
            found.setdefault(source[2], []).append(source)
        _BY_LINE[code] = found
    return found


def _arguments(code):
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)     # *args, **kwargs
    return set(code.co_varnames[:n])


def _scan(code):
    args = _arguments(code)
    instructions = list(dis.get_instructions(code))
    stored = {i.argval for i in instructions if i.opname in ("STORE_FAST", "DELETE_FAST")}
    out = {}
    chain, line, pending = None, None, MISSING

    def close():
        if chain is not None:
            out.setdefault((chain[0], tuple(chain[1:])), line)

    for ins in instructions:
        op = ins.opname
        if chain is not None and op == "LOAD_ATTR" and ins.argval != "__dict__":
            chain.append(("attr", ins.argval))
            continue
        if chain is not None and op == "LOAD_CONST" and pending is MISSING:
            pending = ins.argval
            continue
        if chain is not None and op == "BINARY_SUBSCR" and pending is not MISSING:
            chain.append(("item", pending))
            pending = MISSING
            continue
        close()
        chain, pending = None, MISSING
        root = None
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            root = ("global", ins.argval)
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in code.co_freevars:
            root = ("cell", ins.argval)
        elif op == "LOAD_FAST" and ins.argval in args and ins.argval not in stored:
            root = ("local", ins.argval)
        if root is not None:
            chain = [root]
            line = ins.positions.lineno if ins.positions else None
    close()
    return [(root, steps, line) for (root, steps), line in out.items()]


# ---------------------------------------------------------------- reading without running code

def _instance_dict(o):
    try:
        return object.__getattribute__(o, "__dict__")
    except (AttributeError, TypeError):
        return None


def read_attr(o, name):
    """``o.name`` from dictionaries only (MISSING where that would run code or fail)."""
    return resolve_attr(o, name)[1]


def resolve_attr(o, name):
    """(where it was found, ``o.name``): 'dict' (the instance dictionary), a module's store
    ('_parameters', '_buffers', '_modules'), 'class' (a class in the MRO), or 'other' (a
    slot, nowhere)."""
    d = _instance_dict(o)
    if d is not None and not isinstance(o, type):
        if name in d:
            return "dict", d[name]
        for store in ("_parameters", "_buffers", "_modules"):      # nn.Module.__getattr__
            table = d.get(store)
            if type(table) is dict and name in table:
                return store, table[name]
    for klass in (o.__mro__ if isinstance(o, type) else type(o).__mro__):
        v = klass.__dict__.get(name, MISSING)
        if v is MISSING:
            continue
        if isinstance(v, (types.MemberDescriptorType, types.GetSetDescriptorType)) and \
                not isinstance(o, type):
            try:
                return "other", v.__get__(o, type(o))   # a C-level slot: runs no Python
            except AttributeError:
                return "other", MISSING
        return "class", v
    return "other", MISSING


def read_item(o, key):
    t = type(o)
    if t is list or t is tuple:
        try:
            return o[key]
        except (IndexError, TypeError):
            return MISSING
    if isinstance(o, dict):
        try:
            return dict.get(o, key, MISSING)
        except TypeError:
            return MISSING
    return MISSING


def _stops(o):
    """Whether a source ends at ``o``: tensors (their values are the trace's business), what
    could not be read, and the trace's own state."""
    return o is MISSING or o is TRACE or _is_tensor(o)


# ---------------------------------------------------------------- operands that run no user code

_INERT = set()


def operands_inert(items):
    """Whether dynograph's own code can use these operands of an op without running Python
    code of the user's: tensors of dynograph's own classes, numbers, strings, None, dtypes,
    devices and tuples or lists of them (a user's subclass or object could run its methods,
    ``__index__``, ``__float__``, ``__array__``, inside the op)."""
    if not _INERT:
        _INERT.update(_inert_types())
    for x in items:
        t = type(x)
        if t in _INERT or ((t is tuple or t is list) and operands_inert(x)):
            continue
        return False
    return True


def _inert_types():
    from dynograph._tensor import Tensor
    from dynograph._trace_hook import SizeInt
    from dynograph.nn.parameter import Parameter
    from dynograph.runtime.device import device
    from dynograph.runtime.dtypes import dtype
    return (Tensor, Parameter, SizeInt, dtype, device, int, float, bool, complex, str,
            type(None), type(Ellipsis))


# ---------------------------------------------------------------- keys

def value_key(v, tensors=True, depth=0):
    """What a guard compares: Python scalars by value and type (-0.0 differs from 0.0, NaN
    equals NaN), plain containers by their items, everything else by identity.  With
    ``tensors=False`` every tensor is the same key (side-effect checks leave tensors to the
    tracer, which replays their changes)."""
    t = type(v)
    if v is None or t is bool or t is int or t is str or t is bytes:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is complex:
        return (t, v.real.hex(), v.imag.hex())
    if isinstance(v, np.generic):
        return (t, v.tobytes())
    if (t is tuple or t is list) and len(v) <= _MAX_ITEMS and depth < 4:
        return (t, id(v) if t is list and not tensors else None,
                tuple(value_key(x, tensors, depth + 1) for x in v))
    if isinstance(v, dict) and len(v) <= _MAX_ITEMS and depth < 4:
        return (t, tuple((value_key(k, tensors, depth + 1), value_key(x, tensors, depth + 1))
                         for k, x in v.items()))
    if (t is set or t is frozenset) and len(v) <= _MAX_ITEMS and depth < 4:
        return (t, frozenset(value_key(x, tensors, depth + 1) for x in v))
    if t is bytearray and not tensors:
        return (t, bytes(v))
    if not tensors and _is_tensor(v):
        return ("tensor",)
    return ("id", id(v))


def _is_tensor(v):
    return isinstance(v, _tensor_class())


def _tensor_class():
    global _TENSOR
    if _TENSOR is None:             # (imported on first use: the tensor module imports this one)
        from dynograph._tensor import Tensor
        _TENSOR = Tensor
    return _TENSOR


_TENSOR = None


def object_state(o):
    """What the side-effect check compares: the items of a list, dict or set, the attributes
    of an object with an instance dictionary (shallowly), a random generator's state (numpy's
    generators are Cython code: the profile hook does not see their draws), else None (not
    watched: modules, classes, functions, tensors)."""
    if isinstance(o, _RANDOM_OWNERS):
        return ("random generator", _frozen(o.bit_generator.state if isinstance(o, np.random.Generator)
                                            else o.get_state(legacy=False)
                                            if isinstance(o, np.random.RandomState) else o.getstate()))
    if isinstance(o, (list, dict, set, bytearray)):
        return value_key(o, tensors=False)
    if isinstance(o, (type, types.ModuleType, types.FunctionType)) or _is_tensor(o):
        return None
    d = _instance_dict(o)
    if d is None:
        return None
    return tuple((k, _shallow_key(v)) for k, v in d.items())


def _frozen(state):
    """A generator's state (dicts, tuples, arrays, numbers) as a comparable value."""
    if isinstance(state, dict):
        return tuple((k, _frozen(v)) for k, v in state.items())
    if isinstance(state, (tuple, list)):
        return tuple(_frozen(v) for v in state)
    if isinstance(state, np.ndarray):
        return state.tobytes()
    return state


def _shallow_key(v):
    t = type(v)
    if v is None or t in (bool, int, float, str, bytes, complex) or isinstance(v, np.generic):
        return value_key(v)
    if _is_tensor(v):
        return ("tensor",)
    return ("id", id(v))


# ---------------------------------------------------------------- the watcher

class Source:
    """One read: where its value comes from (a root, or the source one step shorter) and
    what it was when the trace read it."""
    __slots__ = ("name", "where", "root", "parent", "step", "how", "value", "want", "state",
                 "guarded")

    def __init__(self, name, where, root, parent, step, how, value, guarded):
        self.name, self.where = name, where
        self.root, self.parent, self.step, self.how = root, parent, step, how
        self.value = value              # kept: identities guarded stay unique
        self.want = value_key(value)    # what a guard compares
        self.state = value_key(value, tensors=False)    # what the side-effect check compares
        self.guarded = guarded

    def read(self):
        if self.parent is None:
            return self.root.get()
        kind, name = self.step
        o = self.parent.read()
        if o is MISSING:
            return MISSING
        return read_attr(o, name) if kind == "attr" else read_item(o, name)


class _Lines:
    """The local trace function of a watched frame: reads the sources of each line as it runs.
    An object rather than a closure that returns itself: such a closure is a reference cycle,
    which kept the watcher, its tracer and every tensor the trace recorded alive until the
    garbage collector ran (the look-ahead trace ran with twice the memory)."""
    __slots__ = ("watcher", "pending", "state")

    def __init__(self, watcher, pending, state):
        self.watcher, self.pending, self.state = watcher, pending, state

    def __call__(self, frame, event, arg):
        if event == "line":
            found = self.pending.pop(frame.f_lineno, None)
            if found:
                try:
                    self.watcher._read(frame, found, self.state)
                except Exception as e:
                    self.watcher._failed(frame, e)
        return self


class _Leave:
    """The local trace function of a frame whose start switched the profile hook (on into
    watched code, off into dynograph's own): its return puts back ``profile``, the caller's
    hook.  ``lines``: the frame's own _Lines, or None."""
    __slots__ = ("lines", "profile", "trace")

    def __init__(self, lines, profile, trace):
        self.lines, self.profile, self.trace = lines, profile, trace

    def __call__(self, frame, event, arg):
        if event == "return":           # also when an exception leaves the frame
            # (unless the watcher has ended meanwhile: a debugger's trace hook put back by
            # its __exit__ still delivers this event)
            if sys.gettrace() == self.trace:
                sys.setprofile(self.profile)
            return None
        if self.lines is not None:
            self.lines(frame, event, arg)
        return self


class GlobalRoot:
    """A module-level name, looked up as LOAD_GLOBAL does (globals, then builtins)."""

    def __init__(self, g, name):
        b = g.get("__builtins__")
        self.g, self.name = g, name
        self.builtins = b if isinstance(b, dict) else getattr(b, "__dict__", {})

    def get(self):
        v = self.g.get(self.name, MISSING)
        return self.builtins.get(self.name, MISSING) if v is MISSING else v


class CellRoot:
    """A closure variable of a function that outlives the call."""

    def __init__(self, cell):
        self.cell = cell

    def get(self):
        try:
            return self.cell.cell_contents
        except ValueError:
            return MISSING


class FixedRoot:
    """An object the traced code received (an argument, ``self``): fixed for this trace."""

    def __init__(self, obj):
        self.obj = obj

    def get(self):
        return self.obj


class Watcher:
    """Installed with ``with Watcher(tracer, fn):`` around the traced call."""

    def __init__(self, tracer, fn):
        self.tracer = tracer
        self.fn = fn
        self.files = _files()
        self.sources = {}               # (root identity, steps) -> Source
        self.objects = {}               # id -> (object, state when first seen, where)
        self.keep = []                  # identities guarded stay unique
        self.effects = []               # (reason, where): calls that are side effects
        self._old = None
        self._imports = 0               # imports the call started that are running now

    def user_code(self, frame):
        """Whether ``frame`` runs the user's code (watched, and not dynograph's own)."""
        return self.files.user_code(frame)

    def __enter__(self):
        self.tracer.watcher = self
        self._random_states = _global_random_states()
        self._old = sys.getprofile(), sys.gettrace()
        sys.setprofile(self._profile)
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        profile = self._old[0]
        if profile is None or callable(profile):
            sys.setprofile(profile)
        else:       # a C hook sys.setprofile cannot reinstall: cProfile's profiler restarts
            sys.setprofile(None)
            enable = getattr(profile, "enable", None)
            if callable(enable):
                enable()
        sys.settrace(self._old[1])
        self.tracer.watcher = None
        return False

    # ------------------------------------------------------------ events

    def _profile(self, frame, event, arg):
        if event == "c_call":
            try:
                # every builtin call of the traced code comes here: two cheap checks let the
                # pure ones go (a third of a CNN step's two traces was spent here otherwise)
                if arg in _IMPURE or isinstance(getattr(arg, "__self__", None), _RANDOM_OWNERS):
                    self._builtin(frame, arg)
            except Exception as e:      # a watcher bug must not change the user's program
                self._failed(frame, e)

    def _trace(self, frame, event, arg):
        """The trace hook's 'call' event: a frame starts; watched frames get line events."""
        try:
            if self._imports:
                return None
            if frame.f_code is _LOAD_MODULE:
                # a module loading for the first time (a dependency such as scipy loads on
                # first use, which may be inside the call): its code runs once, at import, and
                # sets up the module; none of it is the call's to guard or to repeat
                self._imports += 1
                return self._import_ends
            kind = self.files.classify(frame)
            profiled = sys.getprofile() is not None
            if kind == WATCHED:
                lines = self._frame(frame)
                if profiled:
                    return lines
                sys.setprofile(self._profile)       # back in watched code (a callback)
                return _Leave(lines, None, self._trace)
            if kind == OWN and profiled:
                # dynograph's own code: the profile hook (every call, return and builtin call)
                # stays off until the frame returns or calls watched code; its builtin calls are
                # not the user's, and events were most of a trace's overhead
                sys.setprofile(None)
                frame.f_trace_lines = False
                return _Leave(None, self._profile, self._trace)
        except Exception as e:
            self._failed(frame, e)
        return None

    _trace.watching = True          # how runtime/backend.py's unwatched() knows a watcher's hook

    def _import_ends(self, frame, event, arg):
        if event == "return":           # also when the import raised
            self._imports -= 1
        return self._import_ends

    def _failed(self, frame, e):
        self.effects.append((f"the compiler could not follow the Python code ({e!r})",
                             _where(frame, frame.f_lineno)))

    def _frame(self, frame):
        """Note a starting frame; its sources are read as the lines that hold them run (a
        read in a branch that does not run needs no guard)."""
        code = frame.f_code
        if code.co_name in _CONSTRUCTORS and code.co_argcount:
            # an object being built during the call: its attributes are no side effect
            this = frame.f_locals.get(code.co_varnames[0])
            if id(this) not in self.objects:
                self.objects[id(this)] = (this, None, None, None)
                self.keep.append(this)
        by_line = sources_by_line(code)
        if not by_line:
            return None
        return _Lines(self, dict(by_line), {"cells": None, "locals": dict(frame.f_locals)})

    def _read(self, frame, sources, state):
        code = frame.f_code
        for (kind, name), steps, line in sources:
            if kind == "global":
                key, root, desc = (id(frame.f_globals), name), GlobalRoot(frame.f_globals, name), name
            elif kind == "cell":
                if state["cells"] is None:
                    state["cells"] = _closure_cells(frame, self.fn)
                cell = state["cells"].get(name)
                if cell is None:
                    root = FixedRoot(frame.f_locals.get(name, MISSING))
                    key = ("fixed", id(root.obj))
                else:
                    key, root = ("cell", id(cell)), CellRoot(cell)
                desc = name
            else:
                value = state["locals"].get(name, MISSING)
                if value is MISSING or _is_tensor(value):
                    continue
                key, root = ("fixed", id(value)), FixedRoot(value)
                desc = f"{name} (a {type(value).__name__} argument of {code.co_name})"
            self._chain(key, root, kind, desc, steps, _where(frame, line))

    def _chain(self, key, root, kind, desc, steps, where):
        # an argument itself needs no guard (the caller's read of it has one); its state is
        # still watched for side effects
        parent = self._add((key, ()), desc, where, root, None, None, "root", root.get(),
                           guarded=kind != "local")
        for n, step in enumerate(steps, 1):
            if _stops(parent.value):
                return
            o = parent.value
            how, value = resolve_attr(o, step[1]) if step[0] == "attr" else ("item", read_item(o, step[1]))
            parent = self._add((key, steps[:n]), desc + _path(steps[:n]), where, root, parent,
                               step, how, value, guarded=True)

    def _add(self, k, name, where, root, parent, step, how, value, guarded):
        s = self.sources.get(k)
        if s is None:
            s = self.sources[k] = Source(name, where, root, parent, step, how, value, guarded)
        if id(value) not in self.objects:
            state = object_state(value)
            if state is not None:
                self.objects[id(value)] = (value, state, name, where)
                self.keep.append(value)
        return s

    def run_inert(self, operands, fn, *args):
        """``fn(*args)``, dynograph's own code working on ``operands`` (groups of them): with
        the hooks off where every operand is inert (``operands_inert``), for then no code of
        the user's runs inside, and following its frames was most of a trace's overhead.  The
        check itself runs with the hooks off too: it calls nothing but ``type``."""
        hooks = sys.getprofile(), sys.gettrace()
        if hooks[1] != self._trace:         # something else took the hooks over: leave them
            return fn(*args)
        sys.setprofile(None)
        sys.settrace(None)
        try:
            if not all(operands_inert(group) for group in operands):
                sys.setprofile(hooks[0])        # a user's object may run its own code inside
                sys.settrace(hooks[1])
            return fn(*args)
        finally:
            sys.setprofile(hooks[0])
            sys.settrace(hooks[1])

    def _builtin(self, frame, fn):
        reason = _impure_call(fn)
        if reason is not None and not self._imports and \
                not self.files.inside_package(frame.f_code.co_filename):
            self.effects.append((reason, _where(frame, frame.f_lineno)))

    # ------------------------------------------------------------ after the trace

    def side_effects(self):
        """(reason, where) for each change the call made to Python state, and each impure call."""
        found = list(self.effects)
        if _global_random_states() != self._random_states:
            found.append(("Python's or numpy's global random generator was used (its numbers "
                          "would be frozen in the graph)", _where_fn(self.fn)))
        for s in self.sources.values():
            if value_key(s.read(), tensors=False) != s.state:
                found.append((f"{s.name} changed during the call (a Python side effect the "
                              "compiled graph would not repeat)", s.where))
        for o, state, name, where in self.objects.values():
            now = object_state(o) if state is not None else None
            if now == state:
                continue
            if isinstance(o, _RANDOM_OWNERS):
                found.append((f"{name} drew random numbers during the call (they would be frozen "
                              "in the graph)", where))
                continue
            what = (f"{name} was modified" if isinstance(o, (list, dict, set, bytearray)) else
                    f"attribute {_changed_attrs(state, now)} of {name} was set")
            found.append((f"{what} during the call (a Python side effect the compiled graph "
                          "would not repeat)", where))
        return found

    def guarded_sources(self):
        """The sources to guard, each with how to compare it: by identity ('id'), or only by
        kind for a source holding another tensor after the call than before (a buffer or
        gradient the graph assigns: the replay assigns it again)."""
        out = []
        for s in self.sources.values():
            if s.guarded:
                out.append((s, "value" if value_key(s.read()) == s.want else "kind"))
        return out


def _changed_attrs(before, after):
    a, b = dict(before), dict(after or ())
    names = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
    return ", ".join(sorted(map(repr, names)))


def _path(steps):
    return "".join(f".{n}" if k == "attr" else f"[{n!r}]" for k, n in steps)


def _where(frame, line):
    return f"{frame.f_code.co_filename}:{line or frame.f_lineno} in {frame.f_code.co_name}"


def _where_fn(fn):
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno} in {code.co_name}"


def _global_random_states():
    """The states of Python's and numpy's global generators (numpy's legacy functions are
    Cython code that the profile hook does not see)."""
    state = np.random.mtrand._rand.get_state(legacy=False)
    # the key's bytes, not its repr: printing 624 numbers took milliseconds a trace
    return (random.getstate(), state["state"]["key"].tobytes(), state["state"]["pos"],
            state["has_gauss"], state["gauss"])


# code -> the function last found running it (a method of a class defined in a function is
# the same function object at every call): looking for it among all objects costs milliseconds
_CLOSURES = weakref.WeakKeyDictionary()


def _closure_cells(frame, fn):
    """name -> cell for the free variables of the function running in ``frame``."""
    code = frame.f_code
    local = frame.f_locals
    f = getattr(fn, "__func__", fn)
    if getattr(f, "__code__", None) is code:
        return _cells_holding(f, local) or {}
    ref = _CLOSURES.get(code)
    known = ref() if ref is not None else None
    cells = None if known is None else _cells_holding(known, local)
    if cells is not None:
        return cells
    # a method is found on its object's class; anything else by a search of the heap
    for r in itertools.chain(_methods_of(frame, code), _referrers(code)):
        if isinstance(r, types.FunctionType) and r.__code__ is code:
            cells = _cells_holding(r, local)
            if cells is not None:
                _CLOSURES[code] = weakref.ref(r)
                return cells
    return {}


def _referrers(code):
    """What refers to ``code``, found by a search of the whole heap (milliseconds): only
    asked for when nothing cheaper found the function."""
    yield from gc.get_referrers(code)


def _methods_of(frame, code):
    """The functions named as ``code`` on the class of the frame's first argument (or on
    the argument itself, a class)."""
    if not code.co_argcount:
        return
    first = frame.f_locals.get(code.co_varnames[0], MISSING)
    # (type() and the classes' own dictionaries: nothing of the user's runs here)
    for klass in (first if issubclass(type(first), type) else type(first)).__mro__:
        attr = klass.__dict__.get(code.co_name)
        if type(attr) in (staticmethod, classmethod):
            attr = attr.__func__
        elif type(attr) is property:
            attr = attr.fget
        yield attr


def _cells_holding(function, local):
    """name -> cell of ``function``'s closure where each cell holds what the frame's ``local``
    variables of that name hold, else None."""
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
    if all(_cell_matches(cells[n], local.get(n, MISSING)) for n in cells):
        return cells
    return None


def _cell_matches(cell, value):
    try:
        return cell.cell_contents is value
    except ValueError:
        return value is MISSING


# ---------------------------------------------------------------- impure builtins

_CLOCKS = {time.time, time.time_ns, time.perf_counter, time.perf_counter_ns, time.monotonic,
           time.monotonic_ns, time.process_time, time.process_time_ns}
# what _impure_call finds impure: these functions, and the methods of these generators
_IMPURE = _CLOCKS | {print, input, os.urandom}
_RANDOM_OWNERS = (random.Random, np.random.RandomState, np.random.Generator)


def _impure_call(fn):
    """Why calling builtin ``fn`` makes the traced code impure, or None."""
    if fn is print:
        return "print() writes output (it would not be repeated by the compiled graph)"
    if fn in _CLOCKS:
        return f"time.{fn.__name__}() reads the clock (its value would be frozen in the graph)"
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, random.Random):
        return f"random.{fn.__name__}() draws from Python's generator (frozen in the graph)"
    if isinstance(owner, _RANDOM_OWNERS):
        return f"numpy's random {fn.__name__}() draws numbers (frozen in the graph)"
    if fn is input or fn is os.urandom:
        return f"{fn.__name__}() reads from outside the program"
    return None

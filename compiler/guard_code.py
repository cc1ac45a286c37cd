"""The source guards of one trace, compiled into one Python function.

A training step reads a hundred or more Python values (every module's hooks, its flags, its
parameters, the optimizer...).  Checking them one by one through generic readers costs
hundreds of microseconds per call; this module writes one straight-line function instead:
each source's value is computed from its parent's by the lookup that found it during the
trace (``o.__dict__.get(name)``, a module's ``_parameters``), and compared in the cheapest
way its recorded value allows (``is`` for identity, ``==`` plus type for scalars).  A lookup
that would now go elsewhere (an attribute moved from the instance to the class) yields
MISSING, which fails its guard: at worst a retrace, never a stale replay.

Facts the tracer records as getters (a parameter's .grad layout, optimizer hyper-parameters)
are called from the same function, which saves the interpreter a loop over them.

``check()`` returns -1 when every guard holds, else the index of the first failing source
(-3 for a failing fact, -2 when a lookup raised).
"""
import hashlib
import importlib.util
import marshal
import math
import sys
import types

from dynograph.runtime.cache import DiskCache
from .watch import MISSING, CellRoot, GlobalRoot, read_attr, read_item, value_key


class _Names:
    """Constants of the generated code, bound by name."""

    def __init__(self):
        self.env = {"M": MISSING, "_attr": read_attr, "_item": read_item, "_key": value_key,
                    "_copysign": math.copysign, "_cell": _cell_value}
        self.ids = {}

    def __call__(self, obj):
        name = self.ids.get(id(obj))
        if name is None:
            name = self.ids[id(obj)] = f"c{len(self.ids)}"
            self.env[name] = obj
        return name


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING


def _root_code(root, bind):
    if isinstance(root, GlobalRoot):
        return f"{bind(root.g)}.get({bind(root.name)}, M)" if root.name in root.g else \
            f"{bind(root.g)}.get({bind(root.name)}, {bind(root.builtins)}.get({bind(root.name)}, M))"
    if isinstance(root, CellRoot):
        return f"_cell({bind(root.cell)})"
    return bind(root.obj)


def _step_code(parent, source, bind, instance_dict):
    kind, name = source.step
    if source.how == "dict":
        return f"{instance_dict(parent)}.get({bind(name)}, M)"
    if source.how in ("_parameters", "_buffers", "_modules"):
        return f"{instance_dict(parent)}[{bind(source.how)}].get({bind(name)}, M)"
    if kind == "attr" and source.how == "class":
        # found on a class: absent from the instance and from the classes before it
        owner = source.parent.value
        klasses = owner.__mro__ if isinstance(owner, type) else type(owner).__mro__
        found = next(i for i, k in enumerate(klasses) if name in k.__dict__)
        before = [f"{bind(name)} in {bind(k)}.__dict__" for k in klasses[:found]]
        if not isinstance(owner, type):
            before.insert(0, f"{bind(name)} in {parent}.__dict__")
        shadowed = " or ".join(before) or "False"
        return (f"(M if {parent}.__class__ is not {bind(type(owner))} or {shadowed} "
                f"else {bind(klasses[found])}.__dict__.get({bind(name)}, M))")
    if kind == "attr":
        return f"_attr({parent}, {bind(name)})"
    # the parent's own guard checked its type: exact lists, tuples and dicts index directly
    container = type(source.parent.value)
    if container is dict:
        return f"{parent}.get({bind(name)}, M)"
    if container is list or container is tuple:
        return f"{parent}[{bind(name)}]"          # out of range: the check fails as a whole
    return f"_item({parent}, {bind(name)})"


def _test_code(v, source, mode, bind):
    """An expression true when value ``v`` (a variable name) passes the source's guard."""
    if mode == "kind":
        return f"_key({v}, False) == {bind(source.state)}"
    return _same(v, source.value, bind, 0)


def _same(v, value, bind, depth):
    """An expression true when the value of expression ``v`` has the key ``value_key(value)``:
    written out for scalars, identities and small containers, so no key is built per call."""
    t = type(value)
    if value is None or t is bool or value is MISSING:
        return f"{v} is {bind(value)}"
    if t is int or t is str or t is bytes:
        return f"({v}.__class__ is {bind(t)} and {v} == {bind(value)})"
    if t is float:
        if value != value:
            return f"({v}.__class__ is float and {v} != {v})"
        sign = math.copysign(1.0, value)
        return f"({v}.__class__ is float and {v} == {bind(value)} and _copysign(1.0, {v}) == {sign!r})"
    want = value_key(value)
    if want[0] == "id":
        return f"{v} is {bind(value)}"
    small = len(value) <= 16 and depth < 2 if isinstance(value, (tuple, list, dict)) else False
    if (t is tuple or t is list) and small:
        items = [_same(f"{v}[{i}]", x, bind, depth + 1) for i, x in enumerate(value)]
        return f"({v}.__class__ is {bind(t)} and len({v}) == {len(value)}" + \
            "".join(f" and {x}" for x in items) + ")"
    if isinstance(value, dict) and small and all(type(k) is str for k in value):
        items = [_same(f"{v}[{bind(k)}]", x, bind, depth + 1) for k, x in value.items()]
        return f"({v}.__class__ is {bind(t)} and tuple({v}) == {bind(tuple(value))}" + \
            "".join(f" and {x}" for x in items) + ")"
    return f"_key({v}) == {bind(want)}"


def compile_checks(facts, guarded):
    """``facts``: [(name, getter, expected)] (the tracer's, grad mode...); ``guarded``:
    [(Source, mode)] as ``Watcher.guarded_sources()`` gives them.  Returns the check function:
    -1 when all hold, else the index of a failing source, or -3 for a failing fact."""
    bind = _Names()
    var = {}                    # id(source) -> variable holding its value
    lines = ["def check():", "    try:"]
    for _, get, want in facts:
        inline = get.code(want, bind) if hasattr(get, "code") else None
        test = f"not {inline}" if inline is not None else f"{bind(get)}() != {bind(want)}"
        lines.append(f"        if {test}: return -3")
    index = {id(s): i for i, (s, _) in enumerate(guarded)}

    dicts = {}                  # variable -> variable holding its instance dictionary

    def instance_dict(v):       # read once per object, not once per attribute
        d = dicts.get(v)
        if d is None:
            d = dicts[v] = f"d{v[1:]}"
            lines.append(f"        {d} = {v}.__dict__")
        return d

    def value_of(source):
        # the sources from the first one without a variable down to ``source``, each computed
        # from its parent's (a loop: a recursive closure is a reference cycle)
        chain, s = [], source
        while s is not None and id(s) not in var:
            chain.append(s)
            s = s.parent
        for s in reversed(chain):
            code = _root_code(s.root, bind) if s.parent is None else \
                _step_code(var[id(s.parent)], s, bind, instance_dict)
            name = var[id(s)] = f"v{len(var)}"
            lines.append(f"        {name} = {code}")
        return var[id(source)]

    for s, mode in guarded:
        v = value_of(s)
        lines.append(f"        if not {_test_code(v, s, mode, bind)}: return {index[id(s)]}")
    lines += ["        pass", "    except Exception:", "        return -2", "    return -1"]
    source = "\n".join(lines)
    env = bind.env
    exec(_code(source), env)
    check = env["check"]
    check.source = source
    return check


def _header():
    text = f"dynograph-guards python {importlib.util.MAGIC_NUMBER.hex()} {sys.version}"
    return hashlib.sha256(text.encode()).hexdigest().encode()


# guard functions compiled by Python, on disk (runtime/cache.py) by a hash of their source,
# which names constants only as c0, c1...: the same model's guards are the same text in every
# process.  Compiling a char transformer step's two guard functions (650-710 lines) took 18 ms
# of its first call; a warm one reads them back.
DISK = DiskCache("guards", ".pyc", _header)


def _code(source):
    """The code object of ``source``, from the disk cache or compiled (and written there)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    data = DISK.read(key)
    if data is not None:
        try:
            code = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            code = None                     # (an entry of another build: compiled again)
        if isinstance(code, types.CodeType):
            return code
    code = compile(source, "<dynograph guards>", "exec")
    DISK.write(key, marshal.dumps(code))
    return code

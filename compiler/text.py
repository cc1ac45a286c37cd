"""The IR's text form: ``print_graph`` writes it, ``parse_graph`` reads it back.

    graph {
      input %0: f32[4,8] x
      param %1: f32[8] fc.bias
      %2: f32[4,8] = add(%0, %1)
      %3: f32[], %4: i64[] = max(%2, dim=None)
      return %3
      update fc.bias <- %2
    }

Literal arguments print as Python literals (``2.0``, ``(1, 2)``, ``None``, ``'mean'``); dtypes
by name (``float32``); ``inf``/``nan`` as such.  A node whose op holds a subgraph (a fused
kernel) prints the subgraph as an indented block after the node.  The parser accepts exactly
what the printer writes; ``parse_graph(print_graph(g))`` is structurally equal to ``g``.
"""
import ast
import math
import re

from dynograph.runtime import dtypes as D
from .ir import RNG, Graph, Input, INPUT_KINDS, Node, Sym, TensorType, Value

_ABBR = {d.abbr: d for d in D.EVERY_DTYPE}
_NAMES = {d.name: d for d in D.EVERY_DTYPE}
_OUT = re.compile(r"(%\d+): (\w+\[[^\]]*\](?: on [^,\s]+)?|rng)")
_SIMPLE_NAME = re.compile(r"^[\w.\[\]:\-]+$")


# ---------------------------------------------------------------- printing

class _Names:
    """Positional names: %0, %1, ... in order of definition."""

    def __init__(self):
        self.names = {}

    def define(self, v):
        self.names[v] = f"%{len(self.names)}"
        return self.names[v]

    def __getitem__(self, v):
        try:
            return self.names[v]
        except KeyError:
            raise ValueError(f"value {v!r} is used but never defined") from None


def format_literal(x, names=None):
    """One argument or attribute as text."""
    if isinstance(x, Value):
        return names[x]
    if isinstance(x, Sym):
        return str(x)
    if x is None or isinstance(x, (bool, str)):
        return repr(x)
    if isinstance(x, int):
        return repr(int(x))
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    if isinstance(x, D.dtype):
        return x.name
    if isinstance(x, tuple):
        inner = ", ".join(format_literal(a, names) for a in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(format_literal(a, names) for a in x) + "]"
    if isinstance(x, slice):
        return f"slice({format_literal(x.start)}, {format_literal(x.stop)}, {format_literal(x.step)})"
    if x is Ellipsis:
        return "..."
    if isinstance(x, complex):
        return repr(x)
    raise TypeError(f"cannot write {type(x).__name__} into the IR text form: {x!r}")


def _format_name(name):
    return name if _SIMPLE_NAME.match(name) else repr(name)


def print_graph(graph, sources=False):
    """The graph as text (``sources=True`` adds each node's user source line as a comment)."""
    lines = ["graph {"]
    _print_body(graph, _Names(), lines, "  ", sources)
    lines.append("}")
    return "\n".join(lines)


def _print_body(graph, names, lines, indent, sources):
    for inp in graph.inputs:
        lines.append(f"{indent}{inp.kind} {names.define(inp.value)}: {inp.value.type} "
                     f"{_format_name(inp.name)}")
    for node in graph.nodes:
        args = [format_literal(a, names) for a in node.args]
        args += [f"{k}={format_literal(v, names)}" for k, v in node.attrs.items() if k != "graph"]
        outs = ", ".join(f"{names.define(v)}: {v.type}" for v in node.outs)
        line = f"{indent}{outs} = {node.op}({', '.join(args)})"
        sub = node.attrs.get("graph")
        if sub is not None:
            line += " {"
        if sources and node.source:
            line += f"  # {node.source}"
        if sub is not None:
            lines.append(line)
            _print_body(sub, _Names(), lines, indent + "  ", sources)
            lines.append(indent + "}")
        else:
            lines.append(line)
    if graph.outputs:
        lines.append(f"{indent}return " + ", ".join(names[v] for v in graph.outputs))
    for slot, v in graph.updates:
        lines.append(f"{indent}update {_format_name(slot)} <- {names[v]}")


# ---------------------------------------------------------------- parsing

class ParseError(ValueError):
    pass


def parse_type(text):
    text = text.strip()
    if text == "rng":
        return RNG
    m = re.fullmatch(r"(\w+)\[([\w,\s*+\-]*)\](?: on (\S+))?", text)
    if not m or m.group(1) not in _ABBR:
        raise ParseError(f"not a type: {text!r}")
    dims = tuple(_dim(s.strip()) for s in m.group(2).split(",") if s.strip())
    return TensorType(dims, _ABBR[m.group(1)], m.group(3) or "cpu")


def _dim(text):
    if text.isdigit():
        return int(text)
    m = re.fullmatch(r"(?:(\d+)\*)?s0([+-]\d+)?", text)
    if not m:
        raise ParseError(f"not a dimension: {text!r}")
    return Sym(int(m.group(1) or 1), int(m.group(2) or 0))


def parse_graph(text):
    """Read a graph written by ``print_graph``."""
    lines = [ln for ln in (s.split("  #")[0].rstrip() for s in text.splitlines()) if ln.strip()]
    if not lines or lines[0].strip() != "graph {":
        raise ParseError("a graph starts with 'graph {'")
    graph, end = _parse_body(lines, 1)
    if end != len(lines) - 1 or lines[end].strip() != "}":
        raise ParseError(f"line {end + 1}: expected the closing '}}'")
    return graph


def _parse_body(lines, i):
    graph = Graph()
    env = {}
    while i < len(lines):
        line = lines[i].strip()
        if line == "}":
            return graph, i
        try:
            i = _parse_line(line, lines, i, graph, env)
        except ParseError as e:
            raise ParseError(f"line {i + 1}: {e}: {line!r}") from None
    raise ParseError("missing '}'")


def _parse_line(line, lines, i, graph, env):
    head = line.split(" ", 1)[0]
    if head in INPUT_KINDS:
        m = re.fullmatch(r"(\w+) (%\d+): (.+?) ('.*'|\"[^\"]*\"|\S+)", line)
        if not m:
            raise ParseError("bad input line")
        value = _define(env, m.group(2), parse_type(m.group(3)))
        graph.inputs.append(Input(value, m.group(1), _parse_name(m.group(4))))
        return i + 1
    if head == "return":
        graph.outputs.extend(_lookup(env, s.strip()) for s in line[len("return"):].split(","))
        return i + 1
    if head == "update":
        m = re.fullmatch(r"update ('.*'|\S+) <- (%\d+)", line)
        if not m:
            raise ParseError("bad update line")
        graph.updates.append((_parse_name(m.group(1)), _lookup(env, m.group(2))))
        return i + 1
    return _parse_node(line, lines, i, graph, env)


def _parse_node(line, lines, i, graph, env):
    m = re.fullmatch(r"(.+?) = (\w+)\((.*)\)( \{)?", line)
    if not m:
        raise ParseError("bad node line")
    # values are written %N; in the Python expression they become names _vN
    source = re.sub(r"%(\d+)", r"_v\1", m.group(3)).replace("...", "Ellipsis")
    try:
        call = ast.parse(f"f({source})", mode="eval").body
    except (SyntaxError, ValueError):      # ValueError: a NUL byte in the text
        raise ParseError("unreadable arguments") from None
    args = tuple(_literal(a, env) for a in call.args)
    attrs = {k.arg: _literal(k.value, env) for k in call.keywords}
    outs = [(name, parse_type(t)) for name, t in _OUT.findall(m.group(1))]
    if not outs:
        raise ParseError("a node defines at least one value")
    i += 1
    if m.group(4):
        sub, end = _parse_body(lines, i)
        attrs["graph"] = sub
        i = end + 1
    node = Node(m.group(2), args, attrs, tuple(_define(env, n, t) for n, t in outs))
    graph.nodes.append(node)
    return i


def _parse_name(text):
    if text[0] not in "'\"":
        return text
    try:
        name = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        raise ParseError(f"not a name: {text}") from None
    if not isinstance(name, str):
        raise ParseError(f"not a name: {text}")
    return name


def _define(env, name, type):
    if name in env:
        raise ParseError(f"{name} is defined twice")
    env[name] = Value(type)
    return env[name]


def _lookup(env, name):
    if name not in env:
        raise ParseError(f"{name} is used before it is defined")
    return env[name]


def _sym_expression(node, env):
    """a*s0, a*s0+b, a*s0-b, c*s0 and c/s0, as symbolic.Sym prints them."""
    left, right = _literal(node.left, env), _literal(node.right, env)
    if isinstance(node.op, ast.Mult) and isinstance(right, Sym) and right == Sym(1, 0):
        return Sym(left, 0) if isinstance(left, int) else Sym(left, kind="mul")
    if isinstance(node.op, ast.Div) and isinstance(right, Sym) and right == Sym(1, 0):
        return Sym(left, kind="div")
    if isinstance(node.op, (ast.Add, ast.Sub)) and isinstance(left, Sym) and isinstance(right, int):
        return Sym(left.a, left.b + (right if isinstance(node.op, ast.Add) else -right))
    raise ParseError(f"not a literal: {ast.dump(node)}")


def _literal(node, env):
    """Evaluate an argument's expression: literals, dtype names and %N references only."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("inf", "nan"):
            return float(node.id)
        if node.id == "s0":
            return Sym(1, 0)
        if node.id.startswith("_v"):
            return _lookup(env, "%" + node.id[2:])
        if node.id == "Ellipsis":
            return Ellipsis
        if node.id in _NAMES:
            return _NAMES[node.id]
        raise ParseError(f"unknown name {node.id}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand, env)
    if isinstance(node, ast.BinOp):
        return _sym_expression(node, env)
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, env) for e in node.elts)
    if isinstance(node, ast.List):
        return [_literal(e, env) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "slice":
        return slice(*(_literal(a, env) for a in node.args))
    raise ParseError(f"not a literal: {ast.dump(node)}")

"""Every environment variable dynograph reads, declared once: its kind, default and meaning.

The rest of the code asks this module (``config.get("CACHE_DIR")``, ``config.debug("kernels")``)
instead of reading ``os.environ``.  A value is read when it is asked for, so a test or a tool
can set a variable while the program runs (``CHECK_META`` is the exception: the dispatcher
reads it once, at import).  The table in docs/architecture.md ("Environment variables") is
``markdown_table()``'s output; tests/test_config.py checks the two agree.
"""
import os
import warnings
from dataclasses import dataclass

__all__ = ["Variable", "VARIABLES", "DEBUG_TOPICS", "get", "get_default", "debug", "markdown_table"]

PREFIX = "DYNOGRAPH_"


@dataclass(frozen=True)
class Variable:
    name: str           # without the prefix: "CACHE_DIR" is read from DYNOGRAPH_CACHE_DIR
    kind: str           # "flag" (0/1), "level" (an int), "number", "path" or "list" (a,b,c)
    default: object     # what an unset (or empty) variable reads as; None: see the meaning
    meaning: str


VARIABLES = (
    Variable("DEBUG", "level", 0,
             "What the compiler prints on stderr. 1: graph breaks, recompilations and their "
             "reasons, the guards of each new graph, each kernel compiled (with its time), ops "
             "that run on the interpreter instead of a kernel; errors under fullgraph=True keep "
             "the compiler's own frames. 2: also each kernel's optimized LLVM IR."),
    Variable("COMPILE", "flag", True,
             "0: compiled functions call the original function (eager; nothing is traced)."),
    Variable("CACHE_DIR", "path", None,
             "Folder of the compiled-kernel disk cache (default `$XDG_CACHE_HOME/dynograph`, "
             "else `~/.cache/dynograph`)."),
    Variable("CACHE_SIZE_MB", "number", 256,
             "Most megabytes the kernel disk cache holds; the least recently used entries go "
             "first."),
    Variable("DUMP", "path", None,
             "Folder to write every stage of every compilation into (docs/viz.md)."),
    Variable("DUMP_STAGES", "list", None,
             "The stages `DUMP` writes, comma separated (default all)."),
    Variable("DUMP_FORMATS", "list", None,
             "The formats `DUMP` writes graph stages in, comma separated (default text,json)."),
    Variable("VERIFY", "flag", False,
             "1: run the IR verifier on the captured graph and after every compiler pass "
             "(on in the tests)."),
    Variable("DIST_TIMEOUT", "number", None,
             "Seconds a distributed collective waits for the other ranks before it fails "
             "(default 1800; `dynograph-run --timeout` sets it)."),
    Variable("SPIN_US", "number", 2000,
             "Microseconds a kernel worker thread waits for the next kernel by spinning before "
             "it sleeps (a sleeping thread takes tens of microseconds or more to wake; 0: sleep "
             "at once)."),
    Variable("YIELD_AFTER_US", "number", 0,
             "Microseconds an idle kernel worker spins before it starts handing its core to "
             "other runnable threads now and then (it yields about every 20 us after that)."),
    Variable("KEEP_FREED_MB", "number", 128,
             "Megabytes of freed host memory glibc's malloc keeps for reuse instead of giving "
             "them back to the system (set at import; runtime/host_memory.py): arrays freed and "
             "allocated again every step reuse memory instead of faulting fresh pages in. 0: "
             "glibc's own behaviour."),
    Variable("CHECK_META", "flag", False,
             "1: check every eager op's meta rule against the result it computed (on in the "
             "tests; read at import)."),
    Variable("CUDA_EMULATE", "number", 0,
             "N > 0: CUDA devices are N emulated ones whose kernels run on the CPU "
             "(runtime/cuda_emulated.py; for checking the CUDA path on machines without a GPU)."),
)

_BY_NAME = {v.name: v for v in VARIABLES}

# the DEBUG level from which each kind of message is printed
DEBUG_TOPICS = {"breaks": 1, "recompiles": 1, "guards": 1, "kernels": 1, "fallbacks": 1,
                "tracebacks": 1, "llvm_ir": 2}

_FALSE = ("0", "false", "no", "off")
_warned = set()


def get(name):
    """The value of ``DYNOGRAPH_<name>``, parsed by its kind; its default when unset or empty,
    or (with one warning) when it does not parse."""
    var = _BY_NAME[name]
    raw = os.environ.get(PREFIX + name, "").strip()
    if not raw:
        return _default(var)
    if var.kind == "flag":
        return raw.lower() not in _FALSE
    if var.kind == "list":
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if var.kind in ("level", "number"):
        try:
            return int(raw) if var.kind == "level" else float(raw)
        except ValueError:
            if (name, raw) not in _warned:
                _warned.add((name, raw))
                warnings.warn(f"{PREFIX}{name}={raw!r} is not a "
                              f"{'whole ' if var.kind == 'level' else ''}number; using "
                              f"{_default(var)}", RuntimeWarning, stacklevel=3)
            return _default(var)
    return raw


def get_default(name):
    """What ``DYNOGRAPH_<name>`` reads as when it is unset."""
    return _default(_BY_NAME[name])


def _default(var):
    if var.name == "CACHE_DIR":
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "dynograph")
    return var.default


def debug(topic):
    """Whether ``DYNOGRAPH_DEBUG`` is high enough to print ``topic`` (a key of DEBUG_TOPICS)."""
    return get("DEBUG") >= DEBUG_TOPICS[topic]


def markdown_table():
    """The table of variables docs/architecture.md shows."""
    rows = ["| Variable | Kind | Default | Meaning |", "|---|---|---|---|"]
    for v in VARIABLES:
        rows.append(f"| `{PREFIX}{v.name}` | {v.kind} | {_shown(v.default)} | {v.meaning} |")
    return "\n".join(rows) + "\n"


def _shown(default):
    if default is None:
        return "-"
    if isinstance(default, bool):
        return str(int(default))
    return str(default)

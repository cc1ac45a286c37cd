"""runtime/config.py: the one table of environment variables, how values parse, the docs'
copy of the table, and that no other module reads a ``DYNOGRAPH_*`` variable itself."""
import os
import pathlib
import re

import pytest

from dynograph.runtime import config

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Modules that still read a variable themselves while the executor moves into runtime/
# (issue 13): each must switch to ``config.get``; the test below fails once one has, so the
# entry is dropped then.
def test_docs_table_is_the_declarations():
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert config.markdown_table() in text, \
        "docs/architecture.md's 'Environment variables' table differs from runtime/config.py: " \
        "paste config.markdown_table() there"


def test_every_variable_is_declared_once_with_a_meaning():
    names = [v.name for v in config.VARIABLES]
    assert len(names) == len(set(names))
    for v in config.VARIABLES:
        assert v.kind in ("flag", "level", "number", "path", "list") and v.meaning.strip()


_READ = re.compile(r"""environ(?:\.get)?\s*[(\[]\s*["']DYNOGRAPH_""")


def test_only_config_reads_the_variables():
    readers = set()
    for folder in ("dynograph", "compiler", "runtime", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel != "runtime/config.py" and _READ.search(path.read_text(encoding="utf-8")):
                readers.add(rel)
    assert not readers, f"read DYNOGRAPH_* variables outside runtime/config.py " \
                        f"(use config.get): {sorted(readers)}"


def test_values_parse_by_kind(monkeypatch):
    for name in ("DEBUG", "COMPILE", "CACHE_SIZE_MB", "DUMP_STAGES", "VERIFY", "CACHE_DIR"):
        monkeypatch.delenv("DYNOGRAPH_" + name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert config.get("DEBUG") == 0 and config.get("COMPILE") is True
    assert config.get("CACHE_SIZE_MB") == 256 and config.get("DUMP_STAGES") is None
    assert config.get("CACHE_DIR") == os.path.join("/somewhere", "dynograph")
    monkeypatch.setenv("DYNOGRAPH_COMPILE", "0")
    monkeypatch.setenv("DYNOGRAPH_VERIFY", "1")
    monkeypatch.setenv("DYNOGRAPH_CACHE_SIZE_MB", "1.5")
    monkeypatch.setenv("DYNOGRAPH_DUMP_STAGES", " captured, llvm ,")
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", "/tmp/k")
    assert config.get("COMPILE") is False and config.get("VERIFY") is True
    assert config.get("CACHE_SIZE_MB") == 1.5
    assert config.get("DUMP_STAGES") == ("captured", "llvm")
    assert config.get("CACHE_DIR") == "/tmp/k"
    monkeypatch.setenv("DYNOGRAPH_VERIFY", "")             # empty is unset
    assert config.get("VERIFY") is False


def test_a_value_that_does_not_parse_warns_and_uses_the_default(monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "loud")
    with pytest.warns(RuntimeWarning, match="DYNOGRAPH_DEBUG='loud' is not a whole number; "
                                            "using 0"):
        assert config.get("DEBUG") == 0


def test_debug_levels(monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "1")
    assert config.debug("breaks") and config.debug("kernels") and not config.debug("llvm_ir")
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "2")
    assert config.debug("llvm_ir")
    monkeypatch.setenv("DYNOGRAPH_DEBUG", "0")
    assert not any(config.debug(t) for t in config.DEBUG_TOPICS)

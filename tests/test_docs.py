"""Numbers in the docs come from the code: the op-set table of docs/architecture.md is what
``python -m tools.op_counts`` prints now."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tools import op_counts  # noqa: E402


def test_op_counts_in_the_architecture_doc_are_current():
    with open(op_counts.DOC) as f:
        held = op_counts.current(f.read())
    assert held is not None, "docs/architecture.md lost its op-counts block"
    assert held == op_counts.table(), "run: python -m tools.op_counts --write"


def test_architecture_doc_names_only_modules_that_exist():
    """Every `path/file.py` the doc names exists (a moved module must update the doc)."""
    import re
    with open(op_counts.DOC) as f:
        text = f.read()
    missing = []
    for path in set(re.findall(r"`((?:compiler|runtime|dynograph|tools|tests)/[\w/]+\.py)`", text)):
        if not os.path.exists(os.path.join(ROOT, path)):
            missing.append(path)
    assert not missing, f"docs/architecture.md names modules that do not exist: {sorted(missing)}"

"""``DYNOGRAPH_LOGS=breaks,recompiles,guards``: print compiler events as they happen."""
import os
import sys

KINDS = ("breaks", "recompiles", "guards", "graphs")


def enabled():
    return {k.strip() for k in os.environ.get("DYNOGRAPH_LOGS", "").split(",") if k.strip()}


def log(kind, text, also=()):
    """Print ``text`` when ``kind`` (or one of ``also``, or 'all') is enabled."""
    on = enabled()
    for k in (kind, *also):
        if k in on or "all" in on:
            print(f"[dynograph {k}] {text}", file=sys.stderr)
            return

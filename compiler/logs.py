"""``DYNOGRAPH_LOGS=breaks,recompiles,guards``: print compiler events as they happen."""
import os
import sys

KINDS = ("breaks", "recompiles", "guards", "graphs")


def enabled():
    return {k.strip() for k in os.environ.get("DYNOGRAPH_LOGS", "").split(",") if k.strip()}


def log(kind, text):
    on = enabled()
    if kind in on or "all" in on:
        print(f"[dynograph {kind}] {text}", file=sys.stderr)

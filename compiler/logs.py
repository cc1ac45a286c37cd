"""``DYNOGRAPH_DEBUG=1``: print compiler events (graph breaks, recompilations and their reasons,
the guards of each new graph) on stderr as they happen, each tagged with its kind."""
import sys

from dynograph.runtime import config


def log(kind, text):
    """Print ``text`` when ``DYNOGRAPH_DEBUG`` reaches ``kind``'s level (runtime/config.py)."""
    if config.debug(kind):
        print(f"[dynograph {kind}] {text}", file=sys.stderr)

"""Small helpers shared by the examples: a progress bar and a note when compiling is slow.

The bar is tqdm's when tqdm is installed; otherwise one line rewritten in place (no dependency).
"""
import sys
import time

try:
    from tqdm import tqdm
except ImportError:
    tqdm = None


class Progress:
    """Wrap an iterable; call ``update(loss=..., items=...)`` after each step.

    Shows the running loss and the throughput (items per second)."""

    def __init__(self, iterable, total=None, desc="", unit="it", quiet=False):
        self.iterable = iterable
        self.total = total if total is not None else len(iterable)
        self.desc, self.unit, self.quiet = desc, unit, quiet
        self.items, self.steps, self.start = 0, 0, time.perf_counter()
        self.bar = tqdm(total=self.total, desc=desc, leave=True) if tqdm and not quiet else None
        self._last_print = 0.0

    def __iter__(self):
        for item in self.iterable:
            yield item
        self.close()

    def update(self, loss=None, items=1):
        self.steps += 1
        self.items += items
        rate = self.items / max(time.perf_counter() - self.start, 1e-9)
        info = (f"loss {loss:.4f}  " if loss is not None else "") + f"{rate:,.0f} {self.unit}/s"
        if self.bar is not None:
            self.bar.set_postfix_str(info, refresh=False)
            self.bar.update(1)
        elif not self.quiet and sys.stdout.isatty():
            now = time.perf_counter()
            if now - self._last_print > 0.2 or self.steps == self.total:
                self._last_print = now
                width = 30
                done = int(width * self.steps / max(self.total, 1))
                print(f"\r{self.desc} [{'#' * done}{'.' * (width - done)}] {self.steps}/{self.total}  {info}",
                      end="", flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif not self.quiet and sys.stdout.isatty() and self.steps:
            print()


def timed_first_call(compiled, what="the training step"):
    """Call the compiled function ``compiled`` as usual, but say once when a call that traced or
    compiled a graph took over a second (dynograph traces a step on its first call and compiles
    its kernels when a graph first replays, on the second call)."""
    state = {"graphs": 0, "hits": 0, "said": False}

    def call(*args, **kwargs):
        start = time.perf_counter()
        result = compiled(*args, **kwargs)
        seconds = time.perf_counter() - start
        if not state["said"]:
            graphs, hits = len(compiled.graphs()), compiled.hits
            first_replay = hits > 0 and state["hits"] == 0
            if seconds > 1.0 and (graphs > state["graphs"] or first_replay):
                state["said"] = True
                print(f"compiling {what} took {seconds:.1f} s (later calls reuse it)")
            state["graphs"], state["hits"] = graphs, hits
        return result
    return call

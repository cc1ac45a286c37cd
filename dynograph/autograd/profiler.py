"""autograd.profiler: count and time every op (forward and backward) run inside ``profile()``."""
import time
from collections import defaultdict


class _Recorder:
    """The active profile, if any; the dispatcher checks ``active`` on every call."""
    active = None


RECORDER = _Recorder()


class FunctionEvent:
    """One timed call: its name, total time and the part spent outside nested calls."""

    __slots__ = ("name", "cpu_time_total", "self_cpu_time_total", "input_shapes")

    def __init__(self, name, total, self_time, input_shapes=None):
        self.name = name
        self.cpu_time_total = total
        self.self_cpu_time_total = self_time
        self.input_shapes = input_shapes

    @property
    def key(self):
        return self.name

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


class FunctionEventAvg:
    """The events of one name added up (what key_averages lists)."""

    def __init__(self, key):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, ev):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count}>")


_SORT_KEYS = {"cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
              "cpu_time": "cpu_time", "count": "count"}


def _us(v):
    if v >= 1e6:
        return f"{v / 1e6:.3f}s"
    if v >= 1e3:
        return f"{v / 1e3:.3f}ms"
    return f"{v:.3f}us"


class EventList(list):
    """A list of events with torch's ``table()`` rendering."""

    def table(self, sort_by=None, row_limit=100, header=None, top_level_events_only=False,
              max_name_column_width=55):
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"unknown sort key '{sort_by}'")
            rows.sort(key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        name_w = min(max([len("Name")] + [len(e.key) for e in rows]) + 2, max_name_column_width)
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        line = "-" * name_w + "  " + "  ".join("-" * 12 for _ in cols) + "  "
        out = [line, f"{'Name':>{name_w}}  " + "  ".join(f"{c:>12}" for c in cols) + "  ", line]
        for e in rows:
            count = getattr(e, "count", 1)
            cells = [f"{100 * e.self_cpu_time_total / total_self:.2f}%", _us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total_self:.2f}%", _us(e.cpu_time_total),
                     _us(e.cpu_time_total / max(count, 1)), str(count)]
            out.append(f"{e.key[:name_w]:>{name_w}}  " + "  ".join(f"{c:>12}" for c in cells) + "  ")
        out.append(line)
        out.append(f"Self CPU time total: {_us(sum(e.self_cpu_time_total for e in self))}")
        return "\n".join(out) + "\n"

    def total_average(self):
        avg = FunctionEventAvg("Total")
        for e in self:
            avg.count += getattr(e, "count", 1)
            avg.cpu_time_total += e.cpu_time_total
            avg.self_cpu_time_total += e.self_cpu_time_total
        return avg


class profile:
    """Record every op and backward node run inside the ``with`` block.

    Example::

        with dynograph.autograd.profiler.profile() as prof:
            (x * y).sum().backward()
        print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.function_events = EventList()
        self._stack = []            # child time accumulated for each open call

    def __enter__(self):
        if self.enabled:
            if RECORDER.active is not None:
                raise RuntimeError("Profiler is already enabled on this thread")
            RECORDER.active = self
        return self

    def __exit__(self, *exc):
        if self.enabled:
            RECORDER.active = None

    def begin(self):
        """Open an event; returns its start time."""
        self._stack.append(0.0)
        return time.perf_counter()

    def end(self, name, start, shapes=None):
        """Close the innermost event: its self time excludes the events nested inside it."""
        total = (time.perf_counter() - start) * 1e6
        children = self._stack.pop()
        if self._stack:
            self._stack[-1] += total
        self.function_events.append(FunctionEvent(name, total, total - children, shapes))

    def run(self, name, fn, *args, shapes=None):
        """Call ``fn(*args)`` as one event named ``name``."""
        start = self.begin()
        try:
            return fn(*args)
        finally:
            self.end(name, start, shapes)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = defaultdict(lambda: None)
        order = []
        for ev in self.function_events:
            key = (ev.name, str(ev.input_shapes)) if group_by_input_shape else ev.name
            if groups[key] is None:
                groups[key] = FunctionEventAvg(ev.name)
                order.append(key)
            groups[key].add(ev)
        return EventList(groups[k] for k in order)

    def events(self):
        return self.function_events

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)

    def total_average(self):
        return self.key_averages().total_average()


class record_function:
    """Label a region of user code; it appears as its own row in the profile."""

    def __init__(self, name, args=None):
        self.name = name

    def __enter__(self):
        self._prof = RECORDER.active
        if self._prof is not None:
            self._start = self._prof.begin()
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof.end(self.name, self._start)

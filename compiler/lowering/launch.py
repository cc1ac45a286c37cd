"""One call of a direct kernel (conv.py, pool.py), run now or bound for a program's step.

A direct rule works out a ``Launch``: its compiled plan, the arrays it reads (each through a
Padding, padding.py, or as it is), the arrays it writes, views of them to zero afterwards and
the results.  ``run`` runs it once, reading through buffers leased from each Padding (eager
calls, and a launch that cannot be bound).  ``bind`` gives a callable of no arguments that
runs it again on the same arrays, reading through padded buffers of its own: a program's step
that sees the same arrays at the next call launches that (executor.Bound), without the rule's
checks, plan lookups and address reads (in the CIFAR CNN's step, a convolution's Python took
10-28 µs bound against 25-54 µs).
"""
import functools

from dynograph.runtime.executor import address


class Launch:
    """``plan`` on the addresses of ``reads`` ([(array, Padding or None)]) then ``writes``;
    then each of ``zeroed`` (views) set to 0.  ``results``: what the op returns; ``owned``:
    the indices of results made for a bound launch alone (executor.Bound)."""
    __slots__ = ("plan", "reads", "writes", "zeroed", "results", "owned")

    def __init__(self, plan, reads, writes, results, zeroed=(), owned=()):
        self.plan, self.reads, self.writes = plan, reads, writes
        self.results, self.zeroed, self.owned = results, zeroed, owned


def run(launch):
    """Run ``launch`` now; its results."""
    arrays, leases = [], []
    try:
        for a, padding in launch.reads:
            if padding is not None:
                lease = padding(a)
                a = lease.__enter__()
                leases.append(lease)
            arrays.append(a)
        launch.plan([address(a) for a in arrays] + [address(w) for w in launch.writes])
    finally:
        for lease in leases:
            lease.__exit__(None, None, None)
    for v in launch.zeroed:
        v.fill(0)
    return launch.results


def bind(launch):
    """A callable running ``launch`` again on the same arrays, or None where it cannot be
    bound: a padded copy too large to keep (padding.KEEP_BYTES), or a plan without a bound
    form."""
    if not all(padding is None or padding.keep for _, padding in launch.reads):
        return None
    steps, arrays, held = [], [], []
    for a, padding in launch.reads:
        if padding is None:
            arrays.append(a)
            continue
        buffer, copy = padding.kept(a)
        held.append((padding, buffer))
        steps.append(copy)
        arrays.append(buffer)
    kernel = launch.plan.bound([address(a) for a in arrays] +
                               [address(w) for w in launch.writes])
    bound = _Bound(steps + [kernel], held, list(launch.zeroed))
    if kernel is None or None in steps:
        bound.release()
        return None
    return bound


class _Bound:
    """The bound kernels of one launch in order; it holds the padded buffers they use, each
    given back to its Padding by ``release`` (the step drops the launch: a step whose input
    is a new array at every call binds every call, and reuses the buffers)."""
    __slots__ = ("steps", "held", "zeroed")

    def __init__(self, steps, held, zeroed):
        self.steps, self.held, self.zeroed = steps, held, zeroed

    def __call__(self):
        for step in self.steps:
            step()
        for v in self.zeroed:
            v.fill(0)

    def release(self):
        for padding, buffer in self.held:
            padding.free.append(buffer)
        self.held = []


def rule(make):
    """The direct rule (direct.py) running the Launch that ``make(owner, args, attrs, out,
    compile_kernel, bound)`` works out (None: not covered; ``bound``: the Launch is to be
    bound, so arrays the rule recycles from call to call, max pooling's indices, are made for
    it alone, ``Launch.owned``), with its ``bind`` form:
    ``rule.bind(owner, args, attrs, out, compile_kernel)`` -> None (not covered), or
    (callable running the launch, its results, owned results, whether the callable may run
    again on the same arrays: False where the launch could not be bound)."""
    def run_rule(owner, args, attrs, out, compile_kernel):
        launch = make(owner, args, attrs, out, compile_kernel, False)
        return None if launch is None else run(launch)

    def bind_rule(owner, args, attrs, out, compile_kernel):
        launch = make(owner, args, attrs, out, compile_kernel, True)
        if launch is None:
            return None
        bound = bind(launch)
        if bound is None:
            return functools.partial(run, launch), launch.results, launch.owned, False
        return bound, launch.results, launch.owned, True

    run_rule.bind = bind_rule
    run_rule.__name__ = run_rule.__qualname__ = make.__name__
    run_rule.__doc__ = make.__doc__
    return run_rule

"""The watcher's cost in a trace: ops on plain operands run out of its sight, and which frames
it follows is decided once per code object (compiler/watch.py, compiler/tracer.py)."""
import gc
import logging
import os
import sys
import time
import types

import pytest

import dynograph
from dynograph.compiler.tracer import Tracer
from dynograph.compiler.watch import OWN, WATCHED, Watcher, _files, operands_inert


class _UserNumber:
    def __index__(self):
        return 2


class _UserTensor(dynograph.Tensor):
    pass


def _hooks(op, args, attrs):
    return sys.getprofile(), sys.gettrace()


def test_plain_operands_are_inert():
    t = dynograph.ones(3)
    p = dynograph.nn.Parameter(dynograph.ones(2))
    assert operands_inert((t, p, 2, 1.5, True, None, "mean", (3, (4, -1)), [t, t]))
    assert operands_inert({"dtype": dynograph.float32, "device": dynograph.device("cpu")}.values())


def test_user_objects_and_subclasses_are_not_inert():
    t = dynograph.ones(3)
    assert not operands_inert((t, _UserNumber()))
    assert not operands_inert((t, (2, _UserNumber())))
    assert not operands_inert((t, object.__new__(_UserTensor)))
    assert not operands_inert((t, lambda: 1))


def test_an_op_on_plain_operands_runs_with_the_hooks_off():
    tracer = Tracer()
    t = dynograph.ones(3)
    with Watcher(tracer, test_an_op_on_plain_operands_runs_with_the_hooks_off):
        watching = _hooks(None, (), {})
        assert tracer.run_op(_hooks, None, (t, 2, (1, 2)), {"dim": 0}) == (None, None)
        # a user's object may run its own code inside the op: the watcher follows it
        assert tracer.run_op(_hooks, None, (t, _UserNumber()), {}) == watching
        assert tracer.run_op(_hooks, None, (t,), {"size": (_UserNumber(),)}) == watching
        assert _hooks(None, (), {}) == watching         # put back after the op
    assert watching[0] is not None and watching[1] is not None


def test_one_code_object_run_with_two_modules_globals_is_decided_for_each():
    code = compile("def f():\n    return sys._getframe()\n", "<generated>", "exec")
    fcode = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    frames = {}
    for module in ("dynograph.compiler.generated", "users_module"):
        f = types.FunctionType(fcode, {"__name__": module, "sys": sys})
        frames[module] = f()
    files = _files()
    for _ in range(2):          # the second time from the cache
        assert files.classify(frames["dynograph.compiler.generated"]) == OWN
        assert files.classify(frames["users_module"]) == WATCHED


def _own_function(source, **names):
    """A function whose code is dynograph's own (a file inside the package)."""
    path = os.path.join(os.path.dirname(dynograph.__file__), "_probe.py")
    code = compile(source, path, "exec")
    namespace = {"__name__": "dynograph._probe", "sys": sys, **names}
    exec(code, namespace)
    return namespace["f"]


def test_dynograph_code_runs_without_the_profile_hook_and_user_code_it_calls_with_it():
    own = _own_function("def f(callback):\n"
                        "    inside = sys.getprofile()\n"
                        "    called = callback()\n"
                        "    return inside, called, sys.getprofile()\n")
    tracer = Tracer()
    with Watcher(tracer, test_dynograph_code_runs_without_the_profile_hook_and_user_code_it_calls_with_it):
        watching = _hooks(None, (), {})
        inside, called, after = own(lambda: sys.getprofile())
        assert _hooks(None, (), {}) == watching          # back when it returned
        try:
            own(lambda: 1 / 0)
        except ZeroDivisionError:
            pass
        assert _hooks(None, (), {}) == watching          # also when it raised
    assert inside is None and after is None
    assert called == watching[0]                        # the user's callback is watched


def _clock_in_a_hook(x):
    net = dynograph.nn.Linear(2, 2)
    net.register_forward_hook(lambda module, args, out: out * (time.perf_counter() > 0))
    return net(x)


@pytest.mark.parametrize("step", [
    lambda x: (x * 2).sum() + (time.perf_counter() > 0),    # right after ops, on their line
    lambda x: logging.makeLogRecord({"msg": "step"}) and x * 2,   # inside the library's code
    _clock_in_a_hook,                                       # in a callback of dynograph's code
], ids=["same line", "library", "callback"])
def test_a_clock_read_by_the_users_code_is_seen_wherever_it_runs(step):
    compiled = dynograph.compile(step)
    compiled(dynograph.ones(1, 2))
    assert "reads the clock" in (compiled.eager_reason or ""), compiled.explain()


def test_a_debuggers_trace_hook_gets_its_place_back_after_a_trace():
    def debugger(frame, event, arg):
        return None
    step = dynograph.compile(lambda x: (x * 2).sum())
    sys.settrace(debugger)
    try:
        step(dynograph.ones(2))
        hooks = sys.getprofile(), sys.gettrace()
    finally:
        sys.settrace(None)
    assert hooks == (None, debugger)


def test_a_derivative_rule_runs_with_the_hooks_off_where_its_node_is_plain():
    x = dynograph.ones(3, requires_grad=True)
    node = (x * 2.0).grad_fn
    scaled = (x * dynograph.ones(3)).grad_fn
    tracer = Tracer()
    seen = []
    node.apply = lambda *grads: seen.append((sys.getprofile(), sys.gettrace())) or (None, None)
    with Watcher(tracer, test_a_derivative_rule_runs_with_the_hooks_off_where_its_node_is_plain):
        watching = _hooks(None, (), {})
        tracer.run_rule(node, [dynograph.ones(3)])
        node.attrs = {"scale": _UserNumber()}
        tracer.run_rule(node, [dynograph.ones(3)])
        scaled.__class__ = type("UsersNode", (type(scaled),), {})      # its own apply
        scaled.apply = node.apply
        tracer.run_rule(scaled, [dynograph.ones(3)])
    assert seen == [(None, None), watching, watching]


class _UsersSGD(dynograph.optim.SGD):
    pass


def _step_hooks(opt, closure=None):
    """The hooks an optimizer's update ran under, while a trace with a watcher runs its step."""
    seen = []
    original = type(opt)._step

    def spy(self, closure):
        seen.append((sys.getprofile(), sys.gettrace()))
        return original(self, closure)

    opt._step = types.MethodType(spy, opt)
    tracer = Tracer()
    with Watcher(tracer, _step_hooks):
        watching = _hooks(None, (), {})
        tracer.run_step(opt, closure)
    return seen[0] == watching


def test_a_built_in_optimizer_updates_out_of_the_watchers_sight():
    w = dynograph.nn.Parameter(dynograph.ones(3))
    w.grad = dynograph.ones(3)
    opt = dynograph.optim.Adam([w], lr=0.1)
    assert not _step_hooks(opt)
    assert w.tolist() != [1.0, 1.0, 1.0]        # it did update


def test_an_optimizer_that_may_run_user_code_is_watched():
    w = dynograph.nn.Parameter(dynograph.ones(3))
    w.grad = dynograph.ones(3)
    assert _step_hooks(_UsersSGD([w], lr=0.1))                   # its class is the user's
    assert _step_hooks(dynograph.optim.SGD([w], lr=0.1), closure=lambda: None)
    opt = dynograph.optim.SGD([w], lr=0.1)
    opt.param_groups[0]["note"] = _UserNumber()                  # a user's object in a group
    assert _step_hooks(opt)


def test_the_hooks_come_back_when_an_unseen_op_raises():
    tracer = Tracer()

    def fails(op, args, attrs):
        raise ValueError("inside the op")

    with Watcher(tracer, test_the_hooks_come_back_when_an_unseen_op_raises):
        watching = _hooks(None, (), {})
        try:
            tracer.run_op(fails, None, (dynograph.ones(2),), {})
        except ValueError:
            pass
        assert _hooks(None, (), {}) == watching


def test_a_trace_leaves_no_reference_cycle_holding_its_tracer():
    # (a cycle would keep the tracer and every tensor it recorded alive until the collector
    # ran: the look-ahead trace of a training step ran with twice the memory)
    import gc
    model = dynograph.nn.Linear(4, 4)
    opt = dynograph.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = dynograph.compile(step)
    gc.collect()
    gc.disable()
    try:
        compiled(dynograph.ones(2, 4))
        assert compiled.entries                 # it traced (twice: the look-ahead)
        assert not [o for o in gc.get_objects() if isinstance(o, (Tracer, Watcher))]
    finally:
        gc.enable()


class _SaysWhenCollected:
    def __del__(self):
        print("collected")          # someone else's side effect, run by whoever collects it


def test_a_collection_is_not_part_of_a_trace():
    """Cyclic garbage made before the call is not collected inside its trace (the collector is
    off while a call traces): its finalizer's print would be taken for the function's."""
    def make_garbage():
        a = _SaysWhenCollected()
        a.me = a                    # a cycle: only the collector frees it
    step = dynograph.compile(lambda x: (x * 2).sum())
    x = dynograph.ones(3)
    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(100)           # a trace makes more objects than that: it would collect
    make_garbage()
    try:
        step(x)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert step.eager_reason is None, step.eager_reason
    assert gc.isenabled()


def test_a_trace_does_not_keep_the_intermediate_arrays_alive():
    """An op's result that the function drops is freed during the trace as it is eagerly (a
    trace that kept them ran on fresh memory, a page fault every 4 KB, at several times the
    memory)."""
    import tracemalloc

    def chain(x):
        for _ in range(24):
            x = (x * 1.0001).relu()         # 48 results of 4 MB, one or two alive at a time
        return x.sum()

    x = dynograph.ones(1 << 20)
    step = dynograph.compile(chain, backend="interpreter")
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = step(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert step.misses == 1 and out.item() == chain(x).item()
    assert peak < 40 * 2 ** 20, f"{peak / 2 ** 20:.0f} MB"


def test_a_first_call_leaves_no_reference_cycles():
    """The first call of a compiled training step (trace, passes, guard code, programs) frees
    what it made by reference counting: the trace's tables of tensors, fusion's planner and the
    guard writer were reference cycles (4600 objects of a transformer step's first call) that
    the collector found only later, after holding their memory."""
    torch = dynograph
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    head = torch.nn.Linear(8, 5)
    params = list(layer.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(head(layer(x)).reshape(-1, 5), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    x, y = torch.randn(2, 6, 8), torch.randint(0, 5, (2, 6))
    warm = torch.compile(step)
    warm(x, y)
    warm(x, y)                          # kernels and process-wide tables made once
    compiled = torch.compile(step)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        compiled(x, y)
        gc.collect()
        # ours: objects of dynograph's classes and functions (the collector also finds the
        # cycles of llvmlite's IR modules, which kernels compiled meanwhile leave)
        left = sorted({type(o).__qualname__ if type(o) is not types.FunctionType else o.__qualname__
                       for o in gc.garbage
                       if (type(o) is types.FunctionType and o.__module__.startswith("dynograph"))
                       or type(o).__module__.startswith("dynograph")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []

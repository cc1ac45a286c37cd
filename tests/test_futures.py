"""dynograph.futures against torch.futures (one process; Work.get_future runs in the 2-rank
job of tests/test_distributed_hooks.py)."""
import threading

import pytest

import dynograph
from dynograph.futures import Future, collect_all, wait_all

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", ["dynograph", "torch"])
def test_set_result_then_chain_and_callbacks(lib):
    F = Future if lib == "dynograph" else torch.futures.Future
    seen = []
    f = F()
    assert not f.done()
    chained = f.then(lambda x: x.value() + 1).then(lambda x: x.value() * 10)
    f.add_done_callback(lambda x: seen.append(x.value()))
    f.set_result(4)
    assert f.done() and chained.done()
    assert (f.wait(), f.value(), chained.wait(), seen) == (4, 4, 50, [4])
    # already complete: the callback runs inline
    assert f.then(lambda x: x.value() - 1).value() == 3
    with pytest.raises(RuntimeError, match="can only be marked completed once"):
        f.set_result(5)


@pytest.mark.parametrize("lib", ["dynograph", "torch"])
def test_exceptions_reach_wait_and_then(lib):
    F = Future if lib == "dynograph" else torch.futures.Future
    f = F()
    child = f.then(lambda x: x.value() * 2)
    f.set_exception(ValueError("boom"))
    assert f.done() and child.done()
    with pytest.raises(ValueError, match="boom"):
        f.wait()
    with pytest.raises(ValueError, match="boom"):
        f.value()
    with pytest.raises(RuntimeError, match="Got the following error when running the callback: ValueError: boom"):
        child.wait()
    g = F()
    bad = g.then(lambda x: 1 / 0)
    g.add_done_callback(lambda x: 1 / 0)    # logged, not raised
    g.set_result(1)
    assert g.value() == 1
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        bad.wait()
    with pytest.raises(AssertionError, match="not an Exception"):
        F().set_exception("not an exception")


def test_argument_errors_and_value_before_completion():
    with pytest.raises(RuntimeError, match="has not completed"):
        Future().value()
    with pytest.raises(TypeError, match="callable"):
        Future().then(3)
    with pytest.raises(TypeError, match="callable"):
        Future().add_done_callback(None)
    with pytest.raises(TypeError, match="index 1"):
        collect_all([Future(), 3])


def test_wait_blocks_until_another_thread_sets_the_result():
    f = Future()
    t = threading.Timer(0.05, f.set_result, args=(dynograph.ones(2) * 3,))
    t.start()
    assert f.wait().tolist() == [3.0, 3.0]
    t.join()


@pytest.mark.parametrize("lib", ["dynograph", "torch"])
def test_collect_all_and_wait_all(lib):
    F, mod = (Future, dynograph.futures) if lib == "dynograph" else (torch.futures.Future, torch.futures)
    a, b = F(), F()
    both = mod.collect_all([a, b])
    a.set_result(1)
    assert not both.done()
    b.set_result(2)
    assert both.done() and [f.value() for f in both.wait()] == [1, 2]
    assert mod.wait_all([a, b]) == [1, 2]
    assert mod.collect_all([]).wait() == [] and mod.wait_all([]) == []
    c = F()
    failing = mod.collect_all([a, c])
    c.set_exception(ValueError("bad"))
    assert failing.done()
    with pytest.raises(ValueError, match="bad"):
        failing.wait()
    with pytest.raises(ValueError, match="bad"):
        mod.wait_all([a, c])


def test_futures_are_generic_and_public():
    assert dynograph.futures.Future is Future and wait_all is dynograph.futures.wait_all
    assert Future[dynograph.Tensor] == Future[dynograph.Tensor]

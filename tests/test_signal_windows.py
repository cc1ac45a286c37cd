"""dynograph.signal.windows and the top-level window factories against torch: every length
from 0 up (odd and even), symmetric and periodic, each dtype, the shape parameters, the
errors for bad lengths, dtypes and parameters, and the autograd history PyTorch gives."""
import pytest

import dynograph
from conftest import assert_same, assert_same_error, eval_expr

WINDOWS = {"bartlett": {}, "blackman": {}, "cosine": {}, "hamming": {}, "hann": {}, "nuttall": {},
           "exponential": {"tau": 0.7}, "gaussian": {"std": 1.7}, "kaiser": {"beta": 5.5},
           "general_cosine": {"a": [0.5, 0.3, 0.2]}, "general_hamming": {"alpha": 0.6}}
LENGTHS = (0, 1, 2, 3, 4, 7, 10, 33)


def _both(torch, expr, **env):
    theirs = eval_expr(expr.replace("NS", "torch.signal.windows").replace("DT", "torch"),
                       {"torch": torch, **env})
    ours = eval_expr(expr.replace("NS", "dynograph.signal.windows").replace("DT", "dynograph"),
                     {"dynograph": dynograph, **env})
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, expr)
    else:
        assert not isinstance(ours, Exception), f"{expr}: {ours!r}"
        assert_same(ours, theirs, rtol=2e-6, atol=1e-7)
        assert ours.requires_grad == theirs.requires_grad
        assert (ours.grad_fn is None) == (theirs.grad_fn is None), expr
    return ours, theirs


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_windows_module(torch, name):
    kw = WINDOWS[name]
    for M in LENGTHS:
        for sym in (True, False):
            for dt in ("float32", "float64"):
                _both(torch, f"NS.{name}({M}, sym={sym}, dtype=DT.{dt}, **kw)", kw=kw)
    for default in ("", ", **kw"):                                   # default parameters
        _both(torch, f"NS.{name}(6{default})", kw=kw)
    _both(torch, f"NS.{name}(-1, **kw)", kw=kw)
    _both(torch, f"NS.{name}(5, dtype=DT.float16, **kw)", kw=kw)
    _both(torch, f"NS.{name}(5, dtype=DT.int64, **kw)", kw=kw)
    ours, theirs = _both(torch, f"NS.{name}(6, dtype=DT.float64, requires_grad=True, **kw)", kw=kw)
    if theirs.grad_fn is not None:
        theirs.sum().backward()
        ours.sum().backward()


def test_window_parameter_errors(torch):
    for expr in ("NS.exponential(5, tau=0)", "NS.exponential(5, center=1.0)",
                 "NS.exponential(5, center=1.0, sym=False)", "NS.gaussian(5, std=-1.0)",
                 "NS.kaiser(5, beta=-1.0)", "NS.general_cosine(5, a=[])",
                 "NS.general_cosine(5, a=3)", "NS.kaiser(5, beta=0.0)"):
        _both(torch, expr)


FACTORIES = {"hann_window": (), "hamming_window": ((0.3,), (0.3, 0.2)), "blackman_window": (),
             "bartlett_window": (), "kaiser_window": ((0.0,), (3.5,))}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_top_level_window_factories(torch, name):
    for L in LENGTHS + (5, 6):
        for periodic in (True, False):
            for dt in ("float32", "float64", "float16", "bfloat16"):
                tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(dt, 2e-6)
                t = getattr(torch, name)(L, periodic, dtype=getattr(torch, dt))
                d = getattr(dynograph, name)(L, periodic, dtype=getattr(dynograph, dt))
                assert_same(d, t, rtol=tol, atol=tol)
            for extra in FACTORIES[name]:
                assert_same(getattr(dynograph, name)(L, periodic, *extra),
                            getattr(torch, name)(L, periodic, *extra), rtol=2e-6, atol=1e-7)
    assert_same(getattr(dynograph, name)(9), getattr(torch, name)(9), rtol=2e-6, atol=1e-7)
    d = getattr(dynograph, name)(4, requires_grad=True)
    assert d.requires_grad and d.is_leaf
    for expr in (f"DT.{name}(-2)", f"DT.{name}(4, dtype=DT.int64)",
                 f"DT.{name}(4, dtype=DT.int32, requires_grad=True)"):
        _both(torch, expr)


def test_torch_window_names_exist(torch):
    names = [n for n in dir(torch.signal.windows) if not n.startswith("_")]
    assert [n for n in names if not hasattr(dynograph.signal.windows, n)] == []

"""Names PyTorch tutorials use at their top: torch.backends flags, torch.version, torch.range,
thread counts, cuda.get_device_name, bare @no_grad, anomaly mode's forward traceback.
The script runs as a tutorial would, in a fresh interpreter, with ``import dynograph as torch``."""
import subprocess
import sys
import textwrap
import warnings

import pytest

import dynograph
from conftest import assert_same, assert_same_error, eval_expr

SCRIPT = textwrap.dedent('''
    import warnings
    import dynograph as torch
    import dynograph.backends.cudnn as cudnn

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    assert cudnn.benchmark and torch.backends.cudnn.enabled
    assert not torch.backends.mps.is_available() and not torch.cuda.is_available()
    assert torch.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    assert torch.version.cuda is None and torch.version.__version__ == torch.__version__
    device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    torch.set_num_threads(1)
    assert torch.get_num_threads() == 1

    @torch.no_grad
    def evaluate(x):
        return (x * 2).requires_grad

    assert evaluate(torch.ones(2, requires_grad=True)) is False
    print(torch.randint(0, 9, size=(1,), device=device).shape, torch.is_anomaly_enabled())
''')


def test_tutorial_prologue_runs_as_a_script():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "dynograph.Size([1]) False"


def test_set_num_threads_drives_kernels_and_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from dynograph.runtime import threads
    before = dynograph.get_num_threads()
    try:
        dynograph.set_num_threads(1)
        assert threads.count() == 1
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas")
    finally:
        dynograph.set_num_threads(before)
    assert threads.count() == before


@pytest.mark.parametrize("expr", [
    "T.set_num_threads(0)", "T.set_num_threads(1.5)", "T.cuda.is_available()", "T.is_anomaly_enabled()",
    "T.backends.cudnn.is_available()", "T.backends.mps.is_built()", "T.version.hip",
    "T.range(1, 4)", "T.range(0, 1, 0.1)", "T.range(5, 1, -2)", "T.range(1, 4, dtype=T.int64)",
    "T.range(1, 4, 0)", "T.range(4, 1)", "T.range(start=0, end=2, requires_grad=True)",
])
def test_against_torch(torch, expr):
    ours, theirs = eval_expr(expr, {"T": dynograph}), eval_expr(expr, {"T": torch})
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, expr)
    else:
        assert_same(ours, theirs)


def test_range_warns_like_torch(torch):
    for T in (dynograph, torch):
        with pytest.warns(UserWarning, match=r"range is deprecated .* produces values in \[start, end\)"):
            T.range(0, 2)


def test_cuda_get_device_name_without_a_gpu():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        dynograph.cuda.get_device_name(0)


@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_bare_decorators(torch, name):
    def probe():
        return dynograph.is_grad_enabled(), dynograph.is_inference_mode_enabled()
    ours = getattr(dynograph, name)(probe)
    with dynograph.no_grad() if name == "enable_grad" else dynograph.enable_grad():
        assert ours() == {"no_grad": (False, False), "enable_grad": (True, False),
                          "inference_mode": (False, True)}[name]
    assert callable(getattr(torch, name)(lambda: None))      # torch accepts the bare form too


def test_anomaly_mode_names_the_forward_line():
    x = dynograph.ones(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dynograph.autograd.detect_anomaly():
            y = x.exp()
            y.add_(1)
            with pytest.raises(RuntimeError, match="The variable in question was changed"):
                y.sum().backward()
    texts = [str(w.message) for w in caught]
    error = next(t for t in texts if t.startswith("Error detected in ExpBackward0."))
    assert "Traceback of forward call that caused the error:" in error and "y = x.exp()" in error

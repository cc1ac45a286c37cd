"""The examples run to completion (README's first command runs examples/demo.py)."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(name):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_demo_trains_a_cnn_on_digits():
    out = _run("demo.py")
    assert "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in out
    accuracy = float(re.search(r"final test accuracy: ([\d.]+)%", out).group(1))
    assert accuracy >= 95.0, out
    assert re.search(r"compiled training step: \d+ graphs, \d+ replays", out)


def test_tour_runs_and_learns():
    out = _run("tour.py")
    assert "d(out)/dw = tensor([[4.5000, 4.5000]," in out
    assert "learned slope 3.0" in out

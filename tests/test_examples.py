"""The examples run to completion (README's first command runs examples/demo.py)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_demo_runs_and_learns():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "d(out)/dw = tensor([[4.5000, 4.5000]," in r.stdout
    assert "learned slope 3.0" in r.stdout

"""The examples run to completion (README's first command runs examples/demo.py)."""
import pathlib
import re
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(name):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / name)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_readme_first_command_installs_from_the_lock_and_the_demo_trains(tmp_path):
    """README's first command on a fresh machine: a new virtual environment, the project
    installed (not editable) with the pinned versions of constraints.txt, then the demo."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
                              f"{ROOT}[examples]"], capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    r = subprocess.run([python, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in out
    accuracy = float(re.search(r"final test accuracy: ([\d.]+)%", out).group(1))
    assert accuracy >= 95.0, out
    assert re.search(r"compiled training step: \d+ graphs, \d+ replays", out)
    imported = subprocess.run([python, "-c", "import dynograph; print(dynograph.__file__)"],
                              capture_output=True, text=True, cwd=tmp_path).stdout
    assert imported.startswith(str(env)), imported          # the installed copy, not the source


def test_tour_runs_and_learns():
    out = _run("tour.py")
    assert "d(out)/dw = tensor([[4.5000, 4.5000]," in out
    assert "learned slope 3.0" in out

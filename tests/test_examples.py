"""The examples run to completion (README's first command runs examples/demo.py)."""
import os
import pathlib
import re
import subprocess
import sys
import venv

import pytest

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


def _smoke(name, tmp_path, *flags):
    """``python examples/NAME --smoke``, in a scratch folder (checkpoints and logs land there).

    BLAS uses one thread: on a busy machine with few cores, OpenBLAS's spinning threads can make
    small matrix products a hundred times slower."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / name), "--smoke", *flags],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "smoke:" in r.stdout, r.stdout
    return r.stdout


def test_tensors_tutorial(tmp_path):
    out = _smoke("tensors.py", tmp_path)
    assert "Shape of tensor: dynograph.Size([3, 4])" in out
    assert "12.0 <class 'float'>" in out
    assert "n: [2. 2. 2. 2. 2.]" in out


def test_autograd_tutorial(tmp_path):
    out = _smoke("autograd.py", tmp_path)
    assert "Gradient function for z = <AddBackward0 object at" in out
    assert "gradcheck of LegendrePolynomial3: True" in out
    assert "anomaly mode caught: Function 'SqrtBackward0' returned nan values" in out
    assert "Self CPU time total" in out


def test_linear_regression(tmp_path):
    out = _smoke("linear_regression.py", tmp_path, "--plot")
    assert "Linear(in_features=1, out_features=1, bias=True)" in out
    assert "[manual] w = 2.0" in out
    assert "saved linear_regression.png" in out          # matplotlib is a test dependency
    assert (tmp_path / "linear_regression.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("flags", [(), ("--compile",)], ids=["eager", "compiled"])
def test_cifar10_tutorial(tmp_path, flags):
    out = _smoke("cifar10_cnn.py", tmp_path, *flags)
    assert "(fc3): Linear(in_features=84, out_features=10, bias=True)" in out
    assert "Finished Training" in out
    assert re.search(r"Accuracy of the network on the 64 test images: \d+ %", out)
    assert "Accuracy for class: " in out
    assert (tmp_path / "cifar_net.pth").exists()
    assert list((tmp_path / "runs" / "cifar10_cnn").glob("events.out.tfevents.*"))


def test_digits_cnn(tmp_path):
    out = _smoke("digits_cnn.py", tmp_path)
    assert re.search(r"epoch  2  loss [\d.]+  test accuracy", out)
    assert "final test accuracy:" in out


def test_char_transformer(tmp_path):
    out = _smoke("char_transformer.py", tmp_path)
    assert "validation loss after training" in out
    assert "--- sample ---\nThe " in out

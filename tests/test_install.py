"""Packaging: compiler/ and runtime/ install as dynograph.compiler / dynograph.runtime only."""
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_DIRS = {"dynograph": "dynograph", "compiler": "dynograph/compiler", "runtime": "dynograph/runtime"}


def _expected_modules():
    """Every package of the source tree, under the name it must be installed as."""
    out = set()
    for src, dest in SOURCE_DIRS.items():
        for init in (ROOT / src).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / src)
            out.add("/".join([dest, *rel.parts]))
    return out


def _import_everything(env_path=None):
    code = (
        "import importlib, pkgutil, dynograph, dynograph.compiler, dynograph.runtime\n"
        "names = [m.name for m in pkgutil.walk_packages(dynograph.__path__, 'dynograph.')]\n"
        "[importlib.import_module(n) for n in names]\n"
        "import importlib.util as u\n"
        "assert u.find_spec('compiler') is None and u.find_spec('runtime') is None, 'top-level leak'\n"
        "print(dynograph.__file__)\n")
    env = dict(os.environ)
    if env_path:
        env["PYTHONPATH"] = str(env_path)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd="/")


def test_installed_tree_imports_every_subpackage():
    r = _import_everything()
    assert r.returncode == 0, r.stderr


def test_wheel_holds_every_package_and_no_top_level_compiler(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"cannot build a wheel here: {built.stderr.strip()[-200:]}")
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("dynograph-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(n.startswith(("compiler/", "runtime/")) for n in names)
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("__init__.py")}
    assert _expected_modules() <= packages, _expected_modules() - packages

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    r = _import_everything(target)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(str(target)), r.stdout


# ---------------------------------------------------------------- the dependency lock

def _requirements():
    """Every requirement of pyproject.toml that README's commands install (not the cuda extra)."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return project["dependencies"] + extras["test"] + extras["examples"]


def test_the_lock_pins_every_requirement_inside_its_range():
    from packaging.requirements import Requirement
    from tools.newest_deps import _normal, read_lock
    pins = read_lock()
    for line in _requirements():
        req = Requirement(line)
        assert _normal(req.name) in pins, f"constraints.txt does not pin {req.name}"
        assert req.specifier.contains(pins[_normal(req.name)][1], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[_normal(req.name)][1]} outside {req.specifier}"


def test_readme_and_ci_install_with_the_lock():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("pip install")]
    assert len(commands) == 2 and all("-c constraints.txt" in c for c in commands), commands
    test_command = commands[1].split("&&", 1)[1].strip()
    assert test_command in ci, "CI must run README's test command"
    assert "-c constraints.txt" in ci and "--no-cache-dir" in ci
    # the pinned environment is exactly what is installed here (CI's venv): no drift
    from tools.newest_deps import _freeze, drift, read_lock
    if os.environ.get("CI") == "true":
        assert not drift(read_lock(), _freeze(sys.executable)), "installed versions differ from the lock"

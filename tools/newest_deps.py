"""Run the test suite against the newest dependency versions pyproject.toml allows.

README's commands and CI install the versions pinned in constraints.txt, so users get what CI
tested.  Run this before each release (and from time to time) to find drift before users do:
it builds a fresh virtual environment in a temporary folder, installs the project with its
test extra WITHOUT the pins (so pip picks the newest allowed releases), prints every version
that differs from constraints.txt, and runs README's test command there.

    python -m tools.newest_deps                 # report the drift and run the suite
    python -m tools.newest_deps --write-lock    # ... and rewrite constraints.txt if it passes
    python -m tools.newest_deps --no-tests      # only report the drift

Exit status: 0 when the suite passes (or --no-tests), the suite's status otherwise.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile
import venv

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCK = ROOT / "constraints.txt"
EXTRAS = ".[test,examples]"


def read_lock(path=LOCK):
    """{normalized name: (name as written, version)} of the pins in a constraints file."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = (s.strip() for s in line.split("==", 1))
            pins[_normal(name)] = (name, version)
    return pins


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _freeze(python):
    out = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                         capture_output=True, text=True).stdout
    pins = {}
    for line in out.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_normal(name)] = (name, version.split("+", 1)[0])   # 2.13.0+cpu -> 2.13.0
    return pins


def drift(old, new):
    """Lines describing each package whose version differs between two pin tables."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, (key, None))[1], new.get(key, (key, None))[1]
        if a != b:
            lines.append(f"  {new.get(key, old.get(key))[0]}: {a or 'not pinned'} -> {b or 'not installed'}")
    return lines


def write_lock(pins, path=LOCK):
    """Rewrite the pins of ``path``, keeping its leading comment."""
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    body = [f"{name}=={version}" for _, (name, version) in sorted(pins.items())]
    path.write_text("\n".join(header + body) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-lock", action="store_true",
                        help="rewrite constraints.txt with the new versions when the suite passes")
    parser.add_argument("--no-tests", action="store_true", help="only install and report the drift")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dynograph-newest-") as tmp:
        venv.create(tmp, with_pip=True)
        python = str(pathlib.Path(tmp) / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", "--upgrade",
                        "--upgrade-strategy", "eager", "-e", EXTRAS], cwd=ROOT, check=True)
        newest = _freeze(python)
        changed = drift(read_lock(), newest)
        print("versions that differ from constraints.txt:" if changed else
              "constraints.txt already holds the newest allowed versions")
        print("\n".join(changed))
        if args.no_tests:
            return 0
        status = subprocess.run([python, "-m", "pytest", "-n", "2", "tests"], cwd=ROOT).returncode
        if status == 0 and args.write_lock and changed:
            write_lock(newest)
            print("constraints.txt rewritten: commit it with the suite's result")
        return status


if __name__ == "__main__":
    sys.exit(main())

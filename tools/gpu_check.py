"""The GPU check (tools/gpu_check.sh, which runs this with the machine's Python): on a machine with
an NVIDIA GPU and no network, a fresh virtual environment gets dynograph, its dependencies and
the CUDA extra from the wheels in WHEEL_DIR alone (tools/gpu_wheels.sh fills it), then the GPU
tests and benchmarks run, and one JSON report says what happened.

    tools/gpu_check.sh WHEEL_DIR [OUT_JSON] [--tests GLOB,...] [--budget S] [--keep] [--run-without-gpu]

Stages, in order, each with its own time limit and all within ``--budget`` (480 s):

  venv         python -m venv --without-pip (with the system's site-packages, where cupy and a
               CUDA build of torch live on GPU machines; --isolated leaves them out), then pip
               itself from WHEEL_DIR's pip wheel
  install      pip install --no-index --find-links WHEEL_DIR: dynograph[cuda,examples] (its wheel
               in WHEEL_DIR, else this source tree), pytest and pytest-xdist, pinned by
               constraints.txt
  libcuda      the pycuda wheel and the installed extension carry no libcuda (the stand-in
               tools/build_pycuda_wheel.sh links against) and record no run path; the
               libcuda.so.1 the loader finds is the driver's, outside the venv and WHEEL_DIR
  environment  GPU name, compute capability, memory, driver version (nvidia-smi and the driver
               itself), kernel compiler, package versions
  tests        pytest on the GPU tests: the files tests/test_cuda*.py (--tests to change it)
  demo         examples/demo.py --device cuda, once the demo takes --device
  bench        tools/gpu_bench.py (its JSON report goes into this one)

Without a usable GPU the last three are "skipped: <reason>" (``--run-without-gpu`` runs them
anyway: the tests then skip what needs a GPU).  Exit status: 0 every stage passed, 1 a stage
failed, 2 bad arguments, 3 no usable GPU.  This module uses the standard library only; its
``environment`` and ``libcuda`` subcommands run inside the new environment.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET_S = 480
TAIL_CHARS = 4000
NO_GPU = 3
# each stage's own limit (seconds); what is left of the budget limits it too
LIMITS = {"venv": 60, "pip": 60, "install": 150, "libcuda": 30, "environment": 60, "tests": 270,
          "demo": 90, "bench": 240}
DEFAULT_TESTS = "tests/test_cuda*.py"
PACKAGES = ("dynograph", "numpy", "scipy", "ml_dtypes", "llvmlite", "networkx", "pycuda",
            "nvidia-cuda-nvrtc", "pytest", "pytest-xdist", "torch", "cupy", "cupy-cuda12x",
            "cupy-cuda13x")


# -- stages ---------------------------------------------------------------------------------------
def tail(text, n=TAIL_CHARS):
    text = text or ""
    return text if len(text) <= n else "..." + text[-n:]


def run_stage(name, command, timeout, cwd=None, env=None):
    """Run ``command`` (its output and errors together) within ``timeout`` seconds: (the stage's
    record, the whole output).  A command still running at the limit is killed with its whole
    process group."""
    record = {"name": name, "command": [str(c) for c in command], "timeout_s": round(timeout, 1)}
    start = time.monotonic()
    try:
        proc = subprocess.Popen(record["command"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as e:
        return {**record, "status": f"failed: {e}", "exit_code": None, "duration_s": 0.0,
                "output_tail": ""}, ""
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = "passed" if proc.returncode == 0 else f"failed (exit status {proc.returncode})"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = f"timed out after {timeout:.0f} s"
    text = out.decode("utf-8", "replace")
    return {**record, "status": status, "exit_code": proc.returncode,
            "duration_s": round(time.monotonic() - start, 2), "output_tail": tail(text)}, text


def skipped(name, reason):
    return {"name": name, "status": f"skipped: {reason}", "duration_s": 0.0}


def last_json(text):
    """The JSON document on the last line of ``text`` that holds one, or None."""
    for line in reversed((text or "").strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def pytest_counts(text):
    """{"passed": 3, "skipped": 1, ...} from pytest's summary line."""
    lines = [ln for ln in (text or "").splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
    if not lines:
        return {}
    counts = {}
    for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)",
                              lines[-1]):
        counts["errors" if what.startswith("error") else what] = int(n)
    return counts


class Budget:
    """The time left of the whole check: each stage's limit is its own or what is left."""

    def __init__(self, seconds, clock=time.monotonic):
        self.clock, self.deadline = clock, clock() + seconds

    def limit(self, stage):
        return min(LIMITS[stage], self.deadline - self.clock())


def overall(stages, gpu_reason=None):
    """(status text, exit status) of the stage records; ``gpu_reason``: why no GPU was used."""
    failed = [s["name"] for s in stages if not (s["status"] == "passed" or s["status"].startswith("skipped"))]
    if failed:
        return f"failed: {', '.join(failed)}", 1
    if gpu_reason is not None:
        return gpu_reason, NO_GPU
    return "passed", 0


def write_json(path, document):
    """Write ``document`` to ``path`` whole or not at all (a temporary file renamed)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpu-check-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(document, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


# -- WHEEL_DIR ------------------------------------------------------------------------------------
def python_tag(version=None):
    major, minor = (version or sys.version_info)[:2]
    return f"cp{major}{minor}"


def wheels(wheel_dir, project):
    """The wheel files of ``project`` in ``wheel_dir`` (names normalized as wheels write them)."""
    stem = re.sub(r"[-_.]+", "_", project).lower()
    return sorted(p for p in glob.glob(os.path.join(wheel_dir, "*.whl"))
                  if re.sub(r"[-_.]+", "_", os.path.basename(p).split("-")[0]).lower() == stem)


def missing_wheels(wheel_dir, tag):
    """What WHEEL_DIR lacks for this Python, as sentences (empty when nothing)."""
    problems = []
    for project in ("pip", "numpy", "llvmlite", "nvidia-cuda-nvrtc", "pytest"):
        if not wheels(wheel_dir, project):
            problems.append(f"no {project} wheel")
    pycuda = wheels(wheel_dir, "pycuda")
    if not any(f"-{tag}-" in os.path.basename(p) for p in pycuda):
        found = ", ".join(os.path.basename(p) for p in pycuda) or "none"
        problems.append(f"no pycuda wheel for {tag} (found: {found}); build one with "
                        f"tools/gpu_wheels.sh WHEEL_DIR python{tag[2]}.{tag[3:]}")
    if not wheels(wheel_dir, "dynograph") and not wheels(wheel_dir, "setuptools"):
        problems.append("neither a dynograph wheel nor setuptools (to build this source tree)")
    return problems


# -- subcommands run inside the new environment ----------------------------------------------------
def carried_libcuda(wheel_dir):
    """The pycuda wheels of ``wheel_dir`` that carry a libcuda, as sentences."""
    problems = []
    for whl in wheels(wheel_dir, "pycuda"):
        with zipfile.ZipFile(whl) as z:
            carried = [n for n in z.namelist() if "libcuda" in os.path.basename(n)]
        if carried:
            problems.append(f"{os.path.basename(whl)} carries {carried}")
    return problems


def libcuda_findings(wheel_dir, venv):
    """Whether a libcuda stand-in could be loaded: libcuda files in the pycuda wheel or the
    installed package, run paths recorded in pycuda's extension, and where the loader finds
    libcuda.so.1 (it must be outside the venv, WHEEL_DIR and the temporary folder)."""
    import pycuda
    problems, notes = carried_libcuda(wheel_dir), []
    package = os.path.dirname(pycuda.__file__)
    for base, _, files in os.walk(package):
        problems += [f"installed pycuda holds {os.path.join(base, f)}" for f in files if "libcuda" in f]
    extensions = glob.glob(os.path.join(package, "_driver*.so"))
    if not extensions:
        problems.append(f"no _driver extension in {package}")
    suspicious = [os.path.realpath(p) for p in (venv, wheel_dir, tempfile.gettempdir())]
    for so in extensions:
        if shutil.which("readelf"):
            dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
            paths = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.*)\]", dyn)
            if paths:
                problems.append(f"{os.path.basename(so)} records run paths {paths}")
            if "libcuda.so.1" not in dyn:
                notes.append(f"{os.path.basename(so)} does not name libcuda.so.1")
        if shutil.which("ldd"):
            out = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
            found = re.search(r"libcuda\.so\.1 => (not found|\S+)", out)
            where = found.group(1) if found else "not found"
            if where == "not found":
                notes.append("the loader finds no libcuda.so.1 (no NVIDIA driver here)")
            else:
                real = os.path.realpath(where)
                if any(real.startswith(s + os.sep) for s in suspicious):
                    problems.append(f"libcuda.so.1 resolves to {real}, inside {suspicious}")
                notes.append(f"libcuda.so.1 => {real} ({os.path.getsize(real)} bytes)")
    for entry in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        for f in glob.glob(os.path.join(entry, "libcuda.so*")):
            real = os.path.realpath(f)
            if any(real.startswith(s + os.sep) for s in suspicious):
                problems.append(f"LD_LIBRARY_PATH holds {f}")
    return {"ok": not problems, "problems": problems, "notes": notes, "extensions": extensions}


def package_versions():
    from importlib import metadata
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def environment_info():
    """The device as dynograph and the driver see it, the kernel compiler, package versions."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_bench
    env = gpu_bench.environment()
    env["packages"] = package_versions()
    try:
        from dynograph.runtime import cuda_nvrtc
        nvrtc = cuda_nvrtc.version()
        env["nvrtc"] = "%d.%d" % nvrtc
        driver = env["gpu"] and env["gpu"]["driver_cuda_version"]
        if driver and int(driver.split(".")[0]) < nvrtc[0]:
            env["warning"] = (f"NVRTC {env['nvrtc']} makes code for CUDA {nvrtc[0]} drivers; this "
                              f"driver supports CUDA {driver}: kernels will not load (install the "
                              f"nvidia-cuda-nvrtc wheel of the driver's CUDA major version)")
    except Exception as e:
        env["nvrtc"] = f"unavailable: {type(e).__name__}: {e}"
    return env


def nvidia_smi():
    """nvidia-smi's view of the GPUs (works without the venv), or why there is none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi not found"
    fields = "name,compute_cap,driver_version,memory.total,pci.bus_id"
    proc = subprocess.run([exe, f"--query-gpu={fields}", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode:
        return f"nvidia-smi failed: {tail(proc.stdout + proc.stderr, 500)}"
    return [dict(zip(fields.split(","), (v.strip() for v in line.split(","))))
            for line in proc.stdout.strip().splitlines()]


def git_commit():
    if not shutil.which("git"):
        return None
    proc = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True)
    if proc.returncode:
        return None
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return proc.stdout.strip() + (" (modified)" if dirty else "")


# -- the check ------------------------------------------------------------------------------------
def demo_takes_device():
    try:
        with open(os.path.join(ROOT, "examples", "demo.py")) as f:
            return "--device" in f.read()
    except OSError:
        return False


def test_files(patterns):
    files = []
    for pattern in patterns:
        files += sorted(glob.glob(os.path.join(ROOT, pattern)))
    return list(dict.fromkeys(files))


class Check:
    """One run of the check: its stages in order, its report."""

    def __init__(self, args):
        self.args = args
        self.wheel_dir = os.path.realpath(args.wheel_dir)
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.budget = Budget(args.budget)
        self.work = tempfile.mkdtemp(prefix="dynograph-gpu-check-")
        self.venv = os.path.join(self.work, "venv")
        self.py = os.path.join(self.venv, "bin", "python")
        # only WHEEL_DIR: no package index or other wheel folders from this machine's pip settings
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        self.env = {**env, "DYNOGRAPH_CACHE_DIR": os.path.join(self.work, "cache"), "PIP_NO_INDEX": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CONFIG_FILE": os.devnull,
                    "PYTHONNOUSERSITE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        self.stages = []
        self.report = {
            "report": "dynograph GPU check (tools/gpu_check.sh)", "version": 1,
            "started": self.started.isoformat(timespec="seconds"),
            "settings": {"wheel_dir": self.wheel_dir, "source_tree": ROOT, "git_commit": git_commit(),
                         "budget_s": args.budget, "stage_limits_s": LIMITS,
                         "system_site_packages": not args.isolated, "tests": args.tests,
                         "run_without_gpu": args.run_without_gpu, "work_dir": self.work},
            "host": {"hostname": platform.node(), "platform": platform.platform(),
                     "python": f"{platform.python_version()} ({sys.executable})",
                     "cpus": os.cpu_count(), "nvidia_smi": nvidia_smi()},
            "environment": None, "stages": self.stages, "benchmarks": None}

    def stage(self, name, command, finish=None):
        """Run a stage unless the budget is spent (``finish(record, output)`` amends its record);
        True when it passed."""
        left = self.budget.limit(name)
        if left < 5:
            record = skipped(name, f"the check's {self.args.budget} s budget was spent")
        else:
            print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
            record, output = run_stage(name, command, left, env=self.env, cwd=self.work)
            if finish is not None:
                finish(record, output)
        self.add(record)
        return record["status"] == "passed"

    def add(self, record):
        self.stages.append(record)
        print(f"gpu_check: {record['name']}: {record['status']} ({record['duration_s']} s)",
              file=sys.stderr, flush=True)

    def install(self):
        """The venv with pip, then dynograph and the test runner: True when installed."""
        problems = missing_wheels(self.wheel_dir, python_tag())
        if problems:
            self.add({"name": "wheels", "duration_s": 0.0,
                      "status": f"failed: WHEEL_DIR {self.wheel_dir}: " + "; ".join(problems)})
            return False
        venv = [sys.executable, "-m", "venv", "--without-pip"]
        venv += [] if self.args.isolated else ["--system-site-packages"]
        if not self.stage("venv", venv + [self.venv]):
            return False
        pip_wheel = wheels(self.wheel_dir, "pip")[-1]
        if not self.stage("pip", [self.py, os.path.join(pip_wheel, "pip"), "install", "--no-index",
                                  "--find-links", self.wheel_dir, "--ignore-installed", "pip"]):
            return False
        own = wheels(self.wheel_dir, "dynograph")
        self.report["settings"]["installed_from"] = own[-1] if own else "the source tree"
        target = f"{own[-1] if own else ROOT}[cuda,examples]"
        return self.stage("install", [self.py, "-m", "pip", "install", "--no-index", "--find-links",
                                      self.wheel_dir, "--no-cache-dir", "--ignore-installed", "-c",
                                      os.path.join(ROOT, "constraints.txt"), target, "pytest",
                                      "pytest-xdist"])

    def probe(self):
        """The libcuda and environment stages: None when a GPU can be used, else why not."""
        self.stage("libcuda", [self.py, __file__, "libcuda", self.wheel_dir, self.venv])

        def read(record, output):
            self.report["environment"] = last_json(output)
        self.stage("environment", [self.py, __file__, "environment"], read)
        info = self.report["environment"]
        if info is None:
            return "no usable GPU: the environment stage reported nothing"
        if info.get("gpu") is None:
            return f"no usable GPU: {info.get('reason')}"
        return None

    def gpu_stages(self):
        files = test_files(self.args.tests)
        if not files:
            self.add({"name": "tests", "duration_s": 0.0,
                      "status": f"failed: no test files match {self.args.tests}"})
        else:
            workers = min(8, os.cpu_count() or 1)
            # plugins are named, not found: the system's site-packages may hold others
            self.stage("tests", [self.py, "-m", "pytest", "-rfEs", "-p", "no:cacheprovider", "-p",
                                 "xdist.plugin", "-n", str(workers), "--rootdir", ROOT, *files],
                       lambda record, output: record.update(counts=pytest_counts(output)))
        if demo_takes_device():
            self.stage("demo", [self.py, os.path.join(ROOT, "examples", "demo.py"), "--device", "cuda"])
        else:
            self.add(skipped("demo", "examples/demo.py takes no --device option yet"))
        out = os.path.join(self.work, "bench.json")

        def read(record, output):
            try:
                with open(out) as f:
                    self.report["benchmarks"] = json.load(f)
            except (OSError, ValueError):
                return
            if record["exit_code"] == NO_GPU:       # its own "skipped: <reason>"
                record["status"] = self.report["benchmarks"]["status"]
        self.stage("bench", [self.py, os.path.join(ROOT, "tools", "gpu_bench.py"), "--out", out], read)

    def run(self):
        """Every stage, then the report written: the exit status."""
        installed = self.install()
        gpu_reason = self.probe() if installed else "nothing installed"
        if gpu_reason is None or (installed and self.args.run_without_gpu):
            self.gpu_stages()
        else:
            for name in ("tests", "demo", "bench"):
                self.add(skipped(name, gpu_reason))
        report = self.report
        report["overall"], status = overall(self.stages, gpu_reason)
        finished = datetime.datetime.now(datetime.timezone.utc)
        report["finished"] = finished.isoformat(timespec="seconds")
        report["duration_s"] = round((finished - self.started).total_seconds(), 1)
        report["within_budget"] = report["duration_s"] <= self.args.budget
        write_json(self.args.out_json, report)
        print(f"gpu_check: {report['overall']}; report in {os.path.abspath(self.args.out_json)}",
              file=sys.stderr)
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return status


def parse(argv):
    p = argparse.ArgumentParser(prog="tools/gpu_check.sh", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("wheel_dir", help="the wheels tools/gpu_wheels.sh collected")
    p.add_argument("out_json", nargs="?", default="gpu_check.json",
                   help="where the report goes (default gpu_check.json)")
    p.add_argument("--tests", default=DEFAULT_TESTS,
                   help=f"comma-separated globs of test files in the source tree (default {DEFAULT_TESTS})")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check")
    p.add_argument("--isolated", action="store_true",
                   help="leave the system's site-packages (cupy, torch) out of the environment")
    p.add_argument("--run-without-gpu", action="store_true",
                   help="run the tests, demo and benchmarks even without a usable GPU")
    p.add_argument("--keep", action="store_true", help="keep the work folder (venv, caches)")
    args = p.parse_args(argv)
    args.tests = [t for t in args.tests.split(",") if t]
    if not os.path.isdir(args.wheel_dir):
        p.error(f"WHEEL_DIR {args.wheel_dir} is not a folder")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["libcuda"]:
        findings = libcuda_findings(*argv[1:3])
        print(json.dumps(findings))
        return 0 if findings["ok"] else 1
    if argv[:1] == ["environment"]:
        print(json.dumps(environment_info(), default=str))
        return 0
    if sys.version_info < (3, 10):
        print("tools/gpu_check.sh needs Python 3.10 or later (set PYTHON)", file=sys.stderr)
        return 2
    return Check(parse(argv)).run()


if __name__ == "__main__":
    sys.exit(main())

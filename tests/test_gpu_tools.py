"""tools/gpu_check.py (tools/gpu_check.sh) and tools/gpu_bench.py without a GPU: the stage runner,
its time limits and the JSON report; the benchmarks' statistics and report; every benchmark kernel
compiled for sm_90; the backend-level benchmarks run whole on a fake driver whose kernels are
the CPU emulation's, so the buffers, checks and figures are those a GPU run reports.

The whole check (a venv installed from a wheel folder with --no-index, every stage, the report)
runs only when DYNOGRAPH_GPU_CHECK_WHEELS names a folder filled by tools/gpu_wheels.sh: it takes
a minute or two."""
import json
import os
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import pytest

import dynograph
from dynograph.compiler.cuda import backend as cb
from dynograph.compiler.cuda import emulate
from dynograph.runtime import backend as runtime_backend
from dynograph.runtime import cuda_driver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(__file__))
import gpu_bench  # noqa: E402
import gpu_check  # noqa: E402
from test_cuda_runtime import FakeDriver, use_driver  # noqa: E402


@pytest.fixture
def fresh(monkeypatch):
    """The driver module with nothing probed yet (restored afterwards)."""
    monkeypatch.setattr(cuda_driver, "_state", {})
    monkeypatch.setattr(cuda_driver, "_devices", {})
    monkeypatch.setattr(cuda_driver, "_thread", threading.local())
    return monkeypatch


# -- the stage runner and the report ----------------------------------------------------------------
def test_a_stage_records_status_duration_and_the_output_tail():
    record, output = gpu_check.run_stage("hello", [sys.executable, "-c", "print('x' * 5000 + 'end')"], 30)
    assert output == "x" * 5000 + "end\n"
    assert record["status"] == "passed" and record["exit_code"] == 0
    assert record["output_tail"].endswith("end\n") and len(record["output_tail"]) <= gpu_check.TAIL_CHARS + 3
    assert record["command"][0] == sys.executable and 0 <= record["duration_s"] < 30

    record, _ = gpu_check.run_stage("fails", [sys.executable, "-c", "import sys; sys.exit('broken')"], 30)
    assert record["status"] == "failed (exit status 1)" and "broken" in record["output_tail"]

    record, _ = gpu_check.run_stage("missing", ["/nonexistent/program"], 30)
    assert record["status"].startswith("failed: ") and record["exit_code"] is None


def test_a_stage_past_its_limit_is_killed_with_its_children():
    # the child's own child would keep the pipe open (and the check waiting) if only it were killed
    script = ("import subprocess, sys, time; print('started', flush=True); "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    start = time.monotonic()
    record, _ = gpu_check.run_stage("slow", [sys.executable, "-c", script], 2)
    assert time.monotonic() - start < 20
    assert record["status"] == "timed out after 2 s" and "started" in record["output_tail"]


def test_the_budget_limits_each_stage():
    now = [100.0]
    budget = gpu_check.Budget(480, clock=lambda: now[0])
    assert budget.limit("libcuda") == gpu_check.LIMITS["libcuda"]
    now[0] += 400
    assert budget.limit("tests") == 80


def test_overall_status_and_exit_status():
    passed = {"name": "a", "status": "passed"}
    skipped = {"name": "b", "status": "skipped: examples/demo.py takes no --device option yet"}
    failed = {"name": "c", "status": "timed out after 3 s"}
    assert gpu_check.overall([passed, skipped]) == ("passed", 0)
    assert gpu_check.overall([passed, failed, skipped]) == ("failed: c", 1)
    assert gpu_check.overall([passed, skipped], "no usable GPU: no driver") == ("no usable GPU: no driver", 3)
    assert gpu_check.overall([failed], "no usable GPU: no driver")[1] == 1


def test_parsing_pytest_summaries_and_json_lines():
    text = "....s\n=== short test summary ===\nSKIPPED [1] x.py:3: no GPU\n3 passed, 1 skipped, 2 errors in 4.1s\n"
    assert gpu_check.pytest_counts(text) == {"passed": 3, "skipped": 1, "errors": 2}
    assert gpu_check.pytest_counts("1 failed, 7 passed, 1 deselected in 0.3s") == \
        {"failed": 1, "passed": 7, "deselected": 1}
    assert gpu_check.pytest_counts("no tests ran in 0.01s") == {}
    assert gpu_check.last_json('noise\n{"gpu": null}\nwarning: tail\n') == {"gpu": None}
    assert gpu_check.last_json("no json") is None


def test_the_report_is_written_whole(tmp_path):
    path = tmp_path / "deep" / "report.json"
    gpu_check.write_json(str(path), {"stages": [{"name": "a", "duration_s": 1.5}]})
    assert json.loads(path.read_text()) == {"stages": [{"name": "a", "duration_s": 1.5}]}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def _wheel(folder, name, members=("pkg/__init__.py",)):
    with zipfile.ZipFile(folder / name, "w") as z:
        for m in members:
            z.writestr(m, "")


def test_wheel_folder_checks(tmp_path):
    tag = gpu_check.python_tag()
    problems = gpu_check.missing_wheels(str(tmp_path), tag)
    assert any("no pip wheel" in p for p in problems)
    assert any(f"no pycuda wheel for {tag} (found: none)" in p for p in problems)
    for name in ["pip-26.3-py3-none-any.whl", "numpy-2.4.6-cp311-cp311-linux_x86_64.whl",
                 "llvmlite-0.50.0-cp311-cp311-linux_x86_64.whl", "pytest-9.2.0-py3-none-any.whl",
                 "nvidia_cuda_nvrtc-13.5.37-py3-none-manylinux2010_x86_64.whl",
                 "dynograph-0.1.0-py3-none-any.whl", "pycuda-2026.1-cp39-cp39-linux_x86_64.whl"]:
        _wheel(tmp_path, name)
    assert gpu_check.wheels(str(tmp_path), "nvidia-cuda-nvrtc")
    (problem,) = gpu_check.missing_wheels(str(tmp_path), "cp311")
    assert "no pycuda wheel for cp311 (found: pycuda-2026.1-cp39" in problem and "python3.11" in problem
    _wheel(tmp_path, "pycuda-2026.1-cp311-cp311-linux_x86_64.whl",
           ["pycuda/_driver.cpython-311-x86_64-linux-gnu.so", "pycuda/libcuda.so.1"])
    assert gpu_check.missing_wheels(str(tmp_path), "cp311") == []
    (carried,) = gpu_check.carried_libcuda(str(tmp_path))
    assert "pycuda-2026.1-cp311" in carried and "pycuda/libcuda.so.1" in carried


def test_a_wheel_folder_lacking_wheels_still_gives_a_report(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([os.path.join(ROOT, "tools", "gpu_check.sh"), str(tmp_path), str(out)],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert report["overall"] == "failed: wheels" and report["within_budget"]
    assert [s["name"] for s in report["stages"]] == ["wheels", "tests", "demo", "bench"]
    assert "no pip wheel" in report["stages"][0]["status"]
    assert {s["status"] for s in report["stages"][1:]} == {"skipped: nothing installed"}
    assert report["environment"] is None and report["benchmarks"] is None
    assert report["settings"]["wheel_dir"] == str(tmp_path.resolve())


def test_bad_arguments_stop_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_check.main([str(tmp_path / "missing")])
    assert e.value.code == 2 and "is not a folder" in capsys.readouterr().err


# -- gpu_bench: statistics, units, the report ---------------------------------------------------------
def test_statistics_of_the_repeats():
    s = gpu_bench.summarize([4.0, 1.0, 3.0, 2.0, 100.0], inner=7)
    assert s["median_ms"] == 3.0 and s["min_ms"] == 1.0 and s["max_ms"] == 100.0
    assert s["iqr_ms"] == 2.0 and s["repeats"] == 5 and s["runs_per_repeat"] == 7
    assert s["samples_ms"] == [1.0, 2.0, 3.0, 4.0, 100.0]
    assert gpu_bench.summarize([2.5])["iqr_ms"] == 0
    with pytest.raises(ValueError):
        gpu_bench.summarize([])
    assert gpu_bench.bandwidth_GB_s(2e9, 1000) == pytest.approx(2.0)
    assert gpu_bench.throughput_TFLOP_s(2 * 4096 ** 3, 10) == pytest.approx(13.74, rel=1e-3)
    assert gpu_bench.runs_per_repeat(0.11, 20) == 182 and gpu_bench.runs_per_repeat(30, 20) == 1
    assert gpu_bench.runs_per_repeat(1e-6, 20) == 1000 and gpu_bench.runs_per_repeat(0, 20) == 1000
    check = gpu_bench.compare([1.0, 2.001], [1.0, 2.0], 1e-3, 0)
    assert check["ok"] and check["max_abs_error"] == pytest.approx(1e-3)
    assert not gpu_bench.compare([1.0, 2.01], [1.0, 2.0], 1e-3, 0)["ok"]
    assert gpu_bench.failed_checks({"check": {"ok": True}, "float16": {"check": {"ok": False}},
                                    "float32": {"check": {"ok": True}}}) == ["float16"]
    assert gpu_bench.failed_checks({"check": {"ok": False}}) == ["check"]
    assert gpu_bench.result_status({"a": {"status": "ok"}}) == 0
    assert gpu_bench.result_status({"a": {"status": "ok"}, "b": {"status": "failed"}}) == 1


def test_the_summary_lists_the_headline_figures_with_units():
    results = {
        "gelu": {"status": "ok", "settings": {"elements": 5}, "gelu": {"median_ms": 0.2, "bandwidth_GB_s": 2500.0},
                 "copy": {"median_ms": 0.18, "bandwidth_GB_s": 2900.0}, "fraction_of_copy_bandwidth": 0.9,
                 "goal_fraction": 0.8, "meets_goal": True, "check": {"ok": True}},
        "gemm": {"status": "ok", "settings": {}, "float32": {
            "dynograph": {"median_ms": 10, "throughput_TFLOP_s": 13.7},
            "cupy": {"median_ms": 3, "throughput_TFLOP_s": 40}, "time_vs_cupy": 3.3, "check": {},
            "not_available": {"torch": "absent"}}},
        "training": {"status": "ok", "settings": {}, "mlp": {
            "batch": 128, "dynograph": "not available yet: X", "torch": {"median_ms": 1.0}}},
        "softmax": {"status": "failed", "error": "E: boom"}}
    assert gpu_bench.summary(results) == {
        "gelu.gelu_median_ms": 0.2, "gelu.gelu_GB_s": 2500.0, "gelu.copy_median_ms": 0.18,
        "gelu.copy_GB_s": 2900.0, "gelu.fraction_of_copy_bandwidth": 0.9, "gelu.meets_goal": True,
        "gemm.float32.dynograph_median_ms": 10, "gemm.float32.dynograph_TFLOP_s": 13.7,
        "gemm.float32.cupy_median_ms": 3, "gemm.float32.cupy_TFLOP_s": 40, "gemm.float32.time_vs_cupy": 3.3,
        "training.mlp.dynograph": "not available yet: X", "training.mlp.torch_median_ms": 1.0,
        "softmax.error": "E: boom"}


def test_unknown_benchmarks_are_refused(capsys):
    with pytest.raises(SystemExit):
        gpu_bench.parse(["--only", "gelu,fft"])
    assert "unknown benchmark(s) ['fft']" in capsys.readouterr().err


def test_without_a_gpu_the_report_says_why(fresh, tmp_path, capsys):
    use_driver(fresh, import_error="libcuda.so.1: cannot open shared object file: No such file or directory")
    out = tmp_path / "bench.json"
    assert gpu_bench.main(["--out", str(out)]) == gpu_bench.NO_GPU
    report = json.loads(out.read_text())
    assert report["status"].startswith("skipped: dynograph: no CUDA device is available: the NVIDIA "
                                       "driver library is missing")
    assert report["environment"]["gpu"] is None and report["results"] == {}
    assert report["settings"]["repeats"] == 11
    assert "skipped: dynograph: no CUDA device" in capsys.readouterr().err


@pytest.mark.skipif(not cb.Nvrtc.available(), reason="NVRTC not installed (the nvidia-cuda-nvrtc wheel)")
def test_every_benchmark_kernel_compiles_for_sm_90(monkeypatch, tmp_path):
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    report = gpu_bench.compile_only(90)
    assert report["arch"] == "sm_90" and report["compiler"].startswith("nvrtc")
    assert set(report["kernels"]) == {"gelu", "softmax", "gemm_float32", "gemm_float16"}
    assert all(k["image_bytes"] > 1000 for k in report["kernels"].values())


def test_the_traced_kernels_are_one_fused_kernel_at_full_size():
    kernel, ins, outs, dts = gpu_bench.gelu_kernel()
    assert not kernel.reductions and np.prod(kernel.domain) == 1 << 26
    assert ins == outs == [(1024, 1 << 16)] and dts == [np.float32]
    kernel, ins, _, _ = gpu_bench.softmax_kernel()
    assert ins == [(8192, 8192)] and len(kernel.reductions) >= 2       # the max, then the sum


# -- the benchmarks on emulated kernels ---------------------------------------------------------------
class EmulatedDriver(FakeDriver):
    """The fake driver whose modules launch the CPU emulation of the kernels the backend compiled
    (``kernels``: name -> Kernel) on its memory, and whose device-to-device copies copy."""

    def __init__(self, kernels):
        super().__init__(devices=[("NVIDIA Emulated", (9, 0), 8 << 30)])
        self.kernels, self.launchers = kernels, {}

    def real_address(self, address):
        mem, at = self._span(address, 1)
        return np.frombuffer(mem, np.uint8).ctypes.data + at

    def module_from_buffer(self, image):
        drv = self

        class Function:
            def __init__(self, name):
                self.name = name

            def prepare(self, arg_format):
                pass

            def prepared_call(self, grid, block, *addresses):
                if self.name not in drv.launchers:
                    drv.launchers[self.name] = emulate.emulate(drv.kernels[self.name])
                drv.launchers[self.name]([drv.real_address(a) for a in addresses], grid[0], block[0])

        class Module:
            def get_function(self, name):
                return Function(name)
        return Module()

    def memcpy_dtod(self, dst, src, nbytes):
        mem, at = self._span(src, nbytes)
        data = bytes(mem[at:at + nbytes])
        mem, at = self._span(dst, nbytes)
        mem[at:at + nbytes] = data


@pytest.mark.skipif(emulate.host_compiler() is None, reason="no host C++ compiler (g++) to emulate CUDA kernels")
def test_the_benchmarks_run_on_emulated_kernels(fresh, tmp_path):
    kernels = {}

    def compile_source(self, source, name, kernel):
        kernels[name] = kernel
        return source.encode()
    use_driver(fresh, EmulatedDriver(kernels))
    fresh.setattr(cb.CudaBackend, "compile", compile_source)
    fresh.setattr(cb, "_backends", {})
    fresh.setattr(runtime_backend, "_loaded", {})
    fresh.setattr(gpu_bench, "vendor_libraries", lambda: {"cupy_reason": "absent", "torch_reason": "absent"})
    # sizes the emulation runs quickly: partial GEMM tiles, warp-mapped softmax rows
    fresh.setattr(gpu_bench, "GELU_ELEMENTS", 1024 * 6)
    fresh.setattr(gpu_bench, "SOFTMAX_SIDE", 96)
    fresh.setattr(gpu_bench, "GEMM_SIDE", 72)
    out = tmp_path / "bench.json"
    assert gpu_bench.main(["--out", str(out), "--repeats", "3", "--warmup", "1", "--target-ms", "1",
                           "--only", "gelu,softmax,gemm"]) == 0
    report = json.loads(out.read_text())
    assert report["status"] == "ok"
    gpu = report["environment"]["gpu"]
    assert gpu["name"] == "NVIDIA Emulated" and gpu["capability"] == "9.0" and gpu["driver_cuda_version"] == "13.0"
    assert report["environment"]["vendors"] == {"cupy": "absent", "torch": "absent"}
    r = report["results"]
    # every event pair of the fake driver spans 1.5 ms
    gelu = r["gelu"]
    assert gelu["status"] == "ok" and gelu["check"]["ok"], gelu["check"]
    assert gelu["settings"]["bytes_moved"] == 2 * 4 * 1024 * 6
    assert gelu["gelu"]["median_ms"] == 1.5 and gelu["gelu"]["repeats"] == 6        # two rounds
    assert gelu["fraction_of_copy_bandwidth"] == 1.0 and gelu["meets_goal"]
    assert gelu["copy"]["bandwidth_GB_s"] == pytest.approx(2 * 4 * 1024 * 6 / 1.5e-3 / 1e9)
    assert r["softmax"]["check"]["ok"], r["softmax"]["check"]
    assert r["softmax"]["settings"]["shape"] == [96, 96] and "torch" not in r["softmax"]
    for dt in ("float32", "float16"):
        g = r["gemm"][dt]
        assert g["check"]["ok"], (dt, g["check"])
        assert g["not_available"] == {"cupy": "absent", "torch": "absent"}
        assert g["dynograph"]["throughput_TFLOP_s"] == pytest.approx(2 * 72 ** 3 / 1.5e-3 / 1e12)
    assert len(kernels) == 4
    assert report["summary"]["gelu.fraction_of_copy_bandwidth"] == 1.0
    assert report["summary"]["gemm.float16.dynograph_TFLOP_s"] == g["dynograph"]["throughput_TFLOP_s"]


def test_training_waits_for_cuda_tensors(monkeypatch):
    def refuse(*args, device=None, **kwargs):
        raise RuntimeError("cuda tensors are not built yet")
    monkeypatch.setattr(dynograph, "zeros", refuse)
    assert gpu_bench.cuda_tensors_reason() == "not available yet: RuntimeError: cuda tensors are not built yet"
    out = gpu_bench.bench_training(None, None, {"torch_reason": "torch sees no CUDA device"})
    assert out["status_note"].startswith("dynograph cuda tensors not available yet")
    for name in ("mlp_784_512_512_10_b128", "cifar_cnn_b64"):
        assert out[name]["dynograph"].startswith("not available yet")
        assert out[name]["torch"] == "torch sees no CUDA device" and "time_vs_torch" not in out[name]


# -- the whole check ---------------------------------------------------------------------------------
WHEELS = os.environ.get("DYNOGRAPH_GPU_CHECK_WHEELS")


@pytest.mark.skipif(not WHEELS, reason="set DYNOGRAPH_GPU_CHECK_WHEELS to a folder tools/gpu_wheels.sh "
                                       "filled to run the whole check (a minute or two)")
def test_the_whole_check_installs_offline_and_reports(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([os.path.join(ROOT, "tools", "gpu_check.sh"), WHEELS, str(out), "--isolated",
                           "--run-without-gpu", "--tests", "tests/test_cuda_runtime.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    stages = {s["name"]: s for s in report["stages"]}
    assert [s["status"] for s in report["stages"][:5]] == ["passed"] * 5, proc.stderr
    assert report["settings"]["installed_from"].endswith(".whl")
    assert report["environment"]["packages"]["pycuda"] and report["environment"]["nvrtc"]
    gpu = report["environment"]["gpu"]
    if gpu is None:
        assert proc.returncode == 3 and report["overall"].startswith("no usable GPU: ")
        assert stages["bench"]["status"].startswith("skipped: dynograph: no CUDA device is available")
        assert stages["tests"]["counts"]["passed"] > 0
    else:
        assert proc.returncode == 0, report["overall"]
        assert report["benchmarks"]["status"] == "ok"
    assert report["within_budget"]

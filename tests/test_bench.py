"""Smoke tests of the benchmark runner (tools/bench) with tiny repeat counts."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tools.bench import runner  # noqa: E402

TINY = {"repeats": 3, "target_s": 0.0005, "warmup_s": 0.0}


def _fake(name, fns, **kw):
    """An unregistered workload for the runner's own tests."""
    return runner.Workload(name, lambda: fns, name, **kw)


def test_registry_has_the_eager_workloads():
    names = set(runner.load_workloads())
    assert {"eager_overhead", "eager_chain", "autograd_chain"} <= names
    assert [w.name for w in runner.select("^eager_over")] == ["eager_overhead"]
    assert runner.select("no-such-workload") == []


def test_calibrate_sizes_the_inner_loop():
    assert runner.calibrate(lambda: None, 0.002) > 1000        # a no-op needs many calls
    slow = runner.calibrate(lambda: sum(range(20000)), 0.002)
    assert 1 <= slow < 200


def test_calibrate_is_not_sized_by_one_wait_for_the_core():
    """A clock that loses 5 ms in one timing (the process waiting for a core) and otherwise
    sees 1 µs a call: the loop is sized from the calls, not from the wait."""
    now, calls, reads = [0.0], [0], [0]

    def fn():
        calls[0] += 1
        now[0] += 1e-6

    def clock():
        reads[0] += 1
        if reads[0] == 2:               # the end of the first timing
            now[0] += 5e-3
        return now[0]

    assert 1500 <= runner.calibrate(fn, 0.002, clock) <= 2500


def test_measure_reports_median_min_iqr_for_every_system():
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1

    def b():
        calls["b"] += 1
        sum(range(2000))

    # CPU time: a preemption of the process (a loaded machine) does not count as the work's
    stats = runner.measure({"a": a, "b": b}, clock="cpu", **TINY)
    assert set(stats) == {"a", "b"}
    for s in stats.values():
        assert len(s.samples) == 3
        assert 0 < s.min <= s.median and s.iqr >= 0
    assert stats["b"].median > stats["a"].median               # the slower one is slower
    assert calls["a"] >= 3 * stats["a"].number


def test_cpu_clock():
    stats = runner.measure({"s": lambda: sum(range(300))}, clock="cpu", **TINY)
    assert 0 < stats["s"].min <= stats["s"].median < 1e-3


def test_run_checks_agreement_and_skips_failing_systems():
    import numpy as np
    ok = _fake("ok", {"x": lambda: np.ones(3), "y": lambda: [1.0, 1.0, 1.0],
                      "broken": lambda: 1 / 0})
    [rec] = runner.run([ok], **TINY)
    assert set(rec["systems"]) == {"x", "y"}
    assert "ZeroDivisionError" in rec["errors"]["broken"]
    bad = _fake("bad", {"x": lambda: np.ones(3), "y": lambda: np.zeros(3)})
    with pytest.raises(AssertionError, match="y disagrees with x"):
        runner.run([bad], **TINY)


def test_table_and_json_have_ratios_against_the_baseline():
    fast, slow = (lambda: None), (lambda: sum(range(300)))
    results = runner.run([_fake("w", {"fast": fast, "slow": slow})], check=False, **TINY)
    r = runner.ratios(results[0], "fast")
    assert r["fast"] == 1.0 and r["slow"] > 1.0
    table = runner.format_table(results, "fast")
    assert "vs fast" in table and "1.00x" in table and "slow" in table
    doc = runner.to_json(results, "fast", {"repeats": 3})
    json.dumps(doc)                                             # serialisable
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["numpy"]
    assert doc["results"][0]["systems"]["slow"]["inner_loop"] >= 1
    assert doc["results"][0]["ratios"]["slow"] > 1.0


def test_eager_workloads_agree_across_systems():
    for w in runner.select("^eager_"):
        fns = w.setup()
        assert "dynograph" in fns and len(fns) >= 2 - (runner.optional_torch() is None)
        assert runner.check_agreement(w, fns) == {}


def test_autograd_workloads_agree_with_torch():
    pytest.importorskip("torch")
    for w in runner.select("^autograd_"):
        fns = w.setup()
        assert set(fns) == {"dynograph", "torch"}
        assert runner.check_agreement(w, fns) == {}


def test_cli_list_and_json(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tools.bench", "--list"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "eager_overhead" in out and "eager_chain" in out
    path = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "-m", "tools.bench", "--filter", "^eager_overhead$",
                        "--repeats", "2", "--target-ms", "1", "--warmup-ms", "0",
                        "--baseline", "numpy", "--timer", "cpu", "--json", str(path)],
                       cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "vs numpy" in r.stdout and "one thread" in r.stdout and "default threading" in r.stdout
    both = json.loads(path.read_text())
    assert set(both["passes"]) == {"default", "one"}
    assert both["passes"]["one"]["settings"]["threads"]["dynograph"] == 1
    doc = both["passes"]["default"]
    [rec] = doc["results"]
    assert rec["workload"] == "eager_overhead" and rec["ratios"]["numpy"] == 1.0
    assert "dynograph" in rec["systems"]
    assert doc["settings"]["repeats"] == 2 and doc["settings"]["baseline"] == "numpy"
    assert doc["settings"]["timer"] == "cpu" and doc["machine"]["cpu"]


def test_self_timed_workloads_report_the_seconds_their_callables_return():
    timed = _fake("t", {"half": lambda: 0.5, "broken": lambda: 1 / 0}, self_timed=True)
    [rec] = runner.run([timed], **TINY)
    s = rec["systems"]["half"]
    assert s.median == s.min == 0.5 and s.number == 1 and s.samples == [0.5] * 3
    assert "ZeroDivisionError" in rec["errors"]["broken"]


def _without_torch_compile(fns):
    """torch.compile takes tens of seconds to compile: the suite leaves it out, but checks
    that the workload offers it where torch is installed."""
    if runner.optional_torch() is not None:
        assert "torch-compile" in fns
    return {k: v for k, v in fns.items() if k != "torch-compile"}


@pytest.mark.parametrize("name", ["llvm_w4_mlp_step", "llvm_w5_cifar_step"])
def test_llvm_training_steps_agree_across_systems(name):
    [w] = runner.select(f"^{name}$")
    fns = _without_torch_compile(w.setup())
    assert {"dynograph", "dynograph-llvm"} <= set(fns)
    assert runner.check_agreement(w, fns) == {}


@pytest.mark.parametrize("name", ["llvm_w1_gelu", "llvm_w1b_memory_bound"])
def test_llvm_elementwise_workloads_offer_torch_compile(name):
    [w] = runner.select(f"^{name}$")
    assert "dynograph-llvm" in _without_torch_compile(w.setup())


def test_llvm_compile_time_warm_process_loads_every_kernel_from_disk():
    [w] = runner.select("^llvm_w7_compile_time$")
    assert w.self_timed
    fns = w.setup()
    assert set(fns) == {"llvm-cold", "llvm-warm"}
    assert 0 < fns["llvm-warm"]() < 30        # raises if the warm process compiled a kernel


def test_thread_counts_and_the_other_load_are_reported():
    counts = runner.thread_counts()
    assert counts["cores"] >= 1 and counts["dynograph"] >= 1
    with runner.LoadMeter() as load:
        sum(range(100000))
    assert load.foreign is None or load.foreign >= 0
    [rec] = runner.run([_fake("w", {"a": lambda: 1})], check=False, **TINY)
    assert "foreign_load" in rec
    assert "other load" in runner.format_table([rec], "a")


def test_one_thread_mode_sets_every_system_and_default_restores(monkeypatch):
    import dynograph
    before = dynograph.get_num_threads()
    try:
        runner.set_threads(1)
        assert runner.thread_counts()["dynograph"] == 1
        torch = runner.optional_torch()
        if torch is not None:
            assert torch.get_num_threads() == 1
        runner.set_threads(None)
        assert runner.thread_counts()["dynograph"] == (os.cpu_count() or 1)
    finally:
        dynograph.set_num_threads(before)


def test_processes_alternate_trees_and_take_medians_of_ratios(capsys):
    """tools.bench.processes runs the runner in fresh processes (here one per tree, this tree
    against itself) and prints the median ratio per workload and system."""
    from tools.bench import processes
    assert processes.main(["--filter", "^eager_overhead$", "--systems", "dynograph",
                           "--baseline", "dynograph", "--threads", "one", "--processes", "1",
                           "--repeats", "1", "--target-ms", "1", "--against", ROOT]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# one thread: ratio to dynograph")
    row = next(line for line in out.splitlines() if line.startswith("eager_overhead"))
    assert row.count("1.000x [1.00-1.00]") == 2          # both trees, one process each


def test_first_calls_pairs_the_rounds_of_two_trees():
    """first_calls --against: this tree's compile time less the other's, round by round."""
    from tools.bench import first_calls
    mine, other = ("", False, "here"), (" (/before)", False, "/before")

    def run(cold, warm):
        return {"compile_s": cold}, {"compile_s": warm}
    runs = {mine: [run(0.5, 0.10), run(0.7, 0.30), run(0.6, 0.12)],
            other: [run(0.6, 0.11), run(0.9, 0.20), run(0.8, 0.13)]}
    line = first_calls._paired("mlp", mine, other, runs)
    assert "against (/before)" in line
    assert "cold -200.0 ms, faster in 3 of 3" in line
    assert "warm -10.0 ms, faster in 2 of 3" in line

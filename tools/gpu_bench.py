"""GPU benchmarks of the cuda backend (issue 15), run by tools/gpu_check.sh or alone:

    python tools/gpu_bench.py [--out FILE] [--repeats N] [--only NAME,...]
    python tools/gpu_bench.py --compile-only 90     # no GPU: prepare and compile every kernel

Each benchmark runs kernels through the backend-level API (``CudaBackend`` and ``DeviceArray``)
on kernel descriptions the compiler makes, timed with CUDA events: after warm-up runs, each of
``--repeats`` timed repeats launches the work ``inner`` times back to back between two events
(``inner`` sized so that a repeat lasts about ``--target-ms``), and the per-run times' median,
minimum and interquartile range are reported.

* ``gelu``: the fused tanh-GELU chain (bench workload W1's formula) on 64M float32 against the
  device's copy bandwidth measured in the same run (a device-to-device copy of the same bytes);
  the goal is at least 80% of the copy's bandwidth.
* ``softmax``: the fused softmax over the last dimension of 8192 x 8192 float32.
* ``gemm``: ``matmul_kernel`` (the tiled GEMM) on 4096^3 in float32 and float16, against the same
  product through cupy and torch where they are installed (each with its own events; TF32 off).
* ``training``: the MLP (784-512-512-10, batch 128) and the CIFAR tutorial CNN (batch 64)
  SGD-momentum steps compiled on cuda against torch eager on cuda, once dynograph has cuda tensors.

The fused kernels are those ``dynograph.compile`` makes: the function is traced on the llvm backend
at two small batch sizes (so the batch dimension becomes symbolic; the CPU work is tiny) and its
fused node described at the benchmark's size.  Each result is checked against numpy on part of
the output (the training steps: their first loss against torch's), and a benchmark whose check
fails has the status "wrong result", so a fast wrong kernel does not pass as a result.

The report is one JSON document (stdout, or ``--out``): ``settings``, ``environment``,
``results`` and their ``summary``; every number's key ends in its unit (``_ms``, ``_GB_s``,
``_TFLOP_s``, ``_bytes``).  Exit status: 0 when every benchmark ran and agreed, 1 when one
failed or gave a wrong result, 3 without a usable GPU (the report says why).
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import traceback
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_GPU = 3                  # exit status without a usable GPU
GELU_ELEMENTS = 1 << 26     # 64M float32
SOFTMAX_SIDE = 8192
GEMM_SIDE = 4096
GELU_GOAL = 0.8             # of the copy bandwidth
BENCHMARKS = ("gelu", "softmax", "gemm", "training")


# -- statistics and units (pure: tests/test_gpu_tools.py) -------------------------------------------
def summarize(samples_ms, inner=1):
    """Median, minimum, maximum and interquartile range of per-run times (milliseconds)."""
    xs = sorted(float(x) for x in samples_ms)
    if not xs:
        raise ValueError("summarize: no samples")
    if len(xs) >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    else:
        q1 = q3 = xs[0]
    return {"median_ms": statistics.median(xs), "min_ms": xs[0], "max_ms": xs[-1],
            "iqr_ms": q3 - q1, "repeats": len(xs), "runs_per_repeat": inner,
            "samples_ms": xs}


def bandwidth_GB_s(nbytes, ms):
    """Bytes moved in ``ms`` milliseconds, in GB/s (10^9 bytes per second)."""
    return nbytes / (ms * 1e-3) / 1e9


def throughput_TFLOP_s(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def runs_per_repeat(one_run_ms, target_ms, most=1000):
    """How many back-to-back runs make a timed repeat of about ``target_ms``."""
    if one_run_ms <= 0:
        return most
    return max(1, min(most, math.ceil(target_ms / one_run_ms)))


def compare(got, want, rtol, atol):
    """Agreement of a checked part of a result with its reference: the largest error and whether
    every element is within ``atol + rtol * |want|``."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want)
    return {"elements": int(want.size), "max_abs_error": float(err.max(initial=0.0)),
            "rtol": rtol, "atol": atol,
            "ok": bool(np.all(err <= atol + rtol * np.abs(want)))}


def summary(results):
    """The headline figures of a report's results, flat: ``{"gelu.fraction_of_copy_bandwidth":
    0.93, "gemm.float32.dynograph_TFLOP_s": 12.1, ...}`` (a failed benchmark: its error)."""
    out = {}
    for name, r in results.items():
        if r.get("status") != "ok":
            out[f"{name}.error"] = r.get("error", r["status"])
            continue
        for key, value in _figures(r):
            out[f"{name}.{key}"] = value
    return out


def _figures(r, prefix=""):
    """(key, value) of the medians, throughputs, ratios and fractions in a result."""
    for key, value in r.items():
        if isinstance(value, dict) and "median_ms" in value:
            yield f"{prefix}{key}_median_ms", value["median_ms"]
            for unit in ("bandwidth_GB_s", "throughput_TFLOP_s"):
                if unit in value:
                    yield f"{prefix}{key}_{unit.split('_', 1)[1]}", value[unit]
        elif isinstance(value, dict) and key not in ("settings", "check", "not_available"):
            yield from _figures(value, f"{prefix}{key}.")
        elif key.startswith(("time_vs_", "fraction_")) or key == "meets_goal":
            yield prefix + key, value
        elif key in ("dynograph", "torch") and isinstance(value, str):     # why it did not run
            yield prefix + key, value


def failed_checks(result, path=""):
    """The paths of the ``check`` entries in a result that did not agree with their reference."""
    bad = []
    for key, value in result.items():
        if key == "check" and isinstance(value, dict) and not value.get("ok", True):
            bad.append(path or key)
        elif isinstance(value, dict):
            bad += failed_checks(value, f"{path}.{key}" if path else key)
    return bad


def result_status(results):
    """The exit status of a report's results: 0 all ran, 1 some failed."""
    return 1 if any(r.get("status") != "ok" for r in results.values()) else 0


# -- timing -----------------------------------------------------------------------------------------
class Clock:
    """CUDA events of one library: ``event()`` returns an object with record() and
    synchronize(); ``elapsed(start, end)`` is milliseconds between two recorded events."""

    def __init__(self, event, elapsed):
        self.event, self.elapsed = event, elapsed

    @classmethod
    def dynograph(cls):
        import dynograph.cuda
        return cls(lambda: dynograph.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b))

    @classmethod
    def torch(cls, torch):
        return cls(lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b))

    @classmethod
    def cupy(cls, cupy):
        return cls(cupy.cuda.Event, cupy.cuda.get_elapsed_time)

    def run_ms(self, fn, inner=1):
        start, end = self.event(), self.event()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return self.elapsed(start, end) / inner

    def measure(self, fn, settings):
        """``fn`` warmed up, then timed: ``summarize`` of the repeats."""
        for _ in range(settings.warmup):
            fn()
        inner = runs_per_repeat(self.run_ms(fn), settings.target_ms)
        return summarize([self.run_ms(fn, inner) for _ in range(settings.repeats)], inner)


# -- kernel descriptions ------------------------------------------------------------------------------
def contiguous_layout(shape):
    """(element strides, offset) of a row-major array, as the program passes it to a kernel."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(0 if n == 1 else step)
        step *= n
    return tuple(reversed(strides)), 0


def traced_kernel(fn, row_shape, batch):
    """The one fused kernel ``dynograph.compile`` makes of ``fn`` on a float32 input of shape
    (batch, *row_shape): ``(kernel, input shapes, output shapes, output dtypes)``.  The function is
    compiled for the llvm backend and called at two small batch sizes, which makes the batch
    dimension symbolic; its node is then described at ``batch``."""
    import dynograph
    from dynograph.compiler.lowering.kernel import describe
    from dynograph.compiler.lowering.program import kernel_inputs
    from dynograph.compiler.symbolic import concrete
    compiled = dynograph.compile(fn, backend="llvm")
    for b in (2, 3, 2):
        compiled(dynograph.zeros(b, *row_shape))
    graphs = compiled.graphs()
    nodes = [n for g in graphs for n in g.nodes]
    if len(graphs) != 1 or len(nodes) != 1 or kernel_inputs(nodes[0]) is None:
        raise RuntimeError(f"expected one graph of one fused kernel, got {len(graphs)} graph(s) of "
                           f"{[n.op for n in nodes]}")
    node = nodes[0]
    ins = [tuple(concrete(v.type.shape, batch)) for v in kernel_inputs(node)]
    outs = [tuple(concrete(v.type.shape, batch)) for v in node.outs]
    kernel = describe(node, [contiguous_layout(s) for s in ins], batch)
    return kernel, ins, outs, [v.type.dtype.np for v in node.outs]


def gelu_formula(x, tanh):
    """The tanh-GELU chain of bench workload W1 (tools/bench/workloads/llvm.py)."""
    t = x * 1.5 + 0.25
    return 0.5 * t * (1 + tanh(0.79788456 * (t + 0.044715 * t ** 3)))


def gelu_kernel():
    import dynograph
    # 64M elements as (1024, 65536): the kernel's domain collapses to one axis either way
    return traced_kernel(lambda x: gelu_formula(x, dynograph.tanh), (GELU_ELEMENTS // 1024,), 1024)


def softmax_kernel():
    import dynograph
    return traced_kernel(lambda x: dynograph.nn.functional.softmax(x, dim=-1), (SOFTMAX_SIDE,),
                         SOFTMAX_SIDE)


def gemm_kernel(dtype):
    """``matmul_kernel``'s description of a GEMM_SIDE^3 product in ``dtype`` (only the arrays'
    shapes, strides and dtype matter: np.zeros maps no memory until written)."""
    from dynograph.compiler.cuda.gemm import matmul_kernel
    a = np.zeros((GEMM_SIDE, GEMM_SIDE), dtype)
    return matmul_kernel(a, a, a)


def prepared_kernels():
    """Every description a benchmark launches, by name."""
    kernels = {"gelu": gelu_kernel()[0], "softmax": softmax_kernel()[0]}
    for dt in (np.float32, np.float16):
        kernels[f"gemm_{np.dtype(dt).name}"] = gemm_kernel(dt)
    return kernels


def compile_only(arch):
    """Render and compile every benchmark kernel for sm_``arch`` (no GPU needed): name -> bytes
    of the image and compile seconds."""
    from dynograph.compiler.cuda.backend import CudaBackend, default_compiler
    gpu = CudaBackend(arch=arch, compiler=default_compiler())
    out = {}
    for name, kernel in prepared_kernels().items():
        start = time.perf_counter()
        symbol = f"dg_{kernel.key}"
        image = gpu.compile(gpu.render(kernel, symbol), symbol, kernel)
        out[name] = {"image_bytes": len(image), "compile_s": time.perf_counter() - start}
    return {"arch": f"sm_{arch}", "compiler": gpu.cache.version(), "kernels": out}


# -- the backend-level benchmarks -----------------------------------------------------------------------
class Launch:
    """A kernel on device buffers: ``launch()`` queues it (no host synchronization)."""

    def __init__(self, gpu, kernel, inputs, outputs):
        from dynograph.runtime.backend import kernel_function
        self.gpu, self.kernel = gpu, kernel
        self.fn = kernel_function(gpu, kernel)
        self.inputs, self.outputs = inputs, outputs
        self.addresses = [a.address for a in inputs + outputs]

    def __call__(self):
        self.gpu.launch(self.fn, self.kernel, self.addresses)


def bench_gelu(gpu, clock, settings):
    from dynograph.runtime import cuda_driver
    from dynograph.runtime.cuda_memory import DeviceArray
    kernel, ins, outs, dts = gelu_kernel()
    x = np.random.default_rng(0).standard_normal(ins[0], dtype=np.float32)
    device_x = DeviceArray.from_host(x)
    run = Launch(gpu, kernel, [device_x], [DeviceArray(outs[0], dts[0])])
    copy_dst = DeviceArray(ins[0], np.float32)
    nbytes = device_x.nbytes

    def copy():
        cuda_driver.copy_on_device(copy_dst.address, device_x.address, nbytes)
    # alternate the two so that the device's clocks and temperature reach both alike
    gelu_stats, copy_stats = [], []
    for _ in range(2):
        gelu_stats.append(clock.measure(run, settings))
        copy_stats.append(clock.measure(copy, settings))
    gelu_t, copy_t = (_merged(s) for s in (gelu_stats, copy_stats))
    moved = 2 * nbytes                          # read once, written once, by both
    got = run.outputs[0].to_host().reshape(-1)[:1 << 20]
    want = gelu_formula(x.reshape(-1)[:1 << 20].astype(np.float64), np.tanh)
    return {"settings": {"elements": x.size, "dtype": "float32", "bytes_moved": moved,
                         "kernel": f"dg_{kernel.key}", "domain": list(kernel.domain)},
            "gelu": {**gelu_t, "bandwidth_GB_s": bandwidth_GB_s(moved, gelu_t["median_ms"])},
            "copy": {**copy_t, "bandwidth_GB_s": bandwidth_GB_s(moved, copy_t["median_ms"]),
                     "what": "device-to-device copy of the input's bytes (cuMemcpyDtoD)"},
            "fraction_of_copy_bandwidth": copy_t["median_ms"] / gelu_t["median_ms"],
            "goal_fraction": GELU_GOAL,
            "meets_goal": copy_t["median_ms"] / gelu_t["median_ms"] >= GELU_GOAL,
            "check": compare(got, want, 1e-5, 1e-5)}


def _merged(stats):
    """One measurement of the samples of several rounds."""
    return summarize([x for s in stats for x in s["samples_ms"]], stats[0]["runs_per_repeat"])


def bench_softmax(gpu, clock, settings, vendors):
    from dynograph.runtime.cuda_memory import DeviceArray
    kernel, ins, outs, dts = softmax_kernel()
    x = np.random.default_rng(1).standard_normal(ins[0], dtype=np.float32)
    run = Launch(gpu, kernel, [DeviceArray.from_host(x)], [DeviceArray(outs[0], dts[0])])
    t = clock.measure(run, settings)
    moved = 2 * x.nbytes
    rows = x[:16].astype(np.float64)
    e = np.exp(rows - rows.max(-1, keepdims=True))
    got = run.outputs[0].to_host()[:16]
    result = {"settings": {"shape": list(x.shape), "dim": -1, "dtype": "float32",
                           "bytes_moved": moved, "kernel": f"dg_{kernel.key}"},
              "dynograph": {**t, "bandwidth_GB_s": bandwidth_GB_s(moved, t["median_ms"])},
              "check": compare(got, e / e.sum(-1, keepdims=True), 1e-4, 1e-7)}
    if "torch" in vendors:
        torch = vendors["torch"]
        tx = torch.from_numpy(x).cuda()
        theirs = Clock.torch(torch).measure(lambda: torch.softmax(tx, dim=-1), settings)
        result["torch"] = {**theirs, "bandwidth_GB_s": bandwidth_GB_s(moved, theirs["median_ms"])}
        result["time_vs_torch"] = t["median_ms"] / theirs["median_ms"]
    return result


def bench_gemm(gpu, clock, settings, vendors):
    from dynograph.runtime.cuda_memory import DeviceArray
    n = GEMM_SIDE
    flops = 2 * n ** 3
    rng = np.random.default_rng(2)
    result = {"settings": {"m": n, "n": n, "k": n, "flops": flops, "accumulate": "float32",
                           "vendors_tried": ["cupy", "torch"], "tf32": False}}
    for dt in (np.float32, np.float16):
        name = np.dtype(dt).name
        a = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
        b = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
        kernel = gemm_kernel(dt)
        run = Launch(gpu, kernel, [DeviceArray.from_host(a), DeviceArray.from_host(b)],
                     [DeviceArray((n, n), dt)])
        t = clock.measure(run, settings)
        want = a[:8].astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a[:8].astype(np.float64)) @ np.abs(b.astype(np.float64))
        got = run.outputs[0].to_host()[:8].astype(np.float64)
        tol = 1e-5 if dt == np.float32 else 2e-3     # of the sum of magnitudes
        entry = {"dynograph": {**t, "throughput_TFLOP_s": throughput_TFLOP_s(flops, t["median_ms"])},
                 "check": {**compare(got / scale, want / scale, 0, tol), "relative_to": "sum of |a||b|"}}
        for vendor, timing in gemm_vendors(vendors, a, b).items():
            entry[vendor] = {**timing, "throughput_TFLOP_s": throughput_TFLOP_s(flops, timing["median_ms"])}
            entry[f"time_vs_{vendor}"] = t["median_ms"] / timing["median_ms"]
        unavailable = [v for v in ("cupy", "torch") if v not in entry]
        if unavailable:
            entry["not_available"] = {v: vendors.get(f"{v}_reason", "not importable") for v in unavailable}
        result[name] = entry
    return result


def gemm_vendors(vendors, a, b):
    """The same product through each vendor library installed: name -> measurement."""
    out = {}
    settings = vendors["settings"]
    if "cupy" in vendors:
        cupy = vendors["cupy"]
        ca, cb = cupy.asarray(a), cupy.asarray(b)
        cc = cupy.empty((a.shape[0], b.shape[1]), a.dtype)
        out["cupy"] = Clock.cupy(cupy).measure(lambda: cupy.matmul(ca, cb, out=cc), settings)
    if "torch" in vendors:
        torch = vendors["torch"]
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.empty((a.shape[0], b.shape[1]), dtype=ta.dtype, device=ta.device)
        out["torch"] = Clock.torch(torch).measure(lambda: torch.matmul(ta, tb, out=tc), settings)
    return out


# -- training steps on cuda tensors ---------------------------------------------------------------------
def cuda_tensors_reason():
    """None when dynograph can put tensors on cuda, else why not ("not available yet: ...")."""
    import dynograph
    try:
        dynograph.zeros(1, device="cuda")
    except Exception as e:           # whatever it raises is the reason
        return f"not available yet: {type(e).__name__}: {e}"
    return None


def bench_training(clock, settings, vendors):
    import dynograph
    sys.path.append(ROOT)           # after the installed dynograph: tools/ is not installed
    from tools.bench.workloads.training import (cifar_net, _mlp, cifar_batch, mlp_batch,
                                                 sgd_step)
    reason = cuda_tensors_reason()
    torch = vendors.get("torch")
    out = {"settings": {"optimizer": "SGD(lr=0.001, momentum=0.9)",
                        "step": "zero_grad, forward, cross_entropy, backward, step",
                        "dynograph": "the whole step under dynograph.compile, on cuda",
                        "torch": "eager, on cuda"}}
    fallbacks = set()           # ops dynograph ran on the host (it warns once per op and process)
    for name, make, batch in [("mlp_784_512_512_10_b128", _mlp, mlp_batch),
                              ("cifar_cnn_b64", cifar_net, cifar_batch)]:
        x, y = batch()
        entry = {"batch": int(x.shape[0])}
        theirs = make(torch) if torch is not None else None
        if reason is None:
            ours = make(dynograph)
            if theirs is not None:
                ours.load_state_dict({k: dynograph.tensor(v.numpy())
                                      for k, v in theirs.state_dict().items()})
            ours.to("cuda")
            step = dynograph.compile(sgd_step(dynograph, ours))
            dx, dy = dynograph.from_numpy(x).to("cuda"), dynograph.from_numpy(y).to("cuda")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                entry["dynograph_first_loss"] = float(step(dx, dy).item())
                entry["dynograph"] = clock.measure(lambda: step(dx, dy), settings)
            text = " ".join(str(w.message) for w in caught)
            fallbacks.update(re.findall(r"'(\w+)' has no CUDA kernel", text))
        else:
            entry["dynograph"] = reason
        if theirs is not None:
            theirs.to("cuda")
            step = sgd_step(torch, theirs)
            tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
            entry["torch_first_loss"] = float(step(tx, ty).item())
            entry["torch"] = Clock.torch(torch).measure(lambda: step(tx, ty), settings)
        else:
            entry["torch"] = vendors.get("torch_reason", "not importable")
        if isinstance(entry["dynograph"], dict) and isinstance(entry["torch"], dict):
            entry["time_vs_torch"] = entry["dynograph"]["median_ms"] / entry["torch"]["median_ms"]
            entry["check"] = compare(entry["dynograph_first_loss"], entry["torch_first_loss"], 1e-4, 1e-5)
        out[name] = entry
    if reason is not None:
        out["status_note"] = f"dynograph cuda tensors {reason}"
    else:       # their copies to the host and back are part of the times measured
        out["ops_run_on_the_host"] = sorted(fallbacks)
    return out


# -- the report ---------------------------------------------------------------------------------------
def vendor_libraries():
    """cupy and torch where they import and see a GPU; ``<name>_reason`` says why not."""
    out = {}
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        out["cupy"] = cupy
    except Exception as e:
        out["cupy_reason"] = f"{type(e).__name__}: {e}"
    try:
        import torch
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False      # float32 products in float32
            out["torch"] = torch
        else:
            out["torch_reason"] = f"torch {torch.__version__} sees no CUDA device"
    except Exception as e:
        out["torch_reason"] = f"{type(e).__name__}: {e}"
    return out


def environment(index=0):
    """The device and the libraries; ``gpu`` is None (and ``reason`` says why) without one."""
    import dynograph
    from dynograph.runtime import cuda_driver
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "dynograph": getattr(dynograph, "__version__", "?"), "numpy": np.__version__}
    why = cuda_driver.unavailable()
    if why is not None:
        return {**env, "gpu": None, "reason": why.message()}
    major, minor = cuda_driver.capability(index)
    version = cuda_driver.driver_version()
    env["gpu"] = {"index": index, "name": cuda_driver.name(index), "capability": f"{major}.{minor}",
                  "total_memory_bytes": cuda_driver.properties(index)["total_memory"],
                  "driver_cuda_version": f"{version // 1000}.{version % 1000 // 10}"}
    try:
        from dynograph.compiler.cuda.backend import default_compiler
        env["kernel_compiler"] = default_compiler().version()
    except Exception as e:
        env["kernel_compiler"] = f"none: {e}"
    return env


def run(settings):
    """The report of every benchmark in ``settings.only`` (a dict)."""
    report = {"tool": "tools/gpu_bench.py", "version": 1,
              "settings": {"repeats": settings.repeats, "warmup_runs": settings.warmup,
                           "target_ms_per_repeat": settings.target_ms, "device": settings.device,
                           "benchmarks": list(settings.only),
                           "timer": "CUDA events around runs_per_repeat back-to-back runs; "
                                    "times are per run"}}
    env = report["environment"] = environment(settings.device)
    if env["gpu"] is None:
        report["status"] = f"skipped: {env['reason']}"
        report["results"] = {}
        return report
    from dynograph.compiler.cuda.backend import backend
    from dynograph.runtime import cuda_driver
    cuda_driver.set_device(settings.device)
    gpu, clock = backend(settings.device), Clock.dynograph()
    vendors = vendor_libraries()
    vendors["settings"] = settings
    report["environment"]["vendors"] = {
        name: (vendors[name].__version__ if name in vendors else vendors[f"{name}_reason"])
        for name in ("cupy", "torch")}
    jobs = {"gelu": lambda: bench_gelu(gpu, clock, settings),
            "softmax": lambda: bench_softmax(gpu, clock, settings, vendors),
            "gemm": lambda: bench_gemm(gpu, clock, settings, vendors),
            "training": lambda: bench_training(clock, settings, vendors)}
    results = report["results"] = {}
    for name in settings.only:
        start = time.perf_counter()
        try:
            result = jobs[name]()
            bad = failed_checks(result)
            status = f"wrong result: {', '.join(bad)} (see check)" if bad else "ok"
            results[name] = {"status": status, **result}
        except Exception as e:
            results[name] = {"status": "failed", "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-3000:]}
        results[name]["wall_s"] = time.perf_counter() - start
    report["status"] = "failed" if result_status(results) else "ok"
    report["summary"] = summary(results)
    return report


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="write the JSON report here (default: stdout)")
    p.add_argument("--repeats", type=int, default=11, help="timed repeats (default 11)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--target-ms", type=float, default=20.0,
                   help="length of one timed repeat; sizes its runs (default 20)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--only", default=",".join(BENCHMARKS),
                   help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    p.add_argument("--compile-only", type=int, metavar="ARCH",
                   help="no launches: compile every kernel for sm_ARCH and report that")
    args = p.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    unknown = set(args.only) - set(BENCHMARKS)
    if unknown:
        p.error(f"unknown benchmark(s) {sorted(unknown)}; choose from {list(BENCHMARKS)}")
    return args


def main(argv=None):
    args = parse(argv)
    if args.compile_only is not None:
        report, status = {"tool": "tools/gpu_bench.py", "compile_only": compile_only(args.compile_only)}, 0
    else:
        report = run(args)
        status = NO_GPU if report["status"].startswith("skipped") else result_status(report["results"])
    text = json.dumps(report, indent=1, default=str)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    else:
        print(text)
    if status == NO_GPU:
        print(f"gpu_bench: {report['status']}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())

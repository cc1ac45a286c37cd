"""The cuda backend's compilation (compiler/cuda/backend.py, runtime/cuda_nvrtc.py) on machines
without a GPU: real generated kernels compiled to cubins by NVRTC for sm_80 and sm_90 (ptxas's
report: no spills), nvcc's path, the architecture NVRTC targets for each device, the disk cache
and its keys.  Launching needs a GPU: those tests skip elsewhere, saying so."""
import functools
import os
import sys

import numpy as np
import pytest

import dynograph
from dynograph.compiler.cuda import backend as cb
from dynograph.compiler.cuda.source import CompileError, nvcc, parse_ptxas
from dynograph.runtime import cuda_driver, cuda_nvrtc

sys.path.insert(0, os.path.dirname(__file__))
from test_cuda_codegen import layout, representative_kernels  # noqa: E402
from test_llvm_backend import graph_of, sample  # noqa: E402

needs_nvrtc = pytest.mark.skipif(not cb.Nvrtc.available(),
                                 reason="NVRTC not installed (the nvidia-cuda-nvrtc wheel)")
needs_nvcc = pytest.mark.skipif(nvcc() is None, reason="nvcc not on PATH")
_why = cuda_driver.unavailable()
needs_gpu = pytest.mark.skipif(_why is not None, reason=f"launches are checked on a GPU: "
                               f"{_why and _why.message()}")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


@functools.lru_cache(maxsize=None)
def kernels():
    """The representative set of test_cuda_codegen (an Adam step's kernels among them), once."""
    return representative_kernels()


def kernel_of(op, args, **attrs):
    from dynograph.compiler.lowering.kernel import describe
    _, arrays, node = graph_of(op, args, **attrs)
    return describe(node, [layout(a) for a in arrays]), arrays


@needs_nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_generated_kernels_compile_to_cubins_without_spills(arch):
    sources = kernels()
    text = "\n".join(s.text for s in sources)
    image, kind, log = cuda_nvrtc.compile(text, "kernels.cu", arch, ["--ptxas-options=-v"])
    assert kind == "cubin" and image.startswith(b"\x7fELF")
    found = parse_ptxas(log, f"sm_{arch}")
    assert set(found) == {s.name for s in sources}
    for r in found.values():
        assert r.registers > 0 and r.spill_stores == r.spill_loads == 0, r


@needs_nvrtc
def test_backend_compiles_once_then_reads_the_disk_cache(cache_dir):
    kernel, _ = kernel_of("add", (sample(np.float32, (5, 7)),) * 2)
    first = cb.CudaBackend(arch=80, compiler=cb.Nvrtc())
    name = f"dg_{kernel.key}"
    source = first.render(kernel, name)
    image = first.compile(source, name, kernel)
    assert image.startswith(b"\x7fELF") and first.cache.compiled == 1
    again = cb.CudaBackend(arch=80, compiler=cb.Nvrtc())        # another process, in effect
    assert again.compile(source, name, kernel) == image
    assert again.cache.hits == 1 and again.cache.compiled == 0
    other_arch = cb.CudaBackend(arch=90, compiler=cb.Nvrtc())
    assert other_arch.compile(source, name, kernel) != image and other_arch.cache.compiled == 1
    files = list((cache_dir / "cuda").glob("*.cubin"))
    assert len(files) == 2
    for f in files:                          # a damaged entry is compiled again, not loaded
        f.write_bytes(f.read_bytes()[:-10])
    damaged = cb.CudaBackend(arch=80, compiler=cb.Nvrtc())
    assert damaged.compile(source, name, kernel) == image and damaged.cache.compiled == 1


class _Compiler:
    """A compiler of a given version that compiles nothing."""
    name = "fake"

    def __init__(self, version):
        self._version = version

    def version(self):
        return self._version

    def compile(self, source, name, arch):
        return f"{self._version} sm_{arch} {source}".encode()


def test_cache_keys_hash_source_compiler_and_architecture():
    a = cb.ImageCache(_Compiler("nvrtc 13.5"), 80)
    assert a.key("k1") == cb.ImageCache(_Compiler("nvrtc 13.5"), 80).key("k1")
    keys = {a.key("k1"), a.key("k2"), cb.ImageCache(_Compiler("nvrtc 13.6"), 80).key("k1"),
            cb.ImageCache(_Compiler("nvrtc 13.5"), 90).key("k1")}
    assert len(keys) == 4
    headers = {a.header(), cb.ImageCache(_Compiler("nvrtc 13.6"), 80).header(),
               cb.ImageCache(_Compiler("nvrtc 13.5"), 86).header()}
    assert len(headers) == 3


def test_architecture_nvrtc_targets(monkeypatch):
    monkeypatch.setattr(cuda_nvrtc, "supported_archs", lambda: [75, 80, 86, 89, 90, 100, 120])
    monkeypatch.setattr(cuda_nvrtc, "version", lambda: (13, 5))
    assert cuda_nvrtc.target(80) == ("sm_80", "cubin")
    assert cuda_nvrtc.target(87) == ("sm_86", "cubin")      # a cubin runs on later minor versions
    assert cuda_nvrtc.target(91) == ("sm_90", "cubin")
    assert cuda_nvrtc.target(130) == ("compute_120", "ptx")   # newer than NVRTC: PTX, JIT-compiled
    with pytest.raises(cuda_nvrtc.NvrtcError, match="cannot compile for sm_70.*oldest.*sm_75"):
        cuda_nvrtc.target(70)


@needs_nvrtc
def test_compile_errors_carry_the_log():
    with pytest.raises(CompileError, match=r"NVRTC could not compile bad.cu for sm_80:\n.*undefined"):
        cb.Nvrtc().compile('extern "C" __global__ void k(float* a) { a[0] = nope; }', "bad", 80)
    assert cb.Nvrtc().version().startswith("nvrtc 1")


@needs_nvcc
def test_nvcc_compiles_a_generated_kernel():
    kernel, _ = kernel_of("mul", (sample(np.float32, (3, 4)),) * 2)
    name = f"dg_{kernel.key}"
    image = cb.Nvcc().compile(cb.CudaBackend(arch=80).render(kernel, name), name, 80)
    assert image.startswith(b"\x7fELF") and name.encode() in image
    assert cb.Nvcc().version().startswith("nvcc ")
    with pytest.raises(CompileError, match="nvcc -arch=sm_80 failed"):
        cb.Nvcc().compile("this is not CUDA", "bad", 80)


def test_without_a_compiler_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(cb.Nvrtc, "available", staticmethod(lambda: False))
    monkeypatch.setattr(cb.Nvcc, "available", staticmethod(lambda: False))
    with pytest.raises(CompileError, match=r"nvidia-cuda-nvrtc.*dynograph\[cuda\].*nvcc"):
        cb.default_compiler()


# -- on a GPU ----------------------------------------------------------------------------------
@needs_gpu
def test_kernels_launch_on_the_gpu():
    from dynograph.compiler import interpreter
    from dynograph.runtime.backend import kernel_function
    from dynograph.runtime.cuda_memory import DeviceArray
    gpu = cb.backend(0)
    # (a row of 5000 float32s summed in another order differs by about 1e-4 of its magnitude)
    for op, args, attrs, atol in [("add", (sample(np.float32, (64, 33)),) * 2, {}, 1e-6),
                                  ("sum", (sample(np.float32, (300, 5000)),), {"dim": (1,)}, 1e-3),
                                  ("tanh", (sample(np.float64, (1000,)),), {}, 1e-12)]:
        kernel, arrays = kernel_of(op, args, **attrs)
        graph, _, _ = graph_of(op, args, **attrs)
        want = interpreter.run(graph, arrays)[0][0]
        fn = kernel_function(gpu, kernel)
        inputs = [DeviceArray.from_host(a) for a in arrays]
        out = gpu.allocate(want.shape, want.dtype)
        gpu.launch(fn, kernel, [a.address for a in inputs] + [out.address])
        np.testing.assert_allclose(out.to_host(), want, rtol=1e-5, atol=atol, err_msg=op)


@needs_gpu
def test_integer_division_by_zero_raises_through_the_device_flag():
    from dynograph.runtime.backend import kernel_function
    from dynograph.runtime.cuda_memory import DeviceArray
    gpu = cb.backend(0)
    x = np.array([4, 5, 6], np.int32)
    kernel, arrays = kernel_of("div", (x, np.array([2, 0, 3], np.int32)), rounding_mode="floor")
    fn = kernel_function(gpu, kernel)
    inputs = [DeviceArray.from_host(a) for a in arrays]
    out = gpu.allocate((3,), np.int32)
    fault = np.zeros(1, np.uint8)
    gpu.launch(fn, kernel, [a.address for a in inputs] + [out.address, fault.ctypes.data])
    assert fault[0] == 1


@needs_gpu
def test_allocator_reuses_device_memory():
    from dynograph.runtime.cuda_memory import DeviceArray
    dynograph.cuda.init()
    before = dynograph.cuda.memory_stats()["segment.all.allocated"]
    for _ in range(5):
        a = DeviceArray((1 << 20,), np.float32)
        del a
    assert dynograph.cuda.memory_stats()["segment.all.allocated"] - before <= 1
    start, end = dynograph.cuda.Event(enable_timing=True), dynograph.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0

"""CPU time to compile the generated CUDA kernels with NVRTC, nvcc and llvmlite's NVPTX target
(docs/cuda.md, "Compiling kernels", has the numbers and the decision they support).

    python -m tools.cuda_compile_time [ARCH]        # ARCH like 80 (sm_80), the default

The kernels are tests/test_cuda_codegen.py's representative set, compiled one at a time as the
cuda backend compiles them (then all at once, for NVRTC and nvcc).  Times are CPU seconds of this
process and its children, less sensitive than wall time to a busy machine.  llvmlite's NVPTX
target gets the llvm renderer's IR retargeted (there is no GPU renderer for it): an estimate of
what LLVM's code generation costs, for the kernels it can lower at all; each runs in a forked
child, since LLVM aborts the process on what it cannot lower (math functions without libdevice).
"""
import os
import pickle
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn):
    start = cpu()
    result = fn()
    return cpu() - start, result


def llvm_ptx(source, arch):
    """(CPU seconds, PTX) of the llvm renderer's IR of ``source`` through LLVM's NVPTX target, or
    None when LLVM cannot lower it (measured in a forked child: LLVM aborts on what it cannot)."""
    import llvmlite.binding as llvm
    from dynograph.compiler.llvm.render import render
    fd, path = tempfile.mkstemp()
    os.close(fd)
    pid = os.fork()
    if pid == 0:
        try:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
                cpu=f"sm_{arch}", features="+ptx80", opt=2)

            def compile_():
                mod = llvm.parse_assembly(render(source.kernel, source.name, "nvptx64-nvidia-cuda"))
                pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
                pb.getModulePassManager().run(mod, pb)
                return tm.emit_assembly(mod)
            with open(path, "wb") as f:
                pickle.dump(timed(compile_), f)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
    finally:
        os.unlink(path)


def ptxas(ptx, arch):
    """CPU seconds of ptxas turning ``ptx`` into a cubin, or None when it refuses it."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        seconds, proc = timed(lambda: subprocess.run(
            ["ptxas", f"-arch=sm_{arch}", "-o", os.path.join(tmp, "k.cubin"), src], capture_output=True))
        return seconds if proc.returncode == 0 else None


def main(arch=80):
    from dynograph.compiler.cuda.backend import Nvcc, Nvrtc
    from test_cuda_codegen import representative_kernels
    sources = representative_kernels()
    nvrtc, nvcc = Nvrtc(), Nvcc()
    nvrtc.compile(sources[0].text, "warm", arch)
    times = {"nvrtc": [], "nvcc": [], "llvm to PTX": [], "ptxas": []}
    for s in sources:
        times["nvrtc"].append(timed(lambda: nvrtc.compile(s.text, s.name, arch))[0])
        if nvcc.available():
            times["nvcc"].append(timed(lambda: nvcc.compile(s.text, s.name, arch))[0])
        lowered = llvm_ptx(s, arch)
        if lowered is not None:
            times["llvm to PTX"].append(lowered[0])
            if shutil.which("ptxas"):
                seconds = ptxas(lowered[1], arch)
                if seconds is not None:
                    times["ptxas"].append(seconds)
    print(f"{len(sources)} kernels for sm_{arch}, CPU time (this process and its children):")
    for name, values in times.items():
        if values:
            median = 1000 * statistics.median(values)
            print(f"  {name:12s} {len(values):3d} kernels: median {median:6.1f} ms, "
                  f"total {sum(values):6.2f} s")
    text = "\n".join(s.text for s in sources)
    print(f"  all in one NVRTC program: {timed(lambda: nvrtc.compile(text, 'all', arch))[0]:.2f} s")
    if nvcc.available():
        print(f"  all in one nvcc run: {timed(lambda: nvcc.compile(text, 'all', arch))[0]:.2f} s")


if __name__ == "__main__":
    main(int(re.sub(r"\D", "", sys.argv[1])) if len(sys.argv) > 1 else 80)

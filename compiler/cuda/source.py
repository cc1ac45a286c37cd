"""A kernel's CUDA C source (render.py), its launch shape, and its compilation to cubins with
nvcc, checked for what PTX alone would not show: ptxas's register spills, shared memory and
register count against the limits of the target.

``compile_cubin(sources, arch)`` compiles several kernels in one nvcc run (each source's
prelude is guarded, so sources concatenate) and returns one ``Resources`` per kernel.
"""
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field


from .mapping import MAX_BLOCKS, THREADS, launch_shape, mapping_of, per_thread_mapping
from .render import render

SHARED_LIMIT = 48 * 1024    # static shared memory per block
REGISTERS_PER_SM = 65536


class CudaSource:
    """``kernel`` rendered as the ``__global__`` function ``name`` (default ``dg_<key>``) in its
    mapping (mapping.py), or one thread per kept index with ``per_thread`` (the reference the
    cooperative mappings are checked against)."""

    def __init__(self, kernel, name=None, per_thread=False):
        self.kernel = kernel
        self.name = name or f"dg_{kernel.key}"
        self.mapping = per_thread_mapping(kernel) if per_thread else mapping_of(kernel)
        self.text = render(kernel, self.name, per_thread)

    @property
    def cooperative(self):
        """Whether a block's threads share memory or wait for each other (mapping.py)."""
        return self.mapping.cooperative

    @property
    def divides_integers(self):
        return self.kernel.divides_integers

    def launch_shape(self, threads=None, max_blocks=MAX_BLOCKS):
        """(blocks, threads per block) covering the kernel's work: its mapping's threads, warps,
        blocks or tiles (``threads`` may change the block, except a GEMM's)."""
        return launch_shape(self.mapping, threads, max_blocks)

    def cubin(self, arch="sm_80"):
        """(cubin bytes, Resources) for ``arch``; raises CompileError on spills or over-limit
        resources."""
        return compile_cubin([self], arch)[self.name]


class CompileError(RuntimeError):
    """nvcc failed, or a kernel would spill or exceed a resource limit."""


@dataclass
class Resources:
    """What ptxas reports for one kernel."""
    name: str
    arch: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    shared: int = 0
    cubin: bytes = field(default=b"", repr=False)


def nvcc():
    """The nvcc on PATH (or ``$NVCC``), or None."""
    return shutil.which(os.environ.get("NVCC", "nvcc"))


def parse_ptxas(text, arch):
    """{entry function: Resources} from ``nvcc -Xptxas -v`` output.  Spills of the device
    functions an entry calls (not inlined) count against every entry of the report."""
    found, current, callee_spills = {}, None, 0
    props = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = found.setdefault(m.group(1), Resources(m.group(1), arch))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m and props is not None:
            stack, stores, loads = (int(g) for g in m.groups())
            if props in found:
                r = found[props]
                r.stack, r.spill_stores, r.spill_loads = stack, stores, loads
            else:
                callee_spills += stores + loads
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current.registers = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current.shared = int(s.group(1)) if s else 0
    for r in found.values():
        r.spill_stores += callee_spills
    return found


def compile_cubin(sources, arch="sm_80", threads=THREADS):
    """Compile ``sources`` (CudaSource) in one nvcc run for ``arch``; {name: Resources} with the
    cubin of the whole run in each.  Raises CompileError when nvcc fails, or when a kernel
    spills registers, uses more than SHARED_LIMIT bytes of shared memory, or more registers
    than a block of ``threads`` threads can have."""
    exe = nvcc()
    if exe is None:
        raise CompileError("nvcc not found (set NVCC or put CUDA's bin folder on PATH)")
    with tempfile.TemporaryDirectory(prefix="dynograph-cubin-") as tmp:
        cu, out = os.path.join(tmp, "kernels.cu"), os.path.join(tmp, "kernels.cubin")
        with open(cu, "w") as f:
            f.write("\n".join(s.text for s in sources))
        proc = subprocess.run([exe, "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", out, cu],
                              capture_output=True, text=True)
        if proc.returncode:
            raise CompileError(f"nvcc -arch={arch} failed:\n{proc.stderr[-4000:]}")
        with open(out, "rb") as f:
            cubin = f.read()
    found = parse_ptxas(proc.stdout + proc.stderr, arch)
    result = {}
    for s in sources:
        r = found.get(s.name)
        if r is None:
            raise CompileError(f"ptxas reported nothing for {s.name} ({arch})")
        r.cubin = cubin
        if r.spill_stores or r.spill_loads:
            raise CompileError(f"{s.name} ({arch}) spills registers: {r.spill_stores} bytes "
                               f"stored, {r.spill_loads} loaded")
        if r.shared > SHARED_LIMIT:
            raise CompileError(f"{s.name} ({arch}) uses {r.shared} bytes of shared memory, "
                               f"over {SHARED_LIMIT}")
        if r.registers * threads > REGISTERS_PER_SM:
            raise CompileError(f"{s.name} ({arch}) uses {r.registers} registers: too many for "
                               f"blocks of {threads} threads")
        result[s.name] = r
    return result

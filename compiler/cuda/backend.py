"""The ``cuda`` backend: kernel descriptions rendered as CUDA C (render.py), compiled to a cubin
for the device's compute capability, loaded and launched through runtime/cuda_driver.py, results
in device memory from the caching allocator (runtime/cuda_memory.py).

Compilation is NVRTC's (runtime/cuda_nvrtc.py, the ``nvidia-cuda-nvrtc`` wheel), or nvcc's where
NVRTC is missing: docs/cuda.md has the measurement behind the choice.  ``compile`` keeps each
image in the runtime's disk cache (folder ``cuda``) under a key hashing the source text, the
compiler and its version, and the architecture; loaded kernels are cached in memory per device by
runtime/backend.py (the backend's ``name`` is the device's, ``cuda:0``).
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading

import numpy as np

from dynograph.runtime.backend import Backend
from dynograph.runtime.cache import DiskCache
from .gemm import run_matmul
from .mapping import launch_shape, mapping_of
from .emulate import EMULATED_THREADS
from .render import render
from .source import CompileError, nvcc

FORMAT_VERSION = 1


# -- compilers -------------------------------------------------------------------------------------
class Nvrtc:
    """CUDA C to an image in this process (runtime/cuda_nvrtc.py)."""
    name = "nvrtc"

    @staticmethod
    def available():
        from dynograph.runtime import cuda_nvrtc
        try:
            cuda_nvrtc.library()
        except cuda_nvrtc.NvrtcError:
            return False
        return True

    def version(self):
        from dynograph.runtime import cuda_nvrtc
        return "nvrtc %d.%d" % cuda_nvrtc.version()

    def compile(self, source, name, arch, kernel=None):
        from dynograph.runtime import cuda_nvrtc
        try:
            image, _, _ = cuda_nvrtc.compile(source, f"{name}.cu", arch)
        except cuda_nvrtc.NvrtcError as e:
            raise CompileError(str(e)) from None
        return image


class Nvcc:
    """CUDA C to a cubin with the toolkit's nvcc (a process per compilation)."""
    name = "nvcc"

    @staticmethod
    def available():
        return nvcc() is not None

    def version(self):
        out = subprocess.run([nvcc(), "--version"], capture_output=True, text=True).stdout
        return "nvcc " + (out.strip().splitlines() or ["?"])[-1]

    def compile(self, source, name, arch, kernel=None):
        exe = nvcc()
        if exe is None:
            raise CompileError("nvcc not found (set NVCC or put CUDA's bin folder on PATH)")
        with tempfile.TemporaryDirectory(prefix="dynograph-nvcc-") as tmp:
            cu, out = os.path.join(tmp, f"{name}.cu"), os.path.join(tmp, f"{name}.cubin")
            with open(cu, "w") as f:
                f.write(source)
            proc = subprocess.run([exe, "-cubin", f"-arch=sm_{arch}", "-o", out, cu],
                                  capture_output=True, text=True)
            if proc.returncode:
                raise CompileError(f"nvcc -arch=sm_{arch} failed:\n{proc.stderr[-4000:]}")
            with open(out, "rb") as f:
                return f.read()


class Emulation:
    """CUDA C to a shared object of the CPU emulation (emulate.py): the "image" an emulated
    device (runtime/cuda_emulated.py) loads and launches."""
    name = "emulation"

    @staticmethod
    def available():
        from .emulate import host_compiler
        return host_compiler() is not None

    def version(self):
        from .emulate import FLAGS, host_compiler
        out = subprocess.run([host_compiler(), "--version"], capture_output=True, text=True).stdout
        return f"emulation {(out.splitlines() or ['?'])[0]} {' '.join(FLAGS)}"

    def compile(self, source, name, arch, kernel=None):
        from .emulate import compile_object, translation_unit
        unit = _Unit(name, source, kernel is not None and mapping_of(kernel).cooperative)
        return compile_object(translation_unit([unit]))


class _Unit:
    """What the emulation's translation_unit needs of a kernel's source."""

    def __init__(self, name, text, cooperative):
        self.name, self.text, self.cooperative = name, text, cooperative


COMPILERS = {"nvrtc": Nvrtc, "nvcc": Nvcc}


def default_compiler():
    """NVRTC where its library is installed, else nvcc; raises CompileError with neither.  An
    emulated device (runtime/cuda_emulated.py) takes the emulation's compiler."""
    from dynograph.runtime import cuda_driver
    if cuda_driver.is_initialized() and cuda_driver.emulated():
        return Emulation()
    for cls in COMPILERS.values():
        if cls.available():
            return cls()
    raise CompileError("no CUDA compiler: install the nvidia-cuda-nvrtc wheel (pip install "
                       "'dynograph[cuda]') or put CUDA's nvcc on PATH")


# -- the cache of images -------------------------------------------------------------------------
class ImageCache:
    """Compiled images on disk, keyed by what determines them: the source text, the compiler and
    its version, the architecture (and this cache's format)."""

    def __init__(self, compiler, arch):
        self.compiler, self.arch = compiler, arch
        self._version = None
        self.hits = self.compiled = 0
        self.disk = DiskCache("cuda", ".cubin", self.header)

    def version(self):
        if self._version is None:
            self._version = self.compiler.version()
        return self._version

    def header(self):
        text = f"dynograph-cuda v{FORMAT_VERSION} {self.version()} sm_{self.arch}"
        return hashlib.sha256(text.encode()).hexdigest().encode()

    def key(self, source):
        text = f"{FORMAT_VERSION}\0{self.version()}\0sm_{self.arch}\0{source}"
        return hashlib.sha256(text.encode()).hexdigest()[:40]

    def image(self, source, name, kernel=None):
        """The image of ``source`` from disk, or compiled now (and written)."""
        key = self.key(source)
        image = self.disk.read(key)
        if image is None:
            image = self.compiler.compile(source, name, self.arch, kernel)
            self.compiled += 1
            self.disk.write(key, image)
        else:
            self.hits += 1
        return image


# -- the backend ---------------------------------------------------------------------------------
class CudaBackend(Backend):
    """Kernels on CUDA device ``index`` (see the module's note).  ``arch`` (80 for sm_80) and
    ``compiler`` default to the device's and to ``default_compiler()``; with both given, ``render``
    and ``compile`` need no GPU."""
    disk = None             # compile() keeps images on disk itself, by source hash

    def __init__(self, index=0, arch=None, compiler=None):
        self.index = index
        self.name = f"cuda:{index}"
        self._arch, self._compiler = arch, compiler
        self._cache = None
        self._flag = None
        self._lock = threading.Lock()

    @property
    def arch(self):
        if self._arch is None:
            from dynograph.runtime import cuda_driver
            major, minor = cuda_driver.capability(self.index)
            self._arch = 10 * major + minor
        return self._arch

    @property
    def cache(self):
        if self._cache is None:
            self._cache = ImageCache(self._compiler or default_compiler(), self.arch)
        return self._cache

    def render(self, kernel, name):
        return render(kernel, name)

    def compile(self, source, name, kernel):
        return self.cache.image(source, name, kernel)

    def load(self, obj, name, kernel):
        from dynograph.runtime import cuda_driver
        module = cuda_driver.load_module(obj, self.index)
        fn = cuda_driver.function(module, name, len(kernel.buffers) + kernel.divides_integers)
        # the emulation runs a cooperative block as OS threads: smaller blocks, fewer threads
        threads = EMULATED_THREADS if self.cache.compiler.name == "emulation" else None
        return _Loaded(module, fn, *launch_shape(mapping_of(kernel), threads))

    def launch(self, fn, kernel, addresses):
        """Queue the kernel.  A kernel that divides integers gets a device flag in place of the
        host flag (the last address) the program passes; the flag is copied back after the
        launch, which waits for the kernel."""
        from dynograph.runtime import cuda_driver
        cuda_driver.activate(self.index)
        if not kernel.divides_integers:
            cuda_driver.launch(fn.function, fn.grid, fn.block, addresses)
            return
        with self._lock:
            flag = self._device_flag()
            cuda_driver.copy_to_device(flag.address, np.zeros(1, np.uint8))
            cuda_driver.launch(fn.function, fn.grid, fn.block, [*addresses[:-1], flag.address])
            raised = flag.to_host()
        if raised[0]:
            ctypes.c_uint8.from_address(addresses[-1]).value = 1

    def _device_flag(self):
        if self._flag is None:
            from dynograph.runtime.cuda_memory import DeviceArray
            self._flag = DeviceArray((1,), np.uint8, self.index)
        return self._flag

    def matmul(self, a, b, out, bias=None, alpha=1, beta=1):
        """``out = a @ b`` (addmm's ``beta * bias + alpha * (a @ b)`` with ``bias``) of device
        arrays by the tiled GEMM kernel (gemm.py)."""
        arrays = [a, b] if bias is None or beta == 0 else [a, b, bias]
        shadows = [x.shadow()[0] for x in arrays + [out]]
        if bias is not None and beta != 0:
            shadows[2] = np.broadcast_to(shadows[2], out.shape)
        return run_matmul(self, arrays + [out], shadows, alpha, beta)

    def extern(self, op, args, attrs):
        from .eager import extern
        return extern(self, op, args, attrs)

    def allocate(self, shape, dtype):
        from dynograph.runtime.cuda_memory import DeviceArray
        return DeviceArray(shape, dtype, self.index)

    def address(self, array):
        return array.address


class _Loaded:
    """A loaded kernel: its module (kept alive with it), function and launch shape."""
    __slots__ = ("module", "function", "grid", "block")

    def __init__(self, module, function, grid, block):
        self.module, self.function, self.grid, self.block = module, function, grid, block


_backends = {}


def backend(index=0):
    """The backend of CUDA device ``index`` (one per device and process; an emulated device's
    has a name of its own, so no cache mixes its kernels with a GPU's)."""
    from dynograph.runtime import cuda_driver
    key = (index, cuda_driver.emulated())
    if key not in _backends:
        _backends[key] = be = CudaBackend(index)
        if key[1]:
            be.name = f"cuda-emulated:{index}"
    return _backends[key]


def run(graph, inputs, batch=None, writable=()):
    """Execute ``graph`` on the CUDA device its inputs live on (compiler/lowering/program.py):
    kernels where its nodes lower, the rest by ``CudaBackend.extern``.  Host inputs (numbers the
    function reads, 0-d cpu tensors) are copied to the device first."""
    from dynograph.runtime.cuda_memory import DeviceArray
    from ..lowering.program import run as run_program
    index = next(a.index for a in inputs if type(a) is DeviceArray)
    inputs = [DeviceArray.from_host(a, index) if type(a) is np.ndarray else a for a in inputs]
    return run_program(graph, inputs, batch, writable, backend=backend(index))

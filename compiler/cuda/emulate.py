"""Rendered CUDA C kernels run on the CPU: the source after ``HEADER`` (which defines
``__global__``, ``blockIdx``/``threadIdx``/``blockDim``/``gridDim`` and the bit-cast intrinsics
on the host), compiled with the host C++ compiler into a shared object and loaded with ctypes.
A launch runs every thread of the grid in turn, so the renderer's indexing, grid-stride loops,
reductions and scalar semantics are tested on machines without a GPU.

Several kernels compile into one shared object (``build``); objects are cached by a hash of
their text in a folder of this process, removed at exit.  ``EMULATION`` is the same as a
``runtime.backend.Backend``, so a whole program can run on emulated CUDA kernels.
"""
import atexit
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from dynograph.runtime.backend import Backend
from .source import CudaSource

# what rendered kernels need from CUDA, on the host (a string: the package ships Python only)
HEADER = r"""/* A launch runs every thread of the grid in turn on one
   OS thread: correct for kernels whose threads share no memory and never wait for each other
   (no __shared__, __syncthreads() a no-op), which is all the renderer emits so far. */
#include <math.h>
#include <string.h>
#include <utility>

#define __global__
#define __device__
#define __forceinline__ inline

struct dim3 { unsigned int x, y, z; };
static thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

static inline void __syncthreads() {}

static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }

/* Run kernel k over a grid of `grid` blocks of `block` threads, its arguments the addresses
   in args.  Blocks run last to first, so a kernel that depended on their order would show. */
template <class... A, size_t... I>
static void dg_call(void (*k)(A...), void **args, std::index_sequence<I...>) {
  k(static_cast<A>(args[I])...);
}

template <class... A>
static void dg_emulate(void (*k)(A...), void **args, unsigned grid, unsigned block) {
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  for (unsigned b = grid; b-- > 0;) {
    blockIdx = dim3{b, 0, 0};
    for (unsigned t = 0; t < block; ++t) {
      threadIdx = dim3{t, 0, 0};
      dg_call(k, args, std::index_sequence_for<A...>{});
    }
  }
}
"""
FLAGS = ["-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-w"]
_LAUNCHER = 'extern "C" void {0}__launch(void **a, unsigned g, unsigned b) {{ dg_emulate({0}, a, g, b); }}'

_lock = threading.Lock()
_folder = {}                # pid -> the folder of this process's shared objects
_libraries = {}             # source hash -> CDLL


def host_compiler():
    """The host C++ compiler (``$CXX``, else g++), or None."""
    return shutil.which(os.environ.get("CXX", "g++"))


def _workdir():
    pid = os.getpid()
    if pid not in _folder:
        path = tempfile.mkdtemp(prefix="dynograph-cuda-emulation-")
        _folder[pid] = path
        atexit.register(shutil.rmtree, path, True)
    return _folder[pid]


def translation_unit(sources):
    """One C++ file: the emulation header, the kernels, a launcher per kernel."""
    parts = [HEADER] + [s.text for s in sources] + [_LAUNCHER.format(s.name) for s in sources]
    return "\n".join(parts) + "\n"


def compile_object(text):
    """The shared object (bytes) of a translation unit, compiled in this process's folder."""
    return _compile(text)[1]


def _compile(text):
    exe = host_compiler()
    if exe is None:
        raise RuntimeError("no host C++ compiler (g++ or $CXX) to emulate CUDA kernels with")
    key = hashlib.sha256((" ".join(FLAGS) + "\0" + text).encode()).hexdigest()[:24]
    folder = _workdir()
    so = os.path.join(folder, f"{key}.so")
    if not os.path.exists(so):
        src = os.path.join(folder, f"{key}.cc")
        with open(src, "w") as f:
            f.write(text)
        tmp = f"{so}.{threading.get_ident()}.tmp"
        proc = subprocess.run([exe, *FLAGS, "-o", tmp, src], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"emulated CUDA source failed to compile:\n{proc.stderr[-4000:]}")
        os.replace(tmp, so)
    with open(so, "rb") as f:
        return so, f.read()


def _load(path_key, path):
    with _lock:
        lib = _libraries.get(path_key)
        if lib is None:
            lib = _libraries[path_key] = ctypes.CDLL(path)
        return lib


class Launcher:
    """Runs one emulated kernel: ``launcher(addresses, grid, block)``."""

    def __init__(self, lib, source):
        self.source = source
        self.fn = getattr(lib, source.name + "__launch")
        self.fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]
        self.fn.restype = None

    def __call__(self, addresses, grid=None, block=None):
        if grid is None or block is None:
            g, b = self.source.launch_shape()
            grid, block = grid or g, block or b
        args = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        self.fn(args, grid, block)

    def run(self, arrays, grid=None, block=None):
        """Launch on numpy arrays (the kernel's buffers in order); raises torch's
        ``RuntimeError: ZeroDivisionError`` when an integer divisor was 0."""
        addresses = [a.ctypes.data for a in arrays]
        fault = np.zeros(1, np.uint8)
        if self.source.kernel.divides_integers:
            addresses.append(fault.ctypes.data)
        self(addresses, grid, block)
        if fault[0]:
            raise RuntimeError("ZeroDivisionError")


def build(sources):
    """{name: Launcher} of ``sources`` (CudaSource), compiled together."""
    text = translation_unit(sources)
    path, _ = _compile(text)
    lib = _load(path, path)
    return {s.name: Launcher(lib, s) for s in sources}


def emulate(kernel, grid=None, block=None):
    """A Launcher of ``kernel`` alone."""
    source = CudaSource(kernel)
    return build([source])[source.name]


class EmulationBackend(Backend):
    """CUDA C kernels run by the emulation on host memory, behind the backend interface
    (runtime/backend.py): compiled programs run on them unchanged."""
    name = "cuda-emulation"
    disk = None

    def render(self, kernel, name):
        return CudaSource(kernel, name).text

    def compile(self, source, name, kernel):
        return compile_object(translation_unit([_Named(name, source, kernel)]))

    def load(self, obj, name, kernel):
        key = hashlib.sha256(obj).hexdigest()[:24]
        path = os.path.join(_workdir(), f"loaded-{key}.so")
        if not os.path.exists(path):
            with open(f"{path}.tmp", "wb") as f:
                f.write(obj)
            os.replace(f"{path}.tmp", path)
        source = CudaSource(kernel, name)
        return Launcher(_load(path, path), source)

    def launch(self, fn, kernel, addresses):
        fn(addresses)

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data


class _Named:
    """What translation_unit needs of a source: its name and text."""
    def __init__(self, name, text, kernel):
        self.name, self.text, self.kernel = name, text, kernel


EMULATION = EmulationBackend()

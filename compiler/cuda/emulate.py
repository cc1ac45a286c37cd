"""Rendered CUDA C kernels run on the CPU: the source after ``HEADER`` (which defines
``__global__``, ``blockIdx``/``threadIdx``/``blockDim``/``gridDim`` and the bit-cast intrinsics
on the host), compiled with the host C++ compiler into a shared object and loaded with ctypes.
A launch of a per-thread kernel runs every thread of the grid in turn; a cooperative kernel's
(mapping.py: block and warp reductions, GEMM tiles) runs one OS thread per CUDA thread of a
block with a barrier for ``__syncthreads()`` and emulated warp shuffles (``COOPERATIVE``, added
to translation units that need it).  So the renderer's indexing, grid-stride loops, reductions,
shared memory and scalar semantics are tested on machines without a GPU.

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
from .gemm import run_matmul
from .mapping import mapping_of
from .source import CudaSource

# what rendered kernels need from CUDA, on the host (a string: the package ships Python only)
HEADER = r"""/* A launch of a per-thread kernel (threads that share no memory and never wait for each
   other) runs every thread of the grid in turn on one OS thread. */
#include <math.h>
#include <string.h>
#include <utility>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct dim3 { unsigned int x, y, z; };
static thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
static inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}

/* Run kernel k over a grid of `grid` blocks of `block` threads, its arguments the addresses
   in args.  Blocks run last to first, so a kernel that depended on their order would show. */
template <class... A, size_t... I>
static void dg_call(void (*k)(A...), void **args, std::index_sequence<I...>) {
  k(static_cast<A>(args[I])...);
}

template <class... A>
static int dg_emulate(void (*k)(A...), void **args, unsigned grid, unsigned block) {
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  for (unsigned b = grid; b-- > 0;) {
    blockIdx = dim3{b, 0, 0};
    for (unsigned t = 0; t < block; ++t) {
      threadIdx = dim3{t, 0, 0};
      dg_call(k, args, std::index_sequence_for<A...>{});
    }
  }
  return 0;
}
"""

# what translation units of cooperative kernels add: one OS thread per CUDA thread of a block
COOPERATIVE = r"""/* A launch of a cooperative kernel (block and warp reductions, GEMM tiles) runs one OS
   thread per CUDA thread of a block, the blocks in turn: __shared__ variables are static (one
   block runs at a time, launches are serialized), __syncthreads() is a barrier of the block's
   threads, and a warp shuffle exchanges values through one slot per thread between two
   barriers of the warp's threads. */
#include <pthread.h>

struct dg_block {       /* what a block's threads share */
  pthread_barrier_t all;
  pthread_barrier_t warps[32];
  unsigned long long slots[1024];     /* one shuffle slot per thread */
};
static thread_local dg_block *dg_current = nullptr;
static pthread_mutex_t dg_launch_lock = PTHREAD_MUTEX_INITIALIZER;

static inline void __syncthreads() { pthread_barrier_wait(&dg_current->all); }

/* the value lane `from` of this thread's warp holds (its own where `from` is outside) */
template <class T>
static inline T dg_shuffle(T v, unsigned from, bool inside) {
  dg_block *b = dg_current;
  unsigned t = threadIdx.x;
  unsigned long long raw = 0;
  memcpy(&raw, &v, sizeof(T));
  b->slots[t] = raw;
  pthread_barrier_wait(&b->warps[t >> 5]);
  T out = v;
  if (inside && from < blockDim.x) memcpy(&out, &b->slots[from], sizeof(T));
  pthread_barrier_wait(&b->warps[t >> 5]);
  return out;
}
template <class T>
static inline T __shfl_down_sync(unsigned, T v, unsigned delta) {
  return dg_shuffle(v, threadIdx.x + delta, (threadIdx.x & 31u) + delta < 32u);
}
template <class T>
static inline T __shfl_sync(unsigned, T v, int lane) {
  return dg_shuffle(v, (threadIdx.x & ~31u) + (unsigned)lane, true);
}

template <class... A>
struct dg_thread_args { void (*k)(A...); void **args; unsigned grid, block, t; dg_block *shared; };

static pthread_mutex_t dg_start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dg_start_cond = PTHREAD_COND_INITIALIZER;
static int dg_start = 0;      /* 0: wait, 1: run, -1: give up (a thread could not be started) */

template <class... A>
static void *dg_thread(void *p) {
  dg_thread_args<A...> *a = (dg_thread_args<A...> *)p;
  pthread_mutex_lock(&dg_start_lock);
  while (dg_start == 0) pthread_cond_wait(&dg_start_cond, &dg_start_lock);
  int go = dg_start;
  pthread_mutex_unlock(&dg_start_lock);
  if (go < 0) return nullptr;
  dg_current = a->shared;
  gridDim = dim3{a->grid, 1, 1};
  blockDim = dim3{a->block, 1, 1};
  threadIdx = dim3{a->t, 0, 0};
  for (unsigned b = a->grid; b-- > 0;) {
    blockIdx = dim3{b, 0, 0};
    dg_call(a->k, a->args, std::index_sequence_for<A...>{});
    pthread_barrier_wait(&a->shared->all);   /* the next block reuses the shared memory */
  }
  return nullptr;
}

/* 0, or -1 when the block's threads could not all be started (nothing ran then) */
template <class... A>
static int dg_emulate_block(void (*k)(A...), void **args, unsigned grid, unsigned block) {
  pthread_mutex_lock(&dg_launch_lock);
  dg_block *shared = new dg_block;
  pthread_barrier_init(&shared->all, nullptr, block);
  for (unsigned w = 0; w * 32 < block; ++w)
    pthread_barrier_init(&shared->warps[w], nullptr, block - w * 32 < 32 ? block - w * 32 : 32);
  dg_thread_args<A...> *args_of = new dg_thread_args<A...>[block];
  pthread_t *threads = new pthread_t[block];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  dg_start = 0;
  unsigned started = 0;
  for (; started < block; ++started) {
    args_of[started] = dg_thread_args<A...>{k, args, grid, block, started, shared};
    if (pthread_create(&threads[started], &attr, dg_thread<A...>, &args_of[started])) break;
  }
  pthread_mutex_lock(&dg_start_lock);
  dg_start = started == block ? 1 : -1;
  pthread_cond_broadcast(&dg_start_cond);
  pthread_mutex_unlock(&dg_start_lock);
  for (unsigned t = 0; t < started; ++t) pthread_join(threads[t], nullptr);
  pthread_attr_destroy(&attr);
  for (unsigned w = 0; w * 32 < block; ++w) pthread_barrier_destroy(&shared->warps[w]);
  pthread_barrier_destroy(&shared->all);
  delete[] threads;
  delete[] args_of;
  delete shared;
  pthread_mutex_unlock(&dg_launch_lock);
  return started == block ? 0 : -1;
}
"""
FLAGS = ["-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-ffp-contract=off", "-w"]
_LAUNCHER = ('extern "C" int {0}__launch(void **dg_args, unsigned dg_grid, unsigned dg_block) '
             '{{ return {1}({0}, dg_args, dg_grid, dg_block); }}')

EMULATED_THREADS = 64       # the block size of reductions run by EMULATION
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
    """One C++ file: the emulation header (and its cooperative part where a kernel needs it),
    the kernels, a launcher per kernel."""
    cooperative = any(s.cooperative for s in sources)
    parts = [HEADER] + ([COOPERATIVE] if cooperative else []) + [s.text for s in sources] + \
        [_launcher(s) for s in sources]
    return "\n".join(parts) + "\n"


def _launcher(source):
    """The C entry point running ``source``'s kernel over a grid: cooperative kernels (shared
    memory, barriers, shuffles) get one OS thread per CUDA thread of a block."""
    run = "dg_emulate_block" if source.cooperative else "dg_emulate"
    return _LAUNCHER.format(source.name, run)


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
        self.fn.restype = ctypes.c_int

    def __call__(self, addresses, grid=None, block=None):
        if grid is None or block is None:
            g, b = self.source.launch_shape()
            grid, block = grid or g, block or b
        mapping = getattr(self.source, "mapping", None)
        if mapping is not None:
            mapping.check_block(block)
        args = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        if self.fn(args, grid, block):
            raise RuntimeError(f"the CUDA emulation could not start {block} threads for a block "
                               f"of {self.source.name}")

    def run(self, arrays, grid=None, block=None):
        """Launch on numpy arrays (the kernel's buffers in order); raises torch's
        ``RuntimeError: ZeroDivisionError`` when an integer divisor was 0."""
        addresses = [a.ctypes.data for a in arrays]
        fault = np.zeros(1, np.uint8)
        if self.source.divides_integers:
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
        # reductions in blocks of 64 threads (two warps: the join through shared memory
        # runs) rather than 256: a quarter of the OS threads and barriers to emulate
        fn(addresses, *fn.source.launch_shape(EMULATED_THREADS))

    def matmul(self, a, b, out, bias=None, alpha=1, beta=1):
        """``out = a @ b`` (addmm's ``beta * bias + alpha * (a @ b)`` with ``bias``) by the
        emulated tiled GEMM kernel (gemm.py)."""
        arrays = [a, b] if bias is None or beta == 0 else [a, b, np.broadcast_to(bias, out.shape)]
        return run_matmul(self, arrays + [out], arrays + [out], alpha, beta)

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def address(self, array):
        return array.ctypes.data


class _Named:
    """What translation_unit needs of a source: its name, text and mapping."""
    def __init__(self, name, text, kernel):
        self.name, self.text, self.kernel = name, text, kernel
        self.cooperative = mapping_of(kernel).cooperative


EMULATION = EmulationBackend()

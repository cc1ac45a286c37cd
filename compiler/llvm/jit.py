"""All of dynograph's LLVM plumbing: target initialization, the host TargetMachine, the O2
pass pipeline, object code emission and the JIT engine.

The pipeline is LLVM's O2 with loop and SLP vectorization and without loop interleaving: the
kernels are single loop nests that O2 vectorizes as O3 does (the examples' training steps and
the elementwise benchmarks run as fast), while O3 takes twice as long to optimize them and, on
reductions, up to fifty times as long; interleaving (several vector accumulators per loop) costs
another quarter of the compile time for no measurable gain on memory-bound loops.  Unrolling
only where the backend asks for it (``emit_object(unroll=)``, llvm/backend.py's ``unrolled``:
the direct kernels' small constant loops and rows reduced in one loop need it); it doubles
the compile time of the other fused kernels, which gain nothing from it.

Compilation is thread-safe and runs in parallel (runtime/backend.py compiles a program's kernels
on a few threads): llvmlite serializes every call into LLVM behind one process-wide lock, so
the four calls that take the time (parsing, verifying, the pass pipeline, code generation) are
made without it, each compilation in an LLVM context of its own with its thread's own
TargetMachine (neither is thread-safe); everything else goes through llvmlite as usual.

Compiled kernels are cached (runtime/backend.py) in memory by their description's hash, and on
disk as object code in the runtime's disk cache (runtime/cache.py, folder ``kernels``) under
``DISK``'s header: the format version, llvmlite's version, the host CPU and its features and a
hash of the code generator's source; an entry compiled by anything else is rebuilt, never
loaded.

``DYNOGRAPH_DEBUG=1`` prints each kernel compiled (name, domain, time); ``2`` also the
optimized LLVM IR.  ``STATS["compiled"]`` counts compilations (tests check a warm disk cache
compiles nothing).
"""
import contextlib
import ctypes
import hashlib
import os
import sys
import threading
import time

import llvmlite
import llvmlite.binding as llvm
from llvmlite.binding import ffi
from llvmlite.binding.module import ModuleRef

from dynograph.runtime import config
from dynograph.runtime.backend import STATS, settle_compilations  # noqa: F401  (STATS: every backend's)
from dynograph.runtime.cache import DiskCache

FORMAT_VERSION = 3         # 2: every kernel's function is called dg_kernel; 3: it is a pool task

_lock = threading.RLock()


# compilations inside LLVM without llvmlite's lock (emit_object), on any thread: [the number,
# a condition notified when it drops]; a fork waits for none to be left, holding the condition
_compiling = [0, threading.Condition(threading.Lock())]


@contextlib.contextmanager
def _compilation():
    with _compiling[1]:
        _compiling[0] += 1
    try:
        yield
    finally:
        with _compiling[1]:
            _compiling[0] -= 1
            _compiling[1].notify_all()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have."""
    global _lock
    _lock = threading.RLock()
    _compiling[:] = [0, threading.Condition(threading.Lock())]
    ffi.lib._lock._lock.release()           # taken by this thread before the fork


def _before_fork():
    """No thread may be inside LLVM when the process forks (the child would inherit LLVM's and
    llvmlite's locks held by threads it does not have): the compilations running ahead finish
    (runtime/backend.py), so do those of other threads (which skip llvmlite's lock), and no
    new one starts; then this thread holds llvmlite's lock across the fork."""
    settle_compilations()
    _compiling[1].acquire()
    _compiling[1].wait_for(lambda: _compiling[0] == 0)
    ffi.lib._lock._lock.acquire()


def _after_fork_in_parent():
    ffi.lib._lock._lock.release()
    _compiling[1].release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_new_lock_in_child)
_state = {}
_codegen = {}


def _init():
    """The host's description and the maker of its TargetMachines, once per process."""
    if not _state:
        with _lock:
            if not _state:
                _initialize()
    return _state


def _initialize():
    """LLVM's native target, the options and the host's description (once, under the lock)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for option in OPTIONS:
        llvm.set_option("dynograph", option)
    target = llvm.Target.from_default_triple()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    # Static relocation (under a JIT's large code model, absolute addresses): every object is
    # loaded into one engine (load_all), where position-independent code, which reaches its
    # constants and the C library through a GOT, ran a later object on another's table
    # (wrong results, crashes: tests/test_jit_loading.py)
    def machine():
        return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                            codemodel="jitdefault")
    _state.update(machine=machine, triple=llvm.get_process_triple(),
                  fingerprint=f"{cpu};{features}", engines=[])


def triple():
    return _init()["triple"]


def _codegen_version():
    """A hash of the code generator's source (the renderer, the schedule it follows, this
    module): changing how kernels are rendered retires the entries compiled before (their
    description hashes stay the same)."""
    if "codegen" not in _codegen:
        here = os.path.dirname(os.path.abspath(__file__))
        digest = hashlib.sha256()
        for name in ("render.py", "jit.py", os.path.join("..", "lowering", "schedule.py")):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
        _codegen["codegen"] = digest.hexdigest()[:16]
    return _codegen["codegen"]


def _header():
    state = _init()
    text = f"dynograph-kernel v{FORMAT_VERSION} llvmlite {llvmlite.__version__} " \
           f"{state['triple']} {state['fingerprint']} codegen {_codegen_version()}"
    return hashlib.sha256(text.encode()).hexdigest().encode()


# object code on disk (runtime/cache.py): entries start with this backend's header
DISK = DiskCache("kernels", ".o", _header)
# the same for the backend's own runtime code (the worker pool, the BLAS tasks)
RUNTIME = DiskCache("runtime", ".o", _header)


def runtime_object(name, sources, build):
    """Object code of the runtime module ``name``: ``build()`` gives its LLVM IR text, which
    depends only on the files ``sources`` and the target.  Cached on disk under a hash of
    those, so that a warm start builds no IR (building the pool's took ~0.1 s)."""
    digest = hashlib.sha256(triple().encode())
    for path in sources:
        with open(path, "rb") as f:
            digest.update(f.read())
    key = f"{name}-{digest.hexdigest()[:32]}"
    obj = RUNTIME.read(key)
    if obj is None:
        obj = emit_object(build(), name, level=RUNTIME_SPEED_LEVEL)
        RUNTIME.write(key, obj)
    return obj


# LLVM options, process-wide.  The loop vectorizer's default skips loops shorter than 16
# iterations; the rows of our direct kernels are often shorter (a pooled 28x28 image has rows of
# 14 windows), and left scalar, their float selects become branches that mispredict on real
# data: max pooling ran 17x slower.
OPTIONS = ("-vectorizer-min-trip-count=4",)
SPEED_LEVEL = 2     # LLVM's -O level of the pass pipeline (see above)
# the runtime modules (pool.py, blas.py) are hand-written loops and calls, whose object code O1
# makes the same as O2 (the pool's and the BLAS tasks, checked) in 78% of the time
# (kernels gain nothing from it: their time is in the vectorizer and code generation)
RUNTIME_SPEED_LEVEL = 1
TUNING = {"loop_vectorization": True, "slp_vectorization": True, "loop_interleaving": False}


_local = threading.local()


def _machine():
    """This thread's TargetMachine: LLVM's is not thread-safe (code generation keeps state in
    it), so each compiling thread has its own, made with the same options."""
    tm = getattr(_local, "tm", None)
    if tm is None:
        tm = _local.tm = _init()["machine"]()
    return tm


def _unlocked(name):
    """The C function ``name`` of llvmlite's library, called without llvmlite's process-wide
    lock (which would make parallel compilations take turns).  Only for calls on objects this
    thread alone holds: a module in its own context, its own TargetMachine."""
    return getattr(ffi.lib, name)._cfn


def optimize(module_text, level=None, unroll=True, vectorize=True):
    """Parse, verify and optimize LLVM IR text for the host (at -O``level``, default
    ``SPEED_LEVEL``; ``unroll``: with LLVM's loop unrolling; ``vectorize``: with the loop and
    SLP vectorizers ``TUNING`` asks for); returns the ModuleRef (in an LLVM context of its
    own)."""
    context = llvm.create_context()
    with ffi.OutputString() as err:
        mod = ModuleRef(_unlocked("LLVMPY_ParseAssembly")(context, ctypes.c_char_p(
            module_text.encode()), err), context)
        if err:
            mod.close()
            raise RuntimeError(f"LLVM IR parsing error\n{err}")
    with ffi.OutputString() as err:
        if _unlocked("LLVMPY_VerifyModule")(mod, err):
            raise RuntimeError(str(err))
    pto = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL if level is None else level)
    for option, value in TUNING.items():
        setattr(pto, option, value and (vectorize or not option.endswith("_vectorization")))
    pto.loop_unrolling = unroll
    pb = llvm.create_pass_builder(_machine(), pto)
    _unlocked("LLVMPY_RunNewModulePassManager")(pb.getModulePassManager(), mod, pb)
    return mod


def _object_code(mod):
    """The object code of an optimized module, by this thread's TargetMachine."""
    with ffi.OutputString() as err:
        buffer = _unlocked("LLVMPY_TargetMachineEmitToMemory")(_machine(), mod, 1, err)
        if not buffer:
            raise RuntimeError(str(err))
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buffer),
                                ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def emit_object(module_text, name, describe="", level=None, unroll=True, vectorize=True):
    """Object code of LLVM IR text, optimized for the host (``level``, ``unroll``,
    ``vectorize``: as ``optimize``).  Safe to call from several threads at once: they compile
    in parallel."""
    start = time.perf_counter()
    with _compilation():
        mod = optimize(module_text, level, unroll, vectorize)
        obj = _object_code(mod)
    if config.debug("kernels"):
        ms = (time.perf_counter() - start) * 1e3
        print(f"[dynograph] compiled {name} {describe} in {ms:.1f} ms", file=sys.stderr)
    if config.debug("llvm_ir"):
        print(str(mod), file=sys.stderr)
    mod.close()
    return obj


def load(obj, name, argtypes):
    """The ctypes function ``name`` of object code ``obj``, loaded into this process."""
    return ctypes.CFUNCTYPE(None, *argtypes)(load_all(obj, [name])[name])


def load_all(obj, names):
    """{name: address} of the functions ``names`` of object code ``obj``, loaded into this
    process."""
    with _lock:
        state = _init()
        if "engine" not in state:
            state["engine"], state["seen"] = _engine(), set()
        objfile = llvm.ObjectFileRef.from_data(obj)
        state["engine"].add_object_file(objfile)
        state["engine"].finalize_object()
        addresses = {name: state["engine"].get_function_address(name) for name in names}
        # Every kernel's function has one name (llvm/backend.py); the engine's symbol table
        # keeps a name's newest definition, so the address is this object's.  Should that ever
        # not hold, an address handed out before shows it: the object gets an engine alone.
        if any(address in state["seen"] for address in addresses.values()):
            engine = _engine()
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            engine.finalize_object()
            state["engines"].append(engine)
            addresses = {name: engine.get_function_address(name) for name in names}
        state["seen"].update(addresses.values())
    missing = [name for name, address in addresses.items() if not address]
    if missing:
        raise RuntimeError(f"dynograph: {', '.join(missing)} missing from its object code")
    return addresses


def _engine():
    """An engine to load object code into, kept for the process' life.  One engine takes every
    object (making an engine and its machine took 0.3 of the 0.4 ms of loading a kernel).  Its
    empty module leaves before an object is finalized: MCJIT would generate code for it there
    (1.2 -> 0.4 ms an object)."""
    module = llvm.parse_assembly("")
    engine = llvm.create_mcjit_compiler(module, _init()["machine"]())
    engine.remove_module(module)
    return engine

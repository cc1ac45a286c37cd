"""All of dynograph's LLVM plumbing: target initialization, the host TargetMachine, the O3
pass pipeline, object code emission, the JIT engine, and the kernel caches.

Compiled kernels are kept in memory by their description's hash, and on disk as object code
in ``$DYNOGRAPH_CACHE_DIR`` (default ``$XDG_CACHE_HOME/dynograph``, ``~/.cache/dynograph``).
An entry starts with a header naming the format version, llvmlite's version, the host CPU and
its features, and a hash of the object code: an entry whose header does not match, or whose
code does not match its hash, is rebuilt and rewritten, never loaded.

``DYNOGRAPH_DEBUG=1`` prints each kernel compiled (name, domain, time); ``2`` also the
optimized LLVM IR.  ``STATS["compiled"]`` counts LLVM compilations (tests check a warm disk
cache compiles nothing).
"""
import ctypes
import hashlib
import os
import sys
import threading
import time

import llvmlite
import llvmlite.binding as llvm

FORMAT_VERSION = 1
STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}

_lock = threading.RLock()
_state = {}
_codegen = {}


def _init():
    """The target machine and the JIT engine, created once per process."""
    if not _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        def machine():
            return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic",
                                                codemodel="jitdefault")
        _state.update(tm=machine(), machine=machine, triple=llvm.get_process_triple(),
                      fingerprint=f"{cpu};{features}", functions={}, objects=[])
    return _state


def triple():
    return _init()["triple"]


def debug_level():
    try:
        return int(os.environ.get("DYNOGRAPH_DEBUG", "0"))
    except ValueError:
        return 0


def cache_dir():
    root = os.environ.get("DYNOGRAPH_CACHE_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dynograph")


def _codegen_version():
    """A hash of the code generator's source: changing how kernels are rendered retires the
    entries compiled before (their description hashes stay the same)."""
    if "codegen" not in _codegen:
        here = os.path.dirname(os.path.abspath(__file__))
        digest = hashlib.sha256()
        for name in ("render.py", "jit.py"):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(f.read())
        _codegen["codegen"] = digest.hexdigest()[:16]
    return _codegen["codegen"]


def _header():
    state = _init()
    text = f"dynograph-kernel v{FORMAT_VERSION} llvmlite {llvmlite.__version__} " \
           f"{state['triple']} {state['fingerprint']} codegen {_codegen_version()}"
    return hashlib.sha256(text.encode()).hexdigest().encode()


def _entry_path(key):
    return os.path.join(cache_dir(), "kernels", f"{key}.o")


def _read_entry(key):
    """The object code of a valid entry, or None (missing, foreign or corrupted)."""
    try:
        with open(_entry_path(key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = _header()
    if len(data) < len(header) + 65 or not data.startswith(header + b"\n"):
        return None
    digest, obj = data[len(header) + 1:len(header) + 65], data[len(header) + 66:]
    if hashlib.sha256(obj).hexdigest().encode() != digest:
        return None
    return obj


def _write_entry(key, obj):
    path = _entry_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(_header() + b"\n" + hashlib.sha256(obj).hexdigest().encode() + b"\n" + obj)
        os.replace(tmp, path)               # readers see the old entry or the whole new one
    except OSError:
        pass                                # a read-only cache folder only costs compile time


def optimize(module_text):
    """Parse, verify and optimize LLVM IR text at O3 for the host; returns the ModuleRef."""
    state = _init()
    mod = llvm.parse_assembly(module_text)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(state["tm"], pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def compile_kernel(name, key, build_ir, argtypes, describe=""):
    """The ctypes function ``name`` of the kernel ``key``: from memory, from the disk cache,
    or compiled from ``build_ir()`` (LLVM IR text)."""
    with _lock:
        state = _init()
        fn = state["functions"].get(key)
        if fn is not None:
            STATS["memory_hits"] += 1
            return fn
        obj = _read_entry(key)
        if obj is not None:
            STATS["disk_hits"] += 1
        else:
            start = time.perf_counter()
            mod = optimize(build_ir())
            obj = state["tm"].emit_object(mod)
            STATS["compiled"] += 1
            _write_entry(key, obj)
            level = debug_level()
            if level >= 1:
                ms = (time.perf_counter() - start) * 1e3
                print(f"[dynograph] compiled {name} {describe} in {ms:.1f} ms", file=sys.stderr)
            if level >= 2:
                print(str(mod), file=sys.stderr)
        # one engine per kernel (it owns the machine it is given); kept for the process' life
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), state["machine"]())
        objfile = llvm.ObjectFileRef.from_data(obj)
        engine.add_object_file(objfile)
        state["objects"].append((engine, obj, objfile))
        engine.finalize_object()
        address = engine.get_function_address(name)
        if not address:
            raise RuntimeError(f"dynograph: kernel {name} missing from its object code")
        fn = ctypes.CFUNCTYPE(None, *argtypes)(address)
        state["functions"][key] = fn
        return fn

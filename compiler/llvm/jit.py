"""All of dynograph's LLVM plumbing: target initialization, the host TargetMachine, the O3
pass pipeline, object code emission, the JIT engine, and the kernel caches.

Compiled kernels are kept in memory by their description's hash, and on disk as object code
in ``$DYNOGRAPH_CACHE_DIR`` (default ``$XDG_CACHE_HOME/dynograph``, ``~/.cache/dynograph``).
An entry starts with a header naming the format version, llvmlite's version, the host CPU and
its features, and a hash of the object code: an entry whose header does not match, or whose
code does not match its hash, is rebuilt and rewritten, never loaded.

The disk cache holds at most ``$DYNOGRAPH_CACHE_SIZE_MB`` (default ``CACHE_SIZE_MB``) of
entries: a write that goes past it deletes the least recently used ones (a hit refreshes an
entry's mtime).  Loading an entry runs its code, so a cache folder that someone else could
write to (owned by another user, or writable by others) is not used: kernels are then kept in
memory only, with one warning.

``DYNOGRAPH_DEBUG=1`` prints each kernel compiled (name, domain, time); ``2`` also the
optimized LLVM IR.  ``STATS["compiled"]`` counts LLVM compilations (tests check a warm disk
cache compiles nothing).
"""
import ctypes
import hashlib
import os
import stat
import sys
import tempfile
import threading
import time
import warnings

import llvmlite
import llvmlite.binding as llvm

FORMAT_VERSION = 1
CACHE_SIZE_MB = 256             # the disk cache's default cap
STALE_TEMP_S = 3600             # a temporary this old is a killed writer's
STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}

_lock = threading.RLock()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have."""
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)
_state = {}
_codegen = {}
_folders = {}                   # kernel folder path -> usable (checked once per process)


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


def cache_size_limit():
    """The disk cache's cap in bytes (``$DYNOGRAPH_CACHE_SIZE_MB``, else ``CACHE_SIZE_MB``)."""
    try:
        mb = float(os.environ.get("DYNOGRAPH_CACHE_SIZE_MB", CACHE_SIZE_MB))
    except ValueError:
        mb = CACHE_SIZE_MB
    return int(mb * 2 ** 20)


def _foreign_writers(folder, holds_entries):
    """Why someone other than this user could change what ``folder`` holds, or None.  The folder
    of entries must be this user's and writable by nobody else; the folder above it may also be
    root's, or world-writable with the sticky bit (like /tmp), since it holds only that folder."""
    if not hasattr(os, "getuid"):
        return None
    st = os.stat(folder)
    if st.st_uid != os.getuid() and (holds_entries or st.st_uid != 0):
        return f"it is owned by another user (uid {st.st_uid})"
    if holds_entries and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "other users can write to it"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "every user can write to it"
    return None


def _kernel_folder():
    """The folder of disk cache entries, or None when there is none to use (checked once)."""
    root = cache_dir()
    folder = os.path.join(root, "kernels")
    if folder not in _folders:
        _folders[folder] = _usable(root, folder)
    return folder if _folders[folder] else None


def _usable(root, folder):
    """Create ``folder`` (private) if needed; False if that fails or others could plant code
    in it (warned)."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        problems = [(f, _foreign_writers(f, f == folder)) for f in (root, folder)]
    except OSError:
        return False                        # a read-only cache folder only costs compile time
    for where, reason in problems:
        if reason:
            warnings.warn(f"dynograph: not using the kernel disk cache in {where}: {reason}, and "
                          "loading a cached kernel runs its code. Kernels stay in memory only; make "
                          "the folder yours and writable only by you, or set DYNOGRAPH_CACHE_DIR.",
                          RuntimeWarning, stacklevel=5)
            return False
    return True


def _entry_path(key):
    folder = _kernel_folder()
    return None if folder is None else os.path.join(folder, f"{key}.o")


def _read_entry(key):
    """The object code of a valid entry, or None (missing, foreign or corrupted)."""
    path = _entry_path(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = _header()
    if len(data) < len(header) + 65 or not data.startswith(header + b"\n"):
        return None
    digest, obj = data[len(header) + 1:len(header) + 65], data[len(header) + 66:]
    if hashlib.sha256(obj).hexdigest().encode() != digest:
        return None
    try:
        os.utime(path)                      # the mtime says when the entry was last used
    except OSError:
        pass
    return obj


def _write_entry(key, obj):
    path = _entry_path(key)
    if path is None:
        return
    folder = os.path.dirname(path)
    try:
        # a fresh, exclusively created name: nobody can have prepared it or write to it with us
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
    except OSError:
        return                              # a read-only cache folder only costs compile time
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_header() + b"\n" + hashlib.sha256(obj).hexdigest().encode() + b"\n" + obj)
        os.replace(tmp, path)               # readers see the old entry or the whole new one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _evict(folder, cache_size_limit())


def _evict(folder, limit):
    """Keep the folder under ``limit`` bytes: past it, delete the least recently used entries
    down to three quarters of it (so a full cache is not scanned on every write); temporaries
    of killed writers go too."""
    entries, total, now = [], 0, time.time()
    try:
        with os.scandir(folder) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if e.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_S:
                    _unlink(e.path)
                elif e.name.endswith(".o"):
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
    except OSError:
        return
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        _unlink(path)
        total -= size


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:                         # another process evicted it first
        pass


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

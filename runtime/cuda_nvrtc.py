"""NVRTC, CUDA's runtime compiler, through ctypes: CUDA C source to a cubin for one compute
capability, in the calling process, without a toolkit or a GPU.

The library comes from the ``nvidia-cuda-nvrtc`` wheel (``nvidia/cu*/lib/libnvrtc.so.*``), else
the system's libnvrtc (a CUDA toolkit's, found on the library path).  libnvrtc opens its builtins library
(``libnvrtc-builtins.so.X.Y``) by name when it first compiles: that library is loaded first,
from the same folder, so the name resolves whatever the library path says.
"""
import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading

_lock = threading.Lock()
_state = {}


class NvrtcError(RuntimeError):
    """NVRTC is missing or failed; the message carries its log."""


def _wheel_libraries():
    """libnvrtc and its builtins from the nvidia-cuda-nvrtc wheel: [(builtins, libnvrtc)]."""
    spec = importlib.util.find_spec("nvidia")
    found = []
    for root in (spec.submodule_search_locations if spec else ()):
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*")), reverse=True):
            builtins = glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins.so.*"))
            found.append((builtins[0] if builtins else None, lib))
    return found


def library():
    """The loaded libnvrtc (CDLL); raises NvrtcError when there is none."""
    if "lib" in _state:
        return _state["lib"]
    with _lock:
        if "lib" not in _state:
            _state["lib"] = _load()
    return _state["lib"]


def _load():
    candidates = _wheel_libraries()
    system = ctypes.util.find_library("nvrtc")
    if system:
        candidates.append((None, system))
    errors = []
    for builtins, lib in candidates:
        try:
            if builtins:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            return _declare(ctypes.CDLL(lib))
        except OSError as e:
            errors.append(str(e))
    raise NvrtcError("NVRTC not found: install the nvidia-cuda-nvrtc wheel (pip install "
                     "'dynograph[cuda]')" + (f" ({'; '.join(errors)})" if errors else ""))


def _declare(lib):
    p, c = ctypes.c_void_p, ctypes.c_char_p
    size = ctypes.POINTER(ctypes.c_size_t)
    for name, args in {
        "nvrtcVersion": [ctypes.POINTER(ctypes.c_int)] * 2,
        "nvrtcCreateProgram": [ctypes.POINTER(p), c, c, ctypes.c_int, p, p],
        "nvrtcCompileProgram": [p, ctypes.c_int, ctypes.POINTER(c)],
        "nvrtcGetProgramLogSize": [p, size],
        "nvrtcGetProgramLog": [p, c],
        "nvrtcGetCUBINSize": [p, size],
        "nvrtcGetCUBIN": [p, c],
        "nvrtcGetPTXSize": [p, size],
        "nvrtcGetPTX": [p, c],
        "nvrtcDestroyProgram": [ctypes.POINTER(p)],
        "nvrtcGetNumSupportedArchs": [ctypes.POINTER(ctypes.c_int)],
        "nvrtcGetSupportedArchs": [ctypes.POINTER(ctypes.c_int)],
    }.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    lib.nvrtcGetErrorString.argtypes, lib.nvrtcGetErrorString.restype = [ctypes.c_int], c
    return lib


def _check(lib, status, what):
    if status:
        raise NvrtcError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(status).decode()}")


def version():
    """(major, minor) of the loaded NVRTC."""
    lib = library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported_archs():
    """The compute capabilities NVRTC compiles for, as ints (80 for sm_80), ascending."""
    lib = library()
    n = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * n.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return sorted(archs)


def target(arch):
    """(NVRTC's -arch value, image kind) for a device of compute capability ``arch`` (86 for 8.6):
    a cubin for it, or for the newest architecture of its major version NVRTC knows (a cubin runs
    on later minor versions); PTX of the newest architecture NVRTC knows for a device newer than
    all of them (the driver compiles PTX for later devices)."""
    archs = supported_archs()
    same_major = [a for a in archs if a // 10 == arch // 10 and a <= arch]
    if same_major:
        return f"sm_{same_major[-1]}", "cubin"
    older = [a for a in archs if a < arch]
    if not older:
        raise NvrtcError(f"NVRTC {'%d.%d' % version()} cannot compile for sm_{arch} (its oldest "
                         f"architecture is sm_{archs[0]})")
    return f"compute_{older[-1]}", "ptx"


def compile(source, name="kernel.cu", arch=80, options=()):
    """(image, kind, log) of ``source`` for a device of compute capability ``arch`` (see
    ``target``); the log is the compiler's messages (ptxas's with ``--ptxas-options=-v``).
    Raises NvrtcError with the log when the source does not compile."""
    lib = library()
    arch_option, kind = target(arch)
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None,
                                       None), "nvrtcCreateProgram")
    try:
        opts = [f"-arch={arch_option}".encode(), *(o.encode() for o in options)]
        status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        if status:
            raise NvrtcError(f"NVRTC could not compile {name} for {arch_option}:\n"
                             f"{_log(lib, prog)[-4000:]}")
        get_size, get = ((lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if kind == "cubin"
                         else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX))
        size = ctypes.c_size_t()
        _check(lib, get_size(prog, ctypes.byref(size)), "getting the image's size")
        image = ctypes.create_string_buffer(size.value)
        _check(lib, get(prog, image), "getting the image")
        return image.raw, kind, _log(lib, prog)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _log(lib, prog):
    size = ctypes.c_size_t()
    if lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)):
        return ""
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    return log.value.decode(errors="replace")

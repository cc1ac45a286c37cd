"""dynograph.backends: torch.backends' flags and queries, so tutorial code such as
``torch.backends.cudnn.benchmark = True`` or ``torch.backends.mps.is_available()`` runs.

dynograph has no cuDNN or MPS: the cudnn flags are plain settable attributes that change
nothing, and every availability query answers False.  The submodules are built here rather
than as files so that ``import dynograph.backends.cudnn as cudnn`` works from one module.
"""
import sys
import types

__all__ = ["cpu", "cuda", "cudnn", "mps"]


def _submodule(name, doc, **attrs):
    """A module ``dynograph.backends.<name>`` holding ``attrs``, importable by its full name."""
    module = types.ModuleType(f"{__name__}.{name}", doc)
    module.__dict__.update(attrs)
    sys.modules[module.__name__] = module
    return module


def _false():
    return False


def _none():
    return None


def get_cpu_capability():
    """The widest SIMD level of this CPU as torch names it: "AVX512", "AVX2" or "DEFAULT"."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:          # numpy < 2 keeps it in numpy.core
        from numpy.core._multiarray_umath import __cpu_features__ as features
    for level, needed in (("AVX512", ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ")), ("AVX2", ("AVX2",))):
        if all(features.get(f) for f in needed):
            return level
    return "DEFAULT"


cudnn = _submodule("cudnn", "cuDNN flags: settable, without effect (no cuDNN here).",
                   enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                   benchmark_limit=10, is_available=_false, version=_none)
mps = _submodule("mps", "Apple's Metal backend: never available here.",
                 is_available=_false, is_built=_false)
cuda = _submodule("cuda", "CUDA flags: this build has no CUDA.",
                  is_built=_false, matmul=types.SimpleNamespace(allow_tf32=False,
                                                                allow_fp16_reduced_precision_reduction=True))
cpu = _submodule("cpu", "CPU queries.", get_cpu_capability=get_cpu_capability)

"""The CUDA code generator: kernel descriptions rendered as CUDA C (render.py), compiled to
cubins and checked with nvcc (source.py), and run on the CPU by an emulation (emulate.py).
See docs/cuda.md for what the backend still lacks."""
from .source import CompileError, CudaSource, Resources, compile_cubin  # noqa: F401

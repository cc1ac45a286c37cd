"""The LLVM CPU code generator: kernel rendering (render.py), the JIT and its caches (jit.py),
and the ``llvm`` backend runner (runner.py)."""

"""The LLVM CPU backend: kernel rendering (render.py), the JIT (jit.py) and the backend object
that plugs them into the runtime's executor (backend.py)."""

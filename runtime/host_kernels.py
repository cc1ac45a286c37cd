"""Compiled kernels for eager ops on the host: the hook through which a code generator lends
the eager core the ``compile_kernel`` callable that direct rules take (compiler/lowering/direct.py),
and its matrix product (``compile_kernel.matmul``, where it has one).

The eager core sits below the backends: it cannot import one.  A higher layer (compile()'s
backend table, compiler/backends.py) installs a *provider*, a function that imports the backend
and returns its ``compile_kernel(kernel) -> plan``; the provider runs on the first eager op that
asks, so ``import dynograph`` does not load LLVM.  When the provider fails (no llvmlite, no
working JIT) or a kernel does not compile, ``compiler()`` and ``compile_kernel`` answer None and
eager ops keep their numpy implementations.
"""
import math
import os
import threading

import numpy as np

from dynograph.runtime import threads

__all__ = ["install", "compiler", "matmul"]

# products of fewer multiply-adds stay with numpy: its BLAS runs them on one thread anyway
MIN_PRODUCT = 1 << 18

_provider = None
_compile = None         # the provider's callable, once loaded
_failed = False         # the provider raised: no compiled kernels in this process
_lock = threading.Lock()


def _new_lock_in_child():
    """A forked child may inherit the lock held by a thread it does not have."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def install(provider):
    """Make ``provider()`` (returning a ``compile_kernel`` callable) the source of eager kernels."""
    global _provider, _compile, _failed
    with _lock:
        _provider, _compile, _failed = provider, None, False


def compiler():
    """``compile_kernel(kernel)`` -> the compiled plan, or None (that kernel did not compile);
    None when no backend lends kernels."""
    global _compile, _failed
    if _compile is not None or _failed:
        return _compile
    with _lock:
        if _compile is None and not _failed:
            if _provider is None:
                return None
            try:
                backend_compile = _provider()
            except Exception:           # any failure to load it: numpy remains
                _failed = True
                return None
            _compile = _guarded(backend_compile)
    return _compile


def matmul(a, b, bias=None, alpha=1, beta=1):
    """``a @ b`` of 2-D float arrays (with ``bias``: addmm's ``beta * bias + alpha * (a @ b)``),
    or of 3-D ones (bmm: a batch of products), by the lending backend, or None (numpy then):
    the products large enough to split over the threads, which then share the cores with the
    kernels instead of competing with them."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    if math.prod(batch) * m * k * n < MIN_PRODUCT or threads.count() <= 1:
        return None             # one thread: numpy's BLAS as is
    compile_kernel = compiler()
    product = getattr(compile_kernel, "matmul", None)
    if product is None:
        return None
    return product(a, b, np.empty((*batch, m, n), a.dtype), bias, alpha, beta)


def _guarded(backend_compile):
    def compile_kernel(kernel):
        try:
            return backend_compile(kernel)
        except Exception:               # a kernel the backend cannot compile
            return None
    compile_kernel.matmul = getattr(backend_compile, "matmul", None)
    compile_kernel.backend = getattr(backend_compile, "backend", None)
    return compile_kernel

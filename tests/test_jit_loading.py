"""Object code loaded by compiler/llvm/jit.py: every object goes into one engine, and each
kernel keeps its own code and constants there although every kernel's function has the same
name (llvm/backend.py)."""
import ctypes

import numpy as np

from dynograph.compiler.llvm import jit


def _scale_kernel(factor):
    """LLVM IR of ``dg_kernel(float* out, i64 n)``: out[i] = fmod(float(i) * factor, 7) (the
    factor comes from the object's constant pool and fmod from the C library: relocations
    address both)."""
    return f"""
define void @dg_kernel(ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %x = uitofp i64 %i to float
  %y = fmul float %x, {np.float32(factor).item()!r:s}
  %z = frem float %y, 7.0
  %p = getelementptr float, ptr %out, i64 %i
  store float %z, ptr %p
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def test_kernels_of_one_name_keep_their_own_code_and_constants():
    factors = [1.25, -3.5, 0.1875, 1e-3]
    functions = [jit.load(jit.emit_object(_scale_kernel(f), f"scale{f}"), "dg_kernel",
                          [ctypes.c_void_p, ctypes.c_int64]) for f in factors]
    assert len({ctypes.cast(fn, ctypes.c_void_p).value for fn in functions}) == len(factors)
    for factor, fn in zip(factors, functions):        # each run after all were loaded
        out = np.zeros(64, np.float32)
        fn(out.ctypes.data, out.size)
        expected = np.fmod(np.arange(64, dtype=np.float32) * np.float32(factor), np.float32(7))
        np.testing.assert_array_equal(out, expected)

"""runtime/host_memory.py: freed host memory is reused, not faulted in again every step."""
import os
import subprocess
import sys
import textwrap

import pytest

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or
                           os.confstr("CS_GNU_LIBC_VERSION") is None, reason="glibc only")

# a step's pattern: many large arrays allocated, then all freed; the faults of the later rounds
_ROUNDS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import dynograph
    from dynograph.runtime import host_memory
    faults = []
    for r in range(6):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        arrays = [np.ones(400_000, np.float32) for _ in range(24)]     # 24 x 1.6 MB
        del arrays
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(bool(host_memory._applied), max(faults[2:]))
""")


def _rounds(keep):
    env = dict(os.environ, DYNOGRAPH_KEEP_FREED_MB=str(keep))
    out = subprocess.run([sys.executable, "-c", _ROUNDS], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@glibc
def test_freed_arrays_are_reused_without_page_faults():
    applied, faults = _rounds(128)
    assert applied
    pages = 24 * 1_600_000 // 4096         # what a round touches
    assert faults < pages // 10, faults


@glibc
def test_zero_leaves_the_allocator_alone():
    applied, _ = _rounds(0)
    assert not applied

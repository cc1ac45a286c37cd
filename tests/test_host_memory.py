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


# memory a process touches for the first time, with and without a helper mapping the heap's
# new pages in: the main thread's faults while it fills 8 MB of new arrays
_FIRST_TOUCH = textwrap.dedent("""
    import contextlib, resource, sys, threading, time
    import numpy as np
    import dynograph
    from dynograph.runtime import host_memory
    populate = sys.argv[1] == "1"

    def faults():
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    with host_memory.populating() if populate else contextlib.nullcontext() as p:
        started = p is not None and p.thread is not None
        grown = [np.empty(1 << 20, np.uint8)]       # the heap grows, TOP_PAD beyond
        if populate:
            time.sleep(1.0)                         # the helper maps the new pages in
        before = faults()
        arrays = [np.ones(1 << 20, np.uint8) for _ in range(8)]
        touched = faults() - before
    alive = any(t.name == "dynograph-populate" for t in threading.enumerate())
    print(started, touched, alive)
""")


def _first_touch(populate):
    out = subprocess.run([sys.executable, "-c", _FIRST_TOUCH, str(int(populate))],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", int(out[1]), out[2] == "True"


@glibc
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs a second core")
def test_a_helper_maps_new_heap_pages_in_ahead_of_the_main_thread():
    started, touched, alive = _first_touch(True)
    if not started:
        pytest.skip("the allocator settings are not in force here")
    pages = 8 * (1 << 20) // 4096
    _, cold, _ = _first_touch(False)
    assert cold > pages * 0.9, cold         # without the helper: a fault per page
    assert touched < pages // 10, touched   # with it, the pages were there
    assert not alive                        # the helper stops with the context

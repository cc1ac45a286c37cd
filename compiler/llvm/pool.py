"""The host's worker pool: native threads that run the ranges of a kernel launch.

Kernels of a training step last 10 µs to 2 ms.  Handing them to threads that sleep on a
condition variable costs a wake-up each time (tens of µs on bare metal, up to a millisecond on
a virtual machine whose idle core was halted), which is why splitting such kernels gained
nothing.  So, as OpenMP runtimes and BLAS libraries do, the workers here are native code (LLVM IR
compiled by the JIT, run by Python threads inside one ctypes call each, without the GIL) that
spin on a shared word between launches, and only after ``spin_us`` microseconds of idleness
sleep (a futex on Linux, a short sleep elsewhere).

A launch (``Pool.run``) posts a job: a task ``void task(void **args, i64 begin, i64 end)``, its
argument block and the range ``[0, extent)`` cut into ``parts`` pieces.  The calling thread
claims pieces too, and everyone claims the next piece from one atomic ticket, so a worker that
wakes late simply gets fewer pieces; the call returns when every piece is done.  The ticket
packs the job number, the piece count and the next piece into one word: a worker claims a piece
of the job it saw, or nothing, never a piece of the next job with the last job's arguments.

Kernels are tasks themselves (render.py: ``args`` holds their buffers' addresses), so the
pool's module needs no code per kernel signature.

One pool per process, of ``threads.count()`` threads including the caller (runtime/threads.py);
it is rebuilt when the count changes, dropped in a forked child (which makes its own on first
use) and stopped at exit.
"""
import atexit
import ctypes
import os
import threading
import time

import numpy as np
from llvmlite import ir

from dynograph.runtime import config, threads
from dynograph.runtime.backend import unwatched
from . import jit

I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()
TASK_TYPE = ir.FunctionType(VOID, [PTR, I64, I64])     # a task's LLVM type

# the shared state: i64 words, the ones written by different threads a cache line apart
TICKET, DONE, TASK_FN, ARGS, EXTENT, STOP, SLEEPERS, SEQ, SPIN = 0, 8, 16, 17, 18, 24, 32, 40, 48
HELPED = 56                         # pieces run by the workers (not the caller), for the tests
YIELD = 57                          # a spinning thread yields the core every YIELD + 1 pauses
YIELD_AFTER = 58                    # an idle worker's first pauses, which never yield
STATE_WORDS = 64
YIELD_US = 20                       # about this often (rounded up to a power of two of pauses)
FUTEX_WAIT, FUTEX_WAKE = 128, 129   # the private (one process) futex operations
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}


def _word(b, state, index, ty=I64):
    return b.gep(state, [I64(index)], source_etype=I64) if ty is I64 else \
        b.gep(state, [I64(index * 2)], source_etype=I32)


class _Callee:
    """A function pointer loaded from memory, called as a function of type ``function_type``
    (llvmlite's call reads the callee's type from it)."""

    def __init__(self, value, function_type):
        self.value, self.function_type = value, function_type

    def __getattr__(self, name):
        return getattr(self.value, name)


def call_pointer(b, pointer, function_type, args):
    """Call the function at ``pointer`` (a value) as one of ``function_type``."""
    return b.call(_Callee(pointer, function_type), args)


class _Builder:
    """The pool's LLVM module: worker loop, launch, wake-up."""

    def __init__(self, triple):
        self.mod = ir.Module(name="dg_pool")
        self.mod.triple = triple
        arch = triple.split("-")[0]
        self.futex = SYS_FUTEX.get(arch) if "linux" in triple else None
        if arch in ("x86_64", "i686", "i386"):
            self.pause_fn = ir.Function(self.mod, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause")
        elif arch == "aarch64":
            self.pause_fn = ir.Function(self.mod, ir.FunctionType(VOID, [I32]), "llvm.aarch64.hint")
        else:
            self.pause_fn = None
        if self.futex is not None:
            self.syscall = ir.Function(self.mod, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        else:
            self.usleep = ir.Function(self.mod, ir.FunctionType(I32, [I32]), "usleep")
        self.sched_yield = ir.Function(self.mod, ir.FunctionType(I32, []), "sched_yield")
        self.work = self._work()
        self.wake = self._wake()
        self._worker()
        self._run()
        self._spin()

    def function(self, name, ret, args, internal=False):
        fn = ir.Function(self.mod, ir.FunctionType(ret, args), name)
        fn.attributes.add("nounwind")
        if internal:
            fn.linkage = "internal"
        return fn

    def pause(self, b):
        if self.pause_fn is not None:
            b.call(self.pause_fn, [] if not self.pause_fn.args else [I32(1)])   # 1: "yield"

    def pause_or_yield(self, b, state, count, first=None):
        """A pause; every YIELD + 1 of them (``count``: the pauses so far; none of the
        ``first``) the core goes to any other thread waiting for it.  On a machine with more
        runnable threads than cores (other processes, or more workers than cores), a worker
        preempted in the middle of its piece then gets a core back from the threads spinning
        for it, instead of after a whole time slice of the scheduler; with no other thread
        waiting, a yield is one system call."""
        self.pause(b)
        mask = b.load(_word(b, state, YIELD), typ=I64)
        due = b.icmp_unsigned("==", b.and_(count, mask), mask)
        if first is not None:
            due = b.and_(due, b.icmp_unsigned(">=", count, first))
        fn = b.function
        give, done = fn.append_basic_block("give"), fn.append_basic_block("paused")
        b.cbranch(due, give, done)
        b.position_at_end(give)
        b.call(self.sched_yield, [])
        b.branch(done)
        b.position_at_end(done)

    def _work(self):
        """work(state, job): claim and run pieces of ``job`` until none is left; returns how
        many it ran."""
        fn = self.function("dg_pool_work", I64, [PTR, I64], internal=True)
        state, job = fn.args
        entry, loop, claim, run, done = (fn.append_basic_block(n) for n in
                                         ("entry", "loop", "claim", "run", "done"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        ran = b.phi(I64)
        ran.add_incoming(I64(0), entry)
        ticket = b.load_atomic(_word(b, state, TICKET), "acquire", 8, typ=I64)
        same = b.icmp_unsigned("==", b.lshr(ticket, I64(32)), job)
        parts = b.and_(b.lshr(ticket, I64(16)), I64(0xFFFF))
        piece = b.and_(ticket, I64(0xFFFF))
        b.cbranch(b.and_(same, b.icmp_unsigned("<", piece, parts)), claim, done)
        b.position_at_end(claim)
        swap = b.cmpxchg(_word(b, state, TICKET), ticket, b.add(ticket, I64(1)), "acq_rel",
                         "acquire")
        ran.add_incoming(ran, claim)
        b.cbranch(b.extract_value(swap, 1), run, loop)
        b.position_at_end(run)
        # the job's arguments stay as posted until every piece is done (this one included)
        task = b.load(_word(b, state, TASK_FN), typ=PTR)
        args = b.load(_word(b, state, ARGS), typ=PTR)
        extent = b.load(_word(b, state, EXTENT), typ=I64)
        begin = b.udiv(b.mul(extent, piece), parts)
        end = b.udiv(b.mul(extent, b.add(piece, I64(1))), parts)
        call_pointer(b, task, TASK_TYPE, [args, begin, end])
        b.atomic_rmw("add", _word(b, state, DONE), I64(1), "release")
        ran.add_incoming(b.add(ran, I64(1)), run)
        b.branch(loop)
        b.position_at_end(done)
        b.ret(ran)
        return fn

    def _wake(self):
        """wake(state): wake the sleeping workers (a new job, or stop)."""
        fn = self.function("dg_pool_wake", VOID, [PTR])
        b = ir.IRBuilder(fn.append_basic_block())
        seq = _word(b, fn.args[0], SEQ, I32)
        b.atomic_rmw("add", seq, I32(1), "seq_cst")
        if self.futex is not None:
            b.call(self.syscall, [I64(self.futex), seq, I32(FUTEX_WAKE), I32(2 ** 31 - 1)])
        b.ret_void()
        return fn

    def _worker(self):
        """worker(state): run jobs until STOP; between jobs spin ``SPIN`` pauses, then sleep."""
        fn = self.function("dg_pool_worker", VOID, [PTR])
        state = fn.args[0]
        names = ("entry", "wait", "spin", "check", "more", "pause", "sleep", "block", "woke",
                 "work", "exit")
        entry, wait, spin, check, more, pause, sleep, block, woke, work, exit_ = \
            (fn.append_basic_block(n) for n in names)
        b = ir.IRBuilder(entry)
        b.branch(wait)

        b.position_at_end(wait)                 # job: the last job seen (none: 0)
        job = b.phi(I64)
        job.add_incoming(I64(0), entry)
        b.branch(spin)

        b.position_at_end(spin)
        count = b.phi(I64)
        count.add_incoming(I64(0), wait)
        new = b.lshr(b.load_atomic(_word(b, state, TICKET), "acquire", 8, typ=I64), I64(32))
        b.cbranch(b.icmp_unsigned("!=", new, job), work, check)

        b.position_at_end(check)
        stop = b.load_atomic(_word(b, state, STOP), "monotonic", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("!=", stop, I64(0)), exit_, more)

        b.position_at_end(more)
        budget = b.load(_word(b, state, SPIN), typ=I64)
        b.cbranch(b.icmp_unsigned("<", count, budget), pause, sleep)

        b.position_at_end(pause)
        # the gaps between a step's kernels are short: an idle worker keeps its core a
        # while before it yields (a yield hands it to any runnable thread, for a whole slice)
        self.pause_or_yield(b, state, count, b.load(_word(b, state, YIELD_AFTER), typ=I64))
        count.add_incoming(b.add(count, I64(1)), b.block)
        b.branch(spin)

        # sleep: announce it, then look once more (a launch posted since then sees the
        # announcement and wakes us, or we see its job: both are seq_cst)
        b.position_at_end(sleep)
        seq = b.load_atomic(_word(b, state, SEQ, I32), "seq_cst", 4, typ=I32)
        b.atomic_rmw("add", _word(b, state, SLEEPERS), I64(1), "seq_cst")
        ticket = b.load_atomic(_word(b, state, TICKET), "seq_cst", 8, typ=I64)
        stop = b.load_atomic(_word(b, state, STOP), "seq_cst", 8, typ=I64)
        idle = b.and_(b.icmp_unsigned("==", b.lshr(ticket, I64(32)), job),
                      b.icmp_unsigned("==", stop, I64(0)))
        b.cbranch(idle, block, woke)

        b.position_at_end(block)
        if self.futex is not None:          # returns at once if SEQ moved on since we read it
            b.call(self.syscall, [I64(self.futex), _word(b, state, SEQ, I32), I32(FUTEX_WAIT),
                                  seq, ir.Constant(PTR, None)])
        else:
            b.call(self.usleep, [I32(100)])
        b.branch(woke)

        b.position_at_end(woke)
        b.atomic_rmw("sub", _word(b, state, SLEEPERS), I64(1), "seq_cst")
        count.add_incoming(I64(0), woke)
        b.branch(spin)

        b.position_at_end(work)
        pieces = b.call(self.work, [state, new])
        b.atomic_rmw("add", _word(b, state, HELPED), pieces, "monotonic")
        job.add_incoming(new, work)
        b.branch(wait)

        b.position_at_end(exit_)
        b.ret_void()

    def _run(self):
        """run(state, task, args, extent, parts): post a job, work on it, wait for the rest."""
        fn = self.function("dg_pool_run", VOID, [PTR, PTR, PTR, I64, I64])
        state, task, args, extent, parts = fn.args
        entry, wake, own, wait, pause, done = (fn.append_basic_block(n) for n in
                                               ("entry", "wake", "own", "wait", "pause", "done"))
        b = ir.IRBuilder(entry)
        b.store(task, _word(b, state, TASK_FN))
        b.store(args, _word(b, state, ARGS))
        b.store(extent, _word(b, state, EXTENT))
        # (llvmlite's store_atomic predates opaque pointers: atomic stores are exchanges)
        b.atomic_rmw("xchg", _word(b, state, DONE), I64(0), "monotonic")
        job = b.add(b.lshr(b.load(_word(b, state, TICKET), typ=I64), I64(32)), I64(1))
        job = b.and_(job, I64(0xFFFFFFFF))
        b.atomic_rmw("xchg", _word(b, state, TICKET), b.or_(b.shl(job, I64(32)),
                                                             b.shl(parts, I64(16))), "seq_cst")
        sleepers = b.load_atomic(_word(b, state, SLEEPERS), "seq_cst", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("!=", sleepers, I64(0)), wake, own)
        b.position_at_end(wake)
        b.call(self.wake, [state])
        b.branch(own)
        b.position_at_end(own)
        b.call(self.work, [state, job])
        b.branch(wait)
        b.position_at_end(wait)
        count = b.phi(I64)          # pauses so far
        count.add_incoming(I64(0), own)
        finished = b.load_atomic(_word(b, state, DONE), "acquire", 8, typ=I64)
        b.cbranch(b.icmp_unsigned("<", finished, parts), pause, done)
        b.position_at_end(pause)
        self.pause_or_yield(b, state, count)
        count.add_incoming(b.add(count, I64(1)), b.block)
        b.branch(wait)
        b.position_at_end(done)
        b.ret_void()

    def _spin(self):
        """spin(n): n pauses (calibrates the spin budget)."""
        fn = self.function("dg_pool_spin", VOID, [I64])
        entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(I64)
        i.add_incoming(I64(0), entry)
        self.pause(b)
        nxt = b.add(i, I64(1))
        i.add_incoming(nxt, loop)
        b.cbranch(b.icmp_unsigned("<", nxt, fn.args[0]), loop, done)
        b.position_at_end(done)
        b.ret_void()


class _Library:
    """The pool module's functions, compiled once per process (object code cached on disk)."""

    def __init__(self):
        obj = jit.runtime_object("dg_pool", [__file__], lambda: str(_Builder(jit.triple()).mod))
        fns = jit.load_all(obj, ["dg_pool_worker", "dg_pool_run", "dg_pool_wake", "dg_pool_spin"])
        self.worker = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fns["dg_pool_worker"])
        self.run = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2)(
            fns["dg_pool_run"])
        self.wake = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fns["dg_pool_wake"])
        self.spin = ctypes.CFUNCTYPE(None, ctypes.c_int64)(fns["dg_pool_spin"])
        self.pauses_per_us = _calibrate(self.spin)
        self.callers = {}

    def call(self, task, args, begin, end):
        """``task(args, begin, end)`` on this thread (a task ``add``ed)."""
        self.callers[task](args, begin, end)

    def add(self, task, caller=None):
        """Make ``task`` callable on this thread too (``call``), by ``caller`` (its ``TASK``)
        where one is made already."""
        if task not in self.callers:
            self.callers[task] = caller or TASK(task)


# a task, as ctypes calls it: void task(void **args, i64 begin, i64 end)
TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _calibrate(spin):
    """Pauses per microsecond on this machine (a pause lasts 1-150 cycles by CPU): the fastest
    of three spins of at least 0.1 ms (a spin the thread was preempted in counts less).  A
    compiled function's first product waits for this: spins of 2-8 ms took 8-9 ms of its first
    call."""
    n, elapsed = 256, 0.0
    while elapsed < 1e-4 and n < 1 << 30:
        n *= 2
        start = time.perf_counter()
        spin(n)
        elapsed = time.perf_counter() - start
    for _ in range(2):
        start = time.perf_counter()
        spin(n)
        elapsed = min(elapsed, time.perf_counter() - start)
    return max(1.0, n / (elapsed * 1e6))


class Pool:
    """``threads`` threads: the caller of ``run`` and ``threads - 1`` native workers."""

    def __init__(self, library, threads):
        self.lib = library
        self.threads = threads
        self._words = np.zeros(STATE_WORDS + 8, np.int64)
        start = (-self._words.ctypes.data % 64) // 8        # the state at a cache line
        self.state = self._words[start:start + STATE_WORDS]
        self.state[SPIN] = int(config.get("SPIN_US") * library.pauses_per_us)
        self.state[YIELD] = (1 << max(0, int(YIELD_US * library.pauses_per_us)).bit_length()) - 1
        self.state[YIELD_AFTER] = int(config.get("YIELD_AFTER_US") * library.pauses_per_us)
        self.address = self.state.ctypes.data
        self.lock = threading.Lock()
        self.workers = [threading.Thread(target=library.worker, args=(self.address,), daemon=True,
                                         name=f"dynograph-kernel-{i}") for i in range(threads - 1)]
        for t in self.workers:
            t.start()

    def run(self, task, args, extent, parts):
        """``task(args, begin, end)`` over ``[0, extent)`` in ``parts`` pieces, on every thread
        (``args``: the address of the argument block)."""
        if parts <= 1 or not self.lock.acquire(blocking=False):
            # one piece, or another Python thread is launching on the pool: all of it, here
            self.lib.call(task, args, 0, extent)
            return
        try:
            self.lib.run(self.address, task, args, extent, min(parts, 0xFFFF))
        finally:
            self.lock.release()

    def run_kernel(self, fn, block, extent, parts):
        """The loaded kernel ``fn`` (a ``TASK`` with its ``address``) on its buffers' addresses
        ``block`` (a ctypes array) over ``[0, extent)`` in ``parts`` pieces."""
        self.lib.add(fn.address, fn)        # (``run`` may call it on this thread)
        self.run(fn.address, ctypes.addressof(block), extent, parts)

    def close(self):
        self.state[STOP] = 1
        self.lib.wake(self.address)
        for t in self.workers:
            t.join(timeout=1.0)
        if any(t.is_alive() for t in self.workers):
            _retired.append(self._words)    # a worker still reads the state: keep it alive


_lock = threading.Lock()
_current = []          # [Pool] of this process
_retired = []
_library = []
_warming = []         # warm_up() started its thread
_built = []           # and it has finished


def _forget():
    """In a forked child: the parent's workers do not exist here (nor its warm-up thread)."""
    global _lock
    _lock = threading.Lock()
    _current.clear()
    if not _built:
        _warming.clear()


os.register_at_fork(after_in_child=_forget)


def pool():
    """The process' pool, of ``threads.count()`` threads (None for one thread)."""
    n = threads.count()
    current = _current[0] if _current else None
    if current is not None and current.threads == n:
        return current
    if current is None and n <= 1:
        return None
    with _lock, unwatched():
        if _current and _current[0].threads == n:
            return _current[0]
        if _current:
            _current.pop().close()
        if n <= 1:
            return None
        if not _library:
            _library.append(_Library())
        _current.append(Pool(_library[0], n))
        return _current[0]


def warm_up():
    """Build the pool's runtime code, and the products' (blas.py), on a helper thread now: a
    cold start compiles them (0.1-0.35 s), and a compiled function's first call, tracing
    meanwhile, needs them only when its program first runs."""
    if _library or _warming or threads.count() <= 1:
        return
    _warming.append(True)
    threading.Thread(target=_build_runtime, name="dynograph-pool-build", daemon=True).start()


def building():
    """Whether warm_up's thread is still building the runtime: eager products do not wait for
    it (LLVMBackend.matmul), which cost a cold first call 80-140 ms of its trace."""
    return bool(_warming) and not _built


def _build_runtime():
    from . import blas
    try:
        with _lock, unwatched():
            if not _library:
                _library.append(_Library())
        blas.build()
    except Exception:       # noqa: BLE001  (the first use builds them again and meets it there)
        pass
    finally:
        _built.append(True)


def _shutdown():
    if _current:
        _current.pop().close()


atexit.register(_shutdown)

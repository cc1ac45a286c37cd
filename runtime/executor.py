"""The executor: runs a compiled program, the same way for every backend.

A ``Program`` is one graph made ready to run many times at one specialization (batch size,
which state buffers may be updated in place).  The program builder (compiler/lowering/
program.py) numbers the graph's values (slots) and turns each node into a step; the executor
knows nothing of graphs or ops:

* ``steps``: callables ``step(program, env)`` that read their input slots of ``env`` (a list)
  and write their output slots; after step i the slots ``frees[i]`` are dropped;
* planned buffers: the intermediate values of the memory plan (compiler/passes/memory.py) live
  in arenas allocated once per program, so a steady-state call allocates only what it returns;
* in-place state updates: an update whose old state it may overwrite (``inplace``) is written
  by its kernel straight into the state's buffer (``overwritable`` checks the array at run
  time);
* recycled results: a value handed out by one of the last two calls is reused once nothing
  else holds it (no page faults on fresh memory; see ``result_array``).

``run_cached(cache, key, build, inputs)`` keeps one program per key; a call arriving while that
program runs (another thread) gets a program of its own, since the buffers are in use.
"""
import ctypes
import sys
import threading
import weakref

import numpy as np

from .cuda_memory import DeviceArray, contiguous_strides


RESULTS_KEPT = 2        # arrays kept per value the program hands out (Program.result_array)


class Program:
    def __init__(self, n_slots, input_slots, steps, frees, output_slots, update_slots,
                 buffers, inplace, allocate, constants=None):
        """``buffers``: {slot: (shape, numpy dtype, arena id, own)} planned values (``own``:
        False for a view, made by its own step from its base's array); ``inplace``:
        {update slot: the input slot of the state it may overwrite}; ``allocate(shape,
        dtype)``: the backend's allocator; ``constants``: {slot: array} values computed
        once, which no step makes."""
        self.n_slots = n_slots
        self.initial = [None] * n_slots
        for s, a in (constants or {}).items():
            self.initial[s] = a
        # a result that shares a constant's memory (a view of it) is copied before it leaves
        self.constant_roots = {id(storage_root(a)) for a in (constants or {}).values()}
        self.leaving = {*output_slots, *(s for _, s in update_slots)}
        self.input_slots = input_slots
        self.steps = steps
        self.frees = frees
        self.output_slots = output_slots
        self.update_slots = update_slots
        self.inplace = inplace
        self.allocate = allocate
        self.planned, self.arenas = _arenas(buffers, allocate)
        self.results = {}       # slot -> [the arrays the last calls returned for it, newest first]
        self.busy = threading.Lock()

    def run(self, inputs):
        env = self.initial.copy()
        for s, x in zip(self.input_slots, inputs):
            env[s] = x
        for step, frees in zip(self.steps, self.frees):
            step(self, env)
            for s in frees:
                env[s] = None
        if self.constant_roots:
            for s in self.leaving:
                if id(storage_root(env[s])) in self.constant_roots:
                    env[s] = env[s].copy()
        return [env[s] for s in self.output_slots], {k: env[s] for k, s in self.update_slots}

    def result_array(self, slot, shape, dtype):
        """A new array for a value the program hands out (not a planned one), or one handed out
        by the last two calls once nothing holds it any more.  Two, because a training step's
        ``.grad`` (and the loss a loop keeps until the next one comes) is let go only when the
        next call's replaces it: with one, each call got new memory for every gradient and every
        launch writing one was bound anew; with two, calls alternate between two arrays, each
        with its bound launches (``Bound``).  Always the first free one in the same order, so
        that asking twice in one call gives the same array."""
        arrays = self.results.get(slot)
        if arrays is None:
            arrays = self.results[slot] = []
        for a in arrays:
            # three references: the list, ``a`` and getrefcount's argument
            if sys.getrefcount(a) == 3:
                return a
        out = self.allocate(shape, dtype)
        arrays.insert(0, out)
        del arrays[RESULTS_KEPT:]
        return out

    def in_arena(self, array):
        """Whether ``array`` lives in one of this program's planned buffers (a result there
        must be copied before it is handed out: a later step would overwrite it)."""
        return id(storage_root(array)) in self.arenas


class Bound:
    """A step's launch bound to the arrays of one call, made again by a later call that sees
    the same arrays (``again``).  A step keeps its ``BOUNDS_KEPT`` last: results handed out
    alternate between two arrays, and so do the inputs of the steps reading them.  It holds
    what it read (weakly: a result the caller lets go must stay recyclable; None where the
    step read None) and the results it wrote (weakly too: a planned buffer or an input updated
    in place is the same array at every call; a result handed out, ``handed`` {index: (slot,
    array)}, is the same when ``result_array`` gives that memory again).  ``owned``: the
    indices of results made for this launch alone (max pooling's indices), held here and
    written again only while nothing else holds them (a view the caller kept)."""
    __slots__ = ("reads", "launch", "results", "handed", "owned")

    def __init__(self, reads, launch, results, handed, owned=()):
        self.reads = [None if a is None else weakref.ref(a) for a in reads]
        self.launch = launch
        self.results = [None if j in handed else weakref.ref(r) for j, r in enumerate(results)]
        self.handed = [(j, slot, r.shape, r.dtype, address(r)) for j, (slot, r) in handed.items()]
        self.owned = [(j, results[j]) for j in owned]

    def again(self, program, reads):
        """The results when ``reads`` are the arrays read at the bound call and the results go
        to the same memory (then the caller launches); else None."""
        for a, r in zip(reads, self.reads):
            if a is not (None if r is None else r()):
                return None
        for _, a in self.owned:
            # three references: the pair, ``a`` and getrefcount's argument
            if sys.getrefcount(a) != 3:
                return None
        results = [None if r is None else r() for r in self.results]
        if self.handed:
            for j, slot, shape, dtype, at in self.handed:
                r = program.result_array(slot, shape, dtype)
                if address(r) != at:
                    return None
                results[j] = r
        return None if any(r is None for r in results) else results


BOUNDS_KEPT = RESULTS_KEPT


def with_bound(bounds, bound):
    """A step's list of bound launches, newest first, with ``bound`` added."""
    return [bound] + bounds[:BOUNDS_KEPT - 1]


def overwritable(a, dtype, shape):
    """Whether a kernel may store a result of ``dtype`` and ``shape`` element for element into
    the input array ``a``."""
    if type(a) is DeviceArray:
        return a.dtype == dtype and a.shape == shape and a.is_contiguous()
    return type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous and \
        a.flags.writeable and a.shape == shape


def storage_root(a):
    """The array that owns ``a``'s memory (a host or a device array)."""
    if type(a) is DeviceArray:
        return a if a.base is None else a.base
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a


def address(a):
    """The address of the first element of host or device array ``a``."""
    if type(a) is DeviceArray:
        return a.address
    if _DATA_OFFSET and type(a) is np.ndarray:
        return _data_field(id(a) + _DATA_OFFSET).value or 0
    return a.__array_interface__["data"][0]


def _data_offset():
    """Where a numpy array object holds its data pointer (the first field of numpy's C struct
    after the object header), checked on a few arrays; 0 where the check fails (another
    layout: ``address`` then asks numpy).  Reading it takes 0.2 µs where ``a.ctypes.data``
    takes 2-5 µs, and kernels' launches take the addresses of all their buffers at every call."""
    header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    base = np.arange(24, dtype=np.float32)
    probes = [base, base[3:], base.reshape(4, 6)[:, 1:].T, np.zeros(0), np.array(1.0)]
    probes[1].flags.writeable = False
    try:
        if all((ctypes.c_void_p.from_address(id(p) + header).value or 0) ==
               p.__array_interface__["data"][0]
               for p in probes):
            return header
    except (ValueError, OSError):
        pass
    return 0


_DATA_OFFSET = _data_offset()
_data_field = ctypes.c_void_p.from_address


def _arenas(buffers, allocate):
    """(slot -> its array in an arena allocated now by ``allocate``, the arenas' ids)."""
    sizes = {}
    for shape, dtype, arena, _ in buffers.values():
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        sizes[arena] = max(sizes.get(arena, 0), n)
    arenas = {b: allocate((n,), np.uint8) for b, n in sizes.items()}
    planned = {s: _typed(arenas[arena], shape, dtype)
               for s, (shape, dtype, arena, own) in buffers.items() if own}
    return planned, {id(a) for a in arenas.values()}


def _typed(arena, shape, dtype):
    """A contiguous array of ``shape`` and ``dtype`` at the start of byte array ``arena``."""
    if type(arena) is DeviceArray:
        dtype = np.dtype(dtype)
        return arena.view(shape, contiguous_strides(shape, dtype.itemsize), 0, dtype)
    return np.ndarray(shape, dtype, buffer=arena)


def run_cached(cache, key, build, inputs):
    """Run the program ``cache[key]`` (built by ``build()`` on first use) on ``inputs``."""
    program = cache.get(key)
    if program is None:
        program = cache[key] = build()
    if not program.busy.acquire(blocking=False):
        # running already (another thread): its buffers are in use, this call gets its own
        return build().run(inputs)
    try:
        return program.run(inputs)
    finally:
        program.busy.release()

"""Checks of untrusted header values, made before anything is allocated from them.

Every check raises ``CheckpointError`` with a message naming the field, so a damaged
file never reaches numpy as a shape, an offset or a size it could choke on.
"""
import builtins
import math
import sys
import threading
from contextlib import contextmanager

from dynograph.runtime import dtypes as D

from .errors import CheckpointError

DTYPES = D.BY_NAME
MAX_DIMS = 64
MAX_DEPTH = 1000        # levels of nested containers save and load handle (torch.save: about 450)
_FRAMES_PER_LEVEL = 8   # Python frames and json C calls one level costs the recursive coders
_room = {"users": 0, "limit": None}
_room_lock = threading.Lock()


def too_deep(error=CheckpointError):
    raise error(f"the object is nested more than {MAX_DEPTH} levels deep (the most dynograph saves "
                "and loads)")


@contextmanager
def nesting_room():
    """Room on Python's recursion limit (which json's C code shares) for ``MAX_DEPTH`` levels of
    the recursive encoders and decoders; raised by the first thread in, restored by the last out."""
    with _room_lock:
        if _room["users"] == 0:
            _room["limit"] = sys.getrecursionlimit()
            sys.setrecursionlimit(_room["limit"] + MAX_DEPTH * _FRAMES_PER_LEVEL)
        _room["users"] += 1
    try:
        yield
    finally:
        with _room_lock:
            _room["users"] -= 1
            if _room["users"] == 0:
                sys.setrecursionlimit(_room["limit"])


def fail(what, error=CheckpointError):
    raise error(what)


def need(cond, what, error=CheckpointError):
    if not cond:
        raise error(what)


def is_int(x):
    # JSON true/false are bools, which are ints in Python: exclude them explicitly
    return type(x) is builtins.int


def nonneg_int(x, what, error=CheckpointError):
    need(is_int(x) and x >= 0, f"{what} must be a non-negative integer, got {x!r}", error)
    return x


def int_list(x, what, error=CheckpointError):
    need(type(x) is list and len(x) <= MAX_DIMS, f"{what} must be a list of at most {MAX_DIMS} "
         f"integers, got {x!r}"[:300], error)
    for v in x:
        nonneg_int(v, what, error)
    return x


def dtype_named(name, what="dtype", error=CheckpointError):
    need(type(name) is str and name in DTYPES, f"unknown {what} {name!r}"[:200], error)
    return DTYPES[name]


def exact_keys(obj, required, optional=(), what="entry", error=CheckpointError):
    """``obj`` is a dict with every key of ``required`` and nothing outside ``optional``."""
    need(type(obj) is dict, f"{what} must be a JSON object, got {type(obj).__name__}", error)
    missing = [k for k in required if k not in obj]
    need(not missing, f"{what} lacks the key(s) {missing}", error)
    unknown = sorted(k for k in obj if k not in required and k not in optional)
    need(not unknown, f"{what} has unknown key(s) {unknown}"[:300], error)
    return obj


def byte_range(pair, limit, what, error=CheckpointError):
    """A ``[begin, end]`` pair of byte offsets inside ``[0, limit]``."""
    need(type(pair) is list and len(pair) == 2, f"{what} must be a [begin, end] pair, got "
         f"{pair!r}"[:300], error)
    begin, end = (nonneg_int(v, what, error) for v in pair)
    need(begin <= end <= limit, f"{what} [{begin}, {end}] lies outside the {limit} bytes of data",
         error)
    return begin, end


def disjoint(ranges, what, error=CheckpointError):
    """No two ``(begin, end, name)`` ranges overlap."""
    prev = None
    for begin, end, name in sorted(r for r in ranges if r[1] > r[0]):
        if prev is not None and begin < prev[1]:
            fail(f"{what} {prev[2]} and {name} overlap (bytes {prev[0]}..{prev[1]} and "
                 f"{begin}..{end})", error)
        prev = (begin, end, name)


def shape_numel(shape, itemsize, what, error=CheckpointError):
    """The element count of ``shape`` (a checked ``int_list``).  numpy refuses a shape whose
    nonzero sizes multiply past its address space even when another size is 0, so check that
    product here rather than let numpy raise."""
    nonzero = math.prod(n for n in shape if n)
    need(nonzero * itemsize <= sys.maxsize, f"{what}: shape {shape} is larger than any array "
         f"can be"[:300], error)
    return 0 if 0 in shape else nonzero


def strided_extent(shape, stride, offset, itemsize, storage_nbytes, what, error=CheckpointError):
    """The byte span a strided view needs fits inside its storage (Python ints: no overflow)."""
    need(len(stride) == len(shape), f"{what}: shape {shape} and stride {stride} differ in length",
         error)
    if 0 in shape:              # no byte of the storage is used, but numpy must be able to make it
        return shape_numel(shape, itemsize, what, error)
    numel = math.prod(shape)
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride))
    need((last + 1) * itemsize <= storage_nbytes,
         f"{what}: shape {shape}, stride {stride} and offset {offset} reach byte "
         f"{(last + 1) * itemsize} of a storage of {storage_nbytes} bytes", error)
    return numel

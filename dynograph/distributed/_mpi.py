"""The MPI layer: mpi4py imported on first use, dtype and reduce-op mapping, and waiting on a
request with a deadline so that a dead or hanging rank becomes an error, not a hang.

Tensors travel through mpi4py's buffer (upper-case) methods on their numpy storage: no copy
into Python objects and no pickling.  float16 and bfloat16 have no MPI type; they travel as
16-bit words and reduce with MPI operations written in numpy.
"""
import time

import numpy as np

from dynograph.runtime import dtypes

_MPI = None


def mpi():
    """mpi4py's MPI module (importing it initializes MPI), with a clear error when missing."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py
        except ImportError as e:
            raise RuntimeError("dynograph.distributed needs mpi4py and an MPI library: "
                               "pip install \"dynograph[distributed]\" (mpi4py and MPICH)") from e
        mpi4py.rc.threads = True
        mpi4py.rc.thread_level = "serialized"
        from mpi4py import MPI
        _MPI = MPI
    return _MPI


class DistError(RuntimeError):
    """Base of the errors dynograph.distributed raises (torch.distributed.DistError)."""


class DistBackendError(DistError):
    """A collective failed in the communication backend: a timeout, a dead rank."""


# (MPI datatype name, numpy dtype the buffer is viewed as) per dynograph dtype
_WIRE = {
    "bool": ("C_BOOL", np.uint8), "uint8": ("UINT8_T", np.uint8), "int8": ("INT8_T", np.int8),
    "int16": ("INT16_T", np.int16), "int32": ("INT32_T", np.int32), "int64": ("INT64_T", np.int64),
    "float16": ("UINT16_T", np.uint16), "bfloat16": ("UINT16_T", np.uint16),
    "float32": ("FLOAT", np.float32), "float64": ("DOUBLE", np.float64),
    "complex64": ("C_FLOAT_COMPLEX", np.complex64), "complex128": ("C_DOUBLE_COMPLEX", np.complex128),
}
DTYPE_CODE = {d.name: i for i, d in enumerate(dtypes.ALL_DTYPES)}


def buffer(array):
    """``[array, MPI datatype]`` for mpi4py's buffer methods; ``array`` is C-contiguous."""
    name, view = _WIRE[dtypes.from_numpy_dtype(array.dtype).name]
    return [array.view(view).reshape(-1), getattr(mpi(), name)]


_NUMPY_OPS = {"sum": np.add, "product": np.multiply, "max": np.maximum, "min": np.minimum}
_BUILTIN_OPS = {"sum": "SUM", "product": "PROD", "max": "MAX", "min": "MIN"}
_BOOL_OPS = {"sum": "LOR", "max": "LOR", "product": "LAND", "min": "LAND"}   # torch's bool rules
_USER_OPS = {}


def reduce_op(op, np_dtype):
    """The MPI operation computing ``op`` ('sum', 'product', 'max', 'min') on ``np_dtype``."""
    MPI = mpi()
    name = dtypes.from_numpy_dtype(np_dtype).name
    if name == "bool":
        return getattr(MPI, _BOOL_OPS[op])
    if name not in ("float16", "bfloat16"):
        return getattr(MPI, _BUILTIN_OPS[op])
    key = (op, name)
    if key not in _USER_OPS:
        fn, typ = _NUMPY_OPS[op], np.dtype(np_dtype)

        def apply(inbuf, inoutbuf, datatype):
            a = np.frombuffer(inbuf, dtype=typ)
            b = np.frombuffer(inoutbuf, dtype=typ)
            fn(a, b, out=b)

        _USER_OPS[key] = MPI.Op.Create(apply, commute=True)
    return _USER_OPS[key]


def wait(request, deadline, what, describe, statuses=None):
    """Complete ``request`` (an MPI request or a list of them) before ``deadline`` (a
    time.monotonic() value) or raise DistBackendError naming ``what``; ``describe()`` adds
    the rank and tensor to the message; ``statuses`` receive the requests' MPI statuses."""
    MPI = mpi()
    reqs = request if isinstance(request, list) else [request]
    start = time.monotonic()
    spins = 0
    while not MPI.Request.Testall(reqs, statuses):
        # MPI moves data only while it is polled: spin like MPI's own blocking calls, and only
        # after 50 ms (a peer that is late, not a transfer in progress) poll more gently
        spins += 1
        if spins % 256 == 0:
            now = time.monotonic()
            if now > deadline:
                raise DistBackendError(f"dynograph.distributed.{what} timed out {describe()}: "
                                       "another rank died, hangs, or did not call it")
            if now - start > 0.05:
                time.sleep(1e-4)


DistError.__module__ = DistBackendError.__module__ = "dynograph.distributed"

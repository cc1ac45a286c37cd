"""Discrete Fourier transforms: the three primitives every ``dynograph.fft`` function is built
from, as in PyTorch (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``).

* ``fft_r2c(x, dim, normalization, onesided)``  real -> complex, forward; ``onesided`` keeps
  the first n // 2 + 1 outputs of the last transformed dim (the rest are their conjugates);
* ``fft_c2c(x, dim, normalization, forward)``   complex -> complex, either direction;
* ``fft_c2r(x, dim, normalization, last_dim_size)``  the inverse of a onesided r2c: a
  Hermitian half-spectrum -> real, ``last_dim_size`` outputs along the last dim.

``normalization`` is PyTorch's enum: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n the product of the
transformed sizes), whatever the direction.  The derivative rules are PyTorch's.  numpy's
pocketfft computes the values (float32 in single precision).
"""
import numpy as np

from dynograph.runtime import dtypes as D
from . import eager
from .core import TensorSpec, define, type_name

NONE, BY_ROOT_N, BY_N = 0, 1, 2


def _numpy_norm(normalization, forward):
    """numpy's ``norm=`` naming the scaling PyTorch's enum asks for in this direction."""
    if normalization == BY_ROOT_N:
        return "ortho"
    if normalization == NONE:
        return "backward" if forward else "forward"
    return "forward" if forward else "backward"


def _complex_of(a):
    return np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128


def _check_sizes(shape, dim):
    for d in dim:
        if shape[d] < 1:
            raise RuntimeError(f"Invalid number of data points ({shape[d]}) specified")


# ---------------------------------------------------------------- r2c

def _r2c_meta(x, dim, normalization, onesided):
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"Unsupported dtype {type_name(x.dtype)}")
    _check_sizes(x.shape, dim)
    shape = list(x.shape)
    if onesided:
        shape[dim[-1]] = shape[dim[-1]] // 2 + 1
    return TensorSpec(tuple(shape), x.dtype.to_complex())


def _r2c(x, dim, normalization, onesided):
    if x.dtype.kind != "f" or x.itemsize not in (4, 8):
        raise ValueError("fft_r2c")
    _check_sizes(x.shape, dim)
    norm = _numpy_norm(normalization, True)
    if onesided:
        out = np.fft.rfftn(x, axes=dim, norm=norm)
    else:
        out = np.fft.fftn(x, axes=dim, norm=norm)
    return np.asarray(out, _complex_of(x))


def _r2c_vjp(ctx, g):
    x = ctx.inputs[0]
    dim, normalization, onesided = ctx.attrs["dim"], ctx.attrs["normalization"], ctx.attrs["onesided"]
    if onesided:
        last = dim[-1]
        missing = x.shape[last] - g.shape[last]
        if missing > 0:             # the dropped half of the spectrum had zero gradient
            shape = list(g.shape)
            shape[last] = missing
            g = eager.cat([g, g.new_zeros(shape)], last)
    return (eager.call(fft_c2c, g, dim=dim, normalization=normalization, forward=False).real,)


fft_r2c = define("fft_r2c", "other", _r2c, meta=_r2c_meta, vjp=_r2c_vjp,
                 grad_name="FftR2CBackward0",
                 doc="The forward DFT of a real tensor over ``dim`` (onesided: the last dim halved).")


# ---------------------------------------------------------------- c2c

def _c2c_meta(x, dim, normalization, forward):
    if not x.dtype.is_complex:
        raise RuntimeError(f"Unsupported dtype {type_name(x.dtype)}")
    _check_sizes(x.shape, dim)
    return TensorSpec(tuple(x.shape), x.dtype)


def _c2c(x, dim, normalization, forward):
    if x.dtype.kind != "c":
        raise ValueError("fft_c2c")
    if not dim:
        return x.copy()
    _check_sizes(x.shape, dim)
    norm = _numpy_norm(normalization, forward)
    out = (np.fft.fftn if forward else np.fft.ifftn)(x, axes=dim, norm=norm)
    return np.asarray(out, x.dtype)


def _c2c_vjp(ctx, g):
    a = ctx.attrs
    return (eager.call(fft_c2c, g, dim=a["dim"], normalization=a["normalization"],
                       forward=not a["forward"]),)


fft_c2c = define("fft_c2c", "other", _c2c, meta=_c2c_meta, vjp=_c2c_vjp,
                 grad_name="FftC2CBackward0",
                 doc="The DFT (forward) or its unnormalized inverse of a complex tensor over ``dim``.")


# ---------------------------------------------------------------- c2r

def _c2r_meta(x, dim, normalization, last_dim_size):
    if not x.dtype.is_complex:
        raise RuntimeError(f"Unsupported dtype {type_name(x.dtype)}")
    _check_sizes(x.shape, dim)
    if last_dim_size < 1:
        raise RuntimeError(f"Invalid number of data points ({last_dim_size}) specified")
    shape = list(x.shape)
    shape[dim[-1]] = last_dim_size
    return TensorSpec(tuple(shape), x.dtype.to_real())


def _c2r(x, dim, normalization, last_dim_size):
    if x.dtype.kind != "c" or last_dim_size < 1:
        raise ValueError("fft_c2r")
    _check_sizes(x.shape, dim)
    sizes = [x.shape[d] for d in dim[:-1]] + [last_dim_size]
    # pocketfft reads only the first last_dim_size // 2 + 1 inputs of the last dim, as PyTorch
    out = np.fft.irfftn(x, s=sizes, axes=dim, norm=_numpy_norm(normalization, False))
    return np.asarray(out, np.float32 if x.dtype == np.complex64 else np.float64)


def _c2r_vjp(ctx, g):
    dim, normalization = ctx.attrs["dim"], ctx.attrs["normalization"]
    gi = eager.call(fft_r2c, g, dim=dim, normalization=normalization, onesided=True)
    last = dim[-1]
    doubled = g.shape[last] - gi.shape[last]
    if doubled > 0:                 # the outputs that stand for two conjugate inputs
        n = gi.shape[last]
        w = [1.0] + [2.0] * doubled + [1.0] * (n - 1 - doubled)
        w = gi.new_tensor(w, dtype=g.dtype).reshape([n] + [1] * (gi.dim() - 1 - last))
        gi = gi * w
    return (gi,)


fft_c2r = define("fft_c2r", "other", _c2r, meta=_c2r_meta, vjp=_c2r_vjp,
                 grad_name="FftC2RBackward0",
                 doc="The unnormalized inverse DFT of a Hermitian half-spectrum: a real tensor.")

"""``dynograph.fft``: discrete Fourier transforms, as ``torch.fft`` defines them.

Every transform is one of three primitives (compiler/ops/spectral.py: real-to-complex,
complex-to-complex, complex-to-real) applied after PyTorch's argument handling: the input
promoted (integers to the default dtype; float16/bfloat16 are refused on the CPU, as in
PyTorch), cut or zero-padded to the requested sizes ``n`` / ``s`` along ``dim``, and
``norm`` ("backward", "forward" or "ortho") turned into the scaling of that direction.
Results are complex64/complex128 tensors (docs/complex.md); gradients flow back to real
and complex inputs as in PyTorch.
"""
from dynograph.compiler.ops import spectral as S
from dynograph.compiler.ops.core import type_name
from dynograph.runtime import dtypes as D
from . import _creation as C
from ._complex import conj
from ._dispatch import call
from ._math import finish, need_tensor
from ._shape import cat, roll

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


# ---------------------------------------------------------------- primitives (also for vjps)

def _r2c(x, dim, normalization, onesided):
    return call(S.fft_r2c, x, dim=tuple(dim), normalization=normalization, onesided=onesided)


def _c2c(x, dim, normalization, forward):
    return call(S.fft_c2c, x, dim=tuple(dim), normalization=normalization, forward=forward)


def _c2r(x, dim, normalization, last_dim_size):
    return call(S.fft_c2r, x, dim=tuple(dim), normalization=normalization,
                last_dim_size=last_dim_size)


# ---------------------------------------------------------------- argument handling

def _normalization(norm, forward):
    """PyTorch's norm_from_string: the scaling enum of a transform in this direction."""
    if norm is None or norm == "backward":
        return S.NONE if forward else S.BY_N
    if norm == "forward":
        return S.BY_N if forward else S.NONE
    if norm == "ortho":
        return S.BY_ROOT_N
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _promote(x, require_complex=False):
    """Integers to the default float dtype; only float32/float64 (and complex) transform."""
    dt = x.dtype
    if dt.is_complex:
        return x
    if not dt.is_floating_point:
        dt = D.get_default_dtype()
    if dt not in (D.float32, D.float64):
        raise RuntimeError(f"Unsupported dtype {type_name(dt)}")
    if require_complex:
        dt = dt.to_complex()
    return x if x.dtype is dt else x.to(dt)


def _wrap_dim(dim, ndim):
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    return dim % ndim


def _check_n(n):
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _resize(x, dims, sizes):
    """Cut or zero-pad ``x`` to ``sizes`` along ``dims`` (PyTorch's resize_fft_input)."""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if have > n:
            x = x.narrow(d, 0, n)
        elif have < n:
            shape = list(x.shape)
            shape[d] = n - have
            x = cat([x, x.new_zeros(shape)], d)
    return x


def _shape_and_dims(x, s, dim):
    """PyTorch's canonicalize_fft_shape_and_dim_args: the dims and their transform sizes."""
    ndim = x.dim()
    if dim is not None:
        dims = [_wrap_dim(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = list(s)
        if dim is not None and len(dims) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        if dim is None:
            dims = list(range(ndim - len(s), ndim))
        shape = [x.shape[d] if n == -1 else n for d, n in zip(dims, s)]
    elif dim is None:
        dims = list(range(ndim))
        shape = list(x.shape)
    else:
        shape = [x.shape[d] for d in dims]
    for n in shape:
        _check_n(n)
    return dims, shape


def _c2r_shape_and_dims(fname, x, s, dim):
    """The dims, the input sizes (last: n // 2 + 1) and n, the output size of the last dim."""
    dims, shape = _shape_and_dims(x, s, dim)
    if not shape:
        raise RuntimeError(f"{fname} must transform at least one axis")
    if s is None or list(s)[-1] == -1:
        last = 2 * (x.shape[dims[-1]] - 1)
    else:
        last = shape[-1]
    _check_n(last)
    shape[-1] = last // 2 + 1
    return dims, shape, last


def _tensor_arg(input, fname):
    need_tensor(input, "fft_" + fname)


# ---------------------------------------------------------------- one dimension

def _r2c_1d(fname, input, n, dim, norm, forward, onesided):
    _tensor_arg(input, fname)
    if input.is_complex():
        raise RuntimeError(f"{fname} expects a real input tensor, but got {type_name(input.dtype)}")
    x = _promote(input)
    d = _wrap_dim(dim, x.dim())
    n = x.shape[d] if n is None else n
    _check_n(n)
    x = _resize(x, [d], [n])
    out = _r2c(x, [d], _normalization(norm, forward), onesided)
    return out if forward else conj(out)


def _c2r_1d(fname, input, n, dim, norm, forward):
    _tensor_arg(input, fname)
    x = _promote(input, require_complex=True)
    d = _wrap_dim(dim, x.dim())
    n = 2 * (x.shape[d] - 1) if n is None else n
    _check_n(n)
    x = _resize(x, [d], [n // 2 + 1])
    if forward:
        x = conj(x)
    return _c2r(x, [d], _normalization(norm, forward), n)


def _c2c_1d(fname, input, n, dim, norm, forward):
    d = _wrap_dim(dim, input.dim())
    n = input.shape[d] if n is None else n
    _check_n(n)
    return _c2c(_resize(input, [d], [n]), [d], _normalization(norm, forward), forward)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dimensional discrete Fourier transform along ``dim``."""
    _tensor_arg(input, "fft")
    if input.is_complex():
        r = _c2c_1d("fft", input, n, dim, norm, True)
    else:
        r = _r2c_1d("fft", input, n, dim, norm, True, False)
    return finish("fft_fft", r, out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dimensional inverse discrete Fourier transform along ``dim``."""
    _tensor_arg(input, "ifft")
    if input.is_complex():
        r = _c2c_1d("ifft", input, n, dim, norm, False)
    else:
        r = _r2c_1d("ifft", input, n, dim, norm, False, False)
    return finish("fft_ifft", r, out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The transform of a real signal: the n // 2 + 1 non-negative frequencies."""
    return finish("fft_rfft", _r2c_1d("rfft", input, n, dim, norm, True, True), out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of ``rfft``: ``n`` real outputs (default 2 * (size - 1))."""
    return finish("fft_irfft", _c2r_1d("irfft", input, n, dim, norm, False), out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The transform of a Hermitian-symmetric signal given by its first half: real output."""
    return finish("fft_hfft", _c2r_1d("hfft", input, n, dim, norm, True), out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of ``hfft``: the n // 2 + 1 first outputs of the inverse transform."""
    return finish("fft_ihfft", _r2c_1d("ihfft", input, n, dim, norm, False, True), out)


# ---------------------------------------------------------------- n dimensions

def _c2c_n(fname, input, s, dim, norm, forward):
    _tensor_arg(input, fname)
    dims, shape = _shape_and_dims(input, s, dim)
    x = _resize(_promote(input, require_complex=True), dims, shape)
    return _c2c(x, dims, _normalization(norm, forward), forward)


def _rfftn(fname, input, s, dim, norm):
    _tensor_arg(input, fname)
    if input.is_complex():
        raise RuntimeError(f"{fname} expects a real-valued input tensor, but got "
                           f"{type_name(input.dtype)}")
    dims, shape = _shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    x = _resize(_promote(input), dims, shape)
    return _r2c(x, dims, _normalization(norm, True), True)


def _irfftn(fname, input, s, dim, norm):
    _tensor_arg(input, fname)
    dims, shape, last = _c2r_shape_and_dims(fname, input, s, dim)
    x = _resize(_promote(input, require_complex=True), dims, shape)
    return _c2r(x, dims, _normalization(norm, False), last)


def _hfftn(fname, input, s, dim, norm):
    _tensor_arg(input, fname)
    dims, shape, last = _c2r_shape_and_dims(fname, input, s, dim)
    x = _resize(_promote(input, require_complex=True), dims, shape)
    normalization = _normalization(norm, True)
    if len(dims) > 1:
        x = _c2c(x, dims[:-1], normalization, True)
    return _c2r(conj(x), [dims[-1]], normalization, last)


def _ihfftn(fname, input, s, dim, norm):
    _tensor_arg(input, fname)
    if input.is_complex():
        raise RuntimeError("Only supports floating-point dtypes, but found: "
                           f"{type_name(input.dtype)}")
    dims, shape = _shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    x = _resize(_promote(input), dims, shape)
    normalization = _normalization(norm, False)
    r = conj(_r2c(x, [dims[-1]], normalization, True))
    if len(dims) == 1:
        return r
    return _c2c(r, dims[:-1], normalization, False)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-dimensional discrete Fourier transform over ``dim`` (default: all dims)."""
    return finish("fft_fftn", _c2c_n("fftn", input, s, dim, norm, True), out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-dimensional inverse discrete Fourier transform."""
    return finish("fft_ifftn", _c2c_n("ifftn", input, s, dim, norm, False), out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-dimensional transform of a real signal (the last dim halved)."""
    return finish("fft_rfftn", _rfftn("rfftn", input, s, dim, norm), out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of ``rfftn``."""
    return finish("fft_irfftn", _irfftn("irfftn", input, s, dim, norm), out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-dimensional transform of a Hermitian-symmetric signal (real output)."""
    return finish("fft_hfftn", _hfftn("hfftn", input, s, dim, norm), out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of ``hfftn``."""
    return finish("fft_ihfftn", _ihfftn("ihfftn", input, s, dim, norm), out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The two-dimensional discrete Fourier transform."""
    return finish("fft_fft2", _c2c_n("fft2", input, s, dim, norm, True), out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The two-dimensional inverse discrete Fourier transform."""
    return finish("fft_ifft2", _c2c_n("ifft2", input, s, dim, norm, False), out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The two-dimensional transform of a real signal."""
    return finish("fft_rfft2", _rfftn("rfft2", input, s, dim, norm), out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of ``rfft2``."""
    return finish("fft_irfft2", _irfftn("irfft2", input, s, dim, norm), out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The two-dimensional transform of a Hermitian-symmetric signal."""
    return finish("fft_hfft2", _hfftn("hfft2", input, s, dim, norm), out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of ``hfft2``."""
    return finish("fft_ihfft2", _ihfftn("ihfft2", input, s, dim, norm), out)


# ---------------------------------------------------------------- frequencies, shifts

def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform: [0, 1, ..., -(n // 2), ..., -1] / (d n)."""
    k = list(range((n + 1) // 2)) + list(range(-(n // 2), 0))
    r = C.tensor(k, dtype=dtype or D.get_default_dtype(), device=device) * (1.0 / (n * d))
    return C.finish_created(r, requires_grad, out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The non-negative sample frequencies of an n-point real transform."""
    r = C.arange(n // 2 + 1, dtype=dtype or D.get_default_dtype(), device=device) * (1.0 / (n * d))
    return C.finish_created(r, requires_grad, out)


def _shift(input, dim, half):
    need_tensor(input, "fftshift")
    if dim is None:
        dims = list(range(input.dim()))
    else:
        dims = [_wrap_dim(d, input.dim()) for d in ((dim,) if isinstance(dim, int) else dim)]
    if not dims:
        return input.clone()
    return roll(input, [half(input.shape[d]) for d in dims], dims)


def fftshift(input, dim=None):
    """Move the zero frequency to the middle (roll each dim by size // 2)."""
    return _shift(input, dim, lambda n: n // 2)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift`` (roll each dim by (size + 1) // 2)."""
    return _shift(input, dim, lambda n: (n + 1) // 2)


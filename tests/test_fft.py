"""dynograph.fft against torch.fft: every transform over real and complex inputs of each dtype,
sizes n/s cut and padded, every dim and norm, batched, size-0 and non-contiguous inputs, the
errors, float64 gradients (real and complex inputs) and the grad_fn names; fftfreq, rfftfreq,
fftshift and ifftshift."""
import itertools

import numpy as np
import pytest

import dynograph
from conftest import assert_same_error, eval_expr

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn",
       "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}


def _np(t):
    if isinstance(t, dynograph.Tensor):
        return t.detach().numpy()
    return t.detach().resolve_conj().numpy()


def _same(ours, theirs, rtol=1e-6, atol=1e-9, expr=""):
    if isinstance(theirs, RuntimeError) and "MKL FFT error" in str(theirs):
        # torch's MKL path fails on an empty batch; the transform of nothing is empty
        assert not isinstance(ours, Exception) and ours.numel() == 0, expr
        return
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, expr)
        return
    assert not isinstance(ours, Exception), f"{expr}: {ours!r}"
    assert tuple(ours.shape) == tuple(theirs.shape), expr
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], expr
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol, err_msg=expr)


def _data(shape, dtype, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * g.standard_normal(shape)
    if dtype.startswith("int"):
        a = np.round(a * 3)
    return a.astype(dtype)


def _pair(torch, shape, dtype, layout="contiguous", seed=0):
    a = _data(shape, dtype, seed)
    t, d = torch.from_numpy(a.copy()), dynograph.from_numpy(a.copy())
    if layout == "transposed":
        t, d = t.mT, d.mT
    return t, d


def _call(module, name, x, *args, **kwargs):
    return eval_expr("f(x, *args, **kwargs)",
                     {"f": getattr(module, name), "x": x, "args": args, "kwargs": kwargs})


@pytest.mark.parametrize("name", ONE_D)
def test_one_dimensional_transforms(torch, name):
    dtypes = ["float32", "float64", "int64"] + ([] if name in REAL_ONLY else ["complex64", "complex128"])
    for dtype in dtypes:
        tol = 1e-4 if dtype in ("float32", "complex64", "int64") else 1e-9
        for shape, layout in (((8,), "contiguous"), ((4, 5), "transposed"), ((0, 6), "contiguous"),
                              ((2, 3, 7), "contiguous")):
            t, d = _pair(torch, shape, dtype, layout)
            cases = itertools.product((None, 3, 10), (-1, 0))
            for (n, dim), norm in zip(cases, itertools.cycle((None, "forward", "ortho", "backward"))):
                expr = f"{name}({dtype}{shape} {layout}, n={n}, dim={dim}, norm={norm})"
                _same(_call(dynograph.fft, name, d, n, dim, norm),
                      _call(torch.fft, name, t, n, dim, norm), rtol=tol, atol=tol, expr=expr)


@pytest.mark.parametrize("name", N_D)
def test_n_dimensional_transforms(torch, name):
    dtypes = ["float64", "float32"] + ([] if name in REAL_ONLY else ["complex128"])
    cases = [dict(), dict(s=(4, 6)), dict(s=(-1, 3)), dict(dim=(0,)), dict(dim=(-1, 0)),
             dict(s=(5, 2), dim=(2, 0)), dict(norm="ortho"), dict(norm="forward", dim=(1, 2))]
    if not name.endswith("2"):
        cases += [dict(s=(3,)), dict(dim=(0, 1, 2)), dict(s=(2, 4, 5))]
    for dtype in dtypes:
        tol = 1e-4 if dtype == "float32" else 1e-9
        for layout in ("contiguous", "transposed") if dtype == "float64" else ("contiguous",):
            t, d = _pair(torch, (3, 4, 6), dtype, layout)
            for kw in cases:
                _same(_call(dynograph.fft, name, d, **kw), _call(torch.fft, name, t, **kw),
                      rtol=tol, atol=tol, expr=f"{name}({dtype} {layout}, {kw})")
    t, d = _pair(torch, (0, 3, 4), "float64")                       # an empty batch
    _same(_call(dynograph.fft, name, d, dim=(1, 2)), _call(torch.fft, name, t, dim=(1, 2)))


def test_errors(torch):
    t, d = _pair(torch, (3, 4), "float64")
    c_t, c_d = _pair(torch, (3, 4), "complex128")
    h_t, h_d = t.half(), d.half()
    z_t, z_d = torch.tensor(1.0), dynograph.tensor(1.0)
    e_t, e_d = _pair(torch, (3, 0), "float64")
    cases = [("rfft", (c_t, c_d), {}), ("ihfft", (c_t, c_d), {}), ("rfftn", (c_t, c_d), {}),
             ("ihfft2", (c_t, c_d), {}), ("fft", (h_t, h_d), {}), ("irfft", (h_t, h_d), {}),
             ("fft", (t, d), {"n": 0}), ("irfft", (t, d), {"n": 0}), ("fft", (t, d), {"norm": "bad"}),
             ("fft", (t, d), {"dim": 2}), ("fft", (z_t, z_d), {}), ("fft", (e_t, e_d), {}),
             ("fftn", (t, d), {"dim": (0, 0)}), ("fftn", (t, d), {"s": (2, 2), "dim": (0,)}),
             ("fftn", (t, d), {"s": (2, 2, 2)}), ("fft2", (t, d), {"s": (0, 2)}),
             ("irfftn", (t[:, :1], d[:, :1]), {}), ("rfftn", (t, d), {"dim": ()}),
             ("irfft2", (z_t, z_d), {})]
    for name, (tt, dd), kw in cases:
        theirs = _call(torch.fft, name, tt, **kw)
        assert isinstance(theirs, Exception), (name, kw)
        assert_same_error(_call(dynograph.fft, name, dd, **kw), theirs, f"{name} {kw}")


def _loss_weights(torch, out, seed):
    shape = tuple(out.shape) + ((2,) if out.is_complex() else ())
    return np.random.default_rng(seed).standard_normal(shape)


def _real_loss(module, out, w):
    """A real loss that reads every real and imaginary part of ``out``."""
    if out.is_complex():
        out = module.view_as_real(out.resolve_conj())
    parts = out
    return (parts * module.tensor(w)).sum()


@pytest.mark.parametrize("name", ONE_D + N_D)
def test_gradients(torch, name):
    dtypes = ["float64"] + ([] if name in REAL_ONLY else ["complex128"])
    kws = [dict(), dict(norm="ortho")]
    kws.append(dict(n=5) if name in ONE_D else dict(s=(3, 5)))
    kws.append(dict(n=9) if name in ONE_D else dict(s=(5, 9), norm="forward"))
    for dtype, kw in itertools.product(dtypes, kws):
        a = _data((4, 6), dtype, seed=2)
        t = torch.tensor(a, requires_grad=True)
        d = dynograph.tensor(a, requires_grad=True)
        ot, od = getattr(torch.fft, name)(t, **kw), getattr(dynograph.fft, name)(d, **kw)
        w = _loss_weights(torch, ot, 3)
        _real_loss(torch, ot, w).backward()
        _real_loss(dynograph, od, w).backward()
        np.testing.assert_allclose(d.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-9,
                                   atol=1e-10, err_msg=f"{name} {dtype} {kw}")


def test_grad_fn_names(torch):
    x = dynograph.randn(8, dtype=dynograph.float64, requires_grad=True)
    c = dynograph.randn(8, dtype=dynograph.float64).to(dynograph.complex128).requires_grad_()
    assert dynograph.fft.rfft(x).grad_fn.name() == "FftR2CBackward0"
    assert dynograph.fft.fft(x).grad_fn.name() == "FftR2CBackward0"
    assert dynograph.fft.fft(c).grad_fn.name() == "FftC2CBackward0"
    assert dynograph.fft.irfft(c).grad_fn.name() == "FftC2RBackward0"


def test_frequencies_and_shifts(torch):
    for n in (1, 2, 5, 8):
        for d in (1.0, 0.25):
            _same(dynograph.fft.fftfreq(n, d), torch.fft.fftfreq(n, d), rtol=1e-6)
            _same(dynograph.fft.rfftfreq(n, d), torch.fft.rfftfreq(n, d), rtol=1e-6)
    _same(dynograph.fft.fftfreq(7, dtype=dynograph.float64), torch.fft.fftfreq(7, dtype=torch.float64))
    assert dynograph.fft.rfftfreq(4, requires_grad=True).requires_grad
    t, d = _pair(torch, (3, 4, 5), "complex128")
    for dim in (None, 0, -1, (0, 2), [1]):
        _same(dynograph.fft.fftshift(d, dim), torch.fft.fftshift(t, dim))
        _same(dynograph.fft.ifftshift(d, dim), torch.fft.ifftshift(t, dim))
    r = dynograph.fft.ifftshift(dynograph.fft.fftshift(d))
    np.testing.assert_array_equal(r.numpy(), d.numpy())


def test_torch_fft_names_exist(torch):
    names = [n for n in dir(torch.fft) if not n.startswith("_") and callable(getattr(torch.fft, n))
             and n != "Tensor"]
    assert [n for n in names if not hasattr(dynograph.fft, n)] == []

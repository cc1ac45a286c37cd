"""stft and istft against torch: window/hop/length choices, centring and padding modes,
normalization, onesided and two-sided spectra, batched and complex inputs, the round trip,
float64 gradients and the errors."""
import warnings

import numpy as np
import pytest

import dynograph
from conftest import eval_expr


def _np(t):
    return t.detach().numpy() if isinstance(t, dynograph.Tensor) else t.detach().resolve_conj().numpy()


def _both(torch, expr, env, grad=None, rtol=1e-8, atol=1e-10):
    tenv = {k: (torch.tensor(v, requires_grad=(k == grad)) if isinstance(v, np.ndarray) else v)
            for k, v in env.items()}
    denv = {k: (dynograph.tensor(v, requires_grad=(k == grad)) if isinstance(v, np.ndarray) else v)
            for k, v in env.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = eval_expr(expr, {"T": torch, **tenv})
        ours = eval_expr(expr, {"T": dynograph, **denv})
    if isinstance(theirs, Exception):
        assert type(ours) is type(theirs), f"{expr}: {ours!r} vs {theirs!r}"
        return
    assert not isinstance(ours, Exception), f"{expr}: {ours!r}"
    assert tuple(ours.shape) == tuple(theirs.shape), expr
    assert str(ours.dtype)[10:] == str(theirs.dtype)[6:], expr
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol, err_msg=expr)
    if grad is not None:
        w = np.random.default_rng(3).standard_normal(tuple(theirs.shape) + ((2,) if theirs.is_complex() else ()))
        lt = (torch.view_as_real(theirs.resolve_conj()) if theirs.is_complex() else theirs) * torch.tensor(w)
        ld = (dynograph.view_as_real(ours) if ours.is_complex() else ours) * dynograph.tensor(w)
        lt.sum().backward()
        ld.sum().backward()
        np.testing.assert_allclose(denv[grad].grad.numpy(), tenv[grad].grad.numpy(), rtol=1e-7,
                                   atol=1e-9, err_msg=f"grad {expr}")


CASES = ["n_fft=16", "n_fft=16, hop_length=5, window=w", "n_fft=16, win_length=10, window=w[:10]",
         "n_fft=16, center=False, window=w", "n_fft=16, normalized=True, window=w",
         "n_fft=16, pad_mode='constant', window=w", "n_fft=16, onesided=False, window=w",
         "n_fft=15, hop_length=3, window=w[:15]"]


@pytest.mark.parametrize("case", CASES)
def test_stft_and_istft(torch, case):
    g = np.random.default_rng(0)
    env = {"x": g.standard_normal((2, 60)), "w": np.hanning(16) + 0.1, "v": g.standard_normal(60)}
    _both(torch, f"T.stft(x, {case}, return_complex=True)", env, grad="x")
    _both(torch, f"T.stft(v, {case}, return_complex=True)", env)
    _both(torch, f"x.stft({case}, return_complex=True)", env)
    _both(torch, f"T.stft(x, {case}, return_complex=False)", env)
    spec = f"T.stft(x, {case}, return_complex=True)"
    inv = case.replace(", pad_mode='constant'", "")
    _both(torch, f"T.istft({spec}, {inv})", env, grad="x")
    _both(torch, f"T.istft({spec}, {inv}, length=55)", env)
    _both(torch, f"T.istft({spec}, {inv}, length=70)", env)


def test_complex_input_and_round_trip(torch):
    g = np.random.default_rng(1)
    env = {"z": g.standard_normal(40) + 1j * g.standard_normal(40), "w": np.hanning(8) + 0.1}
    _both(torch, "T.stft(z, 8, window=w)", env)
    _both(torch, "T.istft(T.stft(z, 8, window=w), 8, window=w, return_complex=True)", env)
    x = dynograph.tensor(g.standard_normal((3, 64)))
    w = dynograph.hann_window(16, dtype=dynograph.float64)
    back = dynograph.istft(dynograph.stft(x, 16, window=w, return_complex=True), 16, window=w,
                           length=64)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)


def test_errors(torch):
    env = {"x": np.random.default_rng(2).standard_normal((2, 30)), "w": np.ones(8)}
    for expr in ("T.stft(x, 8)", "T.stft(x.long(), 8, return_complex=True)",
                 "T.stft(x[None], 8, return_complex=True)", "T.stft(x, 64, return_complex=True)",
                 "T.stft(x, 8, hop_length=0, return_complex=True)",
                 "T.stft(x, 8, win_length=9, return_complex=True)",
                 "T.stft(x, 8, window=w[:5], return_complex=True)",
                 "T.stft(x + 0j, 8, onesided=True)",
                 "T.istft(x, 8)", "T.istft(T.stft(x, 8, window=w, return_complex=True), 10)",
                 "T.istft(T.stft(x, 8, window=w, return_complex=True), 8, onesided=False)",
                 "T.istft(T.stft(x, 8, window=w, return_complex=True), 8, window=w * 0)"):
        _both(torch, expr, env)

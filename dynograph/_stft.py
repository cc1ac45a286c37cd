"""``stft`` and ``istft``, written as PyTorch writes them: frames are a strided view of the
(centred, padded) signal, windowed and transformed by the FFT primitives; the inverse
transforms the frames back, windows them again and overlap-adds them (``unfold_backward``),
dividing by the overlap-added squared window.  Gradients come from those pieces.
"""
import warnings

from dynograph.compiler.ops import spectral as S
from dynograph.compiler.ops.movement import unfold_backward
from ._dispatch import call
from ._math import need_tensor
from ._shape import cat
from ._tensor import tensor_method

__all__ = ["stft", "istft"]

_warned = []


def _warn_once(key, text):
    """PyTorch's TORCH_WARN_ONCE: once per process."""
    if key not in _warned:
        _warned.append(key)
        warnings.warn(text, UserWarning, stacklevel=3)


def _pad_window(window, n_fft, win_length, like, real_dtype):
    """The window centred in n_fft samples (ones where none is given)."""
    if window is None:
        window = like.new_ones((win_length,), dtype=real_dtype)
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = cat([window.new_zeros((left,)), window,
                      window.new_zeros((n_fft - win_length - left,))], 0)
    return window


def _describe(fn, x, n_fft, hop, win, window, normalized, onesided, return_complex):
    w = "None" if window is None else f"{window.dtype.tensor_type}{{{list(window.shape)}}}"
    return (f"{fn}({x.dtype.tensor_type}{list(x.shape)}, n_fft={n_fft}, hop_length={hop}, "
            f"win_length={win}, window={w}, normalized={int(normalized)}, onesided="
            f"{'None' if onesided is None else int(onesided)}, return_complex="
            f"{'None' if return_complex is None else int(return_complex)}) ")


@tensor_method
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """The short-time Fourier transform: (channel,) frequency x frame complex coefficients."""
    need_tensor(input, "stft")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    is_complex = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None and not is_complex:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, "
                           "and will further require that return_complex=True in a future "
                           "PyTorch release.")
    complex_out = is_complex if return_complex is None else return_complex
    if not complex_out:
        _warn_once("real", "stft with return_complex=False is deprecated. In a future pytorch "
                   "release, stft will return complex tensors for all inputs, and "
                   "return_complex=False will raise an error.\nNote: you can still call "
                   "torch.view_as_real on the complex output to recover the old return format.")
    what = _describe("stft", input, n_fft, hop, win, window, normalized, onesided, return_complex)
    if not (input.dtype.is_floating_point or input.is_complex()):
        raise RuntimeError(what + ": expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise RuntimeError(what + ": expected a 1D or 2D tensor")
    x = input.unsqueeze(0) if input.dim() == 1 else input
    if center:
        from .nn import functional as F
        pad = n_fft // 2
        x = F.pad(x.unsqueeze(0), (pad, pad), mode=pad_mode).squeeze(0)
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(what + f": expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(what + f": expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(what + f": expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(what + ": expected a 1D window tensor of size equal to win_length="
                           f"{win}, but got window with size {list(window.shape)}")
    if window is None:
        _warn_once("stft", "A window was not provided. A rectangular window will be applied,which "
                   "is known to cause spectral leakage. Other windows such as torch.hann_window or "
                   "torch.hamming_window are recommended to reduce spectral leakage.To suppress "
                   "this warning and use a rectangular window, explicitly set "
                   "`window=torch.ones(n_fft, device=<device>)`.")
    if window is not None or win < n_fft:
        window = _pad_window(window, n_fft, win, x, x.dtype.to_real())
    frames = x.unfold(1, n_fft, hop)                    # (channel, frame, n_fft)
    if window is not None:
        frames = frames * window
    onesided = not frames.is_complex() if onesided is None else onesided
    normalization = S.BY_ROOT_N if normalized else S.NONE
    if frames.is_complex():
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = call(S.fft_c2c, frames, dim=(2,), normalization=normalization, forward=True)
    else:
        out = call(S.fft_r2c, frames, dim=(2,), normalization=normalization, onesided=onesided)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    if complex_out:
        return out
    from ._complex import view_as_real
    return view_as_real(out)


@tensor_method
def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of ``stft``: overlap-add of the inverse-transformed, windowed frames."""
    need_tensor(input, "istft")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    what = _describe("istft", input, n_fft, hop, win, window, normalized, onesided, return_complex)
    if input.numel() == 0:
        raise RuntimeError(what + ": input tensor cannot be empty.")
    if input.dim() not in (2, 3):
        raise RuntimeError(what + ": expected a tensor with 2 or 3 dimensions of complex dtype, "
                           f"but got {input.dim()}")
    x = input.unsqueeze(0) if input.dim() == 2 else input          # (channel, freq, frame)
    n_frames, fft_size = x.shape[-1], x.shape[-2]
    expected = n_fft + hop * (n_frames - 1)
    if hop <= 0:
        raise RuntimeError(what + f": expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(what + f": expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(what + ": expected a 1D window tensor of size equal to win_length="
                           f"{win}, but got window with size {list(window.shape)}")
    real = input.dtype.to_real()
    if window is None:
        _warn_once("istft", "A window was not provided. A rectangular window will be applied."
                   "Please provide the same window used by stft to make the inversion lossless."
                   "To suppress this warning and use a rectangular window, explicitly set "
                   "`window=torch.ones(n_fft, device=<device>)`.")
    window = _pad_window(window, n_fft, win, x, real)
    onesided = fft_size != n_fft if onesided is None else onesided
    if onesided and fft_size != n_fft // 2 + 1:
        raise RuntimeError(what + ": expected the frequency dimension (3rd to the last) of the "
                           "input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{fft_size}")
    if not onesided and fft_size != n_fft:
        raise RuntimeError(what + ": expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {fft_size}")
    x = x.transpose(1, 2)                                           # (channel, frame, freq)
    normalization = S.BY_ROOT_N if normalized else S.BY_N
    if return_complex:
        frames = call(S.fft_c2c, x, dim=(2,), normalization=normalization, forward=False)
    else:
        if window.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = call(S.fft_c2r, x, dim=(2,), normalization=normalization, last_dim_size=n_fft)
    y = call(unfold_backward, frames * window, input_sizes=(frames.shape[0], expected), dim=1,
             size=n_fft, step=hop)
    env = call(unfold_backward, (window * window).expand((1, n_frames, n_fft)),
               input_sizes=(1, expected), dim=1, size=n_fft, step=hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    stop = min(end, expected)
    y, env = y.narrow(1, start, max(stop - start, 0)), env.narrow(1, start, max(stop - start, 0))
    low = env.abs().min() if env.numel() else env.new_ones(())
    if low.item() < 1e-11:
        raise RuntimeError(what + "window overlap add min: 1")
    y = y / env
    if input.dim() == 2:
        y = y.squeeze(0)
    if end > expected:                                              # zero-pad to ``length``
        shape = list(y.shape)
        shape[-1] = end - expected
        y = cat([y, y.new_zeros(shape)], -1)
    return y


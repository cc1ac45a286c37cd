"""The tensor side of transforms.functional: images are (..., C, H, W) tensors.

Everything is built from dynograph's own ops (F.interpolate, F.pad, F.grid_sample, F.conv2d),
so the same code runs on any device.  Integer images are computed in float32 and rounded back.
"""

import numpy as np

import dynograph as torch
import dynograph.nn.functional as F

INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_image(img):
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(img)}")
    if img.ndim < 2:
        raise TypeError("Tensor is not a torch image.")


def get_dimensions(img):
    check_image(img)
    channels = 1 if img.ndim == 2 else img.shape[-3]
    return [channels, img.shape[-2], img.shape[-1]]


def check_channels(img, permitted):
    c = get_dimensions(img)[0]
    if c not in permitted:
        raise TypeError(f"Input image tensor permitted channel values are {permitted}, but found {c}")


def max_value(dtype):
    """The value of full intensity: 1.0 for float images, the type's maximum for integer ones."""
    return torch.iinfo(dtype).max if dtype in INT_DTYPES else 1.0


def _as_batch(img, float_dtypes):
    """img as (N, C, H, W) in a float dtype from ``float_dtypes``, and how to undo that."""
    shape, dtype = img.shape, img.dtype
    img = img.reshape(-1, *shape[-3:]) if img.ndim >= 3 else img.reshape(1, 1, *shape)
    if dtype not in float_dtypes:
        img = img.to(float_dtypes[0])
    return img, (shape[:-2], dtype)


def _from_batch(img, undo):
    lead, dtype = undo
    img = img.reshape(*lead, *img.shape[-2:])
    if img.dtype != dtype:
        if dtype in INT_DTYPES:
            img = torch.round(img)      # round, not truncate, back to integers
        img = img.to(dtype)
    return img


def crop(img, top, left, height, width):
    _, h, w = get_dimensions(img)
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        # the part outside the image is zero padding
        ltrb = [max(-left + min(0, right), 0), max(-top + min(0, bottom), 0),
                max(right - max(w, left), 0), max(bottom - max(h, top), 0)]
        inside = img[..., max(top, 0):bottom, max(left, 0):right]
        return pad(inside, ltrb[0], ltrb[2], ltrb[1], ltrb[3])
    return img[..., top:bottom, left:right]


def pad(img, left, right, top, bottom, fill=0, padding_mode="constant"):
    check_image(img)
    widths = [left, right, top, bottom]
    if padding_mode == "symmetric":     # F.pad has no such mode: gather mirrored indices instead
        return _pad_symmetric(img, widths)
    if padding_mode == "constant":
        return F.pad(img, widths, mode="constant", value=float(0 if fill is None else fill))
    batch, undo = _as_batch(img, (torch.float32, torch.float64))
    mode = "replicate" if padding_mode == "edge" else padding_mode
    return _from_batch(F.pad(batch, widths, mode=mode), undo)


def _pad_symmetric(img, widths):
    left, right, top, bottom = widths
    for dim, lo, hi in ((-1, left, right), (-2, top, bottom)):
        n = img.shape[dim]
        idx = np.pad(np.arange(n), (max(lo, 0), max(hi, 0)), mode="symmetric")
        idx = idx[max(-lo, 0):len(idx) - max(-hi, 0)]       # negative widths crop
        img = img.index_select(img.ndim + dim, torch.tensor(idx, dtype=torch.int64))
    return img


def resize(img, size, interpolation, antialias):
    check_image(img)
    antialias = bool(antialias) and interpolation in ("bilinear", "bicubic")
    batch, undo = _as_batch(img, (torch.float32, torch.float64))
    align = False if interpolation in ("bilinear", "bicubic") else None
    out = F.interpolate(batch, size=list(size), mode=interpolation, align_corners=align,
                        antialias=antialias)
    if interpolation == "bicubic" and undo[1] == torch.uint8:
        out = out.clamp(0, 255)         # cubic overshoots
    return _from_batch(out, undo)


# ---------------------------------------------------------------- affine warps

def affine_output_size(matrix, w, h):
    """Bounding box (w, h) of the warped image, as PIL computes it for rotate(expand=True).

    In float32 like torchvision: float64 leaves 2 - 2e-16 where float32 rounds to 2."""
    corners = np.array([[-0.5 * w, -0.5 * h, 1.0], [-0.5 * w, 0.5 * h, 1.0], [0.5 * w, 0.5 * h, 1.0],
                        [0.5 * w, -0.5 * h, 1.0]], np.float32)
    pts = corners @ np.array(matrix, np.float32).reshape(2, 3).T + np.array([0.5 * w, 0.5 * h], np.float32)
    tol = np.float32(1e-4)      # so that 1e-7 above an integer does not ceil to the next one
    size = np.ceil(np.trunc(pts.max(0) / tol) * tol) - np.floor(np.trunc(pts.min(0) / tol) * tol)
    return int(size[0]), int(size[1])


def warp(img, matrix, interpolation, fill, out_size=None):
    """Sample img at inverse-``matrix`` positions (pixel units, origin at the image centre)."""
    check_image(img)
    if interpolation not in ("nearest", "bilinear"):
        raise ValueError(f"Interpolation mode '{interpolation}' is unsupported with Tensor input")
    h, w = img.shape[-2:]
    ow, oh = out_size or (w, h)
    batch, undo = _as_batch(img, (img.dtype,) if img.is_floating_point() else (torch.float32,))
    dtype = batch.dtype
    theta = torch.tensor(matrix, dtype=dtype).reshape(2, 3)
    # output pixel centres in pixels, mapped by theta, then rescaled to grid_sample's [-1, 1]
    xs = torch.linspace(-ow * 0.5 + 0.5, ow * 0.5 - 0.5, ow, dtype=dtype)
    ys = torch.linspace(-oh * 0.5 + 0.5, oh * 0.5 - 0.5, oh, dtype=dtype)
    ones = torch.ones(oh, ow, dtype=dtype)
    base = torch.stack([xs.expand(oh, ow), ys.unsqueeze(1).expand(oh, ow), ones], -1)
    grid = (base.reshape(-1, 3) @ theta.t()) / torch.tensor([0.5 * w, 0.5 * h], dtype=dtype)
    grid = grid.reshape(1, oh, ow, 2).expand(batch.shape[0], oh, ow, 2)
    if fill is not None:
        # a channel of ones marks what came from inside the image
        batch = torch.cat([batch, torch.ones_like(batch[:, :1])], 1)
    out = F.grid_sample(batch, grid, mode=interpolation, padding_mode="zeros", align_corners=False)
    if fill is not None:
        out, mask = out[:, :-1], out[:, -1:].expand(out.shape[0], out.shape[1] - 1, oh, ow)
        fill = list(fill) if isinstance(fill, (list, tuple)) else [float(fill)]
        fill_img = torch.tensor(fill, dtype=dtype).reshape(1, -1, 1, 1).expand_as(out)
        if interpolation == "nearest":
            out = torch.where(mask < 0.5, fill_img, out)
        else:
            out = out * mask + (1.0 - mask) * fill_img
    return _from_batch(out, undo)


# ---------------------------------------------------------------- colour

def rgb_to_grayscale(img, num_output_channels=1):
    if img.ndim < 3:
        raise TypeError(f"Input image tensor should have at least 3 dimensions, but found {img.ndim}")
    check_channels(img, [1, 3])
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    if img.shape[-3] == 3:
        r, g, b = img.unbind(dim=-3)
        gray = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(-3)
    else:
        gray = img.clone()
    return gray.expand(img.shape) if num_output_channels == 3 else gray


def blend(img1, img2, ratio):
    ratio = float(ratio)
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, max_value(img1.dtype)).to(img1.dtype)


def adjust_brightness(img, factor):
    check_channels(img, [1, 3])
    return blend(img, torch.zeros_like(img), factor)


def adjust_contrast(img, factor):
    check_channels(img, [3, 1])
    dtype = img.dtype if img.is_floating_point() else torch.float32
    gray = rgb_to_grayscale(img) if img.shape[-3] == 3 else img
    return blend(img, gray.to(dtype).mean(dim=(-3, -2, -1), keepdim=True), factor)


def adjust_saturation(img, factor):
    check_channels(img, [1, 3])
    if img.shape[-3] == 1:
        return img
    return blend(img, rgb_to_grayscale(img), factor)


def adjust_hue(img, hue_factor, convert_image_dtype):
    check_channels(img, [1, 3])
    if img.shape[-3] == 1:
        return img
    h, s, v = _rgb2hsv(convert_image_dtype(img, torch.float32)).unbind(dim=-3)
    rgb = _hsv2rgb(torch.stack(((h + hue_factor) % 1.0, s, v), dim=-3))
    return convert_image_dtype(rgb, img.dtype)


def _rgb2hsv(img):
    r, g, b = img.unbind(dim=-3)
    maxc, minc = img.max(dim=-3).values, img.min(dim=-3).values
    eqc = maxc == minc          # grey pixels: no hue, no saturation (and no 0 / 0)
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / cr, (maxc - g) / cr, (maxc - b) / cr
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv2rgb(img):
    h, s, v = img.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int32) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    # the sector i of the hue circle picks which of v, p, q, t each channel is
    sector = (i.unsqueeze(-3) == torch.arange(6).reshape(-1, 1, 1)).to(img.dtype)
    table = torch.stack((torch.stack((v, q, p, p, t, v), dim=-3),
                         torch.stack((t, v, v, q, p, p), dim=-3),
                         torch.stack((p, p, t, v, v, q), dim=-3)), dim=-4)
    return (sector.unsqueeze(-4) * table).sum(dim=-3)


def gaussian_kernel1d(kernel_size, sigma, dtype):
    half = (kernel_size - 1) * 0.5
    x = torch.linspace(-half, half, kernel_size, dtype=dtype)
    pdf = torch.exp(-0.5 * (x / sigma).pow(2))
    return pdf / pdf.sum()


def gaussian_blur(img, kernel_size, sigma):
    """kernel_size and sigma are [x, y]; borders reflect, as torchvision's do."""
    check_image(img)
    dtype = img.dtype if img.is_floating_point() else torch.float32
    kernel = torch.outer(gaussian_kernel1d(kernel_size[1], sigma[1], dtype),
                         gaussian_kernel1d(kernel_size[0], sigma[0], dtype))
    batch, undo = _as_batch(img, (dtype,))
    c = batch.shape[1]
    padded = F.pad(batch, [kernel_size[0] // 2] * 2 + [kernel_size[1] // 2] * 2, mode="reflect")
    out = F.conv2d(padded, kernel.expand(c, 1, *kernel.shape), groups=c)
    return _from_batch(out, undo)

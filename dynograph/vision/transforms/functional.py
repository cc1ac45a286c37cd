"""Functional transforms (torchvision.transforms.functional): each takes a PIL image or a
(..., C, H, W) tensor and returns the same kind; the work is in _functional_pil / _functional_tensor.
"""
import math
import numbers
import warnings
from enum import Enum

import numpy as np

import dynograph as torch
from . import _functional_pil as F_pil
from . import _functional_tensor as F_t


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    # PIL only
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


# Pillow's resampling filter numbers (PIL.Image.Resampling), and the old int spelling of the modes
_PIL_FILTERS = {InterpolationMode.NEAREST: 0, InterpolationMode.NEAREST_EXACT: 0,
                InterpolationMode.LANCZOS: 1, InterpolationMode.BILINEAR: 2, InterpolationMode.BICUBIC: 3,
                InterpolationMode.BOX: 4, InterpolationMode.HAMMING: 5}
_FROM_INT = {0: InterpolationMode.NEAREST, 1: InterpolationMode.LANCZOS, 2: InterpolationMode.BILINEAR,
             3: InterpolationMode.BICUBIC, 4: InterpolationMode.BOX, 5: InterpolationMode.HAMMING}


def interpolation_mode(mode):
    if isinstance(mode, int):
        return _FROM_INT[mode]
    if not isinstance(mode, InterpolationMode):
        raise TypeError("Argument interpolation should be a InterpolationMode or a corresponding Pillow "
                        "integer constant")
    return mode


def _is_pil(img):
    return not isinstance(img, torch.Tensor) and F_pil.is_pil_image(img)


def _check_image(img):
    if not isinstance(img, torch.Tensor) and not F_pil.is_pil_image(img):
        raise TypeError(f"img should be PIL Image or Tensor. Got {type(img)}")


def get_dimensions(img):
    """[channels, height, width]."""
    return F_pil.get_dimensions(img) if _is_pil(img) else F_t.get_dimensions(img)


def get_image_size(img):
    """[width, height]."""
    _, h, w = get_dimensions(img)
    return [w, h]


def get_image_num_channels(img):
    return get_dimensions(img)[0]


# ---------------------------------------------------------------- conversion

def to_tensor(pic):
    """PIL image or HWC ndarray -> CHW tensor; uint8 data (and PIL modes stored as bytes) scale to [0, 1]."""
    if not (F_pil.is_pil_image(pic) or isinstance(pic, np.ndarray)):
        raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        arr = pic[:, :, None] if pic.ndim == 2 else pic
    else:
        arr = _pil_array(pic, {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8))
        if pic.mode == "1":
            arr = arr * np.uint8(255)
    img = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
    if img.dtype == torch.uint8:
        return img.to(torch.get_default_dtype()).div(255)
    return img


def _pil_array(pic, dtype=None):
    """The pixels of a PIL image as an (H, W, bands) array."""
    arr = np.array(pic, dtype, copy=True)
    return arr.reshape(pic.size[1], pic.size[0], len(pic.getbands()))


def pil_to_tensor(pic):
    """PIL image -> CHW tensor of the image's own dtype (no scaling)."""
    if not F_pil.is_pil_image(pic):
        raise TypeError(f"pic should be PIL Image. Got {type(pic)}")
    arr = _pil_array(pic)
    if arr.dtype == np.uint16:      # 16-bit images ("I;16"): dynograph has no uint16, int32 holds them
        arr = arr.astype(np.int32)
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


_MODES_BY_CHANNELS = {2: ("LA",), 3: ("RGB", "YCbCr", "HSV"), 4: ("RGBA", "CMYK", "RGBX")}
_ONE_CHANNEL_MODES = {np.dtype(np.uint8): "L", np.dtype(np.int16): "I;16", np.dtype(np.uint16): "I;16",
                      np.dtype(np.int32): "I", np.dtype(np.float32): "F"}


def to_pil_image(pic, mode=None):
    """CHW tensor or HWC ndarray -> PIL image; float data (unless mode "F") is scaled by 255 to bytes."""
    Image = F_pil.pil_module()
    if isinstance(pic, torch.Tensor):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        if pic.ndim == 2:
            pic = pic.unsqueeze(0)
        if pic.shape[-3] > 4:
            raise ValueError(f"pic should not have > 4 channels. Got {pic.shape[-3]} channels.")
        npimg = np.transpose(pic.detach().cpu().numpy(), (1, 2, 0))
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        npimg = pic[:, :, None] if pic.ndim == 2 else pic
        if npimg.shape[-1] > 4:
            raise ValueError(f"pic should not have > 4 channels. Got {npimg.shape[-1]} channels.")
    else:
        raise TypeError(f"pic should be Tensor or ndarray. Got {type(pic)}.")
    if np.issubdtype(npimg.dtype, np.floating) and mode != "F":
        npimg = (npimg * 255).astype(np.uint8)
    channels = npimg.shape[2]
    if channels == 1:
        npimg = npimg[:, :, 0]
        expected = _ONE_CHANNEL_MODES.get(npimg.dtype)
        if mode is not None and mode != expected:
            raise ValueError(f"Incorrect mode ({mode}) supplied for input type {npimg.dtype}. "
                             f"Should be {expected}")
        mode = expected
    else:
        permitted = _MODES_BY_CHANNELS[channels]
        if mode is not None and mode not in permitted:
            raise ValueError(f"Only modes {list(permitted)} are supported for {channels}D inputs")
        if npimg.dtype == np.uint8 and mode is None:
            mode = permitted[0]
    if mode is None:
        raise TypeError(f"Input type {npimg.dtype} is not supported")
    npimg = np.ascontiguousarray(npimg)
    if mode == "I;16":
        npimg = npimg.astype("<u2")
    return Image.frombytes(mode, (npimg.shape[1], npimg.shape[0]), npimg.tobytes())


def convert_image_dtype(image, dtype=torch.float32):
    """Convert between image dtypes, rescaling intensities (1.0 for floats, the max for ints)."""
    if not isinstance(image, torch.Tensor):
        raise TypeError("Input img should be Tensor Image")
    if image.dtype == dtype:
        return image
    to_float = dtype not in F_t.INT_DTYPES
    if image.is_floating_point():
        if to_float:
            return image.to(dtype)
        if (image.dtype == torch.float32 and dtype in (torch.int32, torch.int64)) or (
                image.dtype == torch.float64 and dtype == torch.int64):
            raise RuntimeError(f"The cast from {image.dtype} to {dtype} cannot be performed safely.")
        # 1.0 must map to the max, not overflow: scale by max + 1 - eps and truncate
        eps = 1e-3
        return image.mul(float(F_t.max_value(dtype)) + 1.0 - eps).to(dtype)
    input_max = float(F_t.max_value(image.dtype))
    if to_float:
        return image.to(dtype) / input_max
    output_max = float(F_t.max_value(dtype))
    if input_max > output_max:
        factor = int((input_max + 1) // (output_max + 1))
        return torch.div(image, factor, rounding_mode="floor").to(dtype)
    factor = int((output_max + 1) // (input_max + 1))
    return image.to(dtype) * factor


# ---------------------------------------------------------------- normalization and erasing

def normalize(tensor, mean, std, inplace=False):
    """(x - mean) / std per channel, for a float (..., C, H, W) tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(tensor)}")
    if not tensor.is_floating_point():
        raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
    if tensor.ndim < 3:
        raise ValueError("Expected tensor to be a tensor image of size (..., C, H, W). Got tensor.size() = "
                         f"{tensor.size()}")
    if not inplace:
        tensor = tensor.clone()
    mean = torch.as_tensor(mean, dtype=tensor.dtype, device=tensor.device)
    std = torch.as_tensor(std, dtype=tensor.dtype, device=tensor.device)
    if (std == 0).any():
        raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}, "
                         "leading to division by zero.")
    if mean.ndim == 1:
        mean = mean.view(-1, 1, 1)
    if std.ndim == 1:
        std = std.view(-1, 1, 1)
    return tensor.sub_(mean).div_(std)


def erase(img, i, j, h, w, v, inplace=False):
    """img with the (h, w) box at (i, j) set to v."""
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(img)}")
    if not inplace:
        img = img.clone()
    img[..., i:i + h, j:j + w] = v
    return img


# ---------------------------------------------------------------- geometry

def _resized_output_size(height, width, size, max_size):
    if size is None or len(size) == 1:     # one number: the shorter edge (or max_size: the longer)
        short, long = (width, height) if width <= height else (height, width)
        if size is None:
            new_long, new_short = max_size, int(max_size * short / long)
        else:
            new_short, new_long = size[0], int(size[0] * long / short)
            if max_size is not None:
                if max_size <= size[0]:
                    raise ValueError(f"max_size = {max_size} must be strictly greater than the requested "
                                     f"size for the smaller edge size = {size}")
                if new_long > max_size:
                    new_short, new_long = int(max_size * new_short / new_long), max_size
        new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
        return [new_h, new_w]
    if max_size is not None:
        raise ValueError("max_size should only be passed if size specifies the length of the smaller edge, "
                         "i.e. size should be an int or a sequence of length 1 in torchscript mode.")
    return [size[0], size[1]]


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    """Resize to size (h, w), or the shorter edge to size when it is an int (aspect ratio kept)."""
    _check_image(img)
    interpolation = interpolation_mode(interpolation)
    if isinstance(size, (list, tuple)):
        if len(size) not in (1, 2):
            raise ValueError(f"Size must be an int or a 1 or 2 element tuple/list, not a {len(size)} element "
                             "tuple/list")
    elif size is not None:
        size = [int(size)]
    _, height, width = get_dimensions(img)
    out = _resized_output_size(height, width, size, max_size)
    if [height, width] == out:
        return img
    if _is_pil(img):
        if antialias is False:
            warnings.warn("Anti-alias option is always applied for PIL Image input. "
                          "Argument antialias is ignored.")
        return F_pil.resize(img, out, _PIL_FILTERS[interpolation])
    return F_t.resize(img, out, interpolation.value, antialias)


def _pad_widths(padding):
    """padding (int, or 1, 2 or 4 numbers: left, top, right, bottom) as (left, right, top, bottom)."""
    if isinstance(padding, numbers.Number):
        padding = [padding]
    if len(padding) == 1:
        return [padding[0]] * 4
    if len(padding) == 2:
        return [padding[0], padding[0], padding[1], padding[1]]
    return [padding[0], padding[2], padding[1], padding[3]]


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad the borders; modes constant (with fill), edge, reflect and symmetric."""
    _check_image(img)
    if not isinstance(padding, (numbers.Number, tuple, list)):
        raise TypeError("Got inappropriate padding arg")
    if fill is not None and not isinstance(fill, (numbers.Number, tuple, list)):
        raise TypeError("Got inappropriate fill arg")
    if not isinstance(padding_mode, str):
        raise TypeError("Got inappropriate padding_mode arg")
    if isinstance(padding, (tuple, list)) and len(padding) not in (1, 2, 4):
        raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not a {len(padding)} "
                         "element tuple")
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    widths = [int(p) for p in _pad_widths(padding)]
    if _is_pil(img):
        return F_pil.pad(img, *widths, fill=fill, padding_mode=padding_mode)
    if isinstance(fill, (tuple, list)):
        raise TypeError("Got inappropriate fill arg")       # a tensor image pads with one value
    return F_t.pad(img, *widths, fill=fill, padding_mode=padding_mode)


def crop(img, top, left, height, width):
    """The (height, width) box at (top, left); the part outside the image is zero."""
    _check_image(img)
    if _is_pil(img):
        return F_pil.crop(img, top, left, height, width)
    return F_t.crop(img, top, left, height, width)


def _pair(size):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if len(size) == 1:
        return size[0], size[0]
    return size


def center_crop(img, output_size):
    """The central (h, w) box, zero-padded first when the image is smaller."""
    crop_height, crop_width = _pair(output_size)
    _, image_height, image_width = get_dimensions(img)
    if crop_width > image_width or crop_height > image_height:
        dw, dh = max(crop_width - image_width, 0), max(crop_height - image_height, 0)
        img = pad(img, [dw // 2, dh // 2, (dw + 1) // 2, (dh + 1) // 2], fill=0)
        _, image_height, image_width = get_dimensions(img)
        if crop_width == image_width and crop_height == image_height:
            return img
    top = int(round((image_height - crop_height) / 2.0))
    left = int(round((image_width - crop_width) / 2.0))
    return crop(img, top, left, crop_height, crop_width)


def resized_crop(img, top, left, height, width, size, interpolation=InterpolationMode.BILINEAR,
                 antialias=True):
    img = crop(img, top, left, height, width)
    return resize(img, size, interpolation, antialias=antialias)


def hflip(img):
    _check_image(img)
    return F_pil.hflip(img) if _is_pil(img) else img.flip(-1)


def vflip(img):
    _check_image(img)
    return F_pil.vflip(img) if _is_pil(img) else img.flip(-2)


def _inverse_affine_matrix(center, angle, translate, scale, shear):
    """The inverse of T * C * R * S * Sh * C^-1 (rotation by ``angle`` degrees, shear in degrees)
    as 6 numbers: output pixel -> input pixel, which is what both backends sample with."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]      # det [[a, b], [c, d]] == 1
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy
    return m


def _tensor_fill(img, fill):
    if fill is None or isinstance(fill, (list, tuple)):
        return fill
    return [float(fill)] * get_dimensions(img)[0]


def rotate(img, angle, interpolation=InterpolationMode.NEAREST, expand=False, center=None, fill=None):
    """Rotate counter-clockwise by ``angle`` degrees about center (default: the image centre)."""
    _check_image(img)
    interpolation = interpolation_mode(interpolation)
    if _is_pil(img):
        return F_pil.rotate(img, angle, _PIL_FILTERS[interpolation], expand, center, fill)
    _, height, width = get_dimensions(img)
    # tensors measure from the image centre
    center_f = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [width, height])]
    matrix = _inverse_affine_matrix(center_f, -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    size = F_t.affine_output_size(matrix, width, height) if expand else None
    return F_t.warp(img, matrix, interpolation.value, _tensor_fill(img, fill), size)


def affine(img, angle, translate, scale, shear, interpolation=InterpolationMode.NEAREST, fill=None,
           center=None):
    """Rotate by angle, translate (pixels), scale and shear (degrees, one number or (x, y)) about center."""
    _check_image(img)
    interpolation = interpolation_mode(interpolation)
    if not isinstance(translate, (list, tuple)) or len(translate) != 2:
        raise ValueError("Argument translate should be a sequence of length 2")
    if scale <= 0.0:
        raise ValueError("Argument scale should be positive")
    if isinstance(shear, numbers.Number):
        shear = [shear, 0.0]
    shear = list(shear)
    if len(shear) == 1:
        shear = [shear[0], shear[0]]
    if len(shear) != 2:
        raise ValueError(f"Shear should be a sequence containing two values. Got {shear}")
    _, height, width = get_dimensions(img)
    if _is_pil(img):
        center = [width * 0.5, height * 0.5] if center is None else center
        matrix = _inverse_affine_matrix(center, angle, translate, scale, shear)
        return F_pil.affine(img, matrix, _PIL_FILTERS[interpolation], fill)
    center_f = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [width, height])]
    matrix = _inverse_affine_matrix(center_f, angle, [float(t) for t in translate], scale, shear)
    return F_t.warp(img, matrix, interpolation.value, _tensor_fill(img, fill))


# ---------------------------------------------------------------- colour

def rgb_to_grayscale(img, num_output_channels=1):
    """Luma 0.2989 R + 0.587 G + 0.114 B (PIL: ITU-R 601-2), 1 or 3 output channels."""
    _check_image(img)
    if _is_pil(img):
        return F_pil.to_grayscale(img, num_output_channels)
    return F_t.rgb_to_grayscale(img, num_output_channels)


def to_grayscale(img, num_output_channels=1):
    if not F_pil.is_pil_image(img):
        raise TypeError("Input should be PIL Image")
    return F_pil.to_grayscale(img, num_output_channels)


def _adjust(name, img, factor):
    _check_image(img)
    if factor < 0:
        raise ValueError(f"{name}_factor ({factor}) is not non-negative.")
    module = F_pil if _is_pil(img) else F_t
    return getattr(module, f"adjust_{name}")(img, factor)


def adjust_brightness(img, brightness_factor):
    return _adjust("brightness", img, brightness_factor)


def adjust_contrast(img, contrast_factor):
    return _adjust("contrast", img, contrast_factor)


def adjust_saturation(img, saturation_factor):
    return _adjust("saturation", img, saturation_factor)


def adjust_hue(img, hue_factor):
    """Shift the hue by hue_factor turns of the colour circle, in [-0.5, 0.5]."""
    if not (-0.5 <= hue_factor <= 0.5):
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    _check_image(img)
    if _is_pil(img):
        return F_pil.adjust_hue(img, hue_factor)
    return F_t.adjust_hue(img, hue_factor, convert_image_dtype)


def gaussian_blur(img, kernel_size, sigma=None):
    """Blur with a Gaussian kernel of kernel_size [x, y] (odd); sigma defaults to 0.15 * k + 0.35."""
    if not isinstance(kernel_size, (int, list, tuple)):
        raise TypeError(f"kernel_size should be int or a sequence of integers. Got {type(kernel_size)}")
    if isinstance(kernel_size, int):
        kernel_size = [kernel_size, kernel_size]
    if len(kernel_size) != 2:
        raise ValueError(f"If kernel_size is a sequence its length should be 2. Got {len(kernel_size)}")
    for k in kernel_size:
        if k % 2 == 0 or k < 0:
            raise ValueError(f"kernel_size should have odd and positive integers. Got {kernel_size}")
    if sigma is None:
        sigma = [k * 0.15 + 0.35 for k in kernel_size]
    if not isinstance(sigma, (int, float, list, tuple)):
        raise TypeError(f"sigma should be either float or sequence of floats. Got {type(sigma)}")
    if isinstance(sigma, (int, float)):
        sigma = [float(sigma), float(sigma)]
    if len(sigma) == 1:
        sigma = [sigma[0], sigma[0]]
    if len(sigma) != 2:
        raise ValueError(f"If sigma is a sequence, its length should be 2. Got {len(sigma)}")
    if any(s <= 0.0 for s in sigma):
        raise ValueError(f"sigma should have positive values. Got {sigma}")
    _check_image(img)
    if _is_pil(img):        # blur the pixels as a tensor, then back to an image of the same mode
        return to_pil_image(F_t.gaussian_blur(pil_to_tensor(img), kernel_size, sigma), mode=img.mode)
    return F_t.gaussian_blur(img, kernel_size, sigma)

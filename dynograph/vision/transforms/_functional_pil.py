"""The PIL-image side of transforms.functional: each function takes and returns a PIL image.

Pillow is an optional dependency ("dynograph[vision]"): it is imported only when a PIL image
actually reaches one of these functions.
"""
import numbers

import numpy as np


def pil_module():
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError('PIL images need Pillow: pip install "dynograph[vision]"') from e
    return Image


def is_pil_image(img):
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(img, Image.Image)


def _check(img):
    if not is_pil_image(img):
        raise TypeError(f"img should be PIL Image. Got {type(img)}")


def get_dimensions(img):
    _check(img)
    width, height = img.size
    return [len(img.getbands()), height, width]


def _fill_opts(fill, img, name="fillcolor"):
    """``fill`` as Pillow wants it: one value per band, ints except for float images."""
    if fill is None:
        return {}
    bands = len(img.getbands())
    if isinstance(fill, numbers.Number):
        fill = (fill,) * bands
    fill = tuple(fill)
    if len(fill) == 1:
        fill = fill * bands
    if len(fill) != bands:
        raise ValueError(f"The number of elements in 'fill' does not match the number of channels of the "
                         f"image ({len(fill)} != {bands})")
    if img.mode != "F":
        fill = tuple(int(v) for v in fill)
    return {name: fill[0] if bands == 1 else fill}


def hflip(img):
    _check(img)
    return img.transpose(pil_module().Transpose.FLIP_LEFT_RIGHT)


def vflip(img):
    _check(img)
    return img.transpose(pil_module().Transpose.FLIP_TOP_BOTTOM)


def crop(img, top, left, height, width):
    _check(img)
    return img.crop((left, top, left + width, top + height))


def resize(img, size, interpolation):
    """``size`` is the final [h, w]."""
    _check(img)
    return img.resize(tuple(size[::-1]), interpolation)


def pad(img, left, right, top, bottom, fill=0, padding_mode="constant"):
    _check(img)
    if min(left, right, top, bottom) < 0:       # negative widths crop
        w, h = img.size
        img = img.crop((max(-left, 0), max(-top, 0), w - max(-right, 0), h - max(-bottom, 0)))
        left, right, top, bottom = (max(p, 0) for p in (left, right, top, bottom))
    if padding_mode == "constant":
        from PIL import ImageOps
        return ImageOps.expand(img, border=(left, top, right, bottom), **_fill_opts(fill, img, "fill"))
    palette = img.getpalette() if img.mode == "P" else None
    arr = np.asarray(img)
    widths = ((top, bottom), (left, right)) + ((0, 0),) * (arr.ndim - 2)
    out = pil_module().fromarray(np.pad(arr, widths, padding_mode))     # numpy names the modes as we do
    if palette is not None:
        out.putpalette(palette)
    return out


def rotate(img, angle, interpolation, expand, center, fill):
    _check(img)
    return img.rotate(angle, interpolation, expand, center, **_fill_opts(fill, img))


def affine(img, matrix, interpolation, fill):
    _check(img)
    return img.transform(img.size, pil_module().Transform.AFFINE, matrix, interpolation,
                         **_fill_opts(fill, img))


def to_grayscale(img, num_output_channels):
    _check(img)
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    img = img.convert("L")
    if num_output_channels == 3:
        img = pil_module().merge("RGB", (img, img, img))
    return img


def _enhance(kind, img, factor):
    _check(img)
    from PIL import ImageEnhance
    return getattr(ImageEnhance, kind)(img).enhance(factor)


def adjust_brightness(img, factor):
    return _enhance("Brightness", img, factor)


def adjust_contrast(img, factor):
    return _enhance("Contrast", img, factor)


def adjust_saturation(img, factor):
    return _enhance("Color", img, factor)


def adjust_hue(img, hue_factor):
    _check(img)
    if img.mode in {"L", "1", "I", "F"}:
        return img
    mode = img.mode
    h, s, v = img.convert("HSV").split()
    # hue is a uint8 angle: the shift wraps around, as torchvision's uint8 overflow does
    shifted = (np.asarray(h).astype(np.int64) + int(hue_factor * 255)) % 256
    h = pil_module().fromarray(shifted.astype(np.uint8))
    return pil_module().merge("HSV", (h, s, v)).convert(mode)

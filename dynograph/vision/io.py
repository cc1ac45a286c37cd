"""Reading images into uint8 (C, H, W) tensors (torchvision.io), decoded with Pillow."""
import io as _io
from enum import Enum

import numpy as np

import dynograph as torch


class ImageReadMode(Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4


_PIL_MODES = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
              ImageReadMode.RGB_ALPHA: "RGBA"}


def read_file(path):
    """The bytes of a file as a 1-D uint8 tensor."""
    with open(path, "rb") as f:
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint8).copy())


def _unchanged_mode(img):
    """The mode an UNCHANGED read keeps: the file's own channels, palettes expanded."""
    if img.mode in ("L", "LA", "RGB", "RGBA"):
        return img.mode
    if img.mode in ("1", "I;16", "I"):
        return "L" if img.mode == "1" else img.mode
    has_alpha = "A" in img.getbands() or "transparency" in img.info
    return "RGBA" if has_alpha else "RGB"


def decode_image(input, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Decode a JPEG, PNG, GIF, BMP or WEBP (bytes as a 1-D uint8 tensor, or a path) to (C, H, W)."""
    from PIL import Image, ImageOps
    if isinstance(mode, str):
        mode = ImageReadMode[mode.upper()]
    if isinstance(input, torch.Tensor):
        if input.dtype != torch.uint8 or input.ndim != 1:
            raise RuntimeError("Expected a 1-D uint8 tensor of encoded bytes")
        source = _io.BytesIO(input.numpy().tobytes())
    else:
        source = str(input)
    with Image.open(source) as img:
        if apply_exif_orientation:
            img = ImageOps.exif_transpose(img)
        img = img.convert(_PIL_MODES.get(mode) or _unchanged_mode(img))
        arr = np.array(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.dtype != np.uint8:       # 16- and 32-bit images: dynograph has no uint16, int32 holds both
        arr = arr.astype(np.int32)
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def read_image(path, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Read an image file into a uint8 (C, H, W) tensor."""
    return decode_image(read_file(path), mode, apply_exif_orientation)


decode_jpeg = decode_png = decode_image

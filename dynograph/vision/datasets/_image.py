"""Pillow, imported only when an image is made: the rest of dynograph works without it."""

PIL_MISSING = ('this dataset returns PIL images, which need Pillow: pip install "dynograph[vision]" '
               '(or pip install pillow)')


def pil_image():
    """The PIL.Image module, or an ImportError that says how to install it."""
    try:
        from PIL import Image
    except ImportError as error:
        raise ImportError(PIL_MISSING) from error
    return Image


def image_from_array(array):
    """A PIL image of a uint8 array: HW gives mode "L", HWC with 3 channels "RGB", with 4 "RGBA"."""
    return pil_image().fromarray(array)


def pil_loader(path):
    """Opens an image file as RGB (the file is closed before returning)."""
    with open(path, "rb") as f:
        img = pil_image().open(f)
        return img.convert("RGB")

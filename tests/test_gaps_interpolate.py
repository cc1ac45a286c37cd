"""uint8 bilinear/bicubic interpolation (with and without antialias) equals torch's bit for
bit: torch resizes uint8 images one dimension at a time in integers, with int16 fixed-point
weights, rounding and saturating after each pass.  Up- and downscaling, align_corners,
scale factors, one-pixel inputs, more than four channels (torch's other kernel) and
saturated pixels (cubic overshoot), eager and compiled."""
import numpy as np
import pytest

import dynograph

F = dynograph.nn.functional


def _image(h, w, c, seed):
    img = np.random.default_rng(seed).integers(0, 256, (2, c, h, w), dtype=np.uint8)
    img[0, 0, : h // 2] = 255          # hard edges: the cubic filter overshoots and saturates
    img[0, 0, h // 2:, : w // 3] = 0
    return img


def _check(torch, img, **kw):
    theirs = torch.nn.functional.interpolate(torch.tensor(img), **kw)
    ours = F.interpolate(dynograph.tensor(img), **kw)
    assert str(ours.dtype) == "dynograph.uint8"
    assert tuple(ours.shape) == tuple(theirs.shape), kw
    diff = ours.numpy().astype(int) - theirs.numpy().astype(int)
    assert not diff.any(), f"{kw}: {np.count_nonzero(diff)} differ (by up to {abs(diff).max()})"


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("hw,c", [((17, 23), 3), ((7, 60), 1), ((1, 5), 3), ((12, 12), 5)])
def test_uint8_resize_matches_torch(torch, mode, antialias, hw, c):
    img = _image(*hw, c, seed=hw[0] * c)
    h, w = hw
    for size in [(34, 46), (9, 11), (h, 40), (5, 3), (h, w), (3 * h, w)]:
        for align in (False, True):
            _check(torch, img, size=size, mode=mode, align_corners=align, antialias=antialias)
    for factor in (0.3, 1.7, 2.0):
        for recompute in (None, True):
            if min(int(h * factor), int(w * factor)) < 1:
                continue
            _check(torch, img, scale_factor=factor, mode=mode, antialias=antialias,
                   recompute_scale_factor=recompute)


def test_uint8_resize_compiled(torch):
    img = _image(9, 13, 3, seed=1)
    f = dynograph.compile(lambda x: F.interpolate(x, size=(20, 7), mode="bicubic", antialias=True))
    g = dynograph.compile(lambda x: F.interpolate(x, scale_factor=2.5, mode="bicubic"))
    for fn, kw in ((f, dict(size=(20, 7), mode="bicubic", antialias=True)),
                   (g, dict(scale_factor=2.5, mode="bicubic"))):
        theirs = torch.nn.functional.interpolate(torch.tensor(img), **kw)
        np.testing.assert_array_equal(fn(dynograph.tensor(img)).numpy(), theirs.numpy())


def test_uint8_same_size_is_a_copy(torch):
    img = _image(6, 8, 3, seed=2)
    x = dynograph.tensor(img)
    y = F.interpolate(x, size=(6, 8), mode="bicubic")
    np.testing.assert_array_equal(y.numpy(), img)
    assert y.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
def test_uint8_three_channels_to_one_pixel(torch, mode):
    """torch 2.13 fails an internal assert ("please report a bug to PyTorch") resizing a
    3-channel uint8 image to 1x1 on its AVX path, with and without antialias.  That is a bug,
    not a documented limit: dynograph returns the result torch's other paths compute, each
    channel resized alone and the image padded to four channels agreeing."""
    img = _image(17, 23, 3, seed=4)
    for antialias in (False, True):
        for align in (False, True):
            kw = dict(size=(1, 1), mode=mode, antialias=antialias, align_corners=align)
            try:
                torch.nn.functional.interpolate(torch.tensor(img), **kw)
                raised = False
            except RuntimeError as e:
                raised = True
                assert "INTERNAL ASSERT FAILED" in str(e)
            alone = np.concatenate([torch.nn.functional.interpolate(
                torch.tensor(img[:, c:c + 1]), **kw).numpy() for c in range(3)], axis=1)
            four = torch.nn.functional.interpolate(
                torch.tensor(np.concatenate([img, img[:, :1]], axis=1)), **kw)[:, :3].numpy()
            np.testing.assert_array_equal(alone, four)
            ours = F.interpolate(dynograph.tensor(img), **kw)
            np.testing.assert_array_equal(ours.numpy(), alone)
            if not raised:          # a torch that fixed it must agree as well
                np.testing.assert_array_equal(
                    torch.nn.functional.interpolate(torch.tensor(img), **kw).numpy(), alone)

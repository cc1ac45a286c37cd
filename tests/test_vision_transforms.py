"""dynograph.vision.transforms against torchvision's documented formulas, with torch as the
reference for the tensor paths (interpolate, pad, conv2d)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import dynograph
import dynograph.utils.data
import dynograph.vision.transforms as T
import dynograph.vision.transforms.functional as F

Image = pytest.importorskip("PIL.Image")


def _np(t):
    return t.numpy() if isinstance(t, dynograph.Tensor) else np.asarray(t)


def _rgb(h=20, w=30, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _image(h=3, w=5, c=3, seed=0):
    return dynograph.from_numpy(np.random.default_rng(seed).random((c, h, w), dtype=np.float32))


# ---------------------------------------------------------------- conversion

def test_to_tensor_scales_uint8_only_and_moves_channels_first():
    arr = _rgb(4, 6)
    out = T.ToTensor()(arr)
    assert out.shape == (3, 4, 6) and out.dtype == dynograph.float32
    np.testing.assert_allclose(out.numpy(), arr.transpose(2, 0, 1) / 255, rtol=1e-6)
    floats = np.random.default_rng(1).random((4, 6), dtype=np.float32) * 7
    np.testing.assert_array_equal(T.ToTensor()(floats).numpy(), floats[None])       # not scaled
    with pytest.raises(TypeError, match="pic should be PIL Image or ndarray"):
        T.ToTensor()([1, 2])
    with pytest.raises(ValueError, match="pic should be 2/3 dimensional. Got 1 dimensions."):
        T.ToTensor()(np.zeros(3))


def test_to_tensor_of_pil_modes():
    arr = _rgb(4, 6)
    np.testing.assert_allclose(T.ToTensor()(Image.fromarray(arr)).numpy(), arr.transpose(2, 0, 1) / 255,
                               rtol=1e-6)
    ints = np.arange(24, dtype=np.int32).reshape(4, 6) * 1000
    out = T.ToTensor()(Image.fromarray(ints))                   # mode I: int32, unscaled
    assert out.dtype == dynograph.int32 and np.array_equal(out.numpy()[0], ints)
    bits = Image.fromarray(np.array([[True, False]]))           # mode 1: 0 / 255 -> 0 / 1
    np.testing.assert_array_equal(T.ToTensor()(bits).numpy(), [[[1.0, 0.0]]])


def test_pil_to_tensor_and_back():
    arr = _rgb(4, 6)
    t = T.PILToTensor()(Image.fromarray(arr))
    assert t.dtype == dynograph.uint8 and np.array_equal(t.numpy(), arr.transpose(2, 0, 1))
    assert np.array_equal(np.asarray(T.ToPILImage()(t)), arr)
    gray = T.ToPILImage()(dynograph.tensor([[0.0, 0.5, 1.0]]))    # float: * 255, then bytes
    assert gray.mode == "L" and np.asarray(gray).tolist() == [[0, 127, 255]]
    assert T.ToPILImage()(dynograph.zeros(4, 2, 2)).mode == "RGBA"
    assert T.ToPILImage(mode="HSV")(t).mode == "HSV"
    with pytest.raises(ValueError, match="Only modes"):
        T.ToPILImage(mode="LA")(t)


def test_convert_image_dtype():
    x = dynograph.tensor([0, 128, 255], dtype=dynograph.uint8)
    np.testing.assert_allclose(F.convert_image_dtype(x, dynograph.float32).numpy(), [0, 128 / 255, 1])
    f = dynograph.tensor([0.0, 0.5, 1.0])
    assert T.ConvertImageDtype(dynograph.uint8)(f).tolist() == [0, 127, 255]     # * (255 + 1 - 1e-3)
    assert F.convert_image_dtype(x, dynograph.int32).tolist() == [0, 128 << 23, 255 << 23]
    with pytest.raises(RuntimeError, match="cannot be performed safely"):
        F.convert_image_dtype(f, dynograph.int64)


def test_normalize_matches_the_formula_and_checks_its_input():
    x = _image()
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    out = T.Normalize(mean, std)(x)
    ref = (x.numpy() - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    assert not np.array_equal(out.numpy(), x.numpy())          # not in place by default
    with pytest.raises(TypeError, match="Input tensor should be a float tensor"):
        F.normalize(dynograph.zeros(3, 2, 2, dtype=dynograph.uint8), mean, std)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        F.normalize(x, mean, [1, 0, 1])


# ---------------------------------------------------------------- geometry

@pytest.mark.parametrize("hw,size,expected", [((20, 30), 10, (10, 15)), ((30, 20), 10, (15, 10)),
                                              ((20, 30), (7, 9), (7, 9)), ((20, 30), [12], (12, 18))])
def test_resize_output_sizes(hw, size, expected):
    x = dynograph.rand(3, *hw)
    assert tuple(T.Resize(size)(x).shape[-2:]) == expected
    assert Image.fromarray(_rgb(*hw)).resize((1, 1)) and T.Resize(size)(Image.fromarray(_rgb(*hw))).size == \
        expected[::-1]


def test_resize_max_size():
    assert tuple(F.resize(dynograph.rand(1, 10, 40), 8, max_size=16).shape) == (1, 4, 16)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_resize_tensor_matches_torch_interpolate(mode):
    x = _image(12, 17)
    antialias = mode != "nearest"
    ref = torch.nn.functional.interpolate(torch.from_numpy(x.numpy())[None], size=(5, 7), mode=mode,
                                          antialias=antialias, align_corners=None if mode == "nearest" else False)
    out = T.Resize((5, 7), interpolation=T.InterpolationMode(mode))(x)
    np.testing.assert_allclose(out.numpy(), ref[0].numpy(), rtol=1e-5, atol=1e-6)


def test_resize_uint8_rounds_back():
    x = dynograph.from_numpy(_rgb(12, 16).transpose(2, 0, 1).copy())
    ref = torch.nn.functional.interpolate(torch.from_numpy(x.numpy()).float()[None], size=(6, 8),
                                          mode="bilinear", antialias=True, align_corners=False)
    out = F.resize(x, [6, 8])
    assert out.dtype == dynograph.uint8
    np.testing.assert_array_equal(out.numpy(), ref[0].round().to(torch.uint8).numpy())


def test_center_crop_offsets_round_and_pads_small_images():
    x = dynograph.arange(7 * 8, dtype=dynograph.float32).reshape(1, 7, 8)
    out = T.CenterCrop((4, 3))(x)
    top, left = int(round((7 - 4) / 2)), int(round((8 - 3) / 2))
    np.testing.assert_array_equal(out.numpy(), x.numpy()[:, top:top + 4, left:left + 3])
    big = T.CenterCrop(10)(x)       # pads (10 - 8) // 2 left, (10 - 7) // 2 top, the rest right / bottom
    np.testing.assert_array_equal(big.numpy(), np.pad(x.numpy(), ((0, 0), (1, 2), (1, 1))))
    pil = Image.fromarray(_rgb(7, 8))
    assert np.array_equal(np.asarray(T.CenterCrop((4, 3))(pil)), _rgb(7, 8)[top:top + 4, left:left + 3])


@pytest.mark.parametrize("mode,torch_mode", [("constant", "constant"), ("edge", "replicate"),
                                             ("reflect", "reflect")])
def test_pad_modes_match_torch_pad(mode, torch_mode):
    x = _image(5, 6)
    out = F.pad(x, [1, 2, 3, 2], fill=0, padding_mode=mode)       # left, top, right, bottom
    ref = torch.nn.functional.pad(torch.from_numpy(x.numpy())[None], (1, 3, 2, 2), mode=torch_mode)
    np.testing.assert_array_equal(out.numpy(), ref[0].numpy())


def test_pad_symmetric_and_fill():
    x = _image(4, 5)
    out = F.pad(x, [2, 1], padding_mode="symmetric")
    np.testing.assert_array_equal(out.numpy(), np.pad(x.numpy(), ((0, 0), (1, 1), (2, 2)), mode="symmetric"))
    np.testing.assert_array_equal(F.pad(x, 1, fill=7).numpy(), np.pad(x.numpy(), ((0, 0), (1, 1), (1, 1)),
                                                                      constant_values=7))
    pil = F.pad(Image.fromarray(_rgb(4, 5)), [2, 1], padding_mode="reflect")
    assert np.array_equal(np.asarray(pil), np.pad(_rgb(4, 5), ((1, 1), (2, 2), (0, 0)), mode="reflect"))
    with pytest.raises(ValueError, match="Padding mode should be either"):
        F.pad(x, 1, padding_mode="wrap")


def test_random_crop_padding_and_pad_if_needed():
    x = _image(6, 6)
    dynograph.manual_seed(0)
    out = T.RandomCrop(6, padding=2, padding_mode="reflect")(x)
    assert out.shape == (3, 6, 6)
    padded = np.pad(x.numpy(), ((0, 0), (2, 2), (2, 2)), mode="reflect")
    windows = [padded[:, i:i + 6, j:j + 6] for i in range(5) for j in range(5)]
    assert any(np.array_equal(out.numpy(), w) for w in windows)
    # pad_if_needed pads both sides by the whole shortfall, as torchvision does
    small = _image(4, 5)
    assert T.RandomCrop((6, 8), pad_if_needed=True)(small).shape == (3, 6, 8)
    with pytest.raises(ValueError, match=r"Required crop size \(6, 8\) is larger than input image size"):
        T.RandomCrop((6, 8))(small)


def test_random_transforms_draw_from_dynographs_generator():
    x = _image(20, 30)
    dynograph.manual_seed(3)
    i, j, h, w = T.RandomCrop.get_params(x, (5, 7))
    dynograph.manual_seed(3)
    assert (i, j) == (dynograph.randint(0, 16, (1,)).item(), dynograph.randint(0, 24, (1,)).item())
    pipeline = T.Compose([T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.RandomRotation(30),
                          T.RandomAffine(10, (0.1, 0.1), (0.9, 1.1), 5), T.ColorJitter(0.4, 0.4, 0.4, 0.1),
                          T.GaussianBlur(3), T.RandomErasing(1.0, value="random")])
    runs = []
    for _ in range(2):
        dynograph.manual_seed(7)
        runs.append([pipeline(x).numpy() for _ in range(3)])
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0][0], runs[0][1])


def test_random_resized_crop_params_within_bounds():
    x = dynograph.rand(1, 40, 50)
    dynograph.manual_seed(0)
    for _ in range(50):
        i, j, h, w = T.RandomResizedCrop.get_params(x, (0.08, 1.0), (3 / 4, 4 / 3))
        assert 0 <= i <= 40 - h and 0 <= j <= 50 - w
        assert 0.08 * 2000 * 0.8 <= h * w <= 2000          # rounding of h and w aside
    assert T.RandomResizedCrop((5, 9))(x).shape == (1, 5, 9)
    # an extreme ratio misses ten times and falls back to the central crop of ratio max(ratio)
    assert T.RandomResizedCrop.get_params(x, (1.0, 1.0), (10, 10)) == ((40 - 5) // 2, 0, 5, 50)


def test_flips():
    x = _image()
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(x).numpy(), x.numpy()[..., ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(x).numpy(), x.numpy()[..., ::-1, :])
    assert T.RandomHorizontalFlip(p=0.0)(x) is x
    pil = Image.fromarray(_rgb(3, 5))
    assert np.array_equal(np.asarray(F.hflip(pil)), _rgb(3, 5)[:, ::-1])


def test_rotate_90_is_rot90_for_tensors_and_pil():
    x = _image(5, 5)
    np.testing.assert_allclose(F.rotate(x, 90).numpy(), np.rot90(x.numpy(), 1, (1, 2)), atol=1e-6)
    arr = _rgb(5, 5)
    assert np.array_equal(np.asarray(F.rotate(Image.fromarray(arr), 90)), np.rot90(arr, 1, (0, 1)))
    wide = F.rotate(_image(4, 8), 90, expand=True)
    assert wide.shape == (3, 8, 4)


def test_rotate_fill_and_identity_affine():
    x = _image(6, 6)
    out = F.rotate(x, 45, fill=[2.0, 2.0, 2.0])
    assert out.numpy()[:, 0, 0].tolist() == [2.0, 2.0, 2.0]       # corners come from outside
    np.testing.assert_allclose(F.affine(x, 0.0, [0, 0], 1.0, 0.0).numpy(), x.numpy(), atol=1e-6)
    shifted = F.affine(x, 0.0, [1, 0], 1.0, 0.0)                   # one pixel to the right
    np.testing.assert_allclose(shifted.numpy()[..., 1:], x.numpy()[..., :-1], atol=1e-6)


def test_affine_matrix_matches_pil_for_pil_images():
    arr = _rgb(9, 9)
    out = F.affine(Image.fromarray(arr), 0.0, [2, 1], 1.0, 0.0)
    expected = np.zeros_like(arr)
    expected[1:, 2:] = arr[:-1, :-2]
    assert np.array_equal(np.asarray(out), expected)



@pytest.mark.parametrize("angle,translate,scale,shear,center", [
    (30, [2, -3], 1.1, [5, 2], None), (30, [2, -3], 1.1, [5, 2], [5, 9]), (-45, [0, 0], 0.8, [0, 0], [5, 9])])
def test_affine_and_rotate_agree_on_pil_images_and_tensors(angle, translate, scale, shear, center):
    # Pillow warps PIL images; tensors go through grid_sample: the same matrix, the same pixels but
    # where a sample falls exactly between two (at 45 degrees, the diagonal), which nearest breaks apart
    arr = _rgb(26, 32)
    t = dynograph.from_numpy(arr.transpose(2, 0, 1).copy())
    pil = np.asarray(F.affine(Image.fromarray(arr), angle, translate, scale, shear, center=center))
    ten = F.affine(t, angle, translate, scale, shear, center=center).numpy().transpose(1, 2, 0)
    assert (pil == ten).all(-1).mean() > 0.97
    pil = np.asarray(F.rotate(Image.fromarray(arr), angle, expand=True))
    ten = F.rotate(t, angle, expand=True).numpy().transpose(1, 2, 0)
    assert pil.shape == ten.shape and (pil == ten).all(-1).mean() > 0.98


# ---------------------------------------------------------------- colour

def test_grayscale_weights():
    x = _image()
    r, g, b = x.numpy()
    out = T.Grayscale()(x)
    np.testing.assert_allclose(out.numpy()[0], 0.2989 * r + 0.587 * g + 0.114 * b, rtol=1e-6)
    assert T.Grayscale(3)(x).shape == (3, 3, 5)
    pil = T.Grayscale(3)(Image.fromarray(_rgb()))
    assert pil.mode == "RGB"
    with pytest.raises(ValueError, match="num_output_channels should be either 1 or 3"):
        F.rgb_to_grayscale(x, 2)


def test_color_jitter_factor_ranges():
    cj = T.ColorJitter(brightness=0.5, contrast=(0.2, 0.3), saturation=2, hue=0.25)
    assert cj.brightness == (0.5, 1.5) and cj.contrast == (0.2, 0.3)
    assert cj.saturation == (0.0, 3.0) and cj.hue == (-0.25, 0.25)
    assert T.ColorJitter().brightness is None
    with pytest.raises(ValueError, match=r"hue values should be between \(-0.5, 0.5\)"):
        T.ColorJitter(hue=0.6)
    with pytest.raises(ValueError, match="If brightness is a single number, it must be non negative."):
        T.ColorJitter(brightness=-1)


def test_color_adjustments_follow_blend():
    x = _image()
    np.testing.assert_allclose(F.adjust_brightness(x, 1.5).numpy(), np.clip(x.numpy() * 1.5, 0, 1), rtol=1e-6)
    gray_mean = F.rgb_to_grayscale(x).numpy().mean()
    np.testing.assert_allclose(F.adjust_contrast(x, 0.5).numpy(), 0.5 * x.numpy() + 0.5 * gray_mean, rtol=1e-5)
    np.testing.assert_allclose(F.adjust_saturation(x, 0.0).numpy(),
                               np.broadcast_to(F.rgb_to_grayscale(x).numpy(), (3, 3, 5)), rtol=1e-6)
    np.testing.assert_allclose(F.adjust_hue(x, 0.0).numpy(), x.numpy(), atol=1e-5)
    red = dynograph.tensor([1.0, 0.0, 0.0]).reshape(3, 1, 1)
    np.testing.assert_allclose(F.adjust_hue(red, 1 / 3).numpy().ravel(), [0, 1, 0], atol=1e-5)
    pil = F.adjust_hue(Image.fromarray(_rgb()), -0.1)
    assert pil.mode == "RGB"


def test_gaussian_blur_kernel_from_sigma_matches_torch_conv():
    x = _image(8, 9)
    sigma = 0.8
    out = F.gaussian_blur(x, [3, 5], [sigma, sigma])
    k = lambda n: np.exp(-0.5 * (np.linspace(-(n - 1) / 2, (n - 1) / 2, n) / sigma) ** 2)
    kx, ky = k(3) / k(3).sum(), k(5) / k(5).sum()
    kernel = torch.tensor(np.outer(ky, kx), dtype=torch.float32).expand(3, 1, 5, 3)
    padded = torch.nn.functional.pad(torch.from_numpy(x.numpy())[None], (1, 1, 2, 2), mode="reflect")
    ref = torch.nn.functional.conv2d(padded, kernel, groups=3)[0]
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert T.GaussianBlur(3)(Image.fromarray(_rgb())).size == (30, 20)
    with pytest.raises(ValueError, match="Kernel size value should be an odd and positive number."):
        T.GaussianBlur(4)


def test_random_erasing_area_and_ratio_bounds():
    x = dynograph.rand(3, 40, 60)
    dynograph.manual_seed(1)
    for _ in range(30):
        i, j, h, w, v = T.RandomErasing.get_params(x, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0.0])
        if (h, w) == (40, 60):
            continue
        assert 0 <= i <= 40 - h and 0 <= j <= 60 - w
        assert 0.3 * 0.5 <= h / w <= 3.3 * 2 and h * w <= 0.33 * 2400 * 1.2
    out = T.RandomErasing(p=1.0, value=(1, 2, 3))(x)
    changed = (out != x).any(0)
    assert changed.any() and out.numpy()[:, changed.numpy()].T.tolist()[0] == [1, 2, 3]
    with pytest.raises(ValueError, match="If value is str, it should be 'random'"):
        T.RandomErasing(value="noise")


# ---------------------------------------------------------------- containers and reprs

def test_reprs_are_torchvisions():
    assert repr(T.Resize(256)) == "Resize(size=256, interpolation=bilinear, max_size=None, antialias=True)"
    assert repr(T.CenterCrop(224)) == "CenterCrop(size=(224, 224))"
    assert repr(T.RandomCrop(32, padding=4)) == "RandomCrop(size=(32, 32), padding=4)"
    assert repr(T.RandomResizedCrop(224)) == ("RandomResizedCrop(size=(224, 224), scale=(0.08, 1.0), "
                                              "ratio=(0.75, 1.3333), interpolation=bilinear, antialias=True)")
    assert repr(T.Normalize((0.5,), (0.5,))) == "Normalize(mean=(0.5,), std=(0.5,))"
    assert repr(T.ColorJitter(0.2)) == "ColorJitter(brightness=(0.8, 1.2), contrast=None, saturation=None, hue=None)"
    assert repr(T.RandomRotation(10)) == ("RandomRotation(degrees=[-10.0, 10.0], interpolation=nearest, "
                                          "expand=False, fill=0)")
    assert repr(T.GaussianBlur(3)) == "GaussianBlur(kernel_size=(3, 3), sigma=(0.1, 2.0))"
    assert repr(T.Compose([T.ToTensor(), T.Lambda(abs)])) == "Compose(\n    ToTensor()\n    Lambda()\n)"
    assert repr(T.RandomAffine(5, shear=2)) == "RandomAffine(degrees=[-5.0, 5.0], shear=[-2.0, 2.0])"


def test_tutorial_pipeline_on_a_pil_image():
    pipeline = T.Compose([T.Resize(16), T.CenterCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    out = pipeline(Image.fromarray(_rgb(20, 30)))
    assert out.shape == (3, 12, 12) and out.dtype == dynograph.float32
    assert -1.0 <= float(out.min()) and float(out.max()) <= 1.0
    assert T.Lambda(lambda t: t * 2)(dynograph.ones(1)).tolist() == [2.0]


def test_transforms_import_without_pillow_loaded():
    code = "import sys, dynograph.vision.transforms, dynograph.vision.utils; print('PIL' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


class _Noise(dynograph.utils.data.Dataset):
    """Four copies of one image, randomly cropped and flipped."""

    def __init__(self):
        self.image = _image(8, 8)
        self.transform = T.Compose([T.RandomCrop(4), T.RandomHorizontalFlip()])

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.transform(self.image)


def test_dataloader_workers_make_random_transforms_reproducible():
    def run():
        dynograph.manual_seed(11)
        loader = dynograph.utils.data.DataLoader(_Noise(), batch_size=1, num_workers=2)
        return np.stack([b.numpy() for b in loader])
    first, second = run(), run()
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first[0], first[1])       # the two workers are seeded apart

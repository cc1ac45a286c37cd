"""dynograph.vision.utils (make_grid, save_image) and dynograph.vision.io (read_image, decode_image)."""
import numpy as np
import pytest

import dynograph
from dynograph.vision import io, utils

Image = pytest.importorskip("PIL.Image")


def test_make_grid_layout():
    batch = dynograph.arange(5 * 3 * 2 * 2, dtype=dynograph.float32).reshape(5, 3, 2, 2)
    grid = utils.make_grid(batch, nrow=2, padding=1, pad_value=-1)
    assert grid.shape == (3, 3 * 3 + 1, 2 * 3 + 1)             # 3 rows of 2, padding around each
    g, b = grid.numpy(), batch.numpy()
    np.testing.assert_array_equal(g[:, 1:3, 1:3], b[0])
    np.testing.assert_array_equal(g[:, 1:3, 4:6], b[1])
    np.testing.assert_array_equal(g[:, 4:6, 1:3], b[2])
    assert (g[:, 7:9, 4:6] == -1).all() and (g[:, 0] == -1).all()  # the missing sixth image
    assert utils.make_grid(dynograph.rand(1, 4, 4)).shape == (3, 4, 4)     # one gray image -> RGB


def test_make_grid_normalize():
    batch = dynograph.stack([dynograph.full((1, 2, 2), 2.0), dynograph.full((1, 2, 2), 4.0)])
    grid = utils.make_grid(batch, normalize=True, padding=0)
    assert grid.min().item() == 0.0 and grid.max().item() == 1.0
    each = utils.make_grid(batch, normalize=True, scale_each=True, padding=0, value_range=(0.0, 8.0))
    np.testing.assert_allclose(np.unique(each.numpy()), [0.25, 0.5])
    assert batch.max().item() == 4.0                            # not in place
    with pytest.raises(TypeError, match="tensor or list of tensors expected"):
        utils.make_grid(np.zeros((1, 3, 2, 2)))


def test_save_image_and_read_it_back(tmp_path):
    x = dynograph.from_numpy(np.random.default_rng(0).random((2, 3, 4, 5), dtype=np.float32))
    path = tmp_path / "grid.png"
    utils.save_image(x, path, nrow=2, padding=0)
    back = io.read_image(str(path))
    assert back.dtype == dynograph.uint8 and back.shape == (3, 4, 10)
    expected = np.clip(np.concatenate([x.numpy()[0], x.numpy()[1]], 2) * 255 + 0.5, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(back.numpy(), expected)


def test_read_modes_and_decode_from_bytes(tmp_path):
    arr = np.random.default_rng(1).integers(0, 256, (4, 6, 4), dtype=np.uint8)
    path = tmp_path / "a.png"
    Image.fromarray(arr, "RGBA").save(path)
    assert np.array_equal(io.read_image(path).numpy(), arr.transpose(2, 0, 1))
    assert io.read_image(path, io.ImageReadMode.RGB).shape == (3, 4, 6)
    assert io.read_image(path, io.ImageReadMode.GRAY).shape == (1, 4, 6)
    data = io.read_file(path)
    assert data.dtype == dynograph.uint8 and data.ndim == 1
    assert np.array_equal(io.decode_image(data).numpy(), arr.transpose(2, 0, 1))

"""dynograph.vision.datasets reads the real on-disk formats, laid out as torchvision expects them."""
import os
import pickle
import sys

import numpy as np
import pytest

import dynograph
from dynograph.utils.data import DataLoader
from dynograph.vision import datasets
from dynograph.vision.datasets._safe_pickle import UnsafePickleError
from vision_dataset_files import (CIFAR10_CLASSES, patch_cifar10_checksums, write_cifar, write_idx,
                                  write_mnist_raw, write_pickle)

Image = pytest.importorskip("PIL.Image")
NOT_FOUND = "Dataset not found or corrupted. You can use download=True to download it"


def to_array(img):
    return np.asarray(img, dtype=np.float32) / 255


# ---- MNIST family: idx files in root/<ClassName>/raw/

@pytest.mark.parametrize("cls", [datasets.MNIST, datasets.FashionMNIST, datasets.KMNIST])
def test_mnist_family_reads_idx_files(tmp_path, cls):
    written = write_mnist_raw(tmp_path / cls.__name__ / "raw")
    train = cls(str(tmp_path))
    test = cls(tmp_path, train=False)
    assert (len(train), len(test)) == (5, 3)
    assert train.data.dtype == dynograph.uint8 and tuple(train.data.shape) == (5, 28, 28)
    assert train.targets.dtype == dynograph.int64
    np.testing.assert_array_equal(test.data.numpy(), written["t10k-images-idx3-ubyte"])
    np.testing.assert_array_equal(train.targets.numpy(), written["train-labels-idx1-ubyte"])
    img, target = train[1]
    assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (28, 28)
    np.testing.assert_array_equal(np.asarray(img), written["train-images-idx3-ubyte"][1])
    assert type(target) is int and target == written["train-labels-idx1-ubyte"][1]
    assert len(train.classes) == 10 and train.class_to_idx[train.classes[3]] == 3
    assert train.raw_folder == os.path.join(str(tmp_path), cls.__name__, "raw")
    assert repr(test).splitlines()[:4] == [f"Dataset {cls.__name__}", "    Number of datapoints: 3",
                                           f"    Root location: {tmp_path}", "    Split: Test"]


def test_mnist_transforms_and_dataloader(tmp_path):
    written = write_mnist_raw(tmp_path / "MNIST" / "raw", n_train=6)
    ds = datasets.MNIST(tmp_path, transform=lambda img: dynograph.tensor(to_array(img)[None]),
                        target_transform=lambda t: t + 100)
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert tuple(x.shape) == (4, 1, 28, 28)
    np.testing.assert_allclose(x.numpy()[2, 0], written["train-images-idx3-ubyte"][2] / 255, rtol=1e-6)
    np.testing.assert_array_equal(y.numpy(), written["train-labels-idx1-ubyte"][:4].astype(np.int64) + 100)


def test_mnist_missing_or_malformed(tmp_path):
    with pytest.raises(RuntimeError, match=NOT_FOUND):
        datasets.MNIST(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    write_mnist_raw(raw)
    write_idx(raw / "train-labels-idx1-ubyte", np.zeros((5, 2)))  # 2-d where labels are 1-d
    with pytest.raises(ValueError, match="expected uint8 labels"):
        datasets.MNIST(tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(b"\x12\x34\x56\x78" + bytes(8))
    with pytest.raises(ValueError, match="not an idx file"):
        datasets.MNIST(tmp_path)
    write_idx(raw / "train-labels-idx1-ubyte", np.zeros(5))
    (raw / "train-images-idx3-ubyte").write_bytes((raw / "train-images-idx3-ubyte").read_bytes()[:-1])
    with pytest.raises(ValueError, match="idx header announces shape"):
        datasets.MNIST(tmp_path)


# ---- CIFAR: pickled python batches in root/cifar-10-batches-py (cifar-100-python)

def make_cifar10(tmp_path, monkeypatch):
    train, test = ["data_batch_1", "data_batch_2"], ["test_batch"]
    md5s, contents = write_cifar(tmp_path / "cifar-10-batches-py", {"data_batch_1": 3, "data_batch_2": 2,
                                                                    "test_batch": 4},
                                 "batches.meta", "label_names", CIFAR10_CLASSES)
    patch_cifar10_checksums(monkeypatch, datasets.CIFAR10, md5s, train, test, "batches.meta", "label_names")
    return contents


def test_cifar10_reads_batches(tmp_path, monkeypatch):
    contents = make_cifar10(tmp_path, monkeypatch)
    train = datasets.CIFAR10(root=str(tmp_path), train=True, download=False)
    assert len(train) == 5 and train.data.shape == (5, 32, 32, 3) and train.data.dtype == np.uint8
    assert train.targets == contents["data_batch_1"][1] + contents["data_batch_2"][1]
    assert train.classes == CIFAR10_CLASSES and train.class_to_idx["cat"] == 3
    # rows are 1024 red, then 1024 green, then 1024 blue values, row-major
    first_of_batch_2 = contents["data_batch_2"][0][0].reshape(3, 32, 32).transpose(1, 2, 0)
    img, target = train[3]
    assert isinstance(img, Image.Image) and img.mode == "RGB" and img.size == (32, 32)
    np.testing.assert_array_equal(np.asarray(img), first_of_batch_2)
    assert target == contents["data_batch_2"][1][0]
    assert len(datasets.CIFAR10(tmp_path, train=False)) == 4


def test_cifar100_fine_labels(tmp_path, monkeypatch):
    classes = [f"class_{i}" for i in range(100)]
    md5s, contents = write_cifar(tmp_path / "cifar-100-python", {"train": 4, "test": 2}, "meta",
                                 "fine_label_names", classes, label_key="fine_labels")
    patch_cifar10_checksums(monkeypatch, datasets.CIFAR100, md5s, ["train"], ["test"], "meta",
                            "fine_label_names")
    ds = datasets.CIFAR100(tmp_path, transform=to_array)
    assert ds.targets == contents["train"][1] and ds.classes == classes
    x, _ = ds[0]
    assert x.shape == (32, 32, 3) and x.dtype == np.float32


def test_cifar_corrupted_batch(tmp_path, monkeypatch):
    make_cifar10(tmp_path, monkeypatch)
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_2", "ab") as f:
        f.write(b"x")
    with pytest.raises(RuntimeError, match=NOT_FOUND):
        datasets.CIFAR10(tmp_path)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("payload", ["call", "object array", "subclass"])
def test_cifar_refuses_malicious_pickle(tmp_path, monkeypatch, payload):
    make_cifar10(tmp_path, monkeypatch)
    marker = tmp_path / "ran"
    evil = {"call": _RunsCode(str(marker)),
            "object array": np.array([_RunsCode(str(marker))], dtype=object),
            "subclass": np.zeros(3).view(np.matrix)}[payload]
    path = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    write_pickle(path, {"labels": [0], "data": evil})
    monkeypatch.setattr(datasets.CIFAR10, "train_list", [["data_batch_1", None]])
    with pytest.raises(UnsafePickleError, match="data_batch_1: "):
        datasets.CIFAR10(tmp_path)
    assert not marker.exists()
    assert isinstance(UnsafePickleError("x"), pickle.UnpicklingError)


# ---- folders of images: root/<class>/**/<file>

def make_image_folder(root):
    rng = np.random.default_rng(0)
    files = {"cat/a.png": 0, "cat/sub/b.JPG": 0, "dog/c.bmp": 1, "dog/notes.txt": None}
    for name, _ in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".txt"):
            path.write_text("not an image")
        else:
            Image.fromarray(rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)).save(path)
    return files


def test_image_folder(tmp_path):
    make_image_folder(tmp_path)
    ds = datasets.ImageFolder(tmp_path, transform=lambda img: img.size)
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    assert [os.path.relpath(p, tmp_path) for p, _ in ds.samples] == ["cat/a.png", "cat/sub/b.JPG", "dog/c.bmp"]
    assert ds.targets == [0, 0, 1] and ds.imgs is ds.samples and len(ds) == 3
    assert ds[2] == ((7, 5), 1)
    img, _ = datasets.ImageFolder(tmp_path)[0]
    assert isinstance(img, Image.Image) and img.mode == "RGB"
    only_png = datasets.ImageFolder(tmp_path, is_valid_file=lambda p: p.endswith(".png"), allow_empty=True)
    assert len(only_png) == 1


def test_dataset_folder_loader_and_errors(tmp_path):
    make_image_folder(tmp_path)
    ds = datasets.DatasetFolder(tmp_path, loader=lambda p: open(p).read(), extensions=(".txt",), allow_empty=True)
    assert ds[0] == ("not an image", 1)
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes cat. "
                                                "Supported extensions are: .txt"):
        datasets.DatasetFolder(tmp_path, loader=open, extensions=(".txt",))
    with pytest.raises(ValueError, match="Both extensions and is_valid_file cannot be None"):
        datasets.DatasetFolder(tmp_path, loader=open)
    with pytest.raises(FileNotFoundError, match="Couldn't find any class folder"):
        datasets.ImageFolder(tmp_path / "cat" / "sub")


# ---- generated and bundled data

def test_fake_data_is_reproducible():
    ds = datasets.FakeData(size=4, image_size=(3, 6, 5), num_classes=3)
    dynograph.manual_seed(7)
    before = dynograph.rand(1).item()
    (a, ta), (b, tb) = ds[2], ds[2]
    dynograph.manual_seed(7)
    assert dynograph.rand(1).item() == before  # the global generator is untouched
    assert isinstance(a, Image.Image) and a.size == (5, 6) and a.mode == "RGB"
    assert np.array_equal(np.asarray(a), np.asarray(b)) and ta == tb and 0 <= ta < 3
    assert not np.array_equal(np.asarray(a), np.asarray(ds[1][0]))
    assert datasets.FakeData(size=2, image_size=(1, 4, 4))[0][0].mode == "L"
    with pytest.raises(IndexError, match="FakeData index out of range"):
        ds[4]


def test_digits():
    pytest.importorskip("sklearn")
    train, test = datasets.Digits(), datasets.Digits(train=False, transform=to_array)
    assert (len(train), len(test)) == (1437, 360)
    assert tuple(train.data.shape) == (1437, 8, 8) and train.data.dtype == dynograph.uint8
    img, target = train[0]
    assert img.mode == "L" and img.size == (8, 8) and target == 0
    assert train.data.numpy().max() == 255  # 16, the source maximum, becomes 255
    x, _ = test[0]
    assert x.shape == (8, 8) and 0 <= x.min() and x.max() <= 1


def test_missing_pillow_says_how_to_install(tmp_path, monkeypatch):
    write_mnist_raw(tmp_path / "MNIST" / "raw")
    ds = datasets.MNIST(tmp_path)  # reading the files needs no Pillow
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r'pip install "dynograph\[vision\]"'):
        ds[0]

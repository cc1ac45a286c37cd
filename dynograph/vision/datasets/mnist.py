"""MNIST and its drop-in relatives, read from the idx files in root/<ClassName>/raw/ as torchvision does.

`data` is a uint8 tensor (N, 28, 28), `targets` an int64 tensor (N,); items are (PIL image "L", int).
"""
import os
import urllib.error

import numpy as np

from ... import from_numpy
from ._image import image_from_array
from .utils import NOT_FOUND, check_integrity, download_and_extract_archive
from .vision import VisionDataset

# idx type codes -> big-endian numpy dtypes (the format's magic number is 0x00 0x00 type ndim)
_IDX_TYPES = {8: ">u1", 9: ">i1", 11: ">i2", 12: ">i4", 13: ">f4", 14: ">f8"}


def read_idx_file(path):
    """The array stored in one idx file (LeCun's format, as used by MNIST)."""
    with open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[:4], "big")
    ndim, type_code = magic & 0xFF, magic >> 8
    if magic >> 16 != 0 or type_code not in _IDX_TYPES or not 1 <= ndim <= 3:
        raise ValueError(f"{path}: not an idx file (magic number {magic:#010x})")
    header = 4 * (ndim + 1)
    shape = tuple(int.from_bytes(data[4 * i:4 * i + 4], "big") for i in range(1, ndim + 1))
    dtype = np.dtype(_IDX_TYPES[type_code])
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: the idx header announces shape {shape} ({expected} bytes), "
                         f"the file has {len(data)} bytes")
    return np.frombuffer(data, dtype=dtype, offset=header).astype(dtype.newbyteorder("=")).reshape(shape)


def read_image_file(path):
    x = read_idx_file(path)
    if x.dtype != np.uint8 or x.ndim != 3:
        raise ValueError(f"{path}: expected uint8 images (magic 0x00000803), found {x.ndim}-d {x.dtype}")
    return from_numpy(x)


def read_label_file(path):
    x = read_idx_file(path)
    if x.dtype != np.uint8 or x.ndim != 1:
        raise ValueError(f"{path}: expected uint8 labels (magic 0x00000801), found {x.ndim}-d {x.dtype}")
    return from_numpy(x.astype(np.int64))


class MNIST(VisionDataset):
    """`MNIST <http://yann.lecun.com/exdb/mnist/>`_ from root/MNIST/raw/{train,t10k}-*-ubyte.

    `mirrors` are tried in order for each file of `resources` (name, MD5 of the .gz).
    """
    mirrors = [
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ]
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcc0e5a0e5a"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    training_file = "training.pt"
    test_file = "test.pt"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
               "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_exists():
            raise RuntimeError(NOT_FOUND)
        self.data, self.targets = self._load_data()

    def _load_data(self):
        prefix = "train" if self.train else "t10k"
        data = read_image_file(os.path.join(self.raw_folder, f"{prefix}-images-idx3-ubyte"))
        targets = read_label_file(os.path.join(self.raw_folder, f"{prefix}-labels-idx1-ubyte"))
        if len(data) != len(targets):
            raise RuntimeError(f"{self.raw_folder}: {len(data)} images but {len(targets)} labels")
        return data, targets

    def __getitem__(self, index):
        img, target = image_from_array(self.data[index].numpy()), int(self.targets[index])
        return self._apply_transforms(img, target)

    def __len__(self):
        return len(self.data)

    @property
    def raw_folder(self):
        return os.path.join(self.root, self.__class__.__name__, "raw")

    @property
    def processed_folder(self):
        return os.path.join(self.root, self.__class__.__name__, "processed")

    @property
    def class_to_idx(self):
        return {_class: i for i, _class in enumerate(self.classes)}

    def _check_exists(self):
        return all(check_integrity(os.path.join(self.raw_folder, os.path.splitext(name)[0]))
                   for name, _ in self.resources)

    def download(self):
        """Downloads and unpacks the files not present yet; each file tries every mirror in turn."""
        if self._check_exists():
            return
        os.makedirs(self.raw_folder, exist_ok=True)
        for filename, md5 in self.resources:
            errors = []
            for mirror in self.mirrors:
                url = f"{mirror}{filename}"
                try:
                    download_and_extract_archive(url, self.raw_folder, filename=filename, md5=md5)
                except urllib.error.URLError as error:  # unreachable or an HTTP error: next mirror
                    errors.append(f"{url}: {error}")
                    continue
                break
            else:
                raise RuntimeError(f"Error downloading {filename}:\n" + "\n".join(errors))

    def extra_repr(self):
        return f"Split: {'Train' if self.train is True else 'Test'}"


class FashionMNIST(MNIST):
    """`Fashion-MNIST <https://github.com/zalandoresearch/fashion-mnist>`_: root/FashionMNIST/raw/."""
    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]


class KMNIST(MNIST):
    """`Kuzushiji-MNIST <https://github.com/rois-codh/kmnist>`_: root/KMNIST/raw/."""
    mirrors = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "bdb82020997e1d708af4cf47b453dcf7"),
        ("train-labels-idx1-ubyte.gz", "e144d726b3acfaa3e44228e80efcd344"),
        ("t10k-images-idx3-ubyte.gz", "5c965bf0a639b31b8f53240b1b52f4d7"),
        ("t10k-labels-idx1-ubyte.gz", "7320c461ea6c1c855c0b718fb2a4b134"),
    ]
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]

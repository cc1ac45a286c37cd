"""scikit-learn's bundled 8x8 handwritten digits, offline, in MNIST's shape of API.

1797 images; the first 1437 (80%) are the training split, the other 360 the test split. Pixels are
0..16 in the source and are scaled to 0..255 so that ToTensor gives values in [0, 1].
"""
import numpy as np

from ... import from_numpy
from ._image import image_from_array
from .vision import VisionDataset

_TRAIN_SIZE = 1437


class Digits(VisionDataset):
    """`data` is a uint8 tensor (N, 8, 8), `targets` an int64 tensor; items are (PIL image "L", int).

    `root` and `download` are accepted for the same signature as MNIST; the data ships with scikit-learn.
    """
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
               "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root=None, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        try:
            from sklearn.datasets import load_digits
        except ImportError as error:
            raise ImportError("Digits reads the data bundled with scikit-learn: "
                              "pip install scikit-learn") from error
        bunch = load_digits()
        images = np.rint(bunch.images * (255 / 16)).astype(np.uint8)
        split = slice(None, _TRAIN_SIZE) if train else slice(_TRAIN_SIZE, None)
        self.data = from_numpy(np.ascontiguousarray(images[split]))
        self.targets = from_numpy(bunch.target[split].astype(np.int64))

    @property
    def class_to_idx(self):
        return {_class: i for i, _class in enumerate(self.classes)}

    def __getitem__(self, index):
        img, target = image_from_array(self.data[index].numpy()), int(self.targets[index])
        return self._apply_transforms(img, target)

    def __len__(self):
        return len(self.data)

    def extra_repr(self):
        return f"Split: {'Train' if self.train is True else 'Test'}"

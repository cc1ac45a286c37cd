"""Random images, reproducible per index, as torchvision's FakeData."""
import numpy as np

from ... import get_rng_state, manual_seed, randint, randn, set_rng_state
from ._image import image_from_array
from .vision import VisionDataset


def _to_pil(chw):
    """A float CHW tensor as a PIL image the way ToPILImage does: x * 255 cast to uint8, wrapping."""
    array = (chw.numpy() * 255).astype(np.int64).astype(np.uint8).transpose(1, 2, 0)
    return image_from_array(array[:, :, 0] if array.shape[2] == 1 else array)


class FakeData(VisionDataset):
    """`size` random (PIL image, int) pairs; item i is drawn with seed i + random_offset, so it is stable."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        super().__init__(transform=transform, target_transform=target_transform)
        self.size = size
        self.num_classes = num_classes
        self.image_size = image_size
        self.random_offset = random_offset

    def __getitem__(self, index):
        if index >= len(self):
            raise IndexError(f"{self.__class__.__name__} index out of range")
        # seed from the index, then give the global generator its state back
        rng_state = get_rng_state()
        manual_seed(index + self.random_offset)
        img = randn(*self.image_size)
        target = randint(0, self.num_classes, (1,))[0].item()
        set_rng_state(rng_state)
        return self._apply_transforms(_to_pil(img), target)

    def __len__(self):
        return self.size

"""The base class every dataset here derives from, as torchvision's VisionDataset."""
import os

from ...utils.data import Dataset


class StandardTransform:
    """Applies `transform` to the input and `target_transform` to the target."""

    def __init__(self, transform=None, target_transform=None):
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, input, target):
        if self.transform is not None:
            input = self.transform(input)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return input, target

    def _format_transform_repr(self, transform, head):
        lines = repr(transform).splitlines()
        return [f"{head}{lines[0]}"] + [" " * len(head) + line for line in lines[1:]]

    def __repr__(self):
        body = [self.__class__.__name__]
        if self.transform is not None:
            body += self._format_transform_repr(self.transform, "Transform: ")
        if self.target_transform is not None:
            body += self._format_transform_repr(self.target_transform, "Target transform: ")
        return "\n".join(body)


class VisionDataset(Dataset):
    """Holds `root` and the transforms; subclasses implement __getitem__ and __len__.

    `transforms` takes (input, target) together; `transform`/`target_transform` take one each.
    """
    _repr_indent = 4

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        if isinstance(root, (str, os.PathLike)):
            root = os.path.expanduser(os.fspath(root))
        self.root = root
        has_separate_transform = transform is not None or target_transform is not None
        if transforms is not None and has_separate_transform:
            raise ValueError("Only transforms or transform/target_transform can be passed as argument")
        self.transform = transform
        self.target_transform = target_transform
        if has_separate_transform:
            transforms = StandardTransform(transform, target_transform)
        self.transforms = transforms

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def _apply_transforms(self, sample, target):
        """The one place where datasets apply their transforms, as torchvision orders them."""
        if self.transforms is None:
            return sample, target
        return self.transforms(sample, target)

    def extra_repr(self):
        return ""

    def __repr__(self):
        body = [f"Number of datapoints: {self.__len__()}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if self.transforms is not None:
            body += repr(self.transforms).splitlines()
        lines = ["Dataset " + self.__class__.__name__] + [" " * self._repr_indent + line for line in body]
        return "\n".join(lines)

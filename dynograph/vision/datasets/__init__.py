"""dynograph.vision.datasets: torchvision's datasets, reading the same files in the same folders."""
from .cifar import CIFAR10, CIFAR100
from .digits import Digits
from .fakedata import FakeData
from .folder import DatasetFolder, ImageFolder
from .mnist import KMNIST, MNIST, FashionMNIST
from .vision import VisionDataset

__all__ = ["CIFAR10", "CIFAR100", "DatasetFolder", "Digits", "FakeData", "FashionMNIST", "ImageFolder",
           "KMNIST", "MNIST", "VisionDataset"]

"""LeNet-5 as the PyTorch tutorials write it (torchvision has no LeNet).

The layers and names are those of the CIFAR-10 tutorial's ``Net`` (conv1, pool, conv2, fc1-3),
so its state_dict loads here; ``in_channels=1`` gives the "Neural Networks" tutorial's variant.
Inputs are 32x32 images.
"""
import dynograph
from dynograph import nn
from dynograph.nn import functional as F

from ._api import check_weights


class LeNet(nn.Module):
    def __init__(self, num_classes=10, in_channels=3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = dynograph.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def lenet(*, weights=None, progress=True, **kwargs):
    check_weights("lenet", weights, kwargs)
    return LeNet(**kwargs)

"""Models the export tests trace: the test deletes this module from sys.modules before a fresh
process loads the exported files, so nothing of it is needed to run them."""
import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F
from tools.bench.workloads.training import cifar_net


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class BatchNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout2d(0.2),
            nn.AvgPool2d(2), nn.Conv2d(8, 8, 3, stride=2), nn.BatchNorm2d(8), nn.LeakyReLU(0.1),
            nn.AdaptiveAvgPool2d(1))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(8, 5),
                                  nn.BatchNorm1d(5), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.features(x))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.out = nn.Linear(12, 3)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.out(y[:, -1]), h


class EncoderNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def build(name):
    """(model in eval mode, example input, dynamic dimension) for a model's name."""
    torch.manual_seed(0)
    model, x, dim = {
        "mlp": (MLP, (5, 10), 0),
        "cifar": (lambda: cifar_net(torch), (3, 3, 32, 32), 0),
        "batchnorm": (BatchNormNet, (4, 3, 12, 12), 0),
        "lstm": (LSTMNet, (3, 7, 6), 0),
        "encoder": (EncoderNet, (3, 5, 16), 0),
    }[name]
    model = model()
    if name == "batchnorm":            # running statistics that are not the identity
        model.train()
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn(*x) * 2 + 1)
    model.eval()
    return model, torch.randn(*x), dim


NAMES = ("mlp", "cifar", "batchnorm", "lstm", "encoder")

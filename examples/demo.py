"""dynograph's main demo: train a small CNN on handwritten digits, PyTorch style.

The data is scikit-learn's bundled 8x8 digits (1797 images, no download).  The training step
(forward, backward and the optimizer update) is compiled with ``dynograph.compile``: the first
call traces it into one graph, later calls replay that graph.

    python examples/demo.py [--device cuda] [--epochs N]
"""
import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph.utils.data import DataLoader, TensorDataset


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))        # 16 x 4 x 4
        x = self.pool(F.relu(self.conv2(x)))        # 32 x 2 x 2
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def load_data(seed=0):
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]     # N x 1 x 8 x 8 in [0, 1]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:360], order[360:]
    as_set = lambda idx: TensorDataset(torch.from_numpy(images[idx]), torch.from_numpy(labels[idx]))  # noqa: E731
    return as_set(train), as_set(test)


def main(epochs=12, device="cpu"):
    torch.manual_seed(0)
    train_set, test_set = load_data()
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=360)
    model = DigitNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    print(model)

    @torch.compile
    def train_step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                x, y = x.to(device), y.to(device)
                correct += (model(x).argmax(1) == y).sum().item()
        model.train()
        return correct / len(test_set)

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        total, batches = 0.0, 0
        for x, y in train_loader:
            total += train_step(x.to(device), y.to(device)).item()
            batches += 1
        scheduler.step()
        print(f"epoch {epoch:2d}  loss {total / batches:.4f}  test accuracy {evaluate():.1%}  "
              f"({time.perf_counter() - start:.1f} s)")
    report = train_step.explain()
    print(f"compiled training step: {len(report.graphs)} graphs, {report.hits} replays, "
          f"{report.op_counts[-1][1]} ops per step")
    accuracy = evaluate()
    print(f"final test accuracy: {accuracy:.1%}")
    return accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--epochs", type=int, default=12)
    args = parser.parse_args()
    main(args.epochs, args.device)

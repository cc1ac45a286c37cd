"""Handwritten digits with a small CNN: examples/demo.py's training, written as a tutorial.

The data is scikit-learn's bundled 8x8 digits (``dynograph.vision.datasets.Digits``, no
download).  The training step (forward, backward and the optimizer update) is compiled with
``dynograph.compile``; pass ``--eager`` to run it op by op instead.

    python examples/digits_cnn.py
    python examples/digits_cnn.py --smoke      # 2 epochs, with checks (for CI)
"""
import argparse
import time

import dynograph as torch
import dynograph.nn.functional as F
import dynograph.vision.transforms as transforms
from dynograph.utils.data import DataLoader
from dynograph.vision.datasets import Digits

from _progress import Progress, timed_first_call
from demo import DigitNet            # the model, defined once in examples/demo.py

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=12)
parser.add_argument("--eager", action="store_true", help="do not compile the training step")
parser.add_argument("--smoke", action="store_true", help="a short run with checks (for CI)")
args = parser.parse_args()
torch.manual_seed(0)

# --- The data: 1437 training and 360 test images, 1 x 8 x 8 in [0, 1] after ToTensor -------
train_set = Digits(train=True, transform=transforms.ToTensor())
test_set = Digits(train=False, transform=transforms.ToTensor())
if args.smoke:
    args.epochs = 2
train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
test_loader = DataLoader(test_set, batch_size=360)


# --- The model: DigitNet, two conv + pool blocks then two linear layers (examples/demo.py) --
model = DigitNet()
print(model)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)   # halve lr every 5 epochs


# --- One training step: forward, loss, backward, update -------------------------------------
def train_step(x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


if not args.eager:
    # Traced once into a single graph (after a couple of eager warm-up calls), then replayed.
    train_step = timed_first_call(torch.compile(train_step))


def evaluate():
    model.eval()                     # evaluation mode (matters for dropout and batch norm)
    correct = 0
    with torch.no_grad():            # no graph is recorded: faster, less memory
        for x, y in test_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct / len(test_set)


# --- The training loop ----------------------------------------------------------------------
start = time.perf_counter()
epoch_losses = []
for epoch in range(1, args.epochs + 1):
    total, batches = 0.0, 0
    bar = Progress(train_loader, desc=f"epoch {epoch}", unit="img")
    for x, y in bar:
        loss = train_step(x, y).item()
        bar.update(loss=loss, items=len(y))
        total += loss
        batches += 1
    scheduler.step()
    epoch_losses.append(total / batches)
    print(f"epoch {epoch:2d}  loss {total / batches:.4f}  test accuracy {evaluate():.1%}  "
          f"({time.perf_counter() - start:.1f} s)")

# --- Save the weights, load them into a fresh model and test it -----------------------------
torch.save(model.state_dict(), "digits_cnn.pth")
model = DigitNet()
model.load_state_dict(torch.load("digits_cnn.pth", weights_only=True))
accuracy = evaluate()
print(f"final test accuracy: {accuracy:.1%}")

if args.smoke:
    assert epoch_losses[-1] < epoch_losses[0], epoch_losses
    assert accuracy > 0.5, f"test accuracy {accuracy:.1%} is not far above chance (10%)"
    print("smoke: the loss decreased and the test accuracy is far above chance")

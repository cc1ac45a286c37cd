"""Linear regression two ways: by hand with ``.data`` updates, then with ``nn.Linear`` and ``optim.SGD``.

The data are points on the line y = 2x + 1 plus noise; both fits should find a slope near 2 and
an intercept near 1.

    python examples/linear_regression.py
    python examples/linear_regression.py --plot     # also draw the fits to linear_regression.png
    python examples/linear_regression.py --smoke    # fewer epochs, with checks (for CI)
"""
import argparse

import dynograph as torch
import dynograph.nn as nn

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a short run with checks (for CI)")
parser.add_argument("--plot", action="store_true", help="save a plot (needs matplotlib)")
parser.add_argument("--epochs", type=int, default=None)
args = parser.parse_args()
epochs = args.epochs or (100 if args.smoke else 500)

torch.manual_seed(0)

# --- The data: 100 points around the line y = 2x + 1 ----------------------------------------
x = torch.linspace(-1, 1, 100).unsqueeze(1)          # shape (100, 1): 100 samples, 1 feature
y = 2 * x + 1 + 0.2 * torch.randn(100, 1)

# --- 1. By hand: the parameters are plain tensors that require grad -------------------------
w = torch.randn(1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
learning_rate = 0.1

for epoch in range(epochs):
    y_pred = x * w + b                              # the forward pass builds a graph
    loss = ((y_pred - y) ** 2).mean()               # mean squared error
    loss.backward()                                 # fills w.grad and b.grad

    # Update through .data so that the update itself is not recorded by autograd,
    # then zero the gradients: backward() adds to them.
    w.data -= learning_rate * w.grad.data
    b.data -= learning_rate * b.grad.data
    w.grad.data.zero_()
    b.grad.data.zero_()
    if epoch == 0:
        first_manual_loss = loss.item()
    if (epoch + 1) % (epochs // 5) == 0:
        print(f"[manual] epoch {epoch + 1:4d}  loss {loss.item():.4f}")
manual_loss = loss.item()
print(f"[manual] w = {w.item():.3f}, b = {b.item():.3f}")

# --- 2. With nn.Linear, a loss module and an optimizer --------------------------------------
model = nn.Linear(1, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
print(model)

for epoch in range(epochs):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()                           # the same three steps as above,
    loss.backward()                                 # done for every parameter of the model
    optimizer.step()
    if epoch == 0:
        first_model_loss = loss.item()
    if (epoch + 1) % (epochs // 5) == 0:
        print(f"[nn.Linear] epoch {epoch + 1:4d}  loss {loss.item():.4f}")
model_loss = loss.item()
print(f"[nn.Linear] weight = {model.weight.item():.3f}, bias = {model.bias.item():.3f}")

# --- Plot (optional) ------------------------------------------------------------------------
if args.plot:
    try:
        import matplotlib
        matplotlib.use("Agg")                       # draw to a file, no window needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install matplotlib")
    else:
        with torch.no_grad():
            plt.scatter(x.numpy(), y.numpy(), s=8, label="data")
            plt.plot(x.numpy(), (x * w + b).numpy(), label="by hand")
            plt.plot(x.numpy(), model(x).numpy(), "--", label="nn.Linear")
        plt.legend()
        plt.savefig("linear_regression.png")
        print("saved linear_regression.png")

if args.smoke:
    assert manual_loss < 0.5 * first_manual_loss and model_loss < 0.5 * first_model_loss
    assert abs(w.item() - 2) < 0.3 and abs(b.item() - 1) < 0.2, (w, b)
    assert abs(model.weight.item() - 2) < 0.3 and abs(model.bias.item() - 1) < 0.2
    print("smoke: the loss decreased and both fits found y = 2x + 1")

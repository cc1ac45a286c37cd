"""Tutorial-style snippets print the same under ``import dynograph as torch`` as under torch.

Each snippet is a script written for PyTorch.  It runs twice in a subprocess: once as written,
once with only its import lines pointing at dynograph.  The printed output must be identical
once the module name and object addresses are set aside; the snippets print no random values.
"""
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import torch_or_skip

TENSORS = """
import numpy as np
import torch

x = torch.tensor([[1, 2], [3, 4]])
print(x, x.dtype, x.shape, x.ndim, x.device)
print(torch.zeros(2, 3))
print(torch.ones(2, 2, dtype=torch.float64))
print(torch.arange(6).reshape(2, 3))
print(torch.linspace(0, 1, 5))
print(torch.full((2, 2), 7.5), torch.eye(3))
print(torch.tensor([True, False]), torch.tensor(3.14159), torch.tensor([1e-8, 1e8]))
print(torch.tensor([0.1, 100.0]), torch.tensor([1.5, -2.25, 3.0]) * 2)
print(torch.zeros_like(x), torch.ones_like(x, dtype=torch.float))
print(torch.rand(2, 3).shape, torch.randn(4).size(), torch.rand(2, 3).dtype)
y = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
print(y @ y.T, y.sum(), y.mean(dim=0), y.max(), y.argmax())
print(y[0], y[:, 1], y[y > 2], y[..., -1])
print(torch.cat([y, y]).shape, torch.stack([y, y]).size(), y.view(4), y.t())
print(x.float() / 3, x // 3, x * 1.5, (x > 2).dtype)
n = y.numpy()
y.add_(1)
print(n, y)
print(torch.from_numpy(np.arange(3)), torch.from_numpy(np.ones(2)))
print(y.tolist(), y.sum().item(), type(y.sum().item()))
"""

AUTOGRAD = """
import torch

x = torch.ones(2, 2, requires_grad=True)
print(x)
y = x + 2
print(y)
print(y.grad_fn)
z = y * y * 3
out = z.mean()
print(z, out)
out.backward()
print(x.grad)

a = torch.tensor([2.0, 3.0], requires_grad=True)
b = torch.tensor([6.0, 4.0], requires_grad=True)
Q = 3 * a ** 3 - b ** 2
Q.backward(gradient=torch.tensor([1.0, 1.0]))
print(a.grad, b.grad, 9 * a ** 2 == a.grad, -2 * b == b.grad)

print(x.requires_grad, (x ** 2).requires_grad, x.is_leaf, y.is_leaf)
with torch.no_grad():
    print((x ** 2).requires_grad)
print(x.detach().requires_grad)
w = torch.tensor([1.0, -1.0], requires_grad=True)
loss = (w * torch.tensor([3.0, 4.0])).sum()
print(loss, torch.autograd.grad(loss, w))
"""

MODULES = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


net = Net()
print(net)
params = list(net.parameters())
print(len(params), params[0].size())
for name, p in net.named_parameters():
    print(name, tuple(p.shape), p.requires_grad)
print(net(torch.zeros(1, 1, 32, 32)).shape)
print(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 2)))
print(nn.BatchNorm2d(3), nn.LayerNorm(5), nn.Embedding(10, 3), nn.LSTM(4, 8, batch_first=True))
print(nn.ModuleList([nn.Tanh(), nn.Softmax(dim=1)]), nn.CrossEntropyLoss(), nn.MSELoss())
"""

TRAINING = """
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
with torch.no_grad():                     # fixed weights, so both frameworks start alike
    for p in model.parameters():
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
x = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0], [2.0, 2.0, 0.5], [-1.0, 0.5, 1.0]])
y = torch.tensor([[1.0], [-1.0], [2.0], [0.0]])
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(10):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
print(model[0].weight.grad.shape, model[2].bias.grad.dtype)
"""

SAVE_LOAD = """
import os
import sys

import torch
import torch.nn as nn

path = os.path.join(sys.argv[1], "model.pth")
model = nn.Linear(3, 2)
with torch.no_grad():
    model.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    model.bias.fill_(0.5)
torch.save(model.state_dict(), path)
state = torch.load(path, weights_only=True)
print(list(state.keys()), state["weight"], state["bias"])
restored = nn.Linear(3, 2)
print(restored.load_state_dict(state))
print(restored.weight, torch.equal(restored.weight, model.weight))
restored.eval()
print(restored(torch.ones(1, 3)))

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
torch.save({"epoch": 3, "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict()}, path)
checkpoint = torch.load(path, weights_only=True)
print(checkpoint["epoch"], sorted(checkpoint))
print(checkpoint["optimizer_state_dict"]["param_groups"][0]["lr"])
"""

SNIPPETS = {"tensors": TENSORS, "autograd": AUTOGRAD, "modules": MODULES, "training": TRAINING,
            "save_load": SAVE_LOAD}


def _as_dynograph(source):
    """Point the import lines, and only them, at dynograph."""
    return re.sub(r"^import torch(\S*) as", r"import dynograph\1 as",
                  re.sub(r"^import torch$", "import dynograph as torch", source, flags=re.M), flags=re.M)


def _run(source, tmp_path, name):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # the module name and object addresses may differ
    return re.sub(r"0x[0-9a-f]+", "0x?", r.stdout.replace("dynograph", "torch"))


@pytest.mark.parametrize("name", SNIPPETS)
def test_snippet_prints_like_torch(name, tmp_path):
    torch_or_skip()
    expected = _run(SNIPPETS[name], tmp_path, f"{name}_torch")
    got = _run(_as_dynograph(SNIPPETS[name]), tmp_path, f"{name}_dynograph")
    assert got.splitlines() == expected.splitlines()


def test_only_the_imports_change():
    changed = _as_dynograph(MODULES).splitlines()
    diff = [(a, b) for a, b in zip(MODULES.splitlines(), changed) if a != b]
    assert diff == [("import torch", "import dynograph as torch"),
                    ("import torch.nn as nn", "import dynograph.nn as nn"),
                    ("import torch.nn.functional as F", "import dynograph.nn.functional as F")]

"""Training steps: the PyTorch tutorial's CIFAR-10 CNN (batch 64) and an MLP 784-512-512-10
(batch 128), each one full step (zero_grad, forward, cross-entropy, backward, SGD momentum).

Systems: ``dynograph`` (eager), ``dynograph-compiled`` (the step under dynograph.compile) and
``torch`` (eager).  All start from the same weights on the same batch, so the first step's loss
is the cross-system check; later steps keep training on that batch."""
import numpy as np

import dynograph
import dynograph.nn.functional as F

from ..runner import optional_torch, workload


def _cifar_net(lib, functional):
    m = lib.nn

    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = m.Conv2d(3, 6, 5)
            self.pool = m.MaxPool2d(2, 2)
            self.conv2 = m.Conv2d(6, 16, 5)
            self.fc1 = m.Linear(16 * 5 * 5, 120)
            self.fc2 = m.Linear(120, 84)
            self.fc3 = m.Linear(84, 10)

        def forward(self, x):
            x = self.pool(functional.relu(self.conv1(x)))
            x = self.pool(functional.relu(self.conv2(x)))
            x = lib.flatten(x, 1)
            x = functional.relu(self.fc1(x))
            x = functional.relu(self.fc2(x))
            return self.fc3(x)
    return Net()


def _mlp(lib):
    m = lib.nn
    return m.Sequential(m.Linear(784, 512), m.ReLU(), m.Linear(512, 512), m.ReLU(),
                        m.Linear(512, 10))


def _step(lib, functional, model, x, y, compiled=False):
    opt = lib.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if compiled:
        step = dynograph.compile(step)
    return lambda: step().detach().numpy()


def _systems(make_model, x, y):
    """One zero-argument step per system, all models starting from the same weights."""
    torch = optional_torch()
    theirs = None
    ours = make_model(dynograph, F)
    if torch is not None:
        theirs = make_model(torch, torch.nn.functional)
        state = {k: dynograph.tensor(v.numpy()) for k, v in theirs.state_dict().items()}
        ours.load_state_dict(state)
    twin = make_model(dynograph, F)
    twin.load_state_dict(ours.state_dict())
    dx, dy = dynograph.from_numpy(x), dynograph.from_numpy(y)
    fns = {"dynograph": _step(dynograph, F, ours, dx, dy),
           "dynograph-compiled": _step(dynograph, F, twin, dx, dy, compiled=True)}
    if torch is not None:
        fns["torch"] = _step(torch, torch.nn.functional, theirs, torch.from_numpy(x),
                             torch.from_numpy(y))
    return fns


@workload("train_cifar_cnn", "one SGD-momentum step of the CIFAR-10 tutorial CNN, batch 64",
          rtol=1e-4, atol=1e-4, tags=("training",))
def train_cifar_cnn():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, size=64)
    return _systems(_cifar_net, x, y)


@workload("train_mlp", "one SGD-momentum step of an MLP 784-512-512-10, batch 128",
          rtol=1e-4, atol=1e-4, tags=("training",))
def train_mlp():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=128)
    return _systems(lambda lib, functional: _mlp(lib), x, y)


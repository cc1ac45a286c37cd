"""Training steps: the PyTorch tutorial's CIFAR-10 CNN (batch 64) and an MLP 784-512-512-10
(batch 128), each one full step (zero_grad, forward, cross-entropy, backward, SGD momentum).

Systems: ``dynograph`` (eager), ``dynograph-compiled`` (the step under dynograph.compile) and
``torch`` (eager).  All start from the same weights on the same batch, so the first step's loss
is the cross-system check; later steps keep training on that batch."""
import numpy as np

import dynograph

from ..runner import optional_torch, optional_torch_compile, workload


def cifar_net(lib):
    """The CIFAR-10 tutorial's network (examples/cifar10_cnn.py) in ``lib`` (dynograph or torch)."""
    m, functional = lib.nn, lib.nn.functional

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


def cifar_batch():
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, size=64)


def mlp_batch():
    rng = np.random.default_rng(0)
    return rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, size=128)


def classifier_step(model, opt, lib=dynograph, loss_fn=None):
    """The examples' training step ``step(x, y)`` in ``lib`` (dynograph or torch): zero_grad,
    forward, the loss (default cross-entropy), backward, optimizer step; returns the loss."""
    loss_fn = loss_fn or lib.nn.functional.cross_entropy

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def sgd_step(lib, model):
    """``classifier_step`` with the benchmarks' optimizer: SGD, lr 0.001, momentum 0.9."""
    return classifier_step(model, lib.optim.SGD(model.parameters(), lr=0.001, momentum=0.9), lib)


def train_step(lib, model, x, y, compile=None):
    """One SGD-momentum step on (x, y) returning the loss as numpy; ``compile`` wraps the whole
    step (forward, backward and update), and where it gives None (cannot compile here) so does
    this function."""
    one_step = sgd_step(lib, model)

    def step():
        return one_step(x, y)
    if compile is not None:
        step = compile(step)
        if step is None:
            return None
    return lambda: step().detach().numpy()


def training_systems(make_model, x, y, compile=dynograph.compile, compiled="dynograph-compiled",
                     torch_compile=False):
    """Eager dynograph, the step under ``compile`` (system ``compiled``), torch eager and, with
    ``torch_compile``, the step under torch.compile: all starting from the same weights."""
    torch = optional_torch()
    ours = make_model(dynograph)
    if torch is not None:
        theirs = make_model(torch)
        ours.load_state_dict({k: dynograph.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    twin = make_model(dynograph)
    twin.load_state_dict(ours.state_dict())
    dx, dy = dynograph.from_numpy(x), dynograph.from_numpy(y)
    fns = {"dynograph": train_step(dynograph, ours, dx, dy),
           compiled: train_step(dynograph, twin, dx, dy, compile=compile)}
    if torch is None:
        return fns
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    fns["torch"] = train_step(torch, theirs, tx, ty)
    if torch_compile:
        again = make_model(torch)
        again.load_state_dict(theirs.state_dict())
        step = train_step(torch, again, tx, ty, compile=optional_torch_compile)
        if step is not None:
            fns["torch-compile"] = step
    return fns


@workload("train_cifar_cnn", "one SGD-momentum step of the CIFAR-10 tutorial CNN, batch 64",
          rtol=1e-4, atol=1e-4, tags=("training",))
def train_cifar_cnn():
    return training_systems(cifar_net, *cifar_batch())


@workload("train_mlp", "one SGD-momentum step of an MLP 784-512-512-10, batch 128",
          rtol=1e-4, atol=1e-4, tags=("training",))
def train_mlp():
    return training_systems(_mlp, *mlp_batch())

"""Data loading: DataLoader throughput over an MNIST-sized TensorDataset.

One call is one shuffled epoch (60,000 28x28 float32 images + int64 labels, batch 128)
and returns the number of samples and the sum of the labels, which do not depend on the
order.  With workers, each epoch starts its worker processes afresh (the default,
``persistent_workers=False``), as in a training loop; samples/s = 60,000 / time per call.
"""
import numpy as np

import dynograph
from dynograph.utils.data import DataLoader, TensorDataset

from ..runner import optional_torch, workload

N, BATCH = 60_000, 128


def _arrays():
    rng = np.random.default_rng(0)
    return rng.random((N, 28, 28), dtype=np.float32), rng.integers(0, 10, N, dtype=np.int64)


def _epoch(loader):
    n = total = 0
    for images, labels in loader:
        n += images.shape[0]
        total += int(labels.sum())
    return np.array([n, total], dtype=np.int64)


def _systems(num_workers):
    x, y = _arrays()
    ours = DataLoader(TensorDataset(dynograph.from_numpy(x), dynograph.from_numpy(y)), batch_size=BATCH,
                      shuffle=True, num_workers=num_workers)
    fns = {"dynograph": lambda: _epoch(ours)}
    torch = optional_torch()
    if torch is not None:
        from torch.utils.data import DataLoader as TorchLoader, TensorDataset as TorchTensorDataset
        theirs = TorchLoader(TorchTensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=BATCH,
                             shuffle=True, num_workers=num_workers)
        fns["torch"] = lambda: _epoch(theirs)
    return fns


@workload("data_loader_w0", "DataLoader epoch, 60k 28x28 float32 + labels, batch 128, shuffle, 0 workers",
          tags=("data",))
def data_loader_w0():
    return _systems(0)


@workload("data_loader_w2", "DataLoader epoch, 60k 28x28 float32 + labels, batch 128, shuffle, 2 workers",
          tags=("data",))
def data_loader_w2():
    return _systems(2)

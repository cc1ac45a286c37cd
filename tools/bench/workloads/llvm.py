"""The LLVM CPU backend: fused elementwise kernels over 16M float32 (issue workloads W0, W1,
W1b and a 10-op chain), softmax (W2), an MLP training step (W4) and the CIFAR tutorial CNN's
training step (W5); W7, the compile time, is in ``llvm_compile.py``.

Systems: ``dynograph-llvm`` (``dynograph.compile(fn, backend="llvm")``: one fused kernel),
``numpy`` (one pass per op), ``torch`` (eager, one kernel per op); the training steps also run
on eager ``dynograph``.  W1, W1b, W4 and W5 also run on ``torch-compile`` (``torch.compile``,
inductor's generated C++; it compiles during the agreement check).  ``llvm_w0_bandwidth`` is
the machine's memory bandwidth measured by a numpy copy in the same run: a memory-bound kernel
moving ``b`` bytes cannot beat ``b / bandwidth``.  ``bytes_moved(name)`` gives the bytes each
workload reads and writes, to turn its median into GB/s.
"""
import numpy as np
from scipy import special

import dynograph

from ..runner import optional_torch, optional_torch_compile, workload
from .training import cifar_net, _mlp, cifar_batch, mlp_batch, training_systems

N = 1 << 24


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal(N, dtype=np.float32)


def bytes_moved(name):
    """Bytes read plus written by one run of the workload ``name``."""
    return {"llvm_w0_bandwidth": 2, "llvm_w1_gelu": 2, "llvm_w1b_memory_bound": 2,
            "llvm_chain10": 3}[name] * 4 * N


@workload("llvm_w0_bandwidth", "numpy copy of 16M float32: the machine's memory bandwidth")
def w0_bandwidth():
    src = _x()
    dst = np.empty_like(src)

    def copy():
        np.copyto(dst, src)
        return dst
    return {"numpy": copy}


def _systems(fn, np_fn, torch_fn, *arrays, torch_compile=False):
    """One callable per system computing ``fn`` on ``arrays``; each returns a numpy array.
    ``torch_compile``: also ``torch_fn`` under torch.compile."""
    tensors = [dynograph.from_numpy(a) for a in arrays]
    compiled = dynograph.compile(fn, backend="llvm")
    fns = {"dynograph-llvm": lambda: compiled(*tensors).numpy(),
           "numpy": lambda: np_fn(*arrays)}
    torch = optional_torch()
    if torch is None:
        return fns
    ts = [torch.from_numpy(a) for a in arrays]
    fns["torch"] = lambda: torch_fn(*ts).numpy()
    theirs = optional_torch_compile(torch_fn) if torch_compile else None
    if theirs is not None:
        fns["torch-compile"] = lambda: theirs(*ts).numpy()
    return fns


def _gelu(x, tanh):
    t = x * 1.5 + 0.25
    return 0.5 * t * (1 + tanh(0.79788456 * (t + 0.044715 * t ** 3)))


@workload("llvm_w1_gelu", "W1: tanh-GELU of x*1.5+0.25 on 16M float32 (compute-heavy)",
          rtol=1e-4, atol=1e-5)
def w1_gelu():
    return _systems(lambda x: _gelu(x, dynograph.tanh), lambda x: _gelu(x, np.tanh),
                    lambda x: _gelu(x, _torch_tanh()), _x(), torch_compile=True)


def _torch_tanh():
    return optional_torch().tanh


def _relu_chain(x, relu):
    return relu(x * 1.5 + 0.25) * 0.5 - 0.125


@workload("llvm_w1b_memory_bound", "W1b: relu(x*1.5+0.25)*0.5-0.125 on 16M float32")
def w1b_memory_bound():
    return _systems(lambda x: _relu_chain(x, dynograph.relu),
                    lambda x: _relu_chain(x, lambda v: np.maximum(v, 0)),
                    lambda x: _relu_chain(x, optional_torch().relu), _x(), torch_compile=True)


def _chain(x, y, exp, tanh, sigmoid):
    """Ten elementwise ops (the eager_chain workload's formula)."""
    return ((tanh(exp(x * y + 1) - x)) * 0.5 + sigmoid(y)) * x - y


@workload("llvm_chain10", "a 10-op elementwise chain on two 16M float32 vectors",
          rtol=1e-4, atol=1e-5)
def chain10():
    x, y = _x(0) * 0.5, _x(1) * 0.5
    return _systems(lambda a, b: _chain(a, b, dynograph.exp, dynograph.tanh, dynograph.sigmoid),
                    lambda a, b: _chain(a, b, np.exp, np.tanh, special.expit),
                    lambda a, b: _chain(a, b, *_torch_fns()), x, y)


def _torch_fns():
    torch = optional_torch()
    return torch.exp, torch.tanh, torch.sigmoid


@workload("llvm_w2_softmax", "W2: softmax over the last dim of 4096x4096 float32",
          rtol=1e-4, atol=1e-7)
def w2_softmax():
    x = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)

    def np_softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return _systems(lambda a: dynograph.nn.functional.softmax(a, dim=-1), np_softmax,
                    lambda a: optional_torch().softmax(a, dim=-1), x)


def _llvm_compile(fn):
    return dynograph.compile(fn, backend="llvm")


def _llvm_training_systems(make_model, x, y):
    return training_systems(make_model, x, y, compile=_llvm_compile, compiled="dynograph-llvm",
                            torch_compile=True)


@workload("llvm_w4_mlp_step", "W4: SGD-momentum step of an MLP 784-512-512-10, batch 128",
          rtol=1e-4, atol=1e-4, tags=("training",))
def w4_mlp_step():
    return _llvm_training_systems(_mlp, *mlp_batch())


@workload("llvm_w5_cifar_step", "W5: SGD-momentum step of the CIFAR tutorial CNN, batch 64 of "
          "3x32x32", rtol=1e-4, atol=1e-4, tags=("training",))
def w5_cifar_step():
    return _llvm_training_systems(cifar_net, *cifar_batch())

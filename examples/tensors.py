"""Tensors: the PyTorch "Tensors" tutorial, run with ``import dynograph as torch``.

Tensors are like numpy's ndarrays, but they can run on accelerators and record
operations for automatic differentiation.

    python examples/tensors.py            # the tutorial
    python examples/tensors.py --smoke    # the same, with checks (for CI)
"""
import argparse

import numpy as np

import dynograph as torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="check the results (for CI)")
args = parser.parse_args()

# --- Initializing a tensor -----------------------------------------------------------------

# Directly from data: the dtype is inferred.
data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)

# From a numpy array (and back, see "Bridge with NumPy" below).
np_array = np.array(data)
x_np = torch.from_numpy(np_array)

# From another tensor: the new tensor keeps its shape and dtype unless overridden.
x_ones = torch.ones_like(x_data)
print(f"Ones Tensor: \n {x_ones} \n")
x_rand = torch.rand_like(x_data, dtype=torch.float)
print(f"Random Tensor: \n {x_rand} \n")

# With random or constant values: `shape` is a tuple of dimensions.
shape = (2, 3,)
rand_tensor = torch.rand(shape)
ones_tensor = torch.ones(shape)
zeros_tensor = torch.zeros(shape)
print(f"Random Tensor: \n {rand_tensor} \n")
print(f"Ones Tensor: \n {ones_tensor} \n")
print(f"Zeros Tensor: \n {zeros_tensor}")

# --- Attributes of a tensor ----------------------------------------------------------------
tensor = torch.rand(3, 4)
print(f"Shape of tensor: {tensor.shape}")
print(f"Datatype of tensor: {tensor.dtype}")
print(f"Device tensor is stored on: {tensor.device}")

# --- Operations on tensors -----------------------------------------------------------------

# Move the tensor to a GPU if one is available (tensors are created on the CPU).
if torch.cuda.is_available():
    tensor = tensor.to("cuda")

# Standard numpy-like indexing and slicing.
tensor = torch.ones(4, 4)
print(f"First row: {tensor[0]}")
print(f"First column: {tensor[:, 0]}")
print(f"Last column: {tensor[..., -1]}")
tensor[:, 1] = 0
print(tensor)

# Joining tensors.
t1 = torch.cat([tensor, tensor, tensor], dim=1)
print(t1)

# Arithmetic: three ways to compute a matrix multiplication (y1, y2 and y3 are equal) ...
y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.rand_like(y1)
torch.matmul(tensor, tensor.T, out=y3)

# ... and the element-wise product (z1, z2 and z3 are equal).
z1 = tensor * tensor
z2 = tensor.mul(tensor)
z3 = torch.rand_like(tensor)
torch.mul(tensor, tensor, out=z3)

# A one-element tensor converts to a Python number with item().
agg = tensor.sum()
agg_item = agg.item()
print(agg_item, type(agg_item))

# In-place operations end in `_` and change their operand.
print(f"{tensor} \n")
tensor.add_(5)
print(tensor)

# --- Bridge with NumPy: CPU tensors and numpy arrays can share their memory -----------------
t = torch.ones(5)
print(f"t: {t}")
n = t.numpy()
print(f"n: {n}")
t.add_(1)                       # a change in the tensor shows in the array
print(f"t: {t}")
print(f"n: {n}")

n = np.ones(5)
t = torch.from_numpy(n)
np.add(n, 1, out=n)             # a change in the array shows in the tensor
print(f"t: {t}")
print(f"n: {n}")

if args.smoke:
    assert x_data.dtype == torch.int64 and x_np.tolist() == data
    assert x_rand.dtype == torch.float32 and x_rand.shape == (2, 2)
    assert torch.equal(y1, y2) and torch.equal(y1, y3) and torch.equal(z1, z2) and torch.equal(z1, z3)
    assert agg_item == 12.0 and t1.shape == (4, 12)
    assert tensor[0].tolist() == [6.0, 5.0, 6.0, 6.0]
    assert t.tolist() == [2.0] * 5 and t.dtype == torch.float64
    print("smoke: tensors OK")

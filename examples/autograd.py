"""Automatic differentiation with ``dynograph.autograd``: the PyTorch autograd tutorial.

Covers computing gradients, disabling gradient tracking, Jacobian-vector products, a custom
``autograd.Function`` checked with ``gradcheck``, anomaly mode and the profiler.

    python examples/autograd.py
    python examples/autograd.py --smoke    # the same, with checks (for CI)
"""
import argparse

import dynograph as torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="check the results (for CI)")
args = parser.parse_args()
torch.manual_seed(0)

# --- A one-layer network: input x, parameters w and b, and a loss ---------------------------
x = torch.ones(5)                           # input tensor
y = torch.zeros(3)                          # expected output
w = torch.randn(5, 3, requires_grad=True)   # parameters we want gradients for
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)

# Every tensor made by an operation on tensors that require grad remembers the backward function.
print(f"Gradient function for z = {z.grad_fn}")
print(f"Gradient function for loss = {loss.grad_fn}")

# --- Computing gradients --------------------------------------------------------------------
loss.backward()
print(w.grad)
print(b.grad)

# --- Disabling gradient tracking ------------------------------------------------------------
z = torch.matmul(x, w) + b
print(z.requires_grad)
with torch.no_grad():                       # e.g. for inference, or to freeze parameters
    z = torch.matmul(x, w) + b
print(z.requires_grad)

z = torch.matmul(x, w) + b
z_det = z.detach()                          # the same values, cut from the graph
print(z_det.requires_grad)

# --- Gradient descent with the gradients we computed ----------------------------------------
losses = []
for step in range(20):
    loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)
    losses.append(loss.item())
    w.grad, b.grad = None, None
    loss.backward()
    with torch.no_grad():                   # update the parameters outside the graph
        w -= 0.5 * w.grad
        b -= 0.5 * b.grad
print(f"loss before {losses[0]:.4f}, after 20 steps {losses[-1]:.4f}")

# --- Tensor gradients and Jacobian products -------------------------------------------------
# For a non-scalar output, backward() takes the vector v and computes v^T . J.
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"First call\n{inp.grad}")
out.backward(torch.ones_like(out), retain_graph=True)   # gradients accumulate ...
print(f"\nSecond call\n{inp.grad}")
inp.grad.zero_()                                        # ... until they are zeroed
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nCall after zeroing gradients\n{inp.grad}")


# --- A custom autograd Function, checked with gradcheck -------------------------------------
class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = (5x^3 - 3x) / 2, with its derivative written by hand."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


# gradcheck compares the analytical gradient with finite differences (use float64 inputs).
inputs = torch.randn(6, dtype=torch.double, requires_grad=True)
ok = torch.autograd.gradcheck(LegendrePolynomial3.apply, (inputs,), eps=1e-6, atol=1e-4)
print(f"gradcheck of LegendrePolynomial3: {ok}")

# --- Anomaly mode: find the operation whose backward produced NaN ---------------------------
a = torch.zeros(1, requires_grad=True)
with torch.autograd.detect_anomaly():
    try:
        (a.sqrt() * 0).sum().backward()      # d/da sqrt(a) at 0 is inf, and inf * 0 is NaN
        anomaly = None
    except RuntimeError as error:
        anomaly = str(error).splitlines()[0]
print(f"anomaly mode caught: {anomaly}")

# --- The profiler: which operations took the time -------------------------------------------
with torch.autograd.profiler.profile() as prof:
    h = torch.randn(64, 128, requires_grad=True)
    (torch.tanh(h @ h.t()) ** 2).mean().backward()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5))

if args.smoke:
    assert w.grad.shape == (5, 3) and b.grad.shape == (3,)
    assert losses[-1] < 0.5 * losses[0], losses
    assert torch.allclose(inp.grad, 2 * (torch.eye(4, 5) + 1)), inp.grad
    assert ok and anomaly is not None and "nan" in anomaly.lower()
    assert "mm" in [e.key for e in prof.key_averages()]
    print("smoke: autograd OK")

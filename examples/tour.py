"""A short tour of dynograph: tensors, dtypes, views, indexing, reductions and autograd.

Run:  python examples/demo.py
"""
import dynograph as torch


def section(title):
    print(f"\n== {title} ==")


section("tensors and dtypes")
x = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
print(x)
print("shape:", x.shape, "dtype:", x.dtype)
i = torch.arange(6).reshape(2, 3)
print("int64 + float32 ->", (i + x).dtype, "; int64 + 2.5 ->", (i + 2.5).dtype)
print(torch.linspace(0, 1, 5))

section("views share memory")
t = x.t()
t[0, 1] = 40.
print("after writing through x.t():", x)
print("x.view(3, 2) is a view:", x.view(3, 2)._base is x)

section("indexing and reductions")
print("x[:, 1] =", x[:, 1], " x[x > 4] =", x[x > 4])
values, indices = torch.max(x, 1)
print("max over dim 1:", values, indices)
print("mean:", x.mean(), " std over rows:", x.std(0))

section("linear algebra")
a = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))
print("a @ inv(a) ~ I:", torch.allclose(a @ torch.linalg.inv(a), torch.eye(3), atol=1e-5))

section("autograd")
w = torch.ones(2, 2, requires_grad=True)
y = w + 2
z = y * y * 3
out = z.mean()
print(out)
out.backward()
print("d(out)/dw =", w.grad)

section("a hand-written linear regression")
torch.manual_seed(0)
xs = torch.rand(100, 1)
ys = 3 * xs + 0.5 + 0.01 * torch.randn(100, 1)
slope = torch.zeros(1, requires_grad=True)
bias = torch.zeros(1, requires_grad=True)
for step in range(500):
    loss = ((xs * slope + bias - ys) ** 2).mean()
    loss.backward()
    slope.data.add_(-0.5 * slope.grad.data)
    bias.data.add_(-0.5 * bias.grad.data)
    slope.grad.data.zero_()
    bias.grad.data.zero_()
    if step % 100 == 0:
        print(f"step {step:3d}  loss {loss.item():.5f}")
print(f"learned slope {slope.item():.3f} (true 3.0), bias {bias.item():.3f} (true 0.5)")

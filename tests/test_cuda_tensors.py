"""cuda tensors on an emulated CUDA device (runtime/cuda_emulated.py): the kernels are the CUDA
renderer's, compiled for the CPU emulation, so transfers, views, single-op kernels, the host
fallback, writes, autograd and training on cuda tensors are checked on machines without a GPU,
against the same computation on cpu tensors."""
import threading
import warnings

import numpy as np
import pytest

import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F
from dynograph import _device
from dynograph.compiler.cuda import backend as cuda_backend
from dynograph.compiler.cuda.emulate import host_compiler
from dynograph.runtime import cuda_driver

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no host C++ compiler to emulate "
                                "CUDA kernels with")


@pytest.fixture(scope="module", autouse=True)
def emulated_device():
    """The GPU where one is usable, else one emulated CUDA device; CUDA is probed afresh before
    and after this module."""
    mp = pytest.MonkeyPatch()
    if not torch.cuda.is_available():
        mp.setenv("DYNOGRAPH_CUDA_EMULATE", "1")
    mp.setattr(cuda_driver, "_state", {})
    mp.setattr(cuda_driver, "_devices", {})
    mp.setattr(cuda_driver, "_thread", threading.local())
    mp.setattr(cuda_backend, "_backends", {})
    yield
    mp.undo()


def close(cuda_tensor, cpu_tensor, **tol):
    assert cuda_tensor.device == torch.device("cuda", 0)
    got = cuda_tensor.cpu()
    assert got.dtype == cpu_tensor.dtype and got.shape == cpu_tensor.shape
    np.testing.assert_allclose(got.numpy().astype(np.float64), cpu_tensor.numpy().astype(np.float64),
                               **(tol or dict(rtol=1e-6, atol=1e-6)))


# -- transfers, attributes, printing, errors -----------------------------------------------------
def test_transfers_and_attributes():
    x = torch.arange(6.).reshape(2, 3)
    c = x.cuda()
    assert c.is_cuda and not c.is_cpu and c.get_device() == 0 and x.get_device() == -1
    assert c.device == torch.device("cuda:0") == torch.device("cuda", 0)
    assert c.shape == (2, 3) and c.stride() == (3, 1) and c.dtype is torch.float32
    assert c.to("cuda") is c and c.cuda() is c and x.cpu() is x and x.to("cpu") is x
    assert c.data_ptr() != x.data_ptr()
    back = c.cpu()
    assert back.is_cpu and back.tolist() == x.tolist() and c.tolist() == x.tolist()
    assert c.to("cpu", torch.float64).dtype is torch.float64
    assert x.to(torch.device("cuda"), torch.int32).dtype is torch.int32
    assert c[1, 2].item() == 5.0 and float(c.sum()) == 15.0


def test_creation_on_the_device():
    for t in (torch.zeros(2, 3, device="cuda"), torch.ones(2, device="cuda:0"),
              torch.arange(4, device="cuda"), torch.tensor([1, 2], device="cuda"),
              torch.full((2,), 7, device=torch.device("cuda", 0)), torch.eye(2, device="cuda"),
              torch.randn(3, device="cuda"), torch.empty(2, device="cuda")):
        assert t.is_cuda, t
    c = torch.ones(2, 2, device="cuda")
    for t in (torch.zeros_like(c), torch.ones_like(c), torch.rand_like(c), torch.empty_like(c),
              c.new_zeros(3), c.new_ones(1), c.new_full((2,), 3.), c.new_tensor([1., 2.]),
              torch.tensor(c), torch.as_tensor(np.ones(2), device="cuda")):
        assert t.is_cuda, t
    assert torch.zeros_like(c, device="cpu").is_cpu
    assert torch.ones(3, device="cuda").tolist() == [1., 1., 1.]


def test_printing():
    assert repr(torch.tensor([1., 2.], device="cuda")) == "tensor([1., 2.], device='cuda:0')"
    assert repr(torch.tensor([1, 2], device="cuda")) == "tensor([1, 2], device='cuda:0')"
    w = torch.ones(2, device="cuda", requires_grad=True)
    assert repr(w) == "tensor([1., 1.], device='cuda:0', requires_grad=True)"
    assert repr(torch.zeros(0, 2, device="cuda")) == \
        "tensor([], device='cuda:0', size=(0, 2))"


def test_errors_as_torch():
    c = torch.ones(2, device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy\. Use "
                       r"Tensor\.cpu\(\) to copy the tensor to host memory first\."):
        c.numpy()
    with pytest.raises(TypeError, match="can't convert cuda:0"):
        np.asarray(c)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but "
                       "found at least two devices, cuda:0 and cpu!"):
        c + torch.ones(2)
    with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
        torch.ones(2, 2, device="cuda") @ torch.ones(2, 2)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2, device="cuda:3")
    # a 0-d cpu tensor joins a cuda op as a number, as in torch
    assert (c + torch.tensor(2.)).tolist() == [3., 3.]


# -- ops: kernels, views, the host fallback --------------------------------------------------------
def test_elementwise_and_reductions_against_cpu():
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    y = torch.tensor(rng.standard_normal((6,)).astype(np.float32))
    cx, cy = x.cuda(), y.cuda()
    for fn in (lambda a, b: a + b * 2, lambda a, b: (a * b).exp(), lambda a, b: a.t() - 1,
               lambda a, b: torch.where(a > 0, a, b), lambda a, b: a.sum(1),
               lambda a, b: a.mean(0), lambda a, b: a.amax(1), lambda a, b: a.softmax(1),
               lambda a, b: a[:, ::2].relu(), lambda a, b: (a > b).to(torch.int64)):
        close(fn(cx, cy), fn(x, y), rtol=1e-5, atol=1e-6)
    assert cx.argmax(1).tolist() == x.argmax(1).tolist()
    i = torch.tensor([[3, -7], [5, 2]])
    assert (i.cuda() // 2).tolist() == (i // 2).tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        i.cuda() // torch.zeros(2, dtype=torch.int64, device="cuda")


def test_views_share_the_device_memory():
    c = torch.arange(12.).reshape(3, 4).cuda()
    t = c.t()
    assert t.stride() == (1, 4) and t.storage_offset() == 0 and t.data_ptr() == c.data_ptr()
    row = c[1]
    assert row.storage_offset() == 4 and row.tolist() == [4., 5., 6., 7.]
    assert c[:, 1:3].tolist() == [[1., 2.], [5., 6.], [9., 10.]]
    assert c.view(2, 6)._base is c and c.unsqueeze(0).shape == (1, 3, 4)
    assert c[0].expand(2, 4).tolist() == [[0., 1., 2., 3.]] * 2
    row.mul_(10)                        # an in-place op through a view changes the base
    assert c[1].tolist() == [40., 50., 60., 70.]
    c[:, 0] = -1.                       # a strided write
    assert c[:, 0].tolist() == [-1.] * 3 and c[2, 1].item() == 9.
    assert c.t().reshape(12).cpu().tolist() == c.cpu().t().reshape(12).tolist()


def test_products_by_the_gemm_kernel():
    rng = np.random.default_rng(1)
    a = torch.tensor(rng.standard_normal((5, 7)).astype(np.float32))
    b = torch.tensor(rng.standard_normal((7, 3)).astype(np.float32))
    bias = torch.tensor(rng.standard_normal(3).astype(np.float32))
    close(a.cuda() @ b.cuda(), a @ b, rtol=1e-5, atol=1e-5)
    close(torch.addmm(bias.cuda(), a.cuda(), b.cuda(), beta=0.5, alpha=2),
          torch.addmm(bias, a, b, beta=0.5, alpha=2), rtol=1e-5, atol=1e-5)
    close(a.cuda().t() @ a.cuda(), a.t() @ a, rtol=1e-5, atol=1e-5)
    close(torch.bmm(a[None].cuda(), b[None].cuda()), torch.bmm(a[None], b[None]), rtol=1e-5, atol=1e-5)


def test_ops_without_a_kernel_run_on_the_host_with_one_warning():
    c = torch.tensor([[3., 1.], [2., 4.]], device="cuda")
    _device._warned.discard("sort")
    _device._warned.discard("gather")
    with pytest.warns(UserWarning, match="'sort' has no CUDA kernel; it runs on the host"):
        values, indices = c.sort(1)
    assert values.is_cuda and indices.is_cuda and values.tolist() == [[1., 3.], [2., 4.]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c.sort(0)                       # once per op



def test_joins_and_strided_copies_by_copy_kernels():
    a = torch.arange(6.).reshape(2, 3)
    b = torch.arange(3, dtype=torch.int64).reshape(1, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no host round trip
        close(torch.cat([a.cuda(), b.cuda()]), torch.cat([a, b]))
        close(torch.cat([a.cuda(), a.cuda().t().t()], 1), torch.cat([a, a], 1))
        close(torch.stack([a.cuda(), a.cuda() * 2], 1), torch.stack([a, a * 2], 1))
        close(torch.cat([torch.zeros(0, device="cuda"), a.cuda()]), torch.cat([torch.zeros(0), a]))
        x = a.cuda()
        x.t().copy_(x.t() + 1)                  # source and destination share memory
        assert x.tolist() == (a + 1).tolist()
        y = torch.zeros(3, 2, dtype=torch.int32, device="cuda")
        y.copy_(x.t())                          # strided source, cast
        assert y.tolist() == (a + 1).t().to(torch.int32).tolist()


def test_gathers_and_scatters_by_kernels():
    rng = np.random.default_rng(4)
    x = torch.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    idx = torch.tensor(rng.integers(0, 5, (4, 3)))
    idx0 = torch.tensor(rng.integers(0, 4, (2, 5)))
    src = torch.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no host round trip
        close(torch.gather(x.cuda(), 1, idx.cuda()), torch.gather(x, 1, idx))
        close(torch.gather(x.cuda().t(), 1, idx0.t().cuda()), torch.gather(x.t(), 1, idx0.t()))
        close(torch.zeros(4, 5, device="cuda").scatter_add(1, idx.cuda(), src.cuda()),
              torch.zeros(4, 5).scatter_add(1, idx, src), rtol=1e-6, atol=1e-6)
        dup = idx0[:, :4] % 3                   # repeated indices add up
        close(torch.ones(3, 6, device="cuda").scatter_add(0, dup.cuda(), torch.ones(2, 4).cuda() * 2),
              torch.ones(3, 6).scatter_add(0, dup, torch.ones(2, 4) * 2))
        i8 = torch.arange(20, dtype=torch.int8).reshape(4, 5)
        assert torch.gather(i8.cuda(), 1, idx.cuda()).tolist() == torch.gather(i8, 1, idx).tolist()
        w, j = x.t().contiguous(), torch.tensor([[1, 2], [3, 4]])
        for fn in (lambda w, j: F.embedding(j, w), lambda w, j: w[j], lambda w, j: w.index_select(0, j[0]),
                   lambda w, j: w.t().index_select(1, j[1]),
                   lambda w, j: torch.zeros(5, 4, device=w.device).index_add(0, j[0], w[:2])):
            close(fn(w.cuda(), j.cuda()), fn(w, j))
        wc, wh = w.cuda().requires_grad_(), w.clone().requires_grad_()
        F.embedding(j.cuda(), wc).pow(2).sum().backward()
        F.embedding(j, wh).pow(2).sum().backward()
        close(wc.grad, wh.grad)
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 1 with size 5"):
        torch.gather(x.cuda(), 1, torch.tensor([[7]]).cuda())


def test_flip_rot90_roll_repeat_tril_triu_by_kernels():
    x = torch.arange(24.).reshape(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no host round trip
        for fn in (lambda t: t.flip(0, 2), lambda t: t.rot90(1, (1, 2)), lambda t: t.roll((1, -2), (0, 2)),
                   lambda t: t.roll(5), lambda t: t.repeat(2, 1, 3), lambda t: t[0].repeat(2, 2, 1),
                   lambda t: t.transpose(0, 2).flip(1), lambda t: t.transpose(0, 2).roll(3),
                   lambda t: t.tril(), lambda t: t.transpose(1, 2).triu(-1), lambda t: (t > 5).tril(1)):
            close(fn(x.cuda()), fn(x))


def test_convolutions_and_their_gradients_by_direct_kernels():
    rng = np.random.default_rng(6)

    def t(*shape):
        return torch.tensor(rng.standard_normal(shape).astype(np.float32))
    x, x4, w, wg, b = t(2, 3, 7, 6), t(2, 4, 7, 6), t(4, 3, 3, 3), t(4, 1, 3, 3), t(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no host round trip
        for fn in (lambda x, x4, w, wg, b: F.conv2d(x, w, b, padding=1),
                   lambda x, x4, w, wg, b: F.conv2d(x, w, b, stride=2, padding=(1, 2), dilation=(1, 2)),
                   lambda x, x4, w, wg, b: F.conv_transpose2d(x4, w, padding=1),
                   lambda x, x4, w, wg, b: F.conv2d(x4, wg, groups=4, padding=1)):
            close(fn(x.cuda(), x4.cuda(), w.cuda(), wg.cuda(), b.cuda()), fn(x, x4, w, wg, b),
                  rtol=1e-5, atol=1e-5)
        for pad, groups, weight in ((1, 1, w), ((0, 2), 1, w), (1, 4, wg)):
            inp = x if groups == 1 else x4
            xc, wc = inp.cuda().requires_grad_(), weight.cuda().requires_grad_()
            xh, wh = inp.clone().requires_grad_(), weight.clone().requires_grad_()
            F.conv2d(xc, wc, padding=pad, groups=groups).pow(2).sum().backward()
            F.conv2d(xh, wh, padding=pad, groups=groups).pow(2).sum().backward()
            close(wc.grad, wh.grad, rtol=1e-5, atol=1e-4)
            close(xc.grad, xh.grad, rtol=1e-5, atol=1e-4)


def test_max_pooling_and_its_gradient_by_direct_kernels():
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.standard_normal((2, 3, 8, 10)).astype(np.float32))
    for fn in (lambda x: F.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 3, 2),
               lambda x: F.max_pool2d(x.transpose(2, 3), (2, 3), stride=(2, 1))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # no host round trip
            values, indices = fn(x.cuda()), F.max_pool2d(x.cuda(), 2, return_indices=True)[1]
            close(values, fn(x))
            assert indices.tolist() == F.max_pool2d(x, 2, return_indices=True)[1].tolist()
            xc, xh = x.cuda().requires_grad_(), x.clone().requires_grad_()
            fn(xc).pow(2).sum().backward()
            fn(xh).pow(2).sum().backward()
            close(xc.grad, xh.grad)


def test_average_pooling_and_its_gradient_by_kernels():
    """Windows summed by a reduction kernel over a strided view of the padded input, divided
    by the impl's divisors; the gradient spread tap by tap: equal to cpu, with no host trip."""
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.standard_normal((2, 3, 9, 10)).astype(np.float32))
    for fn in (lambda x: F.avg_pool2d(x, 2), lambda x: F.avg_pool2d(x, 3, 2, padding=1),
               lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
               lambda x: F.avg_pool2d(x, (2, 3), stride=(1, 2), ceil_mode=True),
               lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
               lambda x: F.avg_pool2d(x.transpose(2, 3), 2, divisor_override=3),
               lambda x: F.avg_pool1d(x.reshape(6, 9, 10), 4, 3, padding=2),
               lambda x: nn.AvgPool2d(2)(x.reshape(6, 9, 10)),
               lambda x: F.avg_pool3d(x.double().unsqueeze(0), (2, 2, 3), stride=1)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # no host round trip
            close(fn(x.cuda()), fn(x))
            xc, xh = x.cuda().requires_grad_(), x.clone().requires_grad_()
            fn(xc).pow(2).sum().backward()
            fn(xh).pow(2).sum().backward()
            close(xc.grad, xh.grad)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x.cuda(), 2, divisor_override=0)


# -- writes ------------------------------------------------------------------------------------------
def test_in_place_writes_and_copies():
    c = torch.zeros(2, 3, device="cuda")
    c.fill_(2.)
    c.add_(torch.ones(3, device="cuda"))
    assert c.tolist() == [[3.] * 3] * 2
    c.copy_(torch.arange(6).reshape(2, 3))          # from cpu, int64 -> float32
    assert c.tolist() == [[0., 1., 2.], [3., 4., 5.]]
    host = torch.empty(2, 3, dtype=torch.float64)
    host.copy_(c)                                   # cuda -> cpu
    assert host.tolist() == c.tolist()
    c.t().copy_(torch.ones(3, 2, device="cuda") * 7)   # into a strided view
    assert c.tolist() == [[7.] * 3] * 2
    c.zero_()
    assert c.sum().item() == 0
    out = torch.empty(3, device="cuda")
    torch.add(torch.ones(3, device="cuda"), 1, out=out)
    assert out.tolist() == [2., 2., 2.]
    u = torch.zeros(4, dtype=torch.uint8, device="cuda")
    u.fill_(-1)                                     # wraps, as in torch
    assert u.tolist() == [255] * 4


# -- autograd and training --------------------------------------------------------------------------
def test_gradients_flow_across_devices():
    a = torch.ones(2, requires_grad=True)
    c = a.cuda()
    assert c.grad_fn.name() == "ToCopyBackward0" and c.requires_grad
    (c * 3).sum().backward()
    assert a.grad.is_cpu and a.grad.tolist() == [3., 3.]
    w = torch.ones(2, device="cuda", requires_grad=True)
    (w * w).sum().backward()
    (w * 2).sum().backward()            # accumulates on the device
    assert w.grad.is_cuda and w.grad.tolist() == [4., 4.]


def _train(device, opt_cls, **opt_args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    rng = np.random.default_rng(2)
    x = torch.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    model.to(device)
    x, y = x.to(device), y.to(device)
    opt = opt_cls(model.parameters(), **opt_args)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_float_attributes_are_read_at_run_time():
    """``add(alpha=)``, ``addcmul(value=)`` and ``addcdiv(value=)`` read a Python float from a
    0-d operand, as float operands are: an Adam step's new ``value=-step_size`` needs no new
    kernel, and the results equal cpu's."""
    from dynograph.runtime.backend import STATS
    rng = np.random.default_rng(1)
    x, a, b = (torch.tensor(rng.standard_normal((5, 7)).astype(np.float32)) for _ in range(3))
    b = b.abs() + 0.5
    cx, ca, cb = x.cuda(), a.cuda(), b.cuda()
    ops = (lambda x, a, b, v: torch.add(x, a, alpha=v), lambda x, a, b, v: x.sub(a, alpha=v),
           lambda x, a, b, v: torch.addcmul(x, a, b, value=v),
           lambda x, a, b, v: x.addcdiv(a, b, value=v))
    for fn in ops:      # compiled here (or found on disk); 1.0, the default, is left out
        fn(cx, ca, cb, 0.3), fn(cx, ca, cb, 1.0)
    before = STATS["compiled"] + STATS["disk_hits"]
    for v in (1.0, -2.5e-3, 1 / 3, -0.0, 7.0):
        for fn in ops:
            close(fn(cx, ca, cb, v), fn(x, a, b, v), rtol=0, atol=0)
    assert STATS["compiled"] + STATS["disk_hits"] == before
    # in place, as the optimizers call them (the in-place variant is a kernel of its own)
    p, cp = x.clone(), cx.clone()
    for step in range(1, 5):
        p.addcdiv_(a, b, value=-0.01 / (1 - 0.9 ** step))
        cp.addcdiv_(ca, cb, value=-0.01 / (1 - 0.9 ** step))
        if step == 1:
            before = STATS["compiled"] + STATS["disk_hits"]
    close(cp, p, rtol=0, atol=0)
    assert STATS["compiled"] + STATS["disk_hits"] == before
    # an integer alpha on integer tensors stays a constant of the kernel
    i = torch.tensor([[3, -7], [5, 2]])
    assert torch.add(i.cuda(), i.cuda(), alpha=3).tolist() == torch.add(i, i, alpha=3).tolist()


def test_training_on_cuda_equals_cpu():
    model, losses = _train("cuda", torch.optim.SGD, lr=0.1, momentum=0.9)
    ref, ref_losses = _train("cpu", torch.optim.SGD, lr=0.1, momentum=0.9)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
        assert p.grad.is_cuda
    assert model.cpu()[0].weight.is_cpu


def test_memory_is_returned_to_the_allocator():
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    c = torch.ones(1000, device="cuda")
    assert torch.cuda.memory_allocated() >= before + 4000
    v = c[10:]
    del c
    assert torch.cuda.memory_allocated() >= before + 4000      # the view keeps the block
    del v
    assert torch.cuda.memory_allocated() == before
    assert torch.cuda.is_available() and torch.cuda.device_count() >= 1


# -- compiled functions ------------------------------------------------------------------------------
def _compiled_training(device, steps=4):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @torch.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = torch.tensor(rng.standard_normal((6, 5)).astype(np.float32), device=device)
        y = torch.tensor(rng.integers(0, 3, 6), device=device)
        losses.append(step(x, y).item())
    return step, model, losses


def test_compiled_training_step_on_cuda_equals_cpu():
    step, model, losses = _compiled_training("cuda")
    _, ref, ref_losses = _compiled_training("cpu")
    report = str(step.explain())
    assert "graph breaks: 0" in report and "cache hits: 3" in report, report
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.is_cuda and p.grad.is_cuda
        close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
        close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_compiled_entries_are_guarded_on_the_device():
    m = nn.Linear(3, 2)

    @torch.compile
    def f(x):
        return m(x).relu() * 2

    x = torch.randn(4, 3)
    want = f(x)
    assert f(x).is_cpu
    m.cuda()
    got = f(x.cuda())
    assert got.is_cuda
    close(got.detach(), want.detach(), rtol=1e-5, atol=1e-6)
    assert "on cuda:0" in str(f.explain())
    m.cpu()
    assert f(x).is_cpu and f(x).tolist() == want.tolist()


# -- random numbers -----------------------------------------------------------------------------------
def test_random_numbers_come_from_the_devices_philox_generator():
    from dynograph.compiler.cuda.philox import RandomKernel, reference
    from dynograph.runtime import dtypes as D
    torch.manual_seed(7)                # seeds the CUDA generators too, as in torch
    a = torch.rand(10, device="cuda")
    want, = reference(RandomKernel("uniform", 10, D.float32, (0.0, 1.0)), 7, 0)
    assert a.cpu().numpy().tolist() == want.tolist()
    b = torch.rand(10, device="cuda")   # the offset moved on: new numbers
    assert b.tolist() != a.tolist()
    torch.cuda.manual_seed(7)
    assert torch.rand(10, device="cuda").tolist() == a.tolist()
    assert torch.cuda.initial_seed() == 7
    z = torch.empty(20000, device="cuda").normal_(1.0, 2.0)
    assert z.is_cuda and abs(z.mean().item() - 1) < 0.1 and abs(z.std().item() - 2) < 0.1
    u = torch.empty(1000, dtype=torch.float64, device="cuda").uniform_(2, 3)
    assert 2 <= u.min().item() and u.max().item() < 3
    assert torch.randn(3, 4, device="cuda").is_cuda and torch.rand_like(u).dtype is torch.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # dropout's mask is drawn on the device
        y = F.dropout(torch.ones(20000, device="cuda"), 0.25)
    assert y.is_cuda and abs((y == 0).float().mean().item() - 0.25) < 0.02
    assert y.unique().tolist() == [0.0, np.float32(4 / 3)]
    with pytest.raises(RuntimeError, match="bernoulli_ expects p to be in"):
        torch.empty(3, device="cuda").bernoulli_(1.5)


# -- pinned memory ------------------------------------------------------------------------------------
def test_pinned_batches_and_non_blocking_copies():
    from dynograph.utils.data import DataLoader, TensorDataset
    x = torch.arange(12.).reshape(6, 2)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.is_cpu and p.tolist() == x.tolist() and p.pin_memory() is p
    c = p.to("cuda", non_blocking=True)
    assert c.is_cuda and c.tolist() == x.tolist()
    assert x.cuda(non_blocking=True).tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        c.pin_memory()
    loader = DataLoader(TensorDataset(x, torch.arange(6)), batch_size=4, pin_memory=True)
    for xb, yb in loader:
        assert xb.is_pinned() and yb.is_pinned()
        assert (xb.to("cuda", non_blocking=True) * 2).cpu().tolist() == (xb * 2).tolist()


# -- library functions that make tensors of their own -------------------------------------------------
@pytest.mark.parametrize("name", ["cross_entropy", "one_hot", "interpolate", "attention", "pdist",
                                  "multilabel_margin", "reflect_pad", "affine_grid"])
def test_functions_make_their_tensors_on_the_inputs_device(name):
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    t = torch.tensor(rng.integers(0, 4, (3, 4)))
    fn = {
        "cross_entropy": lambda x, t: F.cross_entropy(x, t[:, 0]),
        "one_hot": lambda x, t: F.one_hot(t, 4),
        "interpolate": lambda x, t: F.interpolate(x[None, None], scale_factor=2, mode="bilinear"),
        "attention": lambda x, t: F.scaled_dot_product_attention(x[None], x[None], x[None], is_causal=True),
        "pdist": lambda x, t: F.pdist(x),
        "multilabel_margin": lambda x, t: F.multilabel_margin_loss(x, t),
        "reflect_pad": lambda x, t: F.pad(x[None], (2, 2), mode="reflect"),
        "affine_grid": lambda x, t: F.affine_grid(torch.eye(2, 3, device=x.device)[None], (1, 1, 3, 3),
                                                  align_corners=False),
    }[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (host round trips of ops without kernels)
        close(fn(x.cuda(), t.cuda()), fn(x, t), rtol=1e-5, atol=1e-6)


# -- streams ------------------------------------------------------------------------------------------
def test_streams_run_their_work_in_order():
    s = torch.cuda.Stream()
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    x = torch.ones(1000, device="cuda")
    with torch.cuda.stream(s):
        assert torch.cuda.current_stream() is s
        y = x * 2
        done = s.record_event()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.current_stream().wait_event(done)
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    s.synchronize()
    assert s.query() and done.query() and y.sum().item() == 2000.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    (x + 1).sum()
    end.record(torch.cuda.current_stream())
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    with torch.cuda.stream(None):
        pass

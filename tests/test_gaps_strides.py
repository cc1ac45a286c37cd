"""clone/Tensor.to take PyTorch's strides under memory_format=preserve_format: a
non-overlapping and dense (or empty) tensor's own strides (its size-1 dimensions' included),
otherwise the dense strides that keep the order of its dimensions' strides (PyTorch's
infer_dense_strides); every *_like function takes the same strides.  Random chains of views
(permute, slice, step, expand, unsqueeze) are compared with torch on the same strides.

Empty tensors have PyTorch's strides (contiguous ones where created, numpy's zeros never):
creation ops, views of them and op results, elementwise results taking TensorIterator's.
Reductions, scans and softmax give contiguous results and sort an empty_like one, whatever
the input's layout (numpy would keep its order in the first and give the second row-major);
elementwise results lay their elements out in TensorIterator's order."""
import random

import numpy as np
import pytest

import dynograph
from dynograph.compiler.ops.creation import infer_dense_strides


def _views(seed, count, sizes=(1, 2, 3, 4)):
    """(dynograph view, torch tensor with the same sizes, strides and offset) pairs."""
    import torch
    rng = random.Random(seed)
    for _ in range(count):
        shape = [rng.choice(sizes) for _ in range(rng.randint(1, 4))]
        n = int(np.prod(shape))
        d = dynograph.arange(n, dtype=dynograph.float32).reshape(shape)
        for _ in range(rng.randint(0, 4)):
            kind = rng.choice(["permute", "slice", "expand", "unsqueeze"])
            if kind == "permute":
                p = list(range(d.dim()))
                rng.shuffle(p)
                d = d.permute(p)
            elif kind == "slice":
                dim = rng.randrange(d.dim())
                index = [slice(None)] * d.dim()
                index[dim] = slice(rng.randint(0, max(0, d.shape[dim] - 1)), None, rng.choice([1, 2]))
                d = d[tuple(index)]
            elif kind == "expand":
                ones = [i for i in range(d.dim()) if d.shape[i] == 1]
                if ones:
                    size = list(d.shape)
                    size[rng.choice(ones)] = 3
                    d = d.expand(size)
            else:
                d = d.unsqueeze(rng.randint(0, d.dim()))
        t = torch.as_strided(torch.arange(max(n, 1), dtype=torch.float32), tuple(d.shape),
                             d.stride(), d.storage_offset())
        yield d, t


def test_clone_and_to_keep_torchs_strides(torch):
    for d, t in _views(0, 400):
        for fmt in ("preserve_format", "contiguous_format"):
            ours = d.clone(memory_format=getattr(dynograph, fmt))
            theirs = t.clone(memory_format=getattr(torch, fmt))
            what = (tuple(t.shape), t.stride(), fmt)
            assert ours.stride() == theirs.stride(), what
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert dynograph.clone(d).stride() == torch.clone(t).stride()
        assert d.to(dynograph.float64).stride() == t.to(torch.float64).stride()


@pytest.mark.parametrize("case", ["permuted", "sliced", "expanded", "transposed slice",
                                  "permuted step", "size-1 dims", "column"])
def test_clone_strides_of_named_layouts(torch, case):
    def make(T):
        x = T.arange(24.0).reshape(2, 3, 4)
        return {"permuted": x.permute(2, 0, 1), "sliced": x[:, 1:, ::2],
                "expanded": T.arange(3.0).reshape(3, 1).expand(3, 4), "transposed slice": x.mT[:, 1:],
                "permuted step": x.permute(2, 0, 1)[::2], "size-1 dims": T.arange(4.0).reshape(4, 1).t(),
                "column": T.arange(12.0).reshape(3, 4)[:, :1]}[case]
    ours, theirs = make(dynograph), make(torch)
    assert ours.stride() == theirs.stride()
    c, tc = ours.clone(), theirs.clone()
    assert c.stride() == tc.stride()
    np.testing.assert_array_equal(c.numpy(), tc.numpy())
    # the copy owns its memory and backpropagates as the identity
    x = make(dynograph).detach().requires_grad_(True)
    x.clone().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(tuple(x.shape), np.float32))


def test_infer_dense_strides_matches_torch(torch):
    for d, t in _views(1, 300):
        if not t.is_contiguous():
            # torch's empty_like of a non-dense tensor is infer_dense_strides
            if torch.empty_like(t).stride() != t.stride():
                assert infer_dense_strides(tuple(d.shape), d.stride()) == torch.empty_like(t).stride()


LIKE = {
    "empty_like": lambda T, x, **kw: T.empty_like(x, **kw),
    "zeros_like": lambda T, x, **kw: T.zeros_like(x, **kw),
    "ones_like": lambda T, x, **kw: T.ones_like(x, **kw),
    "full_like": lambda T, x, **kw: T.full_like(x, 2.5, **kw),
    "rand_like": lambda T, x, **kw: T.rand_like(x, **kw),
    "randn_like": lambda T, x, **kw: T.randn_like(x, **kw),
    "randint_like": lambda T, x, **kw: T.randint_like(x, 3, 9, **kw),
}


@pytest.mark.parametrize("sizes", [(1, 2, 3, 4), (0, 1, 2, 3)])
def test_like_functions_take_torchs_strides(torch, sizes):
    count = 0
    for d, t in _views(2 + len(sizes), 150, sizes):
        for name, fn in LIKE.items():
            for fmt in ("preserve_format", "contiguous_format"):
                ours = fn(dynograph, d, memory_format=getattr(dynograph, fmt))
                theirs = fn(torch, t, memory_format=getattr(torch, fmt))
                assert ours.stride() == theirs.stride(), (name, fmt, tuple(t.shape), t.stride())
                assert ours.dtype is d.dtype
                count += 1
        assert fn(dynograph, d, dtype=dynograph.float64).stride() == \
            fn(torch, t, dtype=torch.float64).stride()
    assert count == 150 * len(LIKE) * 2


def test_like_functions_values_and_channels_last(torch):
    x = dynograph.arange(120.0).reshape(2, 3, 4, 5)
    tx = torch.arange(120.0).reshape(2, 3, 4, 5)
    for d, t in ((x, tx), (x[:, :, :0], tx[:, :, :0]), (x.permute(0, 2, 3, 1), tx.permute(0, 2, 3, 1))):
        for name, fn in LIKE.items():
            ours = fn(dynograph, d, memory_format=dynograph.channels_last)
            assert ours.stride() == fn(torch, t, memory_format=torch.channels_last).stride(), name
    r = dynograph.rand_like(x.permute(3, 1, 0, 2), requires_grad=True)
    assert r.requires_grad and r.stride() == torch.rand_like(tx.permute(3, 1, 0, 2)).stride()
    assert 0 <= r.min().item() and r.max().item() < 1
    i = dynograph.randint_like(x.mT, 3, 9)
    assert 3 <= i.min().item() and i.max().item() < 9 and i.dtype is dynograph.float32
    np.testing.assert_array_equal(dynograph.full_like(x.mT, 7).numpy(), np.full((2, 3, 5, 4), 7.0))
    for T in (dynograph, torch):
        assert T.empty(2, 0, 4, 5, memory_format=T.channels_last).stride() == (0, 1, 0, 0)
        assert T.empty(2, 3, 4, 5, 6, memory_format=T.channels_last_3d).stride() == \
            (360, 1, 90, 18, 3)


EMPTY = ["T.empty(0, 3)", "T.zeros(2, 0, 3)", "T.ones(0)", "T.full((3, 0), 1.5)",
         "T.empty(0, 3).t()", "T.ones(2, 3).t()[:0]", "T.ones(2, 0, 3).permute(2, 0, 1)",
         "T.ones(3, 4)[:, :0].t()", "T.ones(3, 4, 0).permute(1, 2, 0)[:, :, :2]",
         "T.ones(4, 3)[:, ::2][2:2]", "T.ones(4, 3)[4:]", "T.arange(0.0)", "T.ones(0, 1, 3)"]
# creation, views and op results (composites whose last step is not torch's kernel, like
# softmax's division, lay out as that step does, and are left out)
RESULTS = [
    "x", "x + 1", "x + x", "x * T.tensor(2.0)", "x.exp()", "x + x.contiguous()",
    "x + T.ones(x.shape[-1])", "x.add(1, alpha=2)", "T.where(x > 0, x, 1.0)", "x.double()",
    "x > 0", "x.clamp(0, 1)", "x.pow(2)", "T.pow(2, x)", "x.sub(x.contiguous(), alpha=2)",
    "T.maximum(x, T.zeros(()))", "x.lerp(x, 0.5)", "x.masked_fill(x > 0, 1.0)",
    "x.nan_to_num()", "x.addcmul(x, x, value=2)", "T.xlogy(2, x)", "x.copysign(2)",
    "x.remainder(2)", "x.hypot(x)", "x.sigmoid()", "-x", "x.to(T.int32)", "x.clone()",
    "x.cumsum(0)", "T.nn.functional.gelu(x)", "x * 2.5", "2 - x", "x // 2",
    "x == 1", "x.int() & 3", "T.atan2(x, x)", "x.mT", "x.unsqueeze(0)", "x.unsqueeze(-1)",
    "x.unsqueeze(1)", "x.reshape(-1)", "x.flatten()", "x.expand(2, *x.shape)",
    "x.contiguous()", "x.squeeze()", "x.flip(0)", "x.roll(1)", "x.transpose(0, -1)",
    "x[..., None]", "x.narrow(-1, 0, 1) if x.shape[-1] else x", "x.movedim(0, -1)",
    "T.cat([x, x])", "T.stack([x, x])", "x.repeat(2, *[1] * (x.dim() - 1))",
    "x.to(T.float16)", "x.new_zeros(x.shape)", "T.zeros_like(x)", "T.rand_like(x)",
    "x[None].expand(3, *x.shape)", "x[..., :1].expand_as(x) if x.shape[-1] else x",
    "T.ones(1).expand(0)", "T.ones(1, 1).expand(0, 2)", "x.sum(-1, keepdim=True).expand_as(x)",
    "x.sum(0, keepdim=True)", "x.sum(-1)", "x.mean(-1)", "x.prod(-1)", "x.sort(-1)[0]",
]


def test_empty_tensors_take_torchs_strides(torch):
    checked = 0
    for base in EMPTY:
        for expr in RESULTS:
            try:
                theirs = eval(expr, {"T": torch, "x": eval(base, {"T": torch})})
            except RuntimeError:            # (mT of a 1-D tensor)
                with pytest.raises(RuntimeError):
                    eval(expr, {"T": dynograph, "x": eval(base, {"T": dynograph})})
                continue
            ours = eval(expr, {"T": dynograph, "x": eval(base, {"T": dynograph})})
            assert tuple(ours.shape) == tuple(theirs.shape)
            assert ours.stride() == theirs.stride(), (base, expr, tuple(theirs.shape))
            assert ours.is_contiguous() == theirs.is_contiguous()
            checked += 1
    assert checked > 0.95 * len(EMPTY) * len(RESULTS)


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 3), (0,), (3, 0, 1)])
def test_creation_ops_give_empty_tensors_contiguous_strides(torch, shape):
    for name in ("empty", "zeros", "ones", "rand", "randn"):
        ours, theirs = getattr(dynograph, name)(*shape), getattr(torch, name)(*shape)
        assert ours.stride() == theirs.stride(), name
    for name in ("full", "new_full"):
        args = (shape, 1.0)
        ours = dynograph.full(*args) if name == "full" else dynograph.ones(1).new_full(*args)
        theirs = torch.full(*args) if name == "full" else torch.ones(1).new_full(*args)
        assert ours.stride() == theirs.stride(), name
    # numpy arrays keep their strides, numpy's zeros for an empty one included
    for a in (np.zeros(shape), np.ones((4, 3)).T[:0], np.ones((2, 0, 3)).transpose(2, 0, 1)):
        for name in ("tensor", "as_tensor", "from_numpy"):
            assert getattr(dynograph, name)(a).stride() == getattr(torch, name)(a).stride()
        assert dynograph.tensor(a, dtype=dynograph.float16).stride() == \
            torch.tensor(a, dtype=torch.float16).stride()


REDUCED = ["x.sum(-1)", "x.sum(0)", "x.sum(1, keepdim=True)", "x.sum((0, -1))", "x.mean(-1)",
           "x.amax(0)", "x.amin(-1, keepdim=True)", "x.max(-1)[0]", "x.max(0)[1]", "x.min(1)[0]",
           "x.argmax(-1)", "x.argmin(0)", "x.prod(0)", "x.std(-1)", "x.var(0)",
           "T.var_mean(x, -1)[0]", "T.std_mean(x, 0)[1]", "x.norm(dim=-1)", "x.logsumexp(-1)",
           "(x > 3).all(-1)", "(x > 3).any(0)", "x.nansum(-1)", "x.nanmean(0)",
           "x.count_nonzero(-1)", "x.aminmax(dim=-1)[0]", "x.median(-1)[0]", "x.mode(-1)[0]",
           "x.kthvalue(1, 0)[0]", "x.topk(2, -1)[1]", "x.cumsum(0)", "x.cumsum(-1)",
           "x.cumprod(1)", "x.cummax(0)[0]", "x.cummin(0)[1]", "x.logcumsumexp(-1)",
           "x.sort(-1)[0]", "x.sort(0)[1]", "x.argsort(-1)", "x.msort()", "x.sum()",
           "x.softmax(-1)", "x.log_softmax(0)", "T.nn.functional.softmin(x, 1)",
           "T.nn.functional.normalize(x, dim=-1)"]
LAYOUTS = ["T.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)",
           "T.arange(24.0).reshape(2, 3, 4)[:, :, ::2]", "T.arange(24.0).reshape(2, 3, 4).transpose(0, 2)",
           "T.arange(24.0).reshape(2, 3, 4).permute(1, 2, 0)[:, 1:]", "T.arange(24.0).reshape(2, 3, 4)",
           "T.arange(24.0).reshape(2, 3, 4, 1).permute(3, 2, 0, 1)[..., 1:]"]


def test_reductions_scans_sorts_and_softmax_take_torchs_layout(torch):
    for base in LAYOUTS:
        for expr in REDUCED:
            theirs = eval(expr, {"T": torch, "x": eval(base, {"T": torch})})
            ours = eval(expr, {"T": dynograph, "x": eval(base, {"T": dynograph})})
            assert ours.stride() == theirs.stride(), (base, expr)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


ELEMENTWISE = ["a + b", "a * b", "T.maximum(a, b)", "a + b[0:1]", "a + b.sum(-1, keepdim=True)",
               "T.where(a > 3, a, b)", "a / b.amax(0, keepdim=True)", "a.exp()", "a + 1",
               "a.add(b, alpha=2)", "T.atan2(a, b)", "a.lerp(b, 0.3)", "a.addcmul(a, b)",
               "a - b[..., :1]", "a * 2 + b", "b[:1] * a", "T.pow(2, a)", "a.masked_fill(b > 5, 0)"]


def test_elementwise_results_take_tensor_iterators_layout(torch):
    """Broadcast operands, operands laid out differently: the result's elements lie in memory
    in the order TensorIterator gives (the first operand's where they disagree), not
    numpy's.  (A size-1 dimension's stride is left out: torch derives it in ways that
    place no element differently.  Operands whose own size-1 dimensions have odd strides
    are not generated: numpy counts them as row-major, and such a broadcast can still take
    numpy's order.)"""
    rng = random.Random(7)

    def make(T, shape, perm, step):
        x = (T.arange(float(np.prod(shape))).reshape(shape) + 1).permute(perm)
        return x[..., ::2] if step and x.shape[-1] > 2 else x
    checked = 0
    for _ in range(200):
        shape = tuple(rng.choice([2, 3, 4]) for _ in range(3))
        pa, pb = rng.sample(range(3), 3), rng.sample(range(3), 3)
        step = rng.random() < 0.3
        for expr in ELEMENTWISE:
            try:
                theirs = eval(expr, {"T": torch, "a": make(torch, shape, pa, step),
                                     "b": make(torch, shape, pb, step)})
            except RuntimeError:         # shapes that do not broadcast
                continue
            ours = eval(expr, {"T": dynograph, "a": make(dynograph, shape, pa, step),
                               "b": make(dynograph, shape, pb, step)})
            big = [d for d, n in enumerate(theirs.shape) if n > 1]
            assert [ours.stride(d) for d in big] == [theirs.stride(d) for d in big], \
                (expr, shape, pa, pb, step, theirs.stride(), ours.stride())
            assert ours.is_contiguous() == theirs.is_contiguous()
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
            checked += 1
    assert checked > 1500           # (shapes that do not broadcast skipped)

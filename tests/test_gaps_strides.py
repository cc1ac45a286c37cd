"""clone/Tensor.to take PyTorch's strides under memory_format=preserve_format: a
non-overlapping and dense tensor's own strides (its size-1 dimensions' included), otherwise
the dense strides that keep the order of its dimensions' strides (PyTorch's
infer_dense_strides); *_like results follow the same order.  Random chains of views
(permute, slice, step, expand, unsqueeze) are compared with torch on the same strides."""
import random

import numpy as np
import pytest

import dynograph
from dynograph.compiler.ops.creation import infer_dense_strides


def _views(seed, count):
    """(dynograph view, torch tensor with the same sizes, strides and offset) pairs."""
    import torch
    rng = random.Random(seed)
    for _ in range(count):
        shape = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
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
        t = torch.as_strided(torch.arange(n, dtype=torch.float32), tuple(d.shape), d.stride(),
                             d.storage_offset())
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


def test_like_results_follow_the_stride_order(torch):
    for d, t in _views(2, 300):
        for fn in ("empty_like", "zeros_like", "ones_like"):
            ours, theirs = getattr(dynograph, fn)(d).stride(), getattr(torch, fn)(t).stride()
            # dimensions of size 1 may take another stride (no element is ever stepped over)
            assert [s for s, n in zip(ours, d.shape) if n > 1] == \
                [s for s, n in zip(theirs, t.shape) if n > 1], (fn, tuple(t.shape), t.stride())

"""Embedding and EmbeddingBag (functional and modules) against PyTorch: values, weight gradients,
padding rows, frequency scaling, max_norm renormalization, bags, errors and reprs."""
import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
import dynograph.nn.functional as F
from conftest import assert_same, assert_same_error, eval_expr, from_torch

DTYPES = ["float32", "float64"]


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)


def _weights(torch, rows=6, dim=3, dtype="float32", seed=0):
    w = torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed), dtype=getattr(torch, dtype))
    return w.clone().requires_grad_(), from_torch(w, requires_grad=True)


def _indices(torch, values, dtype="int64"):
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    return t, from_torch(t)


def _backward(torch, got, expect, seed=1):
    g = torch.randn(expect.shape, generator=torch.Generator().manual_seed(seed), dtype=expect.dtype)
    expect.backward(g)
    got.backward(from_torch(g))


IDX = [[0, 2, 2, 5], [3, 1, 2, 0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}, {"padding_idx": -1},
                                    {"scale_grad_by_freq": True}, {"padding_idx": 0, "scale_grad_by_freq": True},
                                    {"sparse": True}])
@pytest.mark.parametrize("values,index_dtype", [(IDX, "int64"), (IDX[0], "int32"), (3, "int64")])
def test_embedding_functional(torch, dtype, kwargs, values, index_dtype):
    tw, dw = _weights(torch, dtype=dtype)
    ti, di = _indices(torch, values, index_dtype)
    expect = torch.nn.functional.embedding(ti, tw, **kwargs)
    got = F.embedding(di, dw, **kwargs)
    assert_same(got, expect, **_tol(dtype))
    assert got.grad_fn.name() == "EmbeddingBackward0"
    _backward(torch, got, expect)
    grad = tw.grad.to_dense() if tw.grad.is_sparse else tw.grad
    assert_same(dw.grad, grad, **_tol(dtype))


def test_embedding_non_contiguous_and_double_backward(torch):
    tw, dw = _weights(torch, dtype="float64")
    ti, di = _indices(torch, [[0, 1], [4, 4], [2, 3]])
    got = F.embedding(di.t(), dw.t().contiguous().t())
    expect = torch.nn.functional.embedding(ti.t(), tw)
    assert not di.t().is_contiguous()
    assert_same(got, expect)
    (g,) = dynograph.autograd.grad((got * got).sum(), dw, create_graph=True)
    (tg,) = torch.autograd.grad((expect * expect).sum(), tw, create_graph=True)
    assert_same(g, tg)
    g.sum().backward()
    tg.sum().backward()
    assert_same(dw.grad, tw.grad)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5])
@pytest.mark.parametrize("max_norm", [0.5, 1.5])
def test_embedding_max_norm(torch, norm_type, max_norm):
    tw, dw = _weights(torch, dtype="float64")
    ti, di = _indices(torch, [[0, 2, 2], [4, 0, 5]])
    expect = torch.nn.functional.embedding(ti, tw, max_norm=max_norm, norm_type=norm_type)
    got = F.embedding(di, dw, max_norm=max_norm, norm_type=norm_type)
    assert_same(got, expect)
    assert_same(dw, tw)                                     # the referenced rows renormalized in place
    assert dw.is_leaf and dw.requires_grad
    _backward(torch, got, expect)
    assert_same(dw.grad, tw.grad)


def test_embedding_max_norm_module_trains(torch):
    ours = nn.Embedding(6, 3, max_norm=1.0)
    theirs = torch.nn.Embedding(6, 3, max_norm=1.0)
    with dynograph.no_grad():
        ours.weight.copy_(from_torch(theirs.weight))
    opt, topt = dynograph.optim.SGD(ours.parameters(), lr=0.5), torch.optim.SGD(theirs.parameters(), lr=0.5)
    for step in range(3):
        ti, di = _indices(torch, [[step, 1, 2], [5, step, 4]])
        loss, tloss = (ours(di) ** 2).sum(), (theirs(ti) ** 2).sum()
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
    assert_same(ours.weight, theirs.weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"padding_idx": -2, "max_norm": 1.0},
                                    {"norm_type": 1.0, "scale_grad_by_freq": True}, {"sparse": True}])
def test_embedding_module(torch, dtype, kwargs):
    ours = nn.Embedding(6, 3, dtype=getattr(dynograph, dtype), **kwargs)
    theirs = torch.nn.Embedding(6, 3, dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.padding_idx == theirs.padding_idx and ours.weight.dtype == getattr(dynograph, dtype)
    if theirs.padding_idx is not None:
        assert (ours.weight[theirs.padding_idx] == 0).all()
    with dynograph.no_grad():
        ours.weight.copy_(from_torch(theirs.weight))
    ti, di = _indices(torch, IDX)
    expect, got = theirs(ti), ours(di)
    assert_same(got, expect, **_tol(dtype))
    _backward(torch, got, expect)
    grad = theirs.weight.grad.to_dense() if theirs.weight.grad.is_sparse else theirs.weight.grad
    assert_same(ours.weight.grad, grad, **_tol(dtype))


def test_embedding_default_init():
    dynograph.manual_seed(0)
    w = nn.Embedding(400, 50, padding_idx=3).weight.detach().numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02
    assert (w[3] == 0).all() and (w[2] != 0).all()


def test_embedding_from_pretrained(torch):
    t = torch.randn(4, 2)
    for freeze in (True, False):
        ours = nn.Embedding.from_pretrained(from_torch(t), freeze=freeze, padding_idx=1)
        theirs = torch.nn.Embedding.from_pretrained(t, freeze=freeze, padding_idx=1)
        assert repr(ours) == repr(theirs)
        assert ours.weight.requires_grad == theirs.weight.requires_grad
        assert_same(ours.weight, theirs.weight)             # the padding row is not zeroed
        ti, di = _indices(torch, [1, 3])
        assert_same(ours(di), theirs(ti))
    source = dynograph.randn(3, 2)
    shared = nn.Embedding.from_pretrained(source)
    with dynograph.no_grad():
        source[0, 0] = 7.0
    assert shared.weight[0, 0].item() == 7.0                # the weight shares the given tensor


# ----------------------------------------------------------------------------- embedding bag

BAGS = [
    ([1, 2, 4, 4, 0, 3, 5, 5], [0, 2, 2, 5]),               # an empty bag in the middle
    ([1, 2, 4, 4, 0, 3], [0, 3]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("values,offsets", BAGS)
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 4}, {"padding_idx": -1}, {"include_last_offset": True},
                                    {"scale_grad_by_freq": True}, {"max_norm": 1.2}])
def test_embedding_bag_offsets(torch, dtype, mode, values, offsets, kwargs):
    if mode == "max" and kwargs.get("scale_grad_by_freq"):
        return
    if kwargs.get("include_last_offset"):
        offsets = offsets + [len(values)]       # torch reads past the input otherwise
    tw, dw = _weights(torch, dtype=dtype)
    (ti, di), (to, do) = _indices(torch, values), _indices(torch, offsets)
    expect = torch.nn.functional.embedding_bag(ti, tw, to, mode=mode, **kwargs)
    got = F.embedding_bag(di, dw, do, mode=mode, **kwargs)
    assert_same(got, expect, **_tol(dtype))
    assert_same(dw, tw, **_tol(dtype))
    _backward(torch, got, expect)
    assert_same(dw.grad, tw.grad, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_2d(torch, dtype, mode, padding_idx):
    tw, dw = _weights(torch, dtype=dtype)
    ti, di = _indices(torch, [[0, 2, 2, 5], [3, 1, 2, 0], [2, 2, 2, 2]])
    expect = torch.nn.functional.embedding_bag(ti, tw, mode=mode, padding_idx=padding_idx)
    got = F.embedding_bag(di, dw, mode=mode, padding_idx=padding_idx)
    assert_same(got, expect, **_tol(dtype))
    _backward(torch, got, expect)
    assert_same(dw.grad, tw.grad, **_tol(dtype))


@pytest.mark.parametrize("two_d", [False, True])
def test_embedding_bag_per_sample_weights(torch, two_d):
    tw, dw = _weights(torch, dtype="float64")
    values = [[0, 2, 2], [4, 1, 2]] if two_d else [0, 2, 2, 4, 1, 2]
    ti, di = _indices(torch, values)
    tp = torch.rand(ti.shape, dtype=torch.float64).requires_grad_()
    dp = from_torch(tp, requires_grad=True)
    offsets = {} if two_d else {"offsets": torch.tensor([0, 1, 4])}
    doffsets = {k: from_torch(v) for k, v in offsets.items()}
    expect = torch.nn.functional.embedding_bag(ti, tw, mode="sum", per_sample_weights=tp, padding_idx=1,
                                               **offsets)
    got = F.embedding_bag(di, dw, mode="sum", per_sample_weights=dp, padding_idx=1, **doffsets)
    assert_same(got, expect)
    _backward(torch, got, expect)
    assert_same(dw.grad, tw.grad)
    assert_same(dp.grad, tp.grad)


@pytest.mark.parametrize("kwargs", [{}, {"mode": "sum", "padding_idx": -2}, {"mode": "max", "max_norm": 1.0},
                                    {"norm_type": 1.0, "scale_grad_by_freq": True, "include_last_offset": True}])
def test_embedding_bag_module(torch, kwargs):
    ours, theirs = nn.EmbeddingBag(6, 3, **kwargs), torch.nn.EmbeddingBag(6, 3, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.padding_idx == theirs.padding_idx
    if theirs.padding_idx is not None:
        assert (ours.weight[theirs.padding_idx] == 0).all()
    with dynograph.no_grad():
        ours.weight.copy_(from_torch(theirs.weight))
    (ti, di), (to, do) = _indices(torch, [1, 2, 4, 4, 0, 3]), _indices(torch, [0, 2, 2, 6])
    expect, got = theirs(ti, to), ours(di, do)
    assert_same(got, expect, rtol=1e-5, atol=1e-6)
    _backward(torch, got, expect)
    assert_same(ours.weight.grad, theirs.weight.grad, rtol=1e-5, atol=1e-6)


def test_embedding_bag_from_pretrained(torch):
    t = torch.randn(4, 2)
    for freeze in (True, False):
        ours = nn.EmbeddingBag.from_pretrained(from_torch(t), freeze=freeze, mode="max")
        theirs = torch.nn.EmbeddingBag.from_pretrained(t, freeze=freeze, mode="max")
        assert repr(ours) == repr(theirs)
        assert ours.weight.requires_grad == theirs.weight.requires_grad
        ti, di = _indices(torch, [[1, 3], [0, 0]])
        assert_same(ours(di), theirs(ti))


# ----------------------------------------------------------------------------- errors

ERRORS = [
    "F.embedding(T.tensor([6]), w)", "F.embedding(T.tensor([-1]), w)", "F.embedding(T.tensor([1.0]), w)",
    "F.embedding(T.tensor([1]), w[0])", "F.embedding(T.tensor([1]), w, padding_idx=6)",
    "F.embedding(T.tensor([1]), w, padding_idx=-7)",
    "nn.Embedding(4, 2, padding_idx=4)", "nn.Embedding(4, 2, padding_idx=-5)",
    "nn.Embedding(4, 2, _weight=T.ones(3, 2))", "nn.Embedding.from_pretrained(T.ones(3))",
    "nn.EmbeddingBag(4, 2, padding_idx=4)", "nn.EmbeddingBag.from_pretrained(T.ones(3))",
    "nn.EmbeddingBag(4, 2, _weight=T.ones(3, 2))",
    "F.embedding_bag(T.tensor([1, 2]), w)", "F.embedding_bag(T.tensor([1, 2]), w, T.tensor([[0]]))",
    "F.embedding_bag(T.tensor([[1, 2]]), w, T.tensor([0]))", "F.embedding_bag(T.tensor([[[1]]]), w)",
    "F.embedding_bag(T.tensor([[1, 2]]), w, mode='prod')",
    "F.embedding_bag(T.tensor([[1, 2]]), w, mode='max', scale_grad_by_freq=True)",
    "F.embedding_bag(T.tensor([[1, 2]]), w, mode='max', sparse=True)",
    "F.embedding_bag(T.tensor([[1, 2]]), w, per_sample_weights=T.ones(2))",
    "F.embedding_bag(T.tensor([[1, 2]]), w, per_sample_weights=T.ones(1, 2))",
    "F.embedding_bag(T.tensor([[1, 2]]), w[0])",
    "F.embedding_bag(T.tensor([[1, 2]]), w, padding_idx=6)",
    "F.embedding_bag(T.tensor([[1, 2]]), w, padding_idx=-7)",
    "F.embedding_bag(T.tensor([1, -1]), w, T.tensor([0]))", "F.embedding_bag(T.tensor([[1, 6]]), w)",
    "F.embedding_bag(T.tensor([1, 2]), w, T.tensor([1, 2]))",
    "F.embedding_bag(T.tensor([1, 2]), w, T.tensor([0, 3]), include_last_offset=True)",
    "F.embedding_bag(T.tensor([1, 2]), w, T.tensor([0, 3]))",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors(torch, expr):
    w = torch.randn(6, 3)
    theirs = eval_expr(expr, {"F": torch.nn.functional, "T": torch, "w": w, "nn": torch.nn})
    ours = eval_expr(expr, {"F": F, "T": dynograph, "w": from_torch(w), "nn": nn})
    assert_same_error(ours, theirs, expr)


def test_embedding_bag_empty():
    # (torch itself crashes on some of these in max mode)
    w = dynograph.randn(6, 3, requires_grad=True)
    for mode in ("sum", "mean", "max"):
        out = F.embedding_bag(dynograph.tensor([1, 2]), w, dynograph.tensor([], dtype=dynograph.int64),
                              mode=mode)
        assert out.shape == (0, 3)
        out = F.embedding_bag(dynograph.tensor([], dtype=dynograph.int64), w, dynograph.tensor([0, 0]),
                              mode=mode)
        assert out.shape == (2, 3) and (out == 0).all()
        out.sum().backward()
        assert (w.grad == 0).all()


def test_embedding_leaves_weight_untouched_without_max_norm():
    w = dynograph.randn(5, 2)
    before = w.numpy().copy()
    F.embedding(dynograph.tensor([0, 1, 1]), w)
    F.embedding_bag(dynograph.tensor([[0, 1, 1]]), w, mode="max")
    assert np.array_equal(w.numpy(), before) and w._version == 0

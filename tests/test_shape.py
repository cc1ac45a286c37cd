"""Shape and movement ops against PyTorch: values, shapes, strides, memory sharing, version
counters, gradients, grad_fn names and error messages."""
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same, from_torch


def pair(torch, shape, dtype="float32", layout="contiguous", seed=0):
    """The same tensor in torch and dynograph, contiguous or not ('t': transposed, 's': sliced
    by a step via as_strided, 'e': expanded)."""
    g = torch.Generator().manual_seed(seed)
    tdt = getattr(torch, dtype)
    if layout == "t":
        base = torch.randn(tuple(reversed(shape)), generator=g).to(tdt)
        b = from_torch(base)
        tt, dd = base.permute(*reversed(range(len(shape)))), b.permute(*reversed(range(len(shape))))
    elif layout == "s":
        big = tuple(shape[:-1]) + (2 * shape[-1],)
        base = torch.randn(big, generator=g).to(tdt)
        b = from_torch(base)
        stride = base.stride()[:-1] + (2,)
        tt, dd = base.as_strided(shape, stride), b.as_strided(shape, stride)
    elif layout == "e":
        base = torch.randn((1,) + tuple(shape[1:]), generator=g).to(tdt)
        b = from_torch(base)
        tt, dd = base.expand(shape), b.expand(shape)
    else:
        tt = torch.randn(shape, generator=g).to(tdt)
        dd = from_torch(tt)
    return tt, dd


def leaf_pair(torch, shape, layout="contiguous", seed=0):
    """A leaf requiring grad (torch, dynograph) and a function making the op's input from it
    with the given layout, so gradients flow through the non-contiguous path."""
    g = torch.Generator().manual_seed(seed)
    if layout == "t":
        tt = torch.randn(tuple(reversed(shape)), generator=g, dtype=torch.float64)
        make = (lambda x: x.permute(*reversed(range(len(shape)))))
    elif layout == "e":
        tt = torch.randn((1,) + tuple(shape[1:]), generator=g, dtype=torch.float64)
        make = (lambda x: x.expand(shape))
    else:
        tt = torch.randn(shape, generator=g, dtype=torch.float64)
        make = (lambda x: x)
    tt.requires_grad_(True)
    return tt, from_torch(tt, requires_grad=True), make


def grad_name(t):
    return t.grad_fn.name() if t.grad_fn is not None else None


def check_grad(torch, fn, shape, layout="contiguous", name=True):
    """fn(module, x) in both frameworks: same values, same grad_fn names, same input grads."""
    tt, dd, make = leaf_pair(torch, shape, layout)
    to = fn(torch, make(tt))
    do = fn(dynograph, make(dd))
    touts = to if isinstance(to, (tuple, list)) else (to,)
    douts = do if isinstance(do, (tuple, list)) else (do,)
    assert len(touts) == len(douts)
    tl = dl = 0
    for i, (a, b) in enumerate(zip(douts, touts)):
        assert_same(a, b)
        if name:
            assert grad_name(a) == grad_name(b)
        w = torch.arange(b.numel(), dtype=torch.float64).reshape(b.shape) / 7 + i
        tl = tl + (b * w).sum()
        dl = dl + (a * from_torch(w)).sum()
    tl.backward()
    dl.backward()
    assert_same(dd.grad, tt.grad)


# ---------------------------------------------------------------- view / reshape

@pytest.mark.parametrize("shape,new", [((3, 4), (12,)), ((3, 4), (2, -1)), ((2, 3, 4), (6, 4)),
                                       ((2, 3, 4), (4, 1, 6)), ((12,), (2, 2, 3)), ((), (1, 1)),
                                       ((1,), ()), ((0, 3), (3, 0)), ((0, 3), (-1,))])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_view_values_and_sharing(torch, shape, new, dtype):
    tt, dd = pair(torch, shape, dtype)
    tv, dv = tt.view(new), dd.view(new)
    assert_same(dv, tv)
    assert dv.stride() == tv.stride()
    assert dv._base is dd
    assert np.shares_memory(dv._data, dd._data) or dd.numel() == 0


@pytest.mark.parametrize("shape,new", [((3, 4), (4, 3)), ((3, 4), (12,)), ((2, 3, 4), (4, 6)),
                                       ((2, 3, 4), (2, 12)), ((2, 3, 4), (4, 3, 2, 1))])
@pytest.mark.parametrize("layout", ["t", "s", "e"])
def test_view_and_reshape_non_contiguous(torch, shape, new, layout):
    tt, dd = pair(torch, shape, layout=layout)
    try:
        tv = tt.view(new)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=r"view size is not compatible"):
            dd.view(new)
        assert "view size is not compatible" in str(e)
    else:
        dv = dd.view(new)
        assert_same(dv, tv)
        assert dv.stride() == tv.stride()
        assert np.shares_memory(dv._data, dd._data)
    tr, dr = tt.reshape(new), dd.reshape(new)
    assert_same(dr, tr)
    shares = tr.data_ptr() == tt.data_ptr() and tr._base is not None
    assert (dr._base is not None) == shares
    assert dr.is_contiguous() == tr.is_contiguous()


def test_view_writes_through_both_ways(torch):
    x = dynograph.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = x.view(4)
    v.add_(1)
    assert x.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    x.mul_(2)
    assert v.tolist() == [4.0, 6.0, 8.0, 10.0]
    t = x.t()
    t.add_(1)
    assert x.tolist() == [[5.0, 7.0], [9.0, 11.0]]


def test_version_counter_shared_with_views():
    x = dynograph.zeros(2, 2)
    y = x.view(4)
    y.add_(1)
    assert x._version == 1 and y._version == 1
    z = x.t().unsqueeze(0).expand(3, 2, 2)
    x.add_(1)
    assert z._version == 2
    assert z._base is x
    parts = x.split(1)
    x.mul_(3)
    assert all(p._version == 3 and p._base is x for p in parts)
    assert parts[0].tolist() == [[6.0, 6.0]]


def test_reshape_copies_only_when_needed():
    x = dynograph.tensor(np.arange(12.0).reshape(3, 4))
    r = x.reshape(4, 3)
    assert r._base is x and np.shares_memory(r._data, x._data)
    c = x.t().reshape(12)
    assert c._base is None and not np.shares_memory(c._data, x._data)
    assert c.tolist() == np.arange(12.0).reshape(3, 4).T.ravel().tolist()
    # a transposed tensor whose merged dims are still contiguous in memory reshapes as a view
    y = dynograph.tensor(np.arange(24.0).reshape(2, 3, 4)).permute(1, 0, 2)
    v = y.reshape(3, 2, 2, 2)
    assert np.shares_memory(v._data, y._data)


def test_view_as_reshape_as_flatten_unflatten(torch):
    tt, dd = pair(torch, (2, 3, 4))
    assert_same(dd.view_as(dynograph.zeros(6, 4)), tt.view_as(torch.zeros(6, 4)))
    assert_same(dd.reshape_as(dynograph.zeros(4, 6)), tt.reshape_as(torch.zeros(4, 6)))
    for args in [(), (1,), (0, 1), (-2, -1), (1, 1)]:
        assert_same(dd.flatten(*args), tt.flatten(*args))
        assert_same(dynograph.flatten(dd, *args), torch.flatten(tt, *args))
    assert_same(dynograph.tensor(3.0).flatten(), torch.tensor(3.0).flatten())
    for dim, sizes in [(1, (3, 1)), (2, (2, -1)), (-1, [1, 4]), (0, (2,))]:
        assert_same(dd.unflatten(dim, sizes), tt.unflatten(dim, sizes))
    one = dynograph.ones(3)
    assert one.flatten() is one


@pytest.mark.parametrize("call,msg,exc", [
    (lambda x: x.view(3, 5), r"shape '\[3, 5\]' is invalid for input of size 12", RuntimeError),
    (lambda x: x.view(-1, -1), "only one dimension can be inferred", RuntimeError),
    (lambda x: x.view(-1, 5), r"shape '\[-1, 5\]' is invalid for input of size 12", RuntimeError),
    (lambda x: x.view(-2, 6), r"invalid shape dimension -2 at index 0 of shape \[-2, 6\]",
     RuntimeError),
    (lambda x: x.t().view(12), r"view size is not compatible with input tensor's size and stride "
     r"\(at least one dimension spans across two contiguous subspaces\). Use .reshape\(...\) "
     r"instead.", RuntimeError),
    (lambda x: x.view(3, 4.0), "argument 'size' failed to unpack the object at pos 2", TypeError),
    (lambda x: x.view("a"), r"view\(\) received an invalid combination of arguments", TypeError),
    (lambda x: x.reshape(5, 3), r"shape '\[5, 3\]' is invalid for input of size 12", RuntimeError),
    (lambda x: dynograph.reshape(x, 12), "must be tuple of ints, not int", TypeError),
    (lambda x: x.flatten(1, 0), "start_dim cannot come after end_dim", RuntimeError),
    (lambda x: x.flatten(2), r"expected to be in range of \[-2, 1\], but got 2", IndexError),
    (lambda x: x.unflatten(1, (3, 2)), r"unflatten: Provided sizes \[3, 2\] don't multiply up "
     r"to the size of dim 1 \(4\) in the input tensor", RuntimeError),
    (lambda x: x.unflatten(1, ()), "unflatten: sizes must be non-empty", RuntimeError),
    (lambda x: dynograph.zeros(0, 3).view(-1, 0), "cannot reshape tensor of 0 elements into "
     r"shape \[-1, 0\] because the unspecified dimension size -1 can be any value", RuntimeError),
])
def test_view_errors(call, msg, exc):
    x = dynograph.zeros(3, 4)
    with pytest.raises(exc, match=msg):
        call(x)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "int16"),
                                     ("float32", "float64"), ("int64", "uint8"),
                                     ("float16", "bfloat16")])
def test_view_dtype(torch, src, dst):
    tt, dd = pair(torch, (3, 4), src)
    assert_same(dd.view(getattr(dynograph, dst)), tt.view(getattr(torch, dst)))
    assert_same(dd.view(dtype=getattr(dynograph, dst)), tt.view(dtype=getattr(torch, dst)))
    v = dd.view(getattr(dynograph, dst))
    assert np.shares_memory(v._data, dd._data) and v._base is dd


def test_view_dtype_errors():
    x = dynograph.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"self.stride\(-1\) must be 1 to view Float as Short "
                       r"\(different element sizes\), but got 4"):
        x.t().view(dynograph.int16)
    with pytest.raises(RuntimeError, match=r"self.size\(-1\) must be divisible by 2 to view Float "
                       r"as Double \(different element sizes\), but got 3"):
        dynograph.zeros(3, 3).view(dynograph.float64)
    with pytest.raises(RuntimeError, match=r"self.dim\(\) cannot be 0 to view Float as Short"):
        dynograph.tensor(1.0).view(dynograph.int16)


# ---------------------------------------------------------------- expand / broadcasting

@pytest.mark.parametrize("shape,size", [((3, 1), (3, 4)), ((1,), (2, 3, 5)), ((3, 4), (-1, 4)),
                                        ((3, 1), (2, -1, 6)), ((), (2, 3)), ((2, 1, 1), (2, 0, 3)),
                                        ((3, 4), (3, 4))])
def test_expand(torch, shape, size):
    tt, dd = pair(torch, shape)
    te, de = tt.expand(size), dd.expand(*size)
    assert_same(de, te)
    assert de.stride() == te.stride()
    assert de._base is dd
    assert_same(dd.expand_as(dynograph.zeros(te.shape)), tt.expand_as(torch.zeros(te.shape)))
    assert_same(dynograph.broadcast_to(dd, size), torch.broadcast_to(tt, size))
    assert_same(dd.broadcast_to(size), tt.broadcast_to(size))


def test_expand_shares_memory():
    x = dynograph.zeros(3, 1)
    e = x.expand(3, 4)
    x.add_(5)
    assert e.tolist() == [[5.0] * 4] * 3
    assert e._version == x._version == 1


@pytest.mark.parametrize("call,msg", [
    (lambda x: x.expand(3, 5), r"The expanded size of the tensor \(5\) must match the existing "
     r"size \(4\) at non-singleton dimension 1.  Target sizes: \[3, 5\].  Tensor sizes: \[3, 4\]"),
    (lambda x: x.expand(4), r"the number of sizes provided \(1\) must be greater or equal to the "
     r"number of dimensions in the tensor \(2\)"),
    (lambda x: x.expand(-1, 3, 4), r"The expanded size of the tensor \(-1\) isn't allowed in a "
     r"leading, non-existing dimension 0"),
    (lambda x: x.expand(3, -2), r"The expanded size of the tensor \(-2\) must match the existing "
     r"size \(4\) at non-singleton dimension 1"),
])
def test_expand_errors(call, msg):
    with pytest.raises(RuntimeError, match=msg):
        call(dynograph.zeros(3, 4))


def test_broadcast_tensors_and_shapes(torch):
    ta, da = pair(torch, (2, 1, 3))
    tb, db = pair(torch, (4, 1), seed=1)
    assert_same(dynograph.broadcast_tensors(da, db), torch.broadcast_tensors(ta, tb))
    assert dynograph.broadcast_shapes((2, 3), (3,), 1) == torch.broadcast_shapes((2, 3), (3,), 1)
    assert dynograph.broadcast_shapes(2, (3, 1)) == torch.broadcast_shapes(2, (3, 1))
    assert dynograph.broadcast_shapes() == torch.broadcast_shapes()
    with pytest.raises(RuntimeError, match=r"Attempting to broadcast a dimension of length 4 at -1! "
                       r"Mismatching argument at index 1 had \(4,\); but expected shape should be "
                       r"broadcastable to \[2, 3\]"):
        dynograph.broadcast_shapes((2, 3), (4,))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                       r"tensor b \(4\) at non-singleton dimension 1"):
        dynograph.broadcast_tensors(dynograph.zeros(2, 3), dynograph.zeros(4))


# ---------------------------------------------------------------- permute / transpose / squeeze

@pytest.mark.parametrize("layout", ["contiguous", "t", "s"])
def test_permute_transpose(torch, layout):
    tt, dd = pair(torch, (2, 3, 4), layout=layout)
    for dims in [(2, 0, 1), (0, 1, 2), (-1, -3, 1)]:
        assert_same(dd.permute(*dims), tt.permute(*dims))
        assert_same(dd.permute(dims), tt.permute(dims))
        assert_same(dynograph.permute(dd, dims), torch.permute(tt, dims))
        assert dd.permute(dims).stride() == tt.permute(dims).stride()
    for a, b in [(0, 1), (2, -3), (1, 1)]:
        assert_same(dd.transpose(a, b), tt.transpose(a, b))
        assert_same(dynograph.swapaxes(dd, a, b), torch.swapaxes(tt, a, b))
        assert_same(dd.swapdims(a, b), tt.swapdims(a, b))
    assert_same(dd.mT, tt.mT)
    assert_same(dd.mH, tt.mH)
    assert_same(dd.adjoint(), tt.adjoint())
    assert_same(dd.movedim(0, 2), tt.movedim(0, 2))
    assert_same(dd.moveaxis((0, 1), (-1, 0)), tt.moveaxis((0, 1), (-1, 0)))


def test_t_and_T(torch):
    for shape in [(), (3,), (2, 3)]:
        tt, dd = pair(torch, shape)
        assert_same(dd.t(), tt.t())
        assert_same(dynograph.t(dd), torch.t(tt))
    tt, dd = pair(torch, (2, 3))
    assert_same(dd.T, tt.T)
    assert_same(dd.H, tt.H)
    tt, dd = pair(torch, (2, 3, 4))
    with pytest.warns(UserWarning, match=r"The use of `x.T` on tensors of dimension other than 2"):
        assert_same(dd.T, tt.T)
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions, but "
                       "self is 3D"):
        dd.t()
    with pytest.raises(RuntimeError, match="tensor.mT is only supported on matrices or batches of "
                       "matrices. Got 1-D tensor."):
        dynograph.zeros(3).mT
    with pytest.raises(RuntimeError, match=r"tensor.H is only supported on matrices \(2-D "
                       r"tensors\). Got 3-D tensor. For batches of matrices, consider using "
                       r"tensor.mH"):
        dd.H


@pytest.mark.parametrize("call,msg,exc", [
    (lambda x: x.permute(0), r"number of dimensions in the tensor input does not match the length "
     r"of the desired ordering of dimensions i.e. input.dim\(\) = 2 is not equal to len\(dims\) = 1",
     RuntimeError),
    (lambda x: x.permute(0, 0), r"permute\(\): duplicate dims are not allowed.", RuntimeError),
    (lambda x: x.permute(0, -2), r"permute\(\): duplicate dims are not allowed.", RuntimeError),
    (lambda x: x.permute(0, 2), r"expected to be in range of \[-2, 1\], but got 2", IndexError),
    (lambda x: x.transpose(0, 2), r"expected to be in range of \[-2, 1\], but got 2", IndexError),
    (lambda x: x.unsqueeze(3), r"expected to be in range of \[-3, 2\], but got 3", IndexError),
    (lambda x: x.unsqueeze(-4), r"expected to be in range of \[-3, 2\], but got -4", IndexError),
    (lambda x: x.squeeze(2), r"expected to be in range of \[-2, 1\], but got 2", IndexError),
    (lambda x: x.squeeze((0, 0)), "dim 0 appears multiple times in the list of dims",
     RuntimeError),
    (lambda x: x.movedim((0, 1), (1,)), r"movedim: Invalid source or destination dims: source "
     r"\(\[0, 1\] dims\) should contain the same number of dims as destination \(\[1\] dims\)",
     RuntimeError),
    (lambda x: x.movedim((0, 0), (0, 1)), r"movedim: repeated dim in `source` \(\[0, 0\]\)",
     RuntimeError),
])
def test_dim_errors(call, msg, exc):
    with pytest.raises(exc, match=msg):
        call(dynograph.zeros(3, 4))


@pytest.mark.parametrize("layout", ["contiguous", "t", "s"])
def test_squeeze_unsqueeze(torch, layout):
    tt, dd = pair(torch, (1, 3, 1, 2), layout=layout)
    for args in [(), (0,), (1,), (-2,), ((0, 2),), ((1, -1),), ((),)]:
        assert_same(dd.squeeze(*args), tt.squeeze(*args))
        assert_same(dynograph.squeeze(dd, *args), torch.squeeze(tt, *args))
        assert dd.squeeze(*args).stride() == tt.squeeze(*args).stride()
    for d in range(-5, 5):
        assert_same(dd.unsqueeze(d), tt.unsqueeze(d))
        assert dd.unsqueeze(d).stride() == tt.unsqueeze(d).stride()
    s = dynograph.tensor(2.0)
    assert_same(s.squeeze(0), torch.tensor(2.0).squeeze(0))
    assert_same(s.unsqueeze(-1), torch.tensor(2.0).unsqueeze(-1))


def test_inplace_view_ops(torch):
    tt, dd = pair(torch, (1, 3, 2))
    for name, args in [("unsqueeze_", (0,)), ("squeeze_", ()), ("t_", ()), ("transpose_", (0, 1)),
                       ("swapaxes_", (1, 0)), ("squeeze_", (0,))]:
        tr = getattr(tt, name)(*args)
        dr = getattr(dd, name)(*args)
        assert dr is dd and tr is tt
        assert_same(dd, tt)
        assert dd.stride() == tt.stride()
    assert dd._version == tt._version
    leaf = dynograph.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                       "an in-place operation."):
        leaf.unsqueeze_(0)
    y = leaf * 2
    y.unsqueeze_(0)
    y.sum().backward()
    assert leaf.grad.tolist() == [[2.0] * 3] * 2


# ---------------------------------------------------------------- gradients and grad_fn names

GRAD_CASES = {
    "view": lambda m, x: x.view(2, 3, 2, -1),
    "view_as": lambda m, x: x.reshape(24).view_as(m.ones(2, 12)),
    "reshape": lambda m, x: x.reshape(-1, 3),
    "reshape_fn": lambda m, x: m.reshape(x, (3, 8)),
    "flatten": lambda m, x: x.flatten(0, 1),
    "unflatten": lambda m, x: x.unflatten(2, (2, 2)),
    "squeeze": lambda m, x: x.unsqueeze(1).squeeze(),
    "squeeze_dim": lambda m, x: x.unsqueeze(0).squeeze(0),
    "squeeze_dims": lambda m, x: x.unsqueeze(0).squeeze((0, 1)),
    "unsqueeze": lambda m, x: x.unsqueeze(-1),
    "permute": lambda m, x: x.permute(2, 0, 1),
    "transpose": lambda m, x: x.transpose(0, 2),
    "T": lambda m, x: x.flatten(1).T,
    "mT": lambda m, x: x.mT,
    "t": lambda m, x: x.flatten(1).t(),
    "expand": lambda m, x: x.unsqueeze(1).expand(2, 3, 3, 4),
    "expand_lead": lambda m, x: x.expand(2, 2, 3, 4),
    "broadcast_to": lambda m, x: m.broadcast_to(x.sum(1, keepdim=True), (2, 5, 4)),
    "broadcast_tensors": lambda m, x: m.broadcast_tensors(x, x.sum(0)),
    "movedim": lambda m, x: x.movedim(0, -1),
    "repeat": lambda m, x: x.repeat(2, 1, 1, 2),
    "tile": lambda m, x: x.tile(2),
    "cat": lambda m, x: m.cat([x, x * 2, x.sum(1, keepdim=True)], 1),
    "cat_empty": lambda m, x: m.cat([m.zeros(0), x], -1),
    "stack": lambda m, x: m.stack([x, x * 3], 1),
    "hstack": lambda m, x: m.hstack([x, x]),
    "vstack": lambda m, x: m.vstack([x, x]),
    "dstack": lambda m, x: m.dstack([x, x]),
    "column_stack": lambda m, x: m.column_stack([x.flatten(), x.flatten()]),
    "split": lambda m, x: x.split(3, 2),
    "split_sizes": lambda m, x: x.split([1, 2], 1),
    "split_partial": lambda m, x: x.split(1, 0)[1],
    "chunk": lambda m, x: x.chunk(3, 2),
    "unbind": lambda m, x: x.unbind(2),
    "unbind_partial": lambda m, x: x.unbind(1)[2],
    "flip": lambda m, x: x.flip(0, 2),
    "fliplr": lambda m, x: x.fliplr(),
    "flipud": lambda m, x: x.flipud(),
    "roll": lambda m, x: x.roll((1, -1), (0, 2)),
    "roll_flat": lambda m, x: x.roll(5),
    "rot90": lambda m, x: x.rot90(1, (1, 2)),
    "rot90_neg": lambda m, x: x.rot90(-3, (2, 0)),
    "tril": lambda m, x: x.tril(),
    "triu": lambda m, x: x.triu(1),
    "diagonal": lambda m, x: x.diagonal(),
    "diagonal_off": lambda m, x: x.diagonal(1, 1, 2),
    "diagonal_neg": lambda m, x: m.diagonal(x, -1, -1, 1),
    "diag_embed": lambda m, x: m.diag_embed(x, 1, 0, 2),
    "diag_2d": lambda m, x: m.diag(x.flatten(1), 2),
    "diag_1d": lambda m, x: m.diag(x.flatten(), -1),
    "diagonal_copy": lambda m, x: m.diagonal_copy(x, 0, 1, 2),
    "diagonal_scatter": lambda m, x: m.diagonal_scatter(x, x.sum(1).split(3, 1)[0], 0, 1, 2),
    "atleast_3d": lambda m, x: m.atleast_3d(x.flatten()),
    "atleast_2d": lambda m, x: m.atleast_2d(x.sum()),
    "atleast_1d": lambda m, x: m.atleast_1d(x.sum()),
    "meshgrid": lambda m, x: m.meshgrid(x.flatten(1).sum(0), x.sum((1, 2)), indexing="xy"),
    "as_strided": lambda m, x: x.as_strided((3, 3), (2, 1), 1),
    "as_strided_overlap": lambda m, x: x.as_strided((4, 5), (1, 1)),
    "unfold": lambda m, x: x.unfold(2, 2, 1),
    "unfold_gap": lambda m, x: x.unfold(1, 1, 2),
    "narrow": lambda m, x: x.narrow(2, 1, 2),
    "narrow_neg": lambda m, x: m.narrow(x, -2, -2, 2),
    "tensor_split": lambda m, x: x.tensor_split(3, 2),
    "tensor_split_idx": lambda m, x: x.tensor_split([1, 3, 2], -1),
    "slice_scatter": lambda m, x: m.slice_scatter(x, x.narrow(2, 0, 2) * 2, 2, 1, None, 2),
    "repeat_interleave": lambda m, x: x.repeat_interleave(2, 1),
    "repeat_interleave_flat": lambda m, x: m.repeat_interleave(x, 3),
    "narrow_copy": lambda m, x: x.narrow_copy(1, 1, 2),
    "ravel": lambda m, x: x.ravel(),
    "hsplit": lambda m, x: x.hsplit(3),
    "vsplit": lambda m, x: m.vsplit(x, [1]),
    "dsplit": lambda m, x: x.dsplit([1, 3]),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
@pytest.mark.parametrize("layout", ["contiguous", "t"])
def test_gradients(torch, case, layout):
    check_grad(torch, GRAD_CASES[case], (2, 3, 4), layout)


def test_gradients_through_expanded_input(torch):
    for case in ["view", "reshape", "permute", "flip", "cat", "split", "unbind", "diagonal"]:
        check_grad(torch, GRAD_CASES[case], (2, 3, 4), "e")


DOUBLE_CASES = {
    "unfold": lambda x: x.unfold(0, 2, 1),
    "as_strided_overlap": lambda x: x.as_strided((3, 3), (1, 1), 1),
    "as_strided_expanded": lambda x: x.unsqueeze(0).expand(2, 6).as_strided((2, 2), (1, 1)),
    "diagonal": lambda x: x.view(2, 3).diagonal(1),
    "narrow": lambda x: x.narrow(0, 1, 3),
    "split": lambda x: x.split(4)[0],
    "flip_expanded": lambda x: x.unsqueeze(0).expand(2, 6).flip(1),
    "roll": lambda x: x.roll(2),
    "diag_embed": lambda x: x.diag_embed(),
    "repeat": lambda x: x.repeat(2, 1),
}


@pytest.mark.parametrize("case", sorted(DOUBLE_CASES))
def test_double_backward(torch, case):
    fn = DOUBLE_CASES[case]
    tt, dd, _ = leaf_pair(torch, (6,))
    tg, = torch.autograd.grad((fn(tt) ** 3).sum(), tt, create_graph=True)
    dg, = dynograph.autograd.grad((fn(dd) ** 3).sum(), dd, create_graph=True)
    assert_same(dg, tg)
    (tg * tg).sum().backward()
    (dg * dg).sum().backward()
    assert_same(dd.grad, tt.grad)


# ---------------------------------------------------------------- values over dtypes

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "t", "e"])
def test_movement_values(torch, dtype, layout):
    tt, dd = pair(torch, (2, 3, 4), dtype, layout)
    for name in ["flip", "roll", "rot90", "repeat", "tril", "triu", "diagonal", "unfold", "split",
                 "unbind", "stack", "cat", "movedim", "diag_embed", "as_strided", "expand"]:
        fn = GRAD_CASES[name]
        assert_same(fn(dynograph, dd), fn(torch, tt))


def test_cat_promotes_and_checks(torch):
    cases = [("float32", "int64"), ("int32", "bool"), ("float16", "bfloat16"), ("uint8", "int8")]
    for a, b in cases:
        ta, da = pair(torch, (2, 3), a)
        tb, db = pair(torch, (1, 3), b, seed=1)
        assert_same(dynograph.cat([da, db]), torch.cat([ta, tb]))
        assert_same(dynograph.concat((da, db), dim=0), torch.concat((ta, tb), dim=0))
        assert_same(dynograph.concatenate([da, db], -2), torch.concatenate([ta, tb], -2))
    ta, da = pair(torch, (2, 3))
    assert_same(dynograph.cat([dynograph.zeros(0), da], -1), torch.cat([torch.zeros(0), ta], -1))
    assert_same(dynograph.cat([dynograph.zeros(0), dynograph.zeros(0)]), torch.cat([torch.zeros(0)] * 2))
    out = dynograph.zeros(1)
    r = dynograph.cat([da, da], 1, out=out)
    assert r is out
    assert_same(out, torch.cat([ta, ta], 1))


@pytest.mark.parametrize("call,msg,exc", [
    (lambda m: m.cat([m.zeros(2, 3), m.zeros(2, 4)]), r"Sizes of tensors must match except in "
     r"dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list.", RuntimeError),
    (lambda m: m.cat([m.zeros(2, 3), m.zeros(3)]), "Tensors must have same number of dimensions: "
     "got 2 and 1", RuntimeError),
    (lambda m: m.cat([m.zeros(2, 3), m.zeros(1, 0)]), "Expected size 3 but got size 0 for tensor "
     "number 1", RuntimeError),
    (lambda m: m.cat([]), r"torch.cat\(\): expected a non-empty list of Tensors", ValueError),
    (lambda m: m.cat([m.zeros(()), m.zeros(())]), r"zero-dimensional tensor \(at position 0\) "
     "cannot be concatenated", RuntimeError),
    (lambda m: m.cat(m.zeros(2)), r"cat\(\): argument 'tensors' \(position 1\) must be tuple of "
     "Tensors, not Tensor", TypeError),
    (lambda m: m.cat([m.zeros(2), 1]), "expected Tensor as element 1 in argument 0, but got int",
     TypeError),
    (lambda m: m.cat([m.zeros(2, 3)] * 2, 2), r"expected to be in range of \[-2, 1\], but got 2",
     IndexError),
    (lambda m: m.stack([m.zeros(2, 3), m.zeros(3)]), r"stack expects each tensor to be equal size, "
     r"but got \[2, 3\] at entry 0 and \[3\] at entry 1", RuntimeError),
    (lambda m: m.stack([]), "stack expects a non-empty TensorList", RuntimeError),
    (lambda m: m.hstack([]), "hstack expects a non-empty TensorList", RuntimeError),
    (lambda m: m.zeros(2, 3).repeat(2), "Number of dimensions of repeat dims can not be smaller "
     "than number of dimensions of tensor", RuntimeError),
    (lambda m: m.zeros(2, 3).repeat(-1, 1), r"Trying to create tensor with negative dimension -2: "
     r"\[-2, 3\]", RuntimeError),
    (lambda m: m.zeros(2, 3).flip(0, 0), "dim 0 appears multiple times in the list of dims",
     RuntimeError),
    (lambda m: m.zeros(3).fliplr(), "Input must be >= 2-d.", RuntimeError),
    (lambda m: m.zeros(()).flipud(), "Input must be >= 1-d.", RuntimeError),
    (lambda m: m.zeros(2, 3).roll((1, 2), (0,)), "shifts and dimensions must align. shifts: 2, "
     "dims:1", RuntimeError),
    (lambda m: m.zeros(2, 3).rot90(1, (0, 0)), "expected rotation dims to be different, but got "
     "dim0 = 0 and dim1 = 0", RuntimeError),
    (lambda m: m.zeros(3).rot90(), "expected total dims >= 2, but got total dims = 1",
     RuntimeError),
    (lambda m: m.zeros(3).tril(), "tril: input tensor must have at least 2 dimensions",
     RuntimeError),
    (lambda m: m.zeros(3).triu(), "triu: input tensor must have at least 2 dimensions",
     RuntimeError),
    (lambda m: m.diag(m.zeros(2, 3, 4)), r"diag\(\): Supports 1D or 2D tensors. Got 3D",
     RuntimeError),
    (lambda m: m.diagonal(m.zeros(2, 3), 0, 0, 0), "diagonal dimensions cannot be identical 0, 0",
     RuntimeError),
    (lambda m: m.diagonal_scatter(m.zeros(3, 3), m.zeros(4)), r"expected src to have a size "
     r"equal to the slice of self. src size = \[4\], slice size = \[3\]", RuntimeError),
    (lambda m: m.zeros(2, 3).split(0), "split_size can only be 0 if dimension size is 0, but got "
     "dimension size of 2", RuntimeError),
    (lambda m: m.zeros(2, 3).split(-1), "split expects split_size be non-negative, but got "
     "split_size=-1", RuntimeError),
    (lambda m: m.zeros(2, 3).split([1, 2]), r"split_with_sizes expects split_sizes to sum exactly "
     r"to 2 \(input tensor's size at dimension 0\), but got split_sizes=\[1, 2\]", RuntimeError),
    (lambda m: m.zeros(2, 3).split([3, -1]), r"split_with_sizes expects split_sizes have only "
     r"non-negative entries, but got split_sizes=\[3, -1\]", RuntimeError),
    (lambda m: m.zeros(()).split(1), "split expects at least a 1-dimensional tensor", RuntimeError),
    (lambda m: m.zeros(2, 3).chunk(0), "chunk expects `chunks` to be greater than 0, got: 0",
     RuntimeError),
    (lambda m: m.zeros(2, 3).unfold(0, 3, 1), "maximum size for tensor at dimension 0 is 2 but "
     "size is 3", RuntimeError),
    (lambda m: m.zeros(2, 3).unfold(0, 2, 0), "step is 0 but must be > 0", RuntimeError),
    (lambda m: m.zeros(2, 3).as_strided((3, 3), (1, 2)), r"setStorage: sizes \[3, 3\], strides "
     r"\[1, 2\], storage offset 0, and itemsize 4 requiring a storage size of 28 are out of bounds "
     r"for storage of size 24", RuntimeError),
    (lambda m: m.zeros(2, 3).as_strided((2,), (-1,)), r"as_strided: Negative strides are not "
     r"supported at the moment, got strides: \[-1\]", RuntimeError),
    (lambda m: m.meshgrid(m.zeros(3), indexing="foo"), 'torch.meshgrid: indexing must be one of '
     '"xy" or "ij", but received: foo', RuntimeError),
    (lambda m: m.meshgrid(m.zeros(3), m.zeros(2, dtype=m.int32), indexing="ij"),
     "meshgrid expects all tensors to have the same dtype", RuntimeError),
    (lambda m: m.meshgrid(), "meshgrid expects a non-empty TensorList", RuntimeError),
])
def test_errors_match_torch(torch, call, msg, exc):
    with pytest.raises(exc, match=msg):
        call(torch)
    with pytest.raises(exc, match=msg):
        call(dynograph)


# ---------------------------------------------------------------- splits, chunks, grids

@pytest.mark.parametrize("n,chunks", [(5, 3), (6, 4), (0, 2), (4, 4), (3, 5)])
def test_chunk_counts(torch, n, chunks):
    tt, dd = pair(torch, (n, 2))
    assert_same(dd.chunk(chunks), tt.chunk(chunks))
    assert_same(dynograph.chunk(dd, chunks, 0), torch.chunk(tt, chunks, 0))


def test_split_views_share_memory(torch):
    x = dynograph.zeros(4, 3)
    a, b = x.split(2)
    a.add_(1)
    assert x.sum().item() == 6.0
    u = x.unbind(1)
    assert all(np.shares_memory(p._data, x._data) and p._base is x for p in u)
    tx = torch.zeros(4, 3)
    tx.split(2)[0].add_(1)
    assert_same(dynograph.split_with_sizes(x, [1, 3]), tx.split_with_sizes([1, 3]))


def test_meshgrid(torch):
    ta, da = pair(torch, (3,))
    tb, db = pair(torch, (2,), seed=1)
    for idx in ["ij", "xy"]:
        assert_same(dynograph.meshgrid(da, db, indexing=idx), torch.meshgrid(ta, tb, indexing=idx))
        assert_same(dynograph.meshgrid([da, db, da], indexing=idx),
                    torch.meshgrid([ta, tb, ta], indexing=idx))
    with pytest.warns(UserWarning, match="torch.meshgrid: in an upcoming release, it will be "
                      "required to pass the indexing argument."):
        g = dynograph.meshgrid(da, db)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(g, torch.meshgrid(ta, tb))
    assert np.shares_memory(g[0]._data, da._data)


def test_atleast(torch):
    for shape in [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)]:
        tt, dd = pair(torch, shape)
        for fn in ["atleast_1d", "atleast_2d", "atleast_3d"]:
            r = getattr(dynograph, fn)(dd)
            assert_same(r, getattr(torch, fn)(tt))
            assert r.stride() == getattr(torch, fn)(tt).stride()
    ta, da = pair(torch, ())
    tb, db = pair(torch, (2,))
    assert_same(dynograph.atleast_2d(da, db), torch.atleast_2d(ta, tb))
    assert_same(dynograph.atleast_3d([da, db]), torch.atleast_3d([ta, tb]))


def test_stack_family(torch):
    for shapes in [[(), ()], [(3,), (3,)], [(2, 3), (2, 3)], [(2, 3, 4), (2, 3, 4)]]:
        tts = [pair(torch, s, seed=i)[0] for i, s in enumerate(shapes)]
        dds = [from_torch(t) for t in tts]
        for fn in ["hstack", "vstack", "row_stack", "dstack", "column_stack"]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = getattr(torch, fn)(tts)
            assert_same(getattr(dynograph, fn)(dds), want)
        for d in range(-len(shapes[0]) - 1, len(shapes[0]) + 1):
            assert_same(dynograph.stack(dds, d), torch.stack(tts, d))


def test_as_strided_and_unfold(torch):
    tt, dd = pair(torch, (4, 5))
    for size, stride, off in [((2, 2), (1, 2), 0), ((3,), (5,), 2), ((2, 3, 2), (5, 1, 0), 3)]:
        tv, dv = tt.as_strided(size, stride, off), dd.as_strided(size, stride, off)
        assert_same(dv, tv)
        assert dv.stride() == tv.stride() and dv.storage_offset() == tv.storage_offset()
        assert np.shares_memory(dv._data, dd._data)
    sub = dd.t().as_strided((2,), (1,))          # storage_offset defaults to the input's
    assert_same(sub, tt.t().as_strided((2,), (1,)))
    for args in [(0, 2, 1), (1, 3, 2), (-1, 5, 1), (0, 1, 3)]:
        tu, du = tt.unfold(*args), dd.unfold(*args)
        assert_same(du, tu)
        assert du.stride() == tu.stride()
        assert np.shares_memory(du._data, dd._data)
    assert_same(dynograph.tensor(2.0).unfold(0, 1, 1), torch.tensor(2.0).unfold(0, 1, 1))


def test_diagonal_is_writable_view(torch):
    x = dynograph.zeros(3, 4)
    d = x.diagonal(1)
    d.add_(1)
    want = torch.zeros(3, 4)
    want.diagonal(1).add_(1)
    assert_same(x, want)
    assert d.stride() == want.diagonal(1).stride()
    assert d.storage_offset() == want.diagonal(1).storage_offset()


# ---------------------------------------------------------------- slices and repeat_interleave

def test_narrow_and_tensor_split(torch):
    tt, dd = pair(torch, (4, 5), layout="t")
    for args in [(0, 1, 2), (1, -3, 3), (0, 4, 0), (-1, 0, 5)]:
        tn, dn = tt.narrow(*args), dd.narrow(*args)
        assert_same(dn, tn)
        assert dn.stride() == tn.stride()
        assert dn._base is dd._base
        if tn.numel():
            assert dn.storage_offset() == tn.storage_offset()
            assert np.shares_memory(dn._data, dd._data)
    for ios, dim in [(3, 1), (5, 0), (1, 0), ([1, 3], 1), ([3, 1], 1), ([], 0), ([-1], 1),
                     ([7], 0)]:
        assert_same(dd.tensor_split(ios, dim), tt.tensor_split(ios, dim))
    assert_same(dd.tensor_split(dynograph.tensor([1, 2]), 1),
                tt.tensor_split(torch.tensor([1, 2]), 1))
    assert_same(dd.tensor_split(dynograph.tensor(2)), tt.tensor_split(torch.tensor(2)))


@pytest.mark.parametrize("call,msg,exc", [
    (lambda m: m.zeros(2, 3).narrow(0, 1, 2), r"start \(1\) \+ length \(2\) exceeds dimension "
     r"size \(2\).", RuntimeError),
    (lambda m: m.zeros(2, 3).narrow(0, -3, 1), r"start out of range \(expected to be in range of "
     r"\[-2, 2\], but got -3\)", IndexError),
    (lambda m: m.zeros(2, 3).narrow(0, 0, -1), r"narrow\(\): length must be non-negative.",
     RuntimeError),
    (lambda m: m.zeros(()).narrow(0, 0, 1), r"narrow\(\) cannot be applied to a 0-dim tensor.",
     RuntimeError),
    (lambda m: m.zeros(2, 3).tensor_split(0), "number of sections must be larger than 0, got 0",
     RuntimeError),
    (lambda m: m.zeros(2, 3).tensor_split(m.tensor([1.0])), "tensor_split expected "
     "tensor_indices_or_sections to have dtype of long, but got Float", RuntimeError),
    (lambda m: m.zeros(()).tensor_split(2), "tensor_split expected at least a 1-dimensional "
     "tensor, but got a tensor with 0 dims", RuntimeError),
    (lambda m: m.slice_scatter(m.zeros(4), m.zeros(3), 0, 0, 2), r"expected src to have a size "
     r"equal to the slice of self. src size = \[3\], slice size = \[2\]", RuntimeError),
    (lambda m: m.zeros(2, 3).repeat_interleave(-1), "Repeats must be non-negative", RuntimeError),
    (lambda m: m.zeros(2, 3).repeat_interleave(m.tensor([1, 2]), dim=1), r"repeats must have the "
     r"same size as input along dim, but got repeats.size\(0\) = 2 and input.size\(1\) = 3",
     RuntimeError),
    (lambda m: m.repeat_interleave(m.tensor([1, -2])), "repeats can not be negative", RuntimeError),
    (lambda m: m.repeat_interleave(m.tensor([[1, 2]])), "repeat_interleave only accept 1D vector "
     "as repeat", RuntimeError),
])
def test_slice_errors(torch, call, msg, exc):
    with pytest.raises(exc, match=msg):
        call(torch)
    with pytest.raises(exc, match=msg):
        call(dynograph)


def test_slice_scatter_values(torch):
    tt, dd = pair(torch, (4, 6))
    ts, ds = pair(torch, (4, 3), seed=1)
    assert_same(dynograph.slice_scatter(dd, ds, 1, 0, None, 2), torch.slice_scatter(tt, ts, 1, 0, None, 2))
    ts2, ds2 = pair(torch, (2, 6), layout="t", seed=2)
    assert_same(dd.slice_scatter(ds2, start=-2), tt.slice_scatter(ts2, start=-2))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_repeat_interleave_int(torch, dtype):
    tt, dd = pair(torch, (2, 3), dtype, layout="t")
    for args in [(2,), (3, 0), (1, 1), (0, -1)]:
        assert_same(dd.repeat_interleave(*args), tt.repeat_interleave(*args))
    assert_same(dynograph.repeat_interleave(dynograph.tensor(5.0), 2),
                torch.repeat_interleave(torch.tensor(5.0), 2))
    assert_same(dynograph.repeat_interleave(dynograph.tensor([2, 0, 1])),
                torch.repeat_interleave(torch.tensor([2, 0, 1])))


def test_repeat_interleave_tensor(torch):
    if not hasattr(dynograph.Tensor, "index_select"):
        pytest.skip("index_select (indexing ops) is not available yet")
    tt, dd = pair(torch, (2, 3))
    for reps, dim in [([1, 0, 2], 1), ([2], 0), (3, None), ([2, 1], 0)]:
        assert_same(dd.repeat_interleave(dynograph.tensor(reps), dim),
                    tt.repeat_interleave(torch.tensor(reps), dim))
    check_grad(torch, lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), 1), (2, 3, 4))


def test_split_family_errors(torch):
    cases = [
        (lambda m: m.zeros(2, 4).hsplit(3), "torch.hsplit attempted to split along dimension 1, but "
         "the size of the dimension 4 is not divisible by the split_size 3!"),
        (lambda m: m.zeros(4).vsplit(2), "torch.vsplit requires a tensor with at least 2 "
         "dimension, but got a tensor with 1 dimensions!"),
        (lambda m: m.zeros(2, 4).dsplit(2), "torch.dsplit requires a tensor with at least 3 "
         "dimension, but got a tensor with 2 dimensions!"),
        (lambda m: m.zeros(()).hsplit(1), "torch.hsplit requires a tensor with at least 1 "
         "dimension, but got a tensor with 0 dimensions!"),
    ]
    for call, msg in cases:
        for m in (torch, dynograph):
            with pytest.raises(RuntimeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
                call(m)


def test_methods_exist_only_where_torch_has_them(torch):
    import dynograph._shape as S
    for name in S.__all__:
        assert hasattr(torch, name), name
        assert hasattr(dynograph.Tensor, name) == hasattr(torch.Tensor, name), name


def test_views_of_memory_without_an_owner_buffer():
    base = np.arange(20.0)
    a = np.lib.stride_tricks.as_strided(base, (4, 4), (32, 8))     # owner: not an ndarray
    t = dynograph.from_numpy(a)
    d = t.t().diagonal(1)
    assert d.tolist() == np.diagonal(a.T, 1).tolist()
    d.add_(100)
    assert base[[4, 9, 14]].tolist() == [104.0, 109.0, 114.0]
    e = t.t().unsqueeze(0).expand(2, 4, 4)
    assert (e._data == np.broadcast_to(a.T, (2, 4, 4))).all()
    u = t.t().unfold(0, 2, 1)
    assert u._data.tolist() == np.lib.stride_tricks.sliding_window_view(a.T, 2, 0).tolist()

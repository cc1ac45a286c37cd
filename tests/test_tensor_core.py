"""Tensor attributes, conversions to Python and numpy, memory sharing, devices, dtype info."""
import numpy as np
import pytest

import dynograph
from conftest import from_torch


def test_attributes_match_torch(torch):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ours, theirs = dynograph.from_numpy(a), torch.from_numpy(a)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.size() == (2, 3, 4) and ours.size(1) == 3 and ours.size(-1) == 4
    assert ours.ndim == 3 and ours.dim() == 3
    assert ours.numel() == ours.nelement() == 24
    assert ours.element_size() == 4
    assert ours.stride() == theirs.stride() == (12, 4, 1)
    assert ours.is_contiguous()
    assert ours.device == dynograph.device("cpu")
    assert repr(ours.shape) == "dynograph.Size([2, 3, 4])"
    assert isinstance(ours.shape, tuple) and ours.shape[1:] == dynograph.Size([3, 4])


def test_strides_and_offset_of_a_strided_view(torch):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    ours = dynograph.from_numpy(a[1:, ::2])
    theirs = torch.arange(12).reshape(3, 4)[1:, ::2]
    assert ours.stride() == theirs.stride()
    assert ours.storage_offset() == theirs.storage_offset()
    assert ours.stride(-1) == theirs.stride(-1)
    assert not ours.is_contiguous()
    assert ours.data_ptr() == dynograph.from_numpy(a).data_ptr() + 4 * 8


def test_size_dim_out_of_range():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        dynograph.zeros(2, 3).size(2)


def test_python_scalar_conversions():
    t = dynograph.tensor([2.5])
    assert float(t) == 2.5 and int(t) == 2 and bool(t) is True and t.item() == 2.5
    assert [10, 20, 30][dynograph.tensor(1)] == 20
    assert dynograph.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert isinstance(dynograph.tensor(3).item(), int)
    assert isinstance(dynograph.tensor(True).item(), bool)


@pytest.mark.parametrize("fn, exc, msg", [
    (lambda: bool(dynograph.ones(2)), RuntimeError, "Boolean value of Tensor with more than one value is ambiguous"),
    (lambda: bool(dynograph.ones(0)), RuntimeError, "Boolean value of Tensor with no values is ambiguous"),
    (lambda: float(dynograph.ones(2)), ValueError, "only one element tensors can be converted to Python scalars"),
    (lambda: int(dynograph.ones(3)), ValueError, "only one element tensors can be converted to Python scalars"),
    (lambda: [1, 2][dynograph.tensor(1.)], TypeError, "only integer tensors of a single element can be converted to an index"),
    (lambda: len(dynograph.tensor(1.)), TypeError, "len\\(\\) of a 0-d tensor"),
    (lambda: iter(dynograph.tensor(1.)), TypeError, "iteration over a 0-d tensor"),
    (lambda: dynograph.ones(2).item(), RuntimeError, "a Tensor with 2 elements cannot be converted to Scalar"),
    (lambda: dynograph.ones(2, requires_grad=True).numpy(), RuntimeError, "Can't call numpy\\(\\) on Tensor that requires grad"),
])
def test_conversion_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()


def test_numpy_round_trip_shares_memory():
    a = np.zeros(3, dtype=np.float32)
    t = dynograph.from_numpy(a)
    a[0] = 5
    assert t[0].item() == 5 if hasattr(dynograph.Tensor, "__getitem__") else t.tolist()[0] == 5
    t.add_(1)
    assert a.tolist() == [6, 1, 1]
    n = t.numpy()
    n[2] = 9
    assert t.tolist() == [6, 1, 9]
    assert np.asarray(t) is n or np.shares_memory(np.asarray(t), a)


def test_len_and_iteration():
    t = dynograph.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]


def test_cuda_is_unavailable_with_one_clear_error():
    if dynograph.cuda.is_available():
        pytest.skip("a usable GPU here: tests/test_cuda_runtime.py checks its errors")
    assert dynograph.cuda.is_available() is False
    assert dynograph.cuda.device_count() == 0
    for fn in (lambda: dynograph.ones(2).cuda(), lambda: dynograph.ones(2, device="cuda"),
               lambda: dynograph.zeros(2, device=dynograph.device("cuda", 0))):
        with pytest.raises(RuntimeError, match="no CUDA device is available"):
            fn()


def test_devices():
    d = dynograph.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1)
    assert repr(dynograph.device("cpu")) == "device(type='cpu')"
    assert str(d) == "cuda:1" and repr(d) == "device(type='cuda', index=1)"
    assert dynograph.device("cpu") != "cpu"       # as in torch: a device equals only devices
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        dynograph.device("tpu")


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(torch, name):
    assert repr(dynograph.finfo(getattr(dynograph, name))) == repr(torch.finfo(getattr(torch, name)))


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(torch, name):
    assert repr(dynograph.iinfo(getattr(dynograph, name))) == repr(torch.iinfo(getattr(torch, name)))


def test_dtype_objects_and_aliases():
    assert dynograph.float is dynograph.float32 and dynograph.double is dynograph.float64
    assert dynograph.long is dynograph.int64 and dynograph.half is dynograph.float16
    assert dynograph.int is dynograph.int32 and dynograph.short is dynograph.int16
    assert repr(dynograph.float32) == "dynograph.float32"
    assert dynograph.float32.is_floating_point and not dynograph.int8.is_floating_point
    assert dynograph.int8.is_signed and not dynograph.uint8.is_signed


def test_from_torch_helper_round_trips(torch):
    t = torch.randn(3, 2)
    np.testing.assert_array_equal(from_torch(t)._data, t.numpy())


@pytest.mark.parametrize("write", [
    "x.add_(1)", "x.copy_(T.ones(3, 4))", "x.fill_(2)", "x.zero_()", "x.mul_(2)", "x.__setitem__(0, 5)",
    "x.uniform_()", "y.__setitem__(0, 5)", "y.fill_(1)"])
def test_writes_into_expanded_tensors_follow_torch(torch, write):
    """In-place writes into self-overlapping memory raise, except fill_/zero_ (as in torch)."""
    from conftest import assert_same_error, eval_expr

    def env(T):
        return {"T": T, "x": T.zeros(3, 1).expand(3, 4), "y": T.zeros(1, 4).expand(3, 4)}

    our_env, their_env = env(dynograph), env(torch)
    ours, theirs = eval_expr(write, our_env), eval_expr(write, their_env)
    if isinstance(theirs, Exception):
        assert_same_error(ours, theirs, write)
    else:
        assert not isinstance(ours, Exception), ours
        name = write[0]
        np.testing.assert_array_equal(our_env[name]._data, their_env[name].numpy())

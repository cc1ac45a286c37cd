"""dtypes: attributes, promotion, the default dtype, finfo/iinfo, compared with PyTorch."""
import copy
import pickle
import re

import numpy as np
import pytest

import dynograph
from conftest import assert_same

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64",
         "float16", "bfloat16", "float32", "float64"]


@pytest.fixture
def default_dtype_restored():
    yield
    dynograph.set_default_dtype(dynograph.float32)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes(torch, name):
    ours, theirs = getattr(dynograph, name), getattr(torch, name)
    assert ours.is_floating_point == theirs.is_floating_point
    assert ours.is_signed == theirs.is_signed
    assert ours.itemsize == theirs.itemsize
    assert ours.is_complex == theirs.is_complex
    assert ours.abbr == theirs.abbr
    assert ours.to_real() is ours
    assert repr(ours) == f"dynograph.{name}" and str(ours) == repr(ours)


def test_aliases_are_the_same_objects():
    d = dynograph
    assert d.float is d.float32 and d.double is d.float64 and d.half is d.float16
    assert d.long is d.int64 and d.int is d.int32 and d.short is d.int16


@pytest.mark.parametrize("name", NAMES)
def test_pytorch_names_of_each_dtype(torch, name):
    """The names PyTorch's messages give a dtype (runtime/dtypes.py holds them), read from
    torch's own messages: tensor type, ScalarType name, TypeMeta name, C++ type."""
    ours, theirs = getattr(dynograph, name), getattr(torch, name)
    assert f"torch.{ours.tensor_type}" == torch.empty(0, dtype=theirs).type()
    if name != "int64":             # max_unpool names the ScalarType of indices not int64
        with pytest.raises(RuntimeError) as e:
            torch.nn.functional.max_unpool1d(torch.zeros(1, 1, 2),
                                             torch.zeros(1, 1, 2, dtype=theirs), 2)
        assert str(e.value).endswith(f"got: {ours.scalar_type_name}")
    other = torch.float32 if name == "float64" else torch.float64
    with pytest.raises(RuntimeError) as e:
        torch.mm(torch.zeros(2, 2, dtype=theirs), torch.zeros(2, 2, dtype=other))
    assert f"but got: {ours.type_meta_name} != " in str(e.value)
    if name not in ("bool", "float16", "bfloat16", "float64"):     # these take 1e300
        with pytest.raises(RuntimeError, match=f"converted to type {re.escape(ours.cpp_type)} "):
            torch.zeros(1, dtype=theirs).fill_(1e300)


@pytest.mark.parametrize("name", NAMES)
def test_dtypes_are_singletons_through_pickle_and_copy(name):
    dt = getattr(dynograph, name)
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert copy.copy(dt) is dt and copy.deepcopy(dt) is dt
    assert {dt: 1}[getattr(dynograph, name)] == 1


def test_promote_types_matches_torch_for_every_pair(torch):
    for a in NAMES:
        for b in NAMES:
            ours = dynograph.promote_types(getattr(dynograph, a), getattr(dynograph, b))
            theirs = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert ours.name == str(theirs).split(".")[-1], (a, b)
            # symmetric, and promoting with itself is the identity
            assert dynograph.promote_types(getattr(dynograph, b), getattr(dynograph, a)) is ours
        assert dynograph.promote_types(getattr(dynograph, a), getattr(dynograph, a)) \
            is getattr(dynograph, a)


@pytest.mark.parametrize("other", [True, 3, 2.5, "bool", "uint8", "int8", "int64", "float16",
                                   "bfloat16", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_result_type_dims_zero_dim_and_scalars(torch, name, other):
    """torch.result_type: dimensioned tensors > 0-d tensors > Python scalars, by category."""
    def make(m, dt, shape):
        return m.zeros(shape, dtype=getattr(m, dt))
    operands = [other] if not isinstance(other, str) else [("dim", other), ("zero", other)]
    for op in operands:
        for mine in ((2,), ()):
            if isinstance(op, tuple):
                shape = (3,) if op[0] == "dim" else ()
                t_other, d_other = make(torch, op[1], shape), make(dynograph, op[1], shape)
            else:
                t_other = d_other = op
            theirs = torch.result_type(make(torch, name, mine), t_other)
            ours = dynograph.result_type(make(dynograph, name, mine), d_other)
            assert ours.name == str(theirs).split(".")[-1], (name, mine, op)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(torch, name):
    ours, theirs = dynograph.finfo(getattr(dynograph, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.dtype == theirs.dtype
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(torch, name):
    ours, theirs = dynograph.iinfo(getattr(dynograph, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max, ours.dtype) == \
        (theirs.bits, theirs.min, theirs.max, theirs.dtype)
    assert repr(ours) == repr(theirs)


def test_finfo_defaults_to_the_default_dtype(torch, default_dtype_restored):
    assert dynograph.finfo().dtype == torch.finfo().dtype == "float32"
    dynograph.set_default_dtype(dynograph.float64)
    assert dynograph.finfo().dtype == "float64"


@pytest.mark.parametrize("fn", [
    lambda m: m.finfo(m.int32), lambda m: m.iinfo(m.float32), lambda m: m.iinfo(m.bool),
    lambda m: m.set_default_dtype(m.int64),
])
def test_dtype_info_errors(torch, fn):
    with pytest.raises(TypeError) as theirs:
        fn(torch)
    with pytest.raises(TypeError) as ours:
        fn(dynograph)
    assert str(ours.value) == str(theirs.value).replace("torch.bool", "dynograph.bool")


@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_default_dtype_drives_float_results(torch, default, default_dtype_restored):
    prev = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, default))
    try:
        dynograph.set_default_dtype(getattr(dynograph, default))
        assert dynograph.get_default_dtype() is getattr(dynograph, default)
        cases = [lambda m: m.tensor([1.5]), lambda m: m.tensor([1, 2]) / 2,
                 lambda m: m.tensor([1, 2]) + 2.5, lambda m: m.tensor([1, 2]).sqrt(),
                 lambda m: m.tensor([True]) * 1.5, lambda m: m.ones(2),
                 lambda m: m.tensor([1.0], dtype=m.float32) + 2.5,
                 lambda m: m.isclose(m.tensor([True]), m.tensor([False])),
                 lambda m: m.where(m.tensor([True]), 1, 2.5)]
        for fn in cases:
            assert_same(fn(dynograph), fn(torch), rtol=1e-2, atol=1e-2)
    finally:
        torch.set_default_dtype(prev)


def test_numpy_storage_types():
    assert dynograph.float32.np == np.float32 and dynograph.bool.np == np.bool_
    assert dynograph.bfloat16.np.name == "bfloat16"
    from dynograph.runtime.dtypes import from_numpy_dtype
    assert from_numpy_dtype(np.dtype(np.int16)) is dynograph.int16
    assert from_numpy_dtype(np.complex128) is dynograph.complex128
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.uint64"):
        from_numpy_dtype(np.uint64)

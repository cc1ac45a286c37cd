"""Tensor printing against PyTorch, character for character.

Every case builds the same tensor in torch and in dynograph (through numpy) and checks
``repr(ours) == repr(theirs)`` with torch's module name replaced by ours.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import dynograph
from dynograph._printing import tensor_repr


@pytest.fixture(autouse=True)
def _restore_print_options():
    """Every test starts and ends with the default options in both libraries."""
    yield
    dynograph.set_printoptions(profile="default")
    dynograph.set_default_dtype(dynograph.float32)
    try:
        import torch
    except ImportError:
        return
    torch.set_printoptions(profile="default")
    torch.set_default_dtype(torch.float32)


def ours_from(theirs, requires_grad=False):
    """The dynograph tensor with the same dtype, shape and values as torch tensor ``theirs``."""
    import torch
    t = theirs.detach()
    if t.dtype == torch.bfloat16:
        arr = t.float().numpy().astype(ml_dtypes.bfloat16)
    else:
        arr = t.numpy().copy()
    out = dynograph.tensor(arr)
    assert out.dtype.name == str(t.dtype).split(".")[-1]
    if requires_grad:
        out.requires_grad_(True)
    return out


def expected(theirs):
    return repr(theirs).replace("torch.", "dynograph.")


def check(theirs, ours=None):
    ours = ours_from(theirs) if ours is None else ours
    got = repr(ours)
    assert got == expected(theirs), f"\nours:\n{got}\ntorch:\n{expected(theirs)}"
    assert str(ours) == got


# ------------------------------------------------------------------ the table

NAN, INF = math.nan, math.inf

# name -> (numpy values builder, dtypes to print them in)
FLOAT_VALUES = {
    "ints": [1.0, 2.0],
    "halves": [1.5, -2.25],
    "tenths": [0.1, 0.2, 0.3],
    "neg_zero_alone": [-0.0, 0.0],
    "neg_zero_mixed": [-0.0, 1.5],
    "zero_nan": [0.0, NAN],
    "nonfinite_only": [NAN, INF, -INF],
    "int_nonfinite": [1.0, NAN, INF, -3.0],
    "frac_nonfinite": [1.5, NAN, -INF, 2.25],
    "small": [1e-5, 1.0],
    "tiny_alone": [1.5e-5],
    "ratio_1000": [1.0, 1000.0],
    "ratio_1001": [1.0, 1001.0],
    "ratio_frac": [0.5, 600.25],
    "big": [1e9, 1.0],
    "big_alone": [123456789.0],
    "seven_digits": [1234567.0, -2.0],
    "just_below_1e8": [99999999.0],
    "mixed_sign_sci": [-1e-5, 3e2, 7.0],
    "rounding_up": [9.99996, 0.5],
    "negative_ints": [-1.0, -20.0, 300.0],
    "precise": [1.23456789, -0.000123456],
    "threshold_min": [1e-4, 0.5],
    "many": list(np.linspace(-3, 7, 29)),
}

FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _float_cases():
    for name, values in FLOAT_VALUES.items():
        for dt in FLOAT_DTYPES:
            yield pytest.param(name, dt, id=f"{name}-{dt}")


@pytest.mark.parametrize("name,dt", list(_float_cases()))
def test_float_vectors(torch, name, dt):
    with np.errstate(over="ignore"):
        theirs = torch.tensor(FLOAT_VALUES[name], dtype=torch.float64).to(getattr(torch, dt))
    check(theirs)


SCALARS = [3.0, 3.5, -0.0, 0.0, NAN, INF, -INF, 1e-7, 1e10, -123.456, 1e100]


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("value", SCALARS, ids=str)
def test_float_scalars(torch, value, dt):
    check(torch.tensor(value, dtype=torch.float64).to(getattr(torch, dt)))


def test_float64_extreme_exponents(torch):
    check(torch.tensor([1e100, 1e-100, -1e300], dtype=torch.float64))
    check(torch.tensor([1e-300, 2.5], dtype=torch.float64))
    check(torch.tensor([1e-310, 1e308], dtype=torch.float64))      # ratio overflows to inf
    check(torch.tensor([1e-40, 1.0], dtype=torch.float32))          # float32 subnormal


INT_VALUES = {
    "small": [1, 2, 3],
    "negative": [-5, 12, -300],
    "zeros": [0, 0],
    "wide": [2 ** 40, -7],
}


@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "int8", "uint8"])
@pytest.mark.parametrize("name", list(INT_VALUES))
def test_integer_vectors(torch, name, dt):
    values = INT_VALUES[name]
    info = np.iinfo(dt)
    values = [min(max(v, info.min), info.max) for v in values]
    check(torch.tensor(values, dtype=getattr(torch, dt)))


@pytest.mark.parametrize("dt", ["int64", "int32", "uint8", "bool"])
def test_integer_scalars(torch, dt):
    check(torch.tensor(1, dtype=getattr(torch, dt)))
    check(torch.tensor(0, dtype=getattr(torch, dt)))


def test_int64_extremes(torch):
    check(torch.tensor([2 ** 63 - 1, -2 ** 63]))


@pytest.mark.parametrize("values", [[True, False], [True, True], [False], [[True], [False]]], ids=str)
def test_bool(torch, values):
    check(torch.tensor(values))


# shapes built from a fixed random stream, in several dtypes
SHAPES = [(5,), (1,), (1, 1), (3, 4), (2, 3, 4), (4, 1, 3), (2, 1, 2, 2), (1, 1, 1, 1),
          (2, 2, 2, 2, 2), (3, 30), (40,), (2, 17)]


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                "bool"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shapes(torch, shape, dt):
    rng = np.random.RandomState(sum(shape) * 7 + len(shape))
    if dt == "bool":
        arr = rng.rand(*shape) > 0.5
    elif dt.startswith("int"):
        arr = rng.randint(-1000, 1000, size=shape).astype(dt)
    else:
        arr = rng.randn(*shape) * 10
    theirs = torch.from_numpy(np.asarray(arr)).to(getattr(torch, dt))
    check(theirs)


@pytest.mark.parametrize("shape,dt", [
    ((0,), "float32"), ((0, 3), "float32"), ((2, 0, 4), "float32"), ((0,), "int64"),
    ((3, 0), "int32"), ((0,), "bool"), ((0,), "float64"), ((0, 1), "float16"),
    ((0,), "bfloat16"), ((0, 0), "uint8")], ids=str)
def test_empty(torch, shape, dt):
    check(torch.zeros(shape, dtype=getattr(torch, dt)))


def test_empty_requires_grad(torch):
    theirs = torch.zeros(0, 2, requires_grad=True)
    check(theirs, ours_from(theirs, requires_grad=True))


# large tensors: summarized with "..."
LARGE = [
    ("arange_1d", lambda: np.arange(2000.0)),
    ("arange_1001", lambda: np.arange(1001.0)),
    ("exactly_1000", lambda: np.arange(1000.0)),
    ("randn_2d", lambda: np.random.RandomState(0).randn(50, 30)),
    ("randn_3d", lambda: np.random.RandomState(1).randn(12, 10, 10)),
    ("narrow_rows", lambda: np.random.RandomState(2).randn(600, 2)),
    ("wide_cols", lambda: np.random.RandomState(3).randn(2, 600)),
    ("sci_2d", lambda: np.random.RandomState(4).randn(40, 40) * 1e6),
    ("int_2d", lambda: np.arange(2000).reshape(40, 50)),
    ("int_3d", lambda: np.arange(-3000, 3000).reshape(10, 20, 30)),
    ("bool_2d", lambda: np.random.RandomState(5).rand(40, 40) > 0.5),
    ("4d", lambda: np.random.RandomState(6).randn(4, 5, 7, 8)),
    ("nonfinite_edges", lambda: np.concatenate([[np.nan, np.inf], np.ones(1000), [-np.inf]])),
]


def _large_cases():
    """Each large array in every dtype that can hold it (floats print integers too)."""
    for name, build in LARGE:
        kind = build().dtype.kind
        dtypes = {"f": ["float32", "float64", "float16"], "i": ["int64", "float32", "float64"],
                  "b": ["bool"]}[kind]
        for dt in dtypes:
            yield pytest.param(build, dt, id=f"{name}-{dt}")


@pytest.mark.parametrize("build,dt", list(_large_cases()))
def test_summarized(torch, build, dt):
    arr = np.ascontiguousarray(build())
    check(torch.from_numpy(arr).to(getattr(torch, dt)))


def test_summarized_bfloat16(torch):
    check(torch.from_numpy(np.random.RandomState(7).randn(30, 40)).to(torch.bfloat16))


def test_non_contiguous(torch):
    base = np.random.RandomState(8).randn(4, 6, 5).astype(np.float32)
    ours = dynograph.tensor(base)
    ours._data = ours._data.transpose(2, 0, 1)[:, ::2]            # a strided view of the buffer
    theirs = torch.from_numpy(base).permute(2, 0, 1)[:, ::2]
    check(theirs, ours)


# ------------------------------------------------------------------ autograd suffixes

@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (7,), (2, 2, 2), (40, 40)], ids=str)
def test_requires_grad_and_grad_fn(torch, shape, dt):
    arr = np.random.RandomState(9).randn(*shape) * 3
    theirs = torch.tensor(arr).to(getattr(torch, dt)).requires_grad_(True)
    ours = ours_from(theirs, requires_grad=True)
    check(theirs, ours)
    check(theirs * 2, ours * 2)


def test_suffix_wraps_to_new_line(torch):
    # the last line is long enough that the suffixes move to their own lines
    arr = np.linspace(-100, 100, 9)
    for dt in (torch.float64, torch.float16):
        theirs = torch.tensor(arr, dtype=dt, requires_grad=True)
        ours = ours_from(theirs, requires_grad=True)
        check(theirs, ours)
        check(theirs * 2, ours * 2)
        assert "\n" in repr(ours * 2)


def test_grad_fn_names(torch):
    theirs = torch.tensor([1.0, 2.0], requires_grad=True)
    ours = ours_from(theirs, requires_grad=True)
    check(theirs + 1, ours + 1)
    check(theirs - theirs, ours - ours)
    check(theirs / 3, ours / 3)


def test_printing_records_no_graph():
    x = dynograph.tensor([1.0, 2.0]).requires_grad_(True)
    y = x * 2
    repr(y)
    assert y.grad_fn.name() == "MulBackward0"
    assert x.grad is None


# ------------------------------------------------------------------ default dtype

@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_default_dtype_changes_suffix(torch, default):
    torch.set_default_dtype(getattr(torch, default))
    dynograph.set_default_dtype(getattr(dynograph, default))
    for dt in (torch.float32, torch.float64, torch.float16, torch.int64, torch.bool):
        check(torch.tensor([1, 0], dtype=dt))
        check(torch.zeros(0, dtype=dt))


# ------------------------------------------------------------------ print options

TENSORS_FOR_OPTIONS = [
    lambda torch: torch.tensor([1.123456789, -22.5, 3e-3], dtype=torch.float64),
    lambda torch: torch.tensor(np.random.RandomState(10).randn(6, 7)),
    lambda torch: torch.tensor(np.arange(30.0)),
    lambda torch: torch.tensor(np.arange(24).reshape(2, 3, 4)),
    lambda torch: torch.tensor([1e-6, 2.0, 5e5]),
    lambda torch: torch.tensor([2.0, 4.0, 8.0]),
    lambda torch: torch.tensor([True, False, True, True]),
    lambda torch: torch.tensor(2.5),
    lambda torch: torch.tensor(np.random.RandomState(11).randn(25, 50)),
    lambda torch: torch.tensor(np.random.RandomState(12).randn(9, 9, 14)),
]

OPTIONS = [
    {"precision": 2}, {"precision": 0}, {"precision": 8},
    {"threshold": 5}, {"threshold": 10, "edgeitems": 1}, {"threshold": 0},
    {"threshold": 20, "edgeitems": 0}, {"edgeitems": 0}, {"edgeitems": 5},
    {"threshold": 20, "edgeitems": 5},
    {"linewidth": 40}, {"linewidth": 120}, {"linewidth": 10},
    {"sci_mode": True}, {"sci_mode": False}, {"sci_mode": True, "precision": 1},
    {"profile": "short"}, {"profile": "full"}, {"profile": "default"},
    {"profile": "short", "precision": 6}, {"profile": "full", "linewidth": 60},
]


@pytest.mark.parametrize("opts", OPTIONS, ids=str)
def test_set_printoptions(torch, opts):
    torch.set_printoptions(**opts)
    dynograph.set_printoptions(**opts)
    for build in TENSORS_FOR_OPTIONS:
        check(build(torch))
    theirs = torch.tensor(np.random.RandomState(13).randn(4, 5), requires_grad=True)
    check(theirs, ours_from(theirs, requires_grad=True))


def test_get_printoptions_round_trip():
    assert dynograph.get_printoptions() == {
        "precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
    dynograph.set_printoptions(profile="full")
    assert dynograph.get_printoptions()["threshold"] == math.inf
    dynograph.set_printoptions(precision=2, sci_mode=True)
    saved = dynograph.get_printoptions()
    assert saved["precision"] == 2 and saved["sci_mode"] is True
    dynograph.set_printoptions(profile="default")
    assert dynograph.get_printoptions()["precision"] == 4
    dynograph.set_printoptions(**saved)
    assert dynograph.get_printoptions() == saved


def test_sci_mode_resets_like_torch(torch):
    # every set_printoptions call resets sci_mode unless it is passed again
    for lib in (torch, dynograph):
        lib.set_printoptions(sci_mode=True)
        lib.set_printoptions(precision=3)
    check(torch.tensor([1.5, 2.0]))


def test_printoptions_context_manager():
    from dynograph._printing import printoptions
    with printoptions(precision=1):
        assert repr(dynograph.tensor([1.25])) == "tensor([1.2])"
    assert repr(dynograph.tensor([1.25])) == "tensor([1.2500])"


def test_exports():
    import dynograph._printing as P
    assert P.__all__ == ["set_printoptions", "get_printoptions"]
    assert dynograph.set_printoptions is P.set_printoptions
    assert dynograph.get_printoptions is P.get_printoptions


def test_tensor_contents():
    t = dynograph.tensor([1, 2], dtype=dynograph.int32)
    assert tensor_repr(t, tensor_contents="[...]") == "tensor([...], dtype=dynograph.int32)"


def test_subclass_prefix():
    class MyTensor(dynograph.Tensor):
        pass
    t = object.__new__(MyTensor)
    t._data = np.array([1.0, 2.0], dtype=np.float32)
    assert repr(t) == "MyTensor([1., 2.])"


# ------------------------------------------------------------------ random fuzz

def _fuzz_array(rng):
    shape = tuple(rng.randint(1, 6, size=rng.randint(0, 4)))
    kind = rng.randint(5)
    scale = 10.0 ** rng.randint(-8, 10)
    if kind == 0:
        arr = rng.randn(*shape) * scale
    elif kind == 1:
        arr = np.round(rng.randn(*shape) * scale)
    elif kind == 2:
        arr = rng.randint(-50, 50, size=shape) * 1.0
    elif kind == 3:
        arr = np.abs(rng.randn(*shape)) * scale + scale / 100
    else:
        arr = np.asarray(rng.randn(*shape) * scale)
        flat = arr.reshape(-1)
        for special in (np.nan, np.inf, -np.inf, -0.0, 0.0):
            if rng.rand() < 0.4:
                flat[rng.randint(flat.size)] = special
    return np.asarray(arr, dtype=np.float64)


@pytest.mark.parametrize("seed", range(60))
def test_fuzz(torch, seed):
    rng = np.random.RandomState(100 + seed)
    arr = _fuzz_array(rng)
    for dt in FLOAT_DTYPES:
        with np.errstate(over="ignore", invalid="ignore"):
            check(torch.tensor(arr).to(getattr(torch, dt)))
    if np.all(np.isfinite(arr)) and np.all(np.abs(arr) < 2 ** 62):
        check(torch.tensor(arr).to(torch.int64))


# ------------------------------------------------------------------ Size and dtype

@pytest.mark.parametrize("shape", [(2, 3), (), (5,), (0, 1, 2)], ids=str)
def test_size_print(torch, shape, capsys):
    print(dynograph.tensor(np.zeros(shape, np.float32)).shape)
    assert capsys.readouterr().out.strip() == str(torch.zeros(shape).shape).replace("torch.", "dynograph.")
    assert repr(dynograph.Size(shape)) == repr(torch.Size(shape)).replace("torch.", "dynograph.")


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                  "int16", "int8", "uint8", "bool"])
def test_dtype_print(torch, name, capsys):
    print(getattr(dynograph, name))
    assert capsys.readouterr().out.strip() == str(getattr(torch, name)).replace("torch.", "dynograph.")
    assert repr(getattr(dynograph, name)) == f"dynograph.{name}"


def test_print_tensor(capsys):
    print(dynograph.tensor([[1, 2], [3, 4]]))
    assert capsys.readouterr().out == "tensor([[1, 2],\n        [3, 4]])\n"

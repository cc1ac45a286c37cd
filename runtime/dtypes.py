"""The dtypes dynograph knows, their numpy storage types, PyTorch's type promotion, and the
names PyTorch's messages give them ("Float", "FloatTensor", "int64_t", "long int").

A ``dtype`` is an immutable singleton (``dynograph.float32`` ...).  Every other
layer asks this module, and only this module, how dtypes combine.
"""
import builtins
import sys

import numpy as np

__all__ = [
    "dtype", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "complex64", "complex128", "promote_types", "from_numpy_dtype",
    "get_default_dtype", "set_default_dtype", "finfo", "iinfo", "ALL_DTYPES",
]

MODULE_NAME = "dynograph"   # how dtypes print: dynograph.float32


class dtype:
    """A tensor element type; compares by identity like torch.dtype."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize",
                 "category", "_rank", "tensor_type", "abbr")

    def __init__(self, name, np_dtype, category, rank, tensor_type, abbr, itemsize=None):
        self.name = name
        if np_dtype is not None:            # None: bfloat16, whose numpy type loads on first use
            self.np = np.dtype(np_dtype)
        self.category = category            # 0 bool, 1 integer, 2 floating, 3 complex
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        self.is_signed = name not in ("bool", "uint8")
        self.itemsize = self.np.itemsize if itemsize is None else itemsize
        self._rank = rank                   # order inside the category
        self.tensor_type = tensor_type      # legacy name: "FloatTensor"
        self.abbr = abbr                    # short name: "f32"

    def __getattr__(self, attr):
        # reached only for an unset slot: bfloat16's numpy type before its first use
        if attr == "np" and self.name == "bfloat16":
            return _load_bfloat16()
        raise AttributeError(f"'dtype' object has no attribute '{attr}'")

    def to_real(self):
        """The dtype of the real and imaginary parts (complex64 -> float32); real dtypes: self."""
        return _TO_REAL.get(self, self)

    def to_complex(self):
        """The complex dtype with parts of this dtype (float64 -> complex128)."""
        return _TO_COMPLEX[self]

    def __repr__(self):
        return f"{MODULE_NAME}.{self.name}"

    def __reduce__(self):
        # pickled by name: unpickling yields the same singleton (this module's global)
        return self.name

    # PyTorch's other names for a dtype, as its messages print them

    @property
    def scalar_type_name(self):
        """c10's ScalarType name, in kernel errors: 'Float', 'Long', 'BFloat16'."""
        return self.tensor_type[:-len("Tensor")]

    @property
    def cpp_type(self):
        """The C++ type c10 stores it as, in value conversion errors: 'int64_t', 'c10::Half'."""
        return _CPP_NAMES[self.name][0]

    @property
    def type_meta_name(self):
        """That C++ type as c10's TypeMeta names it, in dtype checks: 'long int', 'float'."""
        return _CPP_NAMES[self.name][1]


# dtype name -> (C++ type, the same type as c10's TypeMeta names it)
_CPP_NAMES = {
    "bool": ("bool", "bool"), "uint8": ("uint8_t", "unsigned char"),
    "int8": ("int8_t", "signed char"), "int16": ("int16_t", "short int"), "int32": ("int", "int"),
    "int64": ("int64_t", "long int"), "float16": ("c10::Half", "c10::Half"),
    "bfloat16": ("c10::BFloat16", "c10::BFloat16"), "float32": ("float", "float"),
    "float64": ("double", "double"),
    "complex64": ("c10::complex<float>", "c10::complex<float>"),
    "complex128": ("c10::complex<double>", "c10::complex<double>"),
}


bool = dtype("bool", np.bool_, 0, 0, "BoolTensor", "b8")  # noqa: A001 - torch's name
uint8 = dtype("uint8", np.uint8, 1, 0, "ByteTensor", "u8")
int8 = dtype("int8", np.int8, 1, 0, "CharTensor", "i8")
int16 = dtype("int16", np.int16, 1, 1, "ShortTensor", "i16")
int32 = dtype("int32", np.int32, 1, 2, "IntTensor", "i32")
int64 = dtype("int64", np.int64, 1, 3, "LongTensor", "i64")
float16 = dtype("float16", np.float16, 2, 0, "HalfTensor", "f16")
bfloat16 = dtype("bfloat16", None, 2, 0, "BFloat16Tensor", "bf16", itemsize=2)
float32 = dtype("float32", np.float32, 2, 1, "FloatTensor", "f32")
float64 = dtype("float64", np.float64, 2, 2, "DoubleTensor", "f64")

# complex numbers (docs/complex.md says what works on them): a pair of floats
complex64 = dtype("complex64", np.complex64, 3, 1, "ComplexFloatTensor", "c64")
complex128 = dtype("complex128", np.complex128, 3, 2, "ComplexDoubleTensor", "c128")

# the real dtypes: what most ops, the compiler and the file formats support
ALL_DTYPES = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
COMPLEX_DTYPES = (complex64, complex128)
EVERY_DTYPE = ALL_DTYPES + COMPLEX_DTYPES
BY_NAME = {d.name: d for d in ALL_DTYPES}     # "float32" -> float32 (text forms, file headers)
ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64,
           "int": int32, "short": int16, "cfloat": complex64, "cdouble": complex128}
_TO_REAL = {complex64: float32, complex128: float64}
_TO_COMPLEX = {float16: complex64, bfloat16: complex64, float32: complex64, float64: complex128,
               complex64: complex64, complex128: complex128}


def _load_bfloat16():
    """bfloat16's numpy type, set on the dtype and known to FROM_NUMPY from now on."""
    # ml_dtypes (bfloat16 as a numpy type; well kept, used by JAX) takes a second to
    # import: it loads when bfloat16 data is first made, not with dynograph
    import ml_dtypes
    bfloat16.np = np.dtype(ml_dtypes.bfloat16)
    FROM_NUMPY[bfloat16.np] = bfloat16
    return bfloat16.np


class _ByNumpyType(dict):
    """numpy type -> dtype.  bfloat16's entry appears when its numpy type is loaded; an array
    of it can exist before that only if the user imported ml_dtypes, so a miss then loads it."""

    def __missing__(self, np_dtype):
        if "ml_dtypes" in sys.modules:
            bfloat16.np                     # noqa: B018 - enters bfloat16 on its first use
            if np_dtype in self:
                return dict.__getitem__(self, np_dtype)
        raise KeyError(np_dtype)


FROM_NUMPY = _ByNumpyType({d.np: d for d in EVERY_DTYPE if d is not bfloat16})


def is_bfloat16(np_dtype):
    """Whether the numpy type ``np_dtype`` is bfloat16's, without loading ml_dtypes to answer
    for other types (ml_dtypes' types have numpy kind 'V')."""
    return np_dtype.kind == "V" and np_dtype == bfloat16.np


def is_floating(np_dtype):
    """Whether the numpy type ``np_dtype`` is a real floating type (bfloat16's kind is 'V')."""
    return np_dtype.kind == "f" or is_bfloat16(np_dtype)


_FLOAT16 = np.dtype(np.float16)


def is_half(np_dtype):
    """Whether the numpy type ``np_dtype`` is float16's or bfloat16's (both compute in float32)."""
    return np_dtype == _FLOAT16 or is_bfloat16(np_dtype)


def from_numpy_dtype(np_dtype):
    """The dtype stored as ``np_dtype``; TypeError names an unsupported numpy type."""
    try:
        return FROM_NUMPY[np_dtype]
    except KeyError:
        d = np.dtype(np_dtype)
        if d in FROM_NUMPY:
            return FROM_NUMPY[d]
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{d}. The only supported types are: "
            "float64, float32, float16, bfloat16, complex64, complex128, int64, int32, int16, "
            "int8, uint8, and bool."
        ) from None


def _promote(a, b):
    if a is b:
        return a
    if a.category == 3 or b.category == 3:
        # complex wins, with parts wide enough for the other operand (float64 + complex64)
        wide = _promote(a.to_real(), b.to_real())
        return complex128 if wide is float64 else complex64
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2:
        if a._rank == b._rank:          # float16 with bfloat16
            return float32
        return a if a._rank > b._rank else b
    if a is uint8 or b is uint8:        # uint8 with a signed integer
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a._rank > b._rank else b


_PROMOTE = {(a, b): _promote(a, b) for a in EVERY_DTYPE for b in EVERY_DTYPE}


def promote_types(type1, type2):
    """The smallest dtype both ``type1`` and ``type2`` convert to (torch.promote_types)."""
    return _PROMOTE[type1, type2]


_default = [float32]


def get_default_dtype():
    return _default[0]


def set_default_dtype(d):
    if d not in (float32, float64, float16, bfloat16):
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


def python_scalar_dtype(value):
    """The dtype a Python number takes when it stands alone (torch.tensor(value))."""
    if isinstance(value, (builtins.bool, np.bool_)):
        return bool
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (complex, np.complexfloating)):
        return _TO_COMPLEX[_default[0]]
    return _default[0]


class _BFloat16Limits:
    """numpy.finfo's fields for bfloat16, from its format (float32's 8-bit exponent, 8
    significant bits): no numpy type needed, so torch.finfo(bfloat16) loads no ml_dtypes."""
    eps = 2.0 ** -7
    max = (2.0 - 2.0 ** -7) * 2.0 ** 127
    min = -max
    smallest_normal = 2.0 ** -126
    precision = 2                           # numpy's int(-log10(eps))


class finfo:
    """Machine limits of a floating dtype (torch.finfo)."""

    def __init__(self, type=None):
        type = _default[0] if type is None else type.to_real()     # complex: its parts
        if not type.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo "
                            "to handle 'torch.finfo'")
        info = _BFloat16Limits if type is bfloat16 else np.finfo(type.np)
        self.bits = type.itemsize * 8
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)
        self.dtype = type.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo)."""

    def __init__(self, type):
        if type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo "
                            "to handle 'torch.iinfo'")
        if type is bool:
            raise TypeError(f"{type} is not supported by torch.iinfo")
        info = np.iinfo(type.np)
        self.bits, self.min, self.max = info.bits, int(info.min), int(info.max)
        self.dtype = type.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"

"""Creation, random and dtype-conversion primitives.

Creation ops (``full``, ``empty``, ``arange``, ``linspace``, ``logspace``, ``eye``) take no
tensor inputs: everything they need is an attribute, so a traced graph can hold them as
constants.  Random ops take the random bit source explicitly as the ``generator``
attribute (a ``numpy.random.Generator``); they never touch global state, so a tracer can
turn the generator state into a graph input.  Conversion ops (``to_copy``, ``clone``,
``copy``) carry PyTorch's derivative rules and grad names.

Value rules follow PyTorch's CPU kernels: ``arange`` computes its size in double (in
int64 for int64 results), ``linspace`` fills the first half from ``start`` and the second
half from ``end``, float -> integer conversion truncates toward zero, float -> bool is
``x != 0``, and float16/bfloat16 results are rounded from float32 like c10's types do.
"""
import math
import warnings

import numpy as np

from dynograph.runtime import dtypes as D
from ..lowering.scalar import Unsupported
from .core import define, TensorSpec, check_broadcast, type_name

MANTISSA_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}

def _limits(dt):
    if dt is D.bool:
        return 0, 1
    if dt.is_floating_point:
        hi = D.finfo(dt).max
        return -hi, hi
    info = D.iinfo(dt)
    return info.min, info.max


# (lowest, max) of every dtype as Python numbers; finfo/iinfo are too slow to ask per call
LIMITS = {dt: _limits(dt) for dt in D.ALL_DTYPES}

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_NARROW_INTS = {np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.uint8)}


# ---------------------------------------------------------------- shared helpers

def cast(a, np_dtype, order="K"):
    """A new array holding ``a`` converted to ``np_dtype`` with PyTorch's conversion rules.

    float16/bfloat16 results are rounded from float32 (as c10::Half/BFloat16 are built),
    and floats become narrow integers through int32 (as the CPU kernels convert).
    """
    src = a.dtype
    to_half = D.is_half(np_dtype) and src != _F32 and not D.is_half(src)
    from_float = D.is_floating(src)
    if not to_half and not from_float:
        return a.astype(np_dtype, order=order)
    # out-of-range values convert as the C++ casts do, without numpy's warnings
    # (bfloat16 -> float16 overflows too, although neither type is narrower)
    with np.errstate(invalid="ignore", over="ignore"):
        if to_half:
            a = a.astype(_F32, order=order)
        elif np_dtype in _NARROW_INTS:
            a = a.astype(np.int32, order=order)
        return a.astype(np_dtype, order=order)


def _alloc(shape, dtype, make):
    """Run the allocation ``make()`` with PyTorch's errors for impossible sizes."""
    numel = 1
    for s in shape:
        numel *= s
    nbytes = numel * dtype.itemsize
    if nbytes >= 2 ** 63:
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes=[{', '.join(map(str, shape))}]")
    try:
        return make()
    except (MemoryError, ValueError) as e:
        if not isinstance(e, MemoryError) and "too big" not in str(e):
            raise
        raise RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
            f"{nbytes} bytes.") from None


def allocating(impl):
    """Give an impl that allocates ``shape`` (or ``(n, m)``) of ``dtype`` PyTorch's errors."""
    def run(**attrs):
        shape = attrs.get("shape")
        if shape is None:
            shape = (attrs["n"], attrs["m"]) if "m" in attrs else (attrs["n"],)
        return _alloc(shape, attrs["dtype"], lambda: impl(**attrs))
    run.__name__ = impl.__name__
    run.__doc__ = impl.__doc__
    return run


def _np_full(shape, value, np_dtype):
    if value == 0 and (type(value) is not float or math.copysign(1.0, value) > 0):
        return np.zeros(shape, np_dtype)
    out = np.empty(shape, np_dtype)
    try:
        out.fill(value)
    except (OverflowError, ValueError):     # numpy will not wrap -1 into uint8; torch does
        out.fill(np.array(value).astype(np_dtype))
    return out


def scalar_overflows(value, dtype):
    """c10's ``overflows<T>(value)``: whether a Python number does not fit ``dtype``."""
    if dtype is D.bool or dtype.is_complex or isinstance(value, bool):
        return False
    if isinstance(value, complex):          # a complex value fits a real dtype if it is real
        if value.imag != 0:
            return True
        value = value.real
    lo, hi = LIMITS[dtype]
    if dtype.is_floating_point:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return value > hi or value < lo
    if isinstance(value, float):
        return value != value or value < lo or value > hi
    if not dtype.is_signed:                 # unsigned types take negatives down to -max
        return value > hi or value < -hi
    return value < lo or value > hi


def check_scalar(value, dtype):
    """Raise PyTorch's error when the fill value ``value`` does not fit ``dtype``."""
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError("int too big to convert")
    if scalar_overflows(value, dtype):
        raise RuntimeError(
            f"value cannot be converted to type {dtype.cpp_type} without overflow")


def contiguous_strides(shape):
    """Row-major element strides as PyTorch gives them (a size-0 dimension counts as 1, so
    an empty tensor has the strides of a non-empty one; numpy gives it zeros)."""
    out, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = step
        step *= max(shape[d], 1)
    return tuple(out)


def on_strides(flat, shape, strides):
    """The ``numel``-element array ``flat`` seen with ``shape`` and element ``strides``
    (dense ones: every element once, whatever the strides of its size-1 dimensions)."""
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, shape, tuple(s * item for s in strides))


_STRIDED = type(np.lib.stride_tricks.as_strided(np.empty(1)).base)


def with_torch_strides(a):
    """``a`` itself, or for a new size-0 array (to which numpy gives zero strides) the same
    empty array with PyTorch's contiguous strides, so that views of it take PyTorch's.  Zero
    strides set on purpose stay: a view of elements (a size-1 dimension expanded to 0) or
    an ``on_strides`` array (``numpy_strides``)."""
    if a.size or not a.ndim or any(a.strides) or getattr(a.base, "size", 0) or \
            type(a.base) is _STRIDED:
        return a
    return on_strides(a.reshape(-1), a.shape, contiguous_strides(a.shape))


def numpy_strides(a, src):
    """``a`` (a copy of the numpy array ``src`` or ``src`` itself) with src's element strides
    kept where it is empty: PyTorch's tensor/from_numpy keep them, numpy's zeros included."""
    if a.size or not a.ndim:
        return a
    return on_strides(a.reshape(-1), a.shape, tuple(s // src.itemsize for s in src.strides))


# ---------------------------------------------------------------- creation

def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _full(*, shape, fill_value, dtype, strides=None):
    if strides is None and _numel(shape):
        return _alloc(shape, dtype, lambda: _np_full(shape, fill_value, dtype.np))
    flat = _alloc(shape, dtype, lambda: _np_full((_numel(shape),), fill_value, dtype.np))
    return on_strides(flat, shape, contiguous_strides(shape) if strides is None else strides)


def _full_meta(*, shape, fill_value, dtype, strides=None):
    check_scalar(fill_value, dtype)
    return TensorSpec(tuple(shape), dtype)


full = define("full", "creation", _full, meta=_full_meta, differentiable=False,
              doc="A tensor of ``shape`` filled with ``fill_value``; ``strides`` (in elements, "
                  "dense) lays it out like another tensor.", constant=True,
              lowering=lambda b, *, shape, fill_value, dtype, strides=None: b.const(fill_value, dtype))


def _empty(*, shape, dtype, strides=None):
    if strides is None and _numel(shape):
        return _alloc(shape, dtype, lambda: np.empty(shape, dtype.np))
    flat = _alloc(shape, dtype, lambda: np.empty((_numel(shape),), dtype.np))
    return on_strides(flat, shape, contiguous_strides(shape) if strides is None else strides)


empty = define("empty", "creation", _empty,
               meta=lambda *, shape, dtype, strides=None: TensorSpec(tuple(shape), dtype),
               differentiable=False, doc="An uninitialized tensor (``strides``: as ``full``'s).")


def _cpp_double(x):
    """A double as C++ streams print it (``0``, ``0.5``, ``inf``, ``nan``)."""
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:g}"
    return str(x)


def arange_size(start, end, step, dtype):
    """Number of elements of arange, with PyTorch's checks and messages (in its order)."""
    if dtype is D.int64:
        # int64 results compute everything on the int64-converted arguments
        for v in (start, end, step):
            check_scalar(v, D.int64)
        xs, xe, xp = _to_int(start), _to_int(end), _to_int(step)
        if xp == 0:
            if step != 0:
                raise ValueError("step must be nonzero")
            raise RuntimeError("step must be nonzero")
        num = xe - xs + xp - (1 if xp > 0 else -1)
        size = abs(num) // abs(xp) * (1 if (num >= 0) == (xp > 0) else -1)
        bad_direction = not ((xp > 0 and xe >= xs) or (xp < 0 and xe <= xs))
    else:
        if step == 0:
            raise RuntimeError("step must be nonzero")
        xs, xe, xp = start, end, step
        if not (math.isfinite(xs) and math.isfinite(xe)):
            raise RuntimeError(f"unsupported range: {_cpp_double(xs)} -> {_cpp_double(xe)}")
        span = (float(end) - float(start)) / float(step)
        size = math.ceil(span) if math.isfinite(span) else -1
        bad_direction = not ((xp > 0 and xe >= xs) or (xp < 0 and xe <= xs))
    if bad_direction:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if not 0 <= size <= 2 ** 63 - 1:
        raise RuntimeError("invalid size, possible overflow?")
    return int(size)


def _to_int(x):
    return int(x) if not isinstance(x, float) else int(math.trunc(x))


def _arange(*, start, end, step, dtype):
    n = _arange_meta(start=start, end=end, step=step, dtype=dtype).shape[0]
    if dtype.is_floating_point:
        # start + i * step in the accumulation type (double, float for half types)
        acc = _F64 if dtype is D.float64 or dtype is D.float32 else _F32
        values = _alloc((n,), dtype, lambda: np.arange(n, dtype=acc))
        if step != 1:
            values *= acc.type(step)
        if start != 0:
            values += acc.type(start)
    else:
        # integer results accumulate in int64 (wrapping) and are then narrowed
        s0, st = _to_int(start), _to_int(step)
        if -2 ** 62 < s0 < 2 ** 62 and -2 ** 62 < s0 + n * st < 2 ** 62:
            values = _alloc((n,), dtype, lambda: np.arange(s0, s0 + n * st, st, dtype=np.int64)[:n])
        else:
            values = _alloc((n,), dtype, lambda: np.arange(n, dtype=np.int64))
            values = values * np.int64(st) + np.int64(s0)
    return values if values.dtype == dtype.np else cast(values, dtype.np)


def _arange_meta(*, start, end, step, dtype):
    if dtype is D.bool:
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    return TensorSpec((arange_size(start, end, step, dtype),), dtype)


arange = define("arange", "creation", _arange, meta=_arange_meta, differentiable=False,
                doc="Values from ``start`` up to (excluding) ``end`` by ``step``.", constant=True)


def _check_space(name, steps, dtype):
    if dtype is D.bool:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for 'Bool'")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")


def _spaced(start, end, steps, dtype):
    """linspace's values: start + step*i for the first half, end - step*(steps-1-i) after."""
    if dtype.is_floating_point:
        ct = _F64 if dtype is D.float64 else _F32
        s, e = ct.type(start), ct.type(end)
        if dtype in (D.float16, D.bfloat16):     # c10::Half arithmetic rounds the endpoints first
            s, e = ct.type(dtype.np.type(s)), ct.type(dtype.np.type(e))
    else:
        ct = _F64
        s, e = float(_to_int(start)), float(_to_int(end))
        if not dtype.is_signed and dtype is not D.bool:
            s, e = float(np.array(int(s)).astype(dtype.np)), float(np.array(int(e)).astype(dtype.np))
    if steps == 1:
        return np.array([s], dtype=ct)
    step = (e - s) / ct.type(steps - 1)
    idx = np.arange(steps, dtype=ct)
    out = idx * step + s
    half = steps // 2
    out[half:] = e - step * (ct.type(steps - 1) - idx[half:])
    return out


def _linspace(*, start, end, steps, dtype):
    _check_space("linspace", steps, dtype)
    values = _spaced(start, end, steps, dtype)
    return values if values.dtype == dtype.np else cast(values, dtype.np)


def _space_meta(name):
    def meta(*, start, end, steps, dtype, base=None):
        _check_space(name, steps, dtype)
        return TensorSpec((steps,), dtype)
    return meta


linspace = define("linspace", "creation", _linspace, meta=_space_meta("linspace"),
                  differentiable=False, doc="``steps`` evenly spaced values from start to end.",
                  constant=True)


def _logspace(*, start, end, steps, base, dtype):
    _check_space("logspace", steps, dtype)
    exps = _spaced(start, end, steps, dtype)
    if dtype.is_floating_point:
        values = np.power(exps.dtype.type(base), exps)
    else:
        values = np.power(float(base), exps)
    return values if values.dtype == dtype.np else cast(values, dtype.np)


logspace = define("logspace", "creation", _logspace, meta=_space_meta("logspace"),
                  differentiable=False, doc="``base`` to the powers of linspace(start, end, steps).",
                  constant=True)


def _eye_meta(*, n, m, dtype):
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    return TensorSpec((n, m), dtype)


@allocating
def _eye(*, n, m, dtype):
    _eye_meta(n=n, m=m, dtype=dtype)
    return np.eye(n, m, dtype=dtype.np)


eye = define("eye", "creation", _eye, meta=_eye_meta, differentiable=False,
             doc="A 2-D tensor with ones on the diagonal.", constant=True)


# ---------------------------------------------------------------- conversion

def is_dense(a):
    """Whether ``a`` covers its memory without gaps or overlaps (some permutation of C order)."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return True
    dims = sorted((st, n) for st, n in zip(a.strides, a.shape) if n != 1)
    expected = a.itemsize
    for st, n in dims:
        if st != expected:
            return False
        expected *= n
    return True


def _stride_order(shape, operands):
    """The dimensions innermost first, as PyTorch's TensorIterator orders them from its
    operands' element strides: a stable insertion sort asking each operand in turn, where a
    zero stride (broadcast) says nothing and equal strides put the smaller size inside."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))

    def after(d0, d1):              # whether dimension d0 belongs outside d1 (None: no say)
        for strides in operands:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return s0 > s1
            if shape[d0] > shape[d1]:
                return True
        return None
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            swap = after(perm[d0], perm[d1])
            if swap:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif swap is False:
                break
    return perm


def infer_dense_strides(shape, strides):
    """PyTorch's strides (in elements) for a dense copy of a non-dense tensor that keeps its
    dimensions' order: contiguous strides in ``_stride_order``, a size-0 dimension counting
    as 1."""
    out = [0] * len(shape)
    step = 1
    for d in _stride_order(shape, (strides,)):
        out[d] = step
        step *= max(shape[d], 1)
    return tuple(out)


def iterator_strides(shape, operands):
    """The element strides of the result of shape ``shape`` that PyTorch's TensorIterator
    allocates for ``operands`` ((shape, element strides, whether dense) of each, a Python
    number as a 0-dim dense operand).  Operands of one shape that are all empty (so
    contiguous) give contiguous strides, all dense with the same strides those strides;
    otherwise the dimensions take the operands' stride order, multiplying sizes as they are
    (a size-0 dimension gives the dimensions outside it stride 0)."""
    if all(s == shape for s, _, _ in operands):
        if 0 in shape:
            return contiguous_strides(shape)
        first = operands[0][1]
        if all(dense and st == first for _, st, dense in operands):
            return first
    ndim = len(shape)
    aligned = []
    for s, st, _ in operands:   # a broadcast dimension steps 0
        pad = ndim - len(s)
        aligned.append(tuple(0 if d < pad or (s[d - pad] == 1 and shape[d] != 1) else st[d - pad]
                             for d in range(ndim)))
    perm = _stride_order(shape, aligned)
    if perm == list(range(ndim - 1, -1, -1)):
        return contiguous_strides(shape)
    out, step = [0] * ndim, 1
    for d in perm:
        out[d] = step
        step *= shape[d]
    return tuple(out)


def preserved_strides(a):
    """The element strides a preserve_format copy (or ``*_like`` result) of ``a`` takes in
    PyTorch: a non-overlapping and dense (or empty) ``a``'s own, those of its size-1
    dimensions included, else those ``infer_dense_strides`` gives."""
    own = tuple(s // a.itemsize for s in a.strides)
    return own if is_dense(a) else infer_dense_strides(a.shape, own)


def as_preserved(a, out):
    """``out`` (a copy of ``a``) with the strides ``preserved_strides`` gives."""
    if a.size and a.strides == out.strides and a.itemsize == out.itemsize:
        return out                  # a dense input's own strides already (a copy is dense)
    want = preserved_strides(a)
    if a.size and tuple(s // out.itemsize for s in out.strides) == want:
        return out
    moved = on_strides(np.empty((a.size,), out.dtype), a.shape, want)
    moved[...] = out
    return moved


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def relaid(a, strides):
    """``a`` with element ``strides`` (dense ones): itself, a view where only size-1
    dimensions' strides differ, or a copy."""
    item = a.itemsize
    if a.strides == tuple(s * item for s in strides):
        return a
    if a.size and all(n == 1 or st == s * item for n, st, s in zip(a.shape, a.strides, strides)):
        return np.lib.stride_tricks.as_strided(a, a.shape, tuple(s * item for s in strides))
    out = on_strides(np.empty((a.size,), a.dtype), a.shape, strides)
    out[...] = a
    return out


def as_contiguous(a):
    """``a`` with PyTorch's contiguous strides: itself, a view (where only size-1 dimensions'
    strides differ) or a row-major copy."""
    if not a.flags.c_contiguous:
        return np.ascontiguousarray(a)
    if a.ndim < 2 or 1 not in a.shape or not a.size:
        return a
    want = contiguous_strides(a.shape)
    if tuple(s // a.itemsize for s in a.strides) == want:
        return a
    return on_strides(a.reshape(-1), a.shape, want)


def channels_last_copy(a, np_dtype, rank, name):
    if a.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")
    perm = (0,) + tuple(range(2, rank)) + (1,)
    moved = cast(a.transpose(perm), np_dtype, order="C")
    return moved.transpose(_inverse(perm))


def convert(a, np_dtype, memory_format="preserve"):
    """A copy of ``a`` as ``np_dtype`` laid out in ``memory_format``."""
    if memory_format == "channels_last":
        return channels_last_copy(a, np_dtype, 4, "channels_last")
    if memory_format == "channels_last_3d":
        return channels_last_copy(a, np_dtype, 5, "channels_last_3d")
    if memory_format == "preserve":
        return as_preserved(a, cast(a, np_dtype, order="K"))
    return cast(a, np_dtype, order="C")


def _memory_format_meta(x, memory_format):
    if memory_format == "channels_last" and len(x.shape) != 4:
        raise RuntimeError("required rank 4 tensor to use channels_last format")
    if memory_format == "channels_last_3d" and len(x.shape) != 5:
        raise RuntimeError("required rank 5 tensor to use channels_last_3d format")


def _to_copy(x, *, dtype, memory_format="preserve"):
    return convert(x, dtype.np, memory_format)


def _to_copy_meta(x, *, dtype, memory_format="preserve"):
    _memory_format_meta(x, memory_format)
    return TensorSpec(tuple(x.shape), dtype)


def _copy_lowering(b, x, *, dtype=None, memory_format="preserve"):
    """In a kernel a copy is its input, cast to the output dtype by the kernel; kernels store
    row-major, so only layouts that are row-major for a fresh result qualify."""
    if memory_format not in ("preserve", "contiguous"):
        raise Unsupported(f"a copy to memory format {memory_format}")
    return x


to_copy = define(
    "to_copy", "other", _to_copy, meta=_to_copy_meta, grad_name="ToCopyBackward0",
    vjp=lambda ctx, g: (g.to(ctx.inputs[0].dtype),), lowering=_copy_lowering,
    doc="A copy of x converted to ``dtype`` (the engine casts the gradient back as well).")


def _clone(x, *, memory_format="preserve"):
    return convert(x, x.dtype, memory_format)


def _clone_meta(x, *, memory_format="preserve"):
    _memory_format_meta(x, memory_format)
    return TensorSpec(tuple(x.shape), x.dtype)


clone = define("clone", "other", _clone, meta=_clone_meta, vjp=lambda ctx, g: (g,),
               lowering=_copy_lowering, doc="A copy of x with its own memory.")


def _copy_meta(dst, src):
    shape = check_broadcast(tuple(dst.shape), tuple(src.shape))
    if shape != tuple(dst.shape):
        raise RuntimeError(
            f"output with shape {list(dst.shape)} doesn't match the broadcast shape {list(shape)}")
    return TensorSpec(tuple(dst.shape), dst.dtype)


def _copy(dst, src):
    if src.shape != dst.shape:
        _copy_meta(dst, src)
    if src.dtype != dst.dtype:
        src = cast(src, dst.dtype)
    return np.broadcast_to(src, dst.shape)


def _copy_vjp(ctx, g):
    return (ctx.needs(0) and g * 0, g)


copy = define("copy", "other", _copy, meta=_copy_meta, vjp=_copy_vjp,
              grad_name="torch::autograd::CopyBackwards",
              doc="The value ``dst.copy_(src)`` writes: src broadcast to dst's shape and dtype.")


# ---------------------------------------------------------------- random
# Every impl draws from ``generator`` (a numpy Generator).  Floats are drawn in float32 or
# float64 and rounded to the result dtype; float16/bfloat16 uniforms use as many random
# bits as the type has mantissa digits, like PyTorch, so they never round up to ``high``.

def _float_only(kernel, dtype):
    if not dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dtype)}'")


def _unit_uniform(gen, shape, dtype):
    """Uniform [0, 1) values in float32 (or float64 for float64 results)."""
    if dtype is D.float64:
        return gen.random(shape)
    if dtype is D.float32:
        return gen.random(shape, dtype=np.float32)
    digits = MANTISSA_DIGITS[dtype]
    return gen.integers(0, 1 << digits, shape).astype(np.float32) * np.float32(2.0 ** -digits)


def _finish(values, dtype):
    return values if values.dtype == dtype.np else cast(values, dtype.np)


def check_uniform(low, high, dtype):
    _float_only("check_uniform_bounds", dtype)
    lo, hi = LIMITS[dtype]
    for name, v in (("from", low), ("to", high)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{name} is out of bounds for {dtype.type_meta_name}")
    if low > high:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={_cpp_double(low)} "
            f"> to={_cpp_double(high)}")


@allocating
def _uniform(*, shape, low, high, dtype, generator):
    check_uniform(low, high, dtype)
    u = _unit_uniform(generator, shape, dtype)
    if low != 0 or high != 1:
        u = u * u.dtype.type(high - low) + u.dtype.type(low)
    return _finish(u, dtype)


def _shape_meta(check=None):
    def meta(*, shape, dtype, generator, **attrs):
        if check is not None:
            check(dtype=dtype, **attrs)
        return TensorSpec(tuple(shape), dtype)
    return meta


uniform = define("uniform", "random", _uniform,
                 meta=_shape_meta(lambda low, high, dtype: check_uniform(low, high, dtype)),
                 differentiable=False, doc="Uniform values in [low, high).")


def check_std(std):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_cpp_double(std)}")


def _standard_normal(gen, shape, dtype):
    return gen.standard_normal(shape, dtype=np.float64 if dtype is D.float64 else np.float32)


@allocating
def _normal(*, shape, mean, std, dtype, generator):
    _float_only("normal_kernel_cpu", dtype)
    check_std(std)
    z = _standard_normal(generator, shape, dtype)
    if mean != 0 or std != 1:
        z = z * z.dtype.type(std) + z.dtype.type(mean)
    return _finish(z, dtype)


def _normal_check(mean, std, dtype):
    _float_only("normal_kernel_cpu", dtype)
    check_std(std)


normal = define("normal", "random", _normal, meta=_shape_meta(_normal_check),
                differentiable=False, doc="Normal values with scalar mean and std.")


def _normal_tensor(mean, std, *, generator):
    shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
    dtype = D.from_numpy_dtype(mean.dtype if isinstance(mean, np.ndarray) else std.dtype)
    _float_only("normal_kernel_cpu", dtype)
    if isinstance(std, np.ndarray):
        if (std < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        check_std(std)
    z = _standard_normal(generator, shape, dtype)
    return _finish(z * std + mean, dtype)


def _normal_tensor_meta(mean, std, *, generator):
    mshape = tuple(mean.shape) if isinstance(mean, TensorSpec) else ()
    sshape = tuple(std.shape) if isinstance(std, TensorSpec) else ()
    shape = check_broadcast(mshape, sshape)
    dtype = mean.dtype if isinstance(mean, TensorSpec) else std.dtype
    _float_only("normal_kernel_cpu", dtype)
    if not isinstance(std, TensorSpec):
        check_std(std)
    return TensorSpec(shape, dtype)


def _zero_grads(ctx, g):
    """Sampling ops pass no gradient to their parameters (PyTorch returns zeros)."""
    return tuple(ctx.needs(i) and g * 0 for i in range(len(ctx.inputs)))


# one primitive per overload: PyTorch names their grad_fn NormalBackward1/2/3
normal_tensor_float = define("normal_tensor_float", "random", _normal_tensor,
                             meta=_normal_tensor_meta, vjp=_zero_grads,
                             grad_name="NormalBackward1", doc="normal(Tensor mean, float std)")
normal_float_tensor = define("normal_float_tensor", "random", _normal_tensor,
                             meta=_normal_tensor_meta, vjp=_zero_grads,
                             grad_name="NormalBackward2", doc="normal(float mean, Tensor std)")
normal_tensor_tensor = define("normal_tensor_tensor", "random", _normal_tensor,
                              meta=_normal_tensor_meta, vjp=_zero_grads,
                              grad_name="NormalBackward3", doc="normal(Tensor mean, Tensor std)")


def random_bounds(low, high, dtype, op="random_"):
    """Check [low, high) for integer sampling into ``dtype`` like PyTorch's random_."""
    if low >= high:
        raise RuntimeError(
            f"{op} expects 'from' to be less than 'to', but got from={low} >= to={high}")
    lo, hi = LIMITS[dtype]
    name = dtype.type_meta_name
    if not lo <= low <= hi:
        raise RuntimeError(f"from is out of bounds for {name}")
    if not lo <= high - 1 <= hi:
        raise RuntimeError(f"to - 1 is out of bounds for {name}")
    if dtype.is_floating_point:
        digits = MANTISSA_DIGITS[dtype]
        for what, v in (("from", low), ("to - 1", high - 1)):
            if not -(2 ** digits) <= v <= 2 ** digits:
                cname = dtype.type_meta_name
                warnings.warn(
                    f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision "
                    f"limitations {cname} can support discrete uniform distribution only within "
                    "this range. This warning will become an error in version 1.7 release, "
                    "please fix the code in advance", UserWarning, stacklevel=5)


@allocating
def _randint(*, shape, low, high, dtype, generator):
    random_bounds(low, high, dtype)
    # PyTorch's scheme: a 64-bit random word modulo the range, plus low (mod 2**64)
    raw = generator.bit_generator.random_raw(math.prod(shape))
    values = (raw % np.uint64(high - low)) + np.uint64(low % 2 ** 64)
    return _finish(values.view(np.int64).reshape(shape), dtype)


randint = define("randint", "random", _randint,
                 meta=_shape_meta(lambda low, high, dtype: random_bounds(low, high, dtype)),
                 differentiable=False, doc="Integers uniform in [low, high).")


def _randperm_meta(*, n, dtype, generator):
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    if dtype is D.bool:
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if n > 0 and not dtype.is_floating_point and scalar_overflows(n - 1, dtype):
        raise RuntimeError(
            f"value cannot be converted to type {dtype.cpp_type} without overflow")
    return TensorSpec((n,), dtype)


@allocating
def _randperm(*, n, dtype, generator):
    _randperm_meta(n=n, dtype=dtype, generator=generator)
    return _finish(generator.permutation(n), dtype)


randperm = define("randperm", "random", _randperm, meta=_randperm_meta, differentiable=False,
                  doc="A random permutation of 0..n-1.")


def _bernoulli(p, *, generator):
    _float_only("bernoulli_tensor_cpu_p_", D.from_numpy_dtype(p.dtype))
    pf = p.astype(np.float64) if p.dtype != _F64 else p
    if not ((pf >= 0) & (pf <= 1)).all():
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
            "message be improved?  If so, please report an enhancement request to PyTorch.)")
    return (generator.random(p.shape) < pf).astype(p.dtype)


def _bernoulli_meta(p, *, generator):
    _float_only("bernoulli_tensor_cpu_p_", p.dtype)
    return TensorSpec(tuple(p.shape), p.dtype)


bernoulli = define("bernoulli", "random", _bernoulli, meta=_bernoulli_meta, vjp=_zero_grads,
                   doc="0/1 draws with the probabilities in p.")


def check_probability(p, op="bernoulli_"):
    if not 0 <= p <= 1:
        raise RuntimeError(f"{op} expects p to be in [0, 1], but got p={_cpp_double(p)}")


@allocating
def _bernoulli_scalar(*, shape, p, dtype, generator):
    check_probability(p)
    return (generator.random(shape) < p).astype(dtype.np)


bernoulli_scalar = define("bernoulli_scalar", "random", _bernoulli_scalar,
                          meta=_shape_meta(lambda p, dtype: check_probability(p)),
                          differentiable=False, doc="0/1 draws with one probability p.")


def _multinomial_meta(probs, *, num_samples, replacement, generator):
    if len(probs.shape) not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not probs.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {type_name(probs.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > probs.shape[-1]:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    return TensorSpec(tuple(probs.shape[:-1]) + (num_samples,), D.int64)


def _multinomial(probs, *, num_samples, replacement, generator):
    spec = _multinomial_meta(TensorSpec(probs.shape, D.from_numpy_dtype(probs.dtype)),
                             num_samples=num_samples, replacement=replacement,
                             generator=generator)
    p = np.atleast_2d(probs.astype(np.float64))
    out = np.empty((p.shape[0], num_samples), dtype=np.int64)
    if p.shape[0]:
        if not (np.isfinite(p).all() and (p >= 0).all()):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        total = p.sum(axis=1)
        if (total <= 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    for r in range(p.shape[0]):
        row = p[r] / total[r]
        if replacement:
            cdf = np.cumsum(row)
            idx = np.searchsorted(cdf, generator.random(num_samples) * cdf[-1], side="right")
            out[r] = np.minimum(idx, np.flatnonzero(row)[-1])
        else:
            # exponential race: the k largest p/E_i are a draw without replacement
            keys = row / generator.exponential(size=row.shape[0])
            out[r] = np.argsort(-keys, kind="stable")[:num_samples]
    return out.reshape(spec.shape)


multinomial = define("multinomial", "random", _multinomial, meta=_multinomial_meta,
                     differentiable=False, doc="Category indices drawn from rows of probs.")


def _poisson(rates, *, generator):
    _float_only("poisson_cpu", D.from_numpy_dtype(rates.dtype))
    r = rates.astype(np.float64)
    if (r < 0).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return generator.poisson(r).astype(rates.dtype)


def _poisson_meta(rates, *, generator):
    _float_only("poisson_cpu", rates.dtype)
    return TensorSpec(tuple(rates.shape), rates.dtype)


poisson = define("poisson", "random", _poisson, meta=_poisson_meta, vjp=_zero_grads,
                 doc="Poisson counts with the given rates.")


def _continuous(kind, dtype):
    if not dtype.is_floating_point:
        tname = dtype.type_meta_name if kind == "Cauchy" else type_name(dtype)
        raise RuntimeError(
            f"{kind} distribution is a continuous probability distribution. dtype must be a "
            f"floating point but you specified {tname}")


def check_exponential(lambd, dtype):
    _continuous("Exponential", dtype)
    if not lambd > 0:
        raise RuntimeError(
            f"exponential_ expects lambda > 0.0, but found lambda={_cpp_double(lambd)}")


@allocating
def _exponential(*, shape, lambd, dtype, generator):
    check_exponential(lambd, dtype)
    return _finish(generator.exponential(1.0 / lambd, shape), dtype)


exponential = define("exponential", "random", _exponential,
                     meta=_shape_meta(lambda lambd, dtype: check_exponential(lambd, dtype)),
                     differentiable=False, doc="Exponential values with rate lambd.")


def check_geometric(p):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_cpp_double(p)}")


@allocating
def _geometric(*, shape, p, dtype, generator):
    check_geometric(p)
    return _finish(generator.geometric(p, shape), dtype)


geometric = define("geometric", "random", _geometric,
                   meta=_shape_meta(lambda p, dtype: check_geometric(p)),
                   differentiable=False, doc="Trials until the first success (>= 1).")


def check_log_normal(std, dtype):
    _float_only("log_normal_cpu", dtype)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_cpp_double(std)}")


@allocating
def _log_normal(*, shape, mean, std, dtype, generator):
    check_log_normal(std, dtype)
    return _finish(generator.lognormal(mean, std, shape), dtype)


log_normal = define("log_normal", "random", _log_normal,
                    meta=_shape_meta(lambda mean, std, dtype: check_log_normal(std, dtype)),
                    differentiable=False, doc="exp of normal(mean, std) values.")


def check_cauchy(sigma, dtype):
    _continuous("Cauchy", dtype)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_cpp_double(sigma)}")


@allocating
def _cauchy(*, shape, median, sigma, dtype, generator):
    check_cauchy(sigma, dtype)
    return _finish(median + sigma * generator.standard_cauchy(shape), dtype)


cauchy = define("cauchy", "random", _cauchy,
                meta=_shape_meta(lambda median, sigma, dtype: check_cauchy(sigma, dtype)),
                differentiable=False, doc="Cauchy values around median with scale sigma.")

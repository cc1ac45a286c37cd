"""Random numbers: ``Generator``, seeding and RNG state, random factories (``rand``, ``randn``,
``randint``, ``randperm``, ``normal``, ``bernoulli``, ``multinomial``, ``poisson``, the
``*_like`` forms) and the in-place fills (``uniform_``, ``normal_``, ``random_`` ...).

The bit source is numpy's PCG64.  A ``Generator`` owns one numpy Generator and is the
only place that knows how its state is seeded, saved and restored; the random primitives
(compiler/ops/creation.py) receive that numpy Generator as their ``generator`` attribute
and draw from nothing else.  dynograph does not reproduce PyTorch's random streams, but
its own are reproducible: the same seed and the same calls give the same values.
"""
import builtins
import weakref
import os

import numpy as np

from dynograph.compiler.ops import creation as C
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import as_device
from dynograph._trace_hook import TRACE
from ._convert import copy_recorded, records_write
from ._creation import (parse_size, finish_created, out_dtype, as_int, tname, check_input, sequence_size,
                        dtype_arg, like_strides)
from . import _device
from ._dispatch import call
from ._inplace import check_inplace_leaf, check_no_internal_overlap, write
from ._tensor import Tensor, tensor_method

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm", "normal",
           "bernoulli", "multinomial", "poisson", "rand_like", "randn_like", "randint_like"]

DEFAULT_SEED = 67280421310721          # what PyTorch's default generator starts from
_U64 = 2 ** 64
_STATE_BYTES = 48                      # PCG64 state (16) + increment (16) + cached word (8) + seed (8)


def _seed_int(seed):
    """A seed as PyTorch stores it: an unsigned 64-bit value (negative seeds wrap)."""
    if not -2 ** 63 <= seed < _U64:
        raise ValueError("Overflow when unpacking long long")
    return seed % _U64


_GENERATORS = weakref.WeakSet()    # every Generator, so the tracer can find a draw's owner


def _reseeding_breaks_the_trace():
    """A graph reads a generator's state when it starts; a (re)seeded or new generator inside
    the traced call would be replayed from the wrong state."""
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break("a random generator is seeded, created or given a new state "
                                 "inside the compiled function")


class Generator:
    """A random number generator with its own state (torch.Generator)."""

    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self.manual_seed(DEFAULT_SEED)
        _GENERATORS.add(self)

    def manual_seed(self, seed):
        """Reset the state from ``seed`` (an int); returns this generator."""
        if not isinstance(seed, (builtins.int, np.integer)) or isinstance(seed, builtins.bool):
            raise RuntimeError(f"manual_seed expected a long, but got {tname(seed)}")
        _reseeding_breaks_the_trace()
        self._seed = _seed_int(builtins.int(seed))
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self):
        """Seed from the operating system's entropy; returns the new seed."""
        s = builtins.int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self):
        """The seed the current stream started from."""
        return self._seed

    def get_state(self):
        """The full state as a uint8 tensor (``set_state`` restores it)."""
        st = self._np.bit_generator.state
        raw = (st["state"]["state"].to_bytes(16, "little") + st["state"]["inc"].to_bytes(16, "little")
               + st["has_uint32"].to_bytes(4, "little") + st["uinteger"].to_bytes(4, "little")
               + self._seed.to_bytes(8, "little"))
        return Tensor._wrap(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state saved by ``get_state``; returns this generator."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a dynograph.ByteTensor, but got {tname(new_state)}")
        if new_state.dtype is not D.uint8:
            raise TypeError("RNG state must be a dynograph.ByteTensor")
        _reseeding_breaks_the_trace()
        raw = np.ascontiguousarray(new_state._data).tobytes()
        if len(raw) != _STATE_BYTES:
            raise RuntimeError(
                f"Expected a dynograph CPU generator state of size {_STATE_BYTES} but found the "
                f"input RNG state size to be {len(raw)}")
        word = lambda a, b: builtins.int.from_bytes(raw[a:b], "little")  # noqa: E731
        bitgen = np.random.PCG64()
        bitgen.state = {"bit_generator": "PCG64",
                        "state": {"state": word(0, 16), "inc": word(16, 32)},
                        "has_uint32": word(32, 36), "uinteger": word(36, 40)}
        self._np = np.random.Generator(bitgen)
        self._seed = word(40, 48)
        return self

    def __repr__(self):
        return f"<dynograph.Generator object at {hex(id(self))}>"


default_generator = Generator()


def live_generators():
    """Every Generator that exists (a compiled function's look-ahead puts their states back)."""
    return list(_GENERATORS)


def generator_of(bits):
    """The dynograph Generator whose numpy Generator is ``bits`` (the tracer binds the owner,
    since ``manual_seed`` replaces the numpy Generator)."""
    for g in list(_GENERATORS):
        if g._np is bits:
            return g
    return None


def _bits(generator):
    """The numpy Generator behind ``generator`` (None: the default one)."""
    if generator is None:
        return default_generator._np
    if isinstance(generator, Generator):
        return generator._np
    raise TypeError(f"expected a dynograph.Generator as generator, got {tname(generator)}")


def manual_seed(seed):
    """Seed the default generator and every CUDA device's; returns the default generator."""
    gen = default_generator.manual_seed(builtins.int(seed))
    from . import cuda
    cuda.manual_seed_all(builtins.int(seed))
    return gen


def seed():
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state."""
    default_generator.set_state(new_state)


# ---------------------------------------------------------------- factories

def _into(t, out):
    """``out=`` for samplers: the sample is converted to out's dtype, like PyTorch's kernels."""
    if out is not None and out.dtype is not t.dtype:
        t = t.to(out.dtype)
    return finish_created(t, False, out)


def _create(op, shape, dtype, out, device, requires_grad, generator, **attrs):
    if device is not None and _on_cuda(op, dtype, device, generator):
        t = _device.random(op.name, shape, dtype, tuple(attrs.values()), as_device(device))
        return finish_created(t, requires_grad, out)
    t = call(op, shape=shape, dtype=dtype, generator=_bits(generator), **attrs)
    return finish_created(t, requires_grad, out, device)


def rand(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         pin_memory=False, requires_grad=False):
    """Uniform values in [0, 1)."""
    shape = parse_size(args, size, "rand")
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    return _create(C.uniform, shape, dtype, out, device, requires_grad, generator,
                   low=0.0, high=1.0)


def randn(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          pin_memory=False, requires_grad=False):
    """Standard normal values."""
    shape = parse_size(args, size, "randn")
    dtype = out_dtype(dtype, out) or D.get_default_dtype()
    return _create(C.normal, shape, dtype, out, device, requires_grad, generator,
                   mean=0.0, std=1.0)


def _int_arg(x, fn, name, pos):
    n = as_int(x)
    if n is None:
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be int, not {tname(x)}")
    return n


_RANDINT_OPTIONS = ("*, dynograph.Generator generator, Tensor out = None, dynograph.dtype dtype = None, "
                    "dynograph.layout layout = None, dynograph.device device = None, "
                    "bool pin_memory = False, bool requires_grad = False")
_RANDINT_SIGNATURES = "".join(
    f" * ({params}, {options})\n"
    for params in ("int high, tuple of ints size", "int low, int high, tuple of ints size")
    for options in (_RANDINT_OPTIONS, _RANDINT_OPTIONS.replace("generator, ", "generator = None, ")))


def _bind(names, args, kwargs):
    """``args`` and ``kwargs`` bound to the parameters ``names``; None when they do not fit."""
    if len(args) > len(names) or any(k not in names[len(args):] for k in kwargs):
        return None
    bound = dict(zip(names, args), **kwargs)
    return bound if len(bound) == len(names) else None


def _fits_randint(bound):
    return (bound is not None and isinstance(bound["size"], (tuple, list))
            and all(as_int(bound[n]) is not None for n in ("low", "high") if n in bound))


def _randint_args(args, kwargs, n_options):
    """(low, high, size) by torch's overloads ``randint(high, size)`` and
    ``randint(low, high, size)``; ``n_options`` counts the other keywords given."""
    for names in (("high", "size"), ("low", "high", "size")):
        bound = _bind(names, args, kwargs)
        if _fits_randint(bound):
            return as_int(bound.get("low", 0)), as_int(bound["high"]), bound["size"]
    if len(args) + len(kwargs) + n_options == 2:
        _randint_high_size_error(args, kwargs)   # only (high, size) takes two: torch names the fault
    got = ", ".join([tname(a) for a in args] + [f"{k}={tname(v)}" for k, v in kwargs.items()])
    raise TypeError(f"randint() received an invalid combination of arguments - got ({got}), "
                    "but expected one of:\n" + _RANDINT_SIGNATURES)


def _randint_high_size_error(args, kwargs):
    """torch's error for two arguments that do not fit ``randint(high, size)``."""
    bound = dict(zip(("high", "size"), args), **kwargs)
    if "high" not in bound:      # torch lists every required parameter from the first one missing
        raise TypeError('randint() missing 2 required positional argument: "high", "size"')
    if "size" not in bound:
        raise TypeError('randint() missing 1 required positional arguments: "size"')
    where = {n: "" if n in kwargs else f" (position {i})" for i, n in enumerate(("high", "size"), 1)}
    if as_int(bound["high"]) is None:
        raise TypeError(f"randint(): argument 'high'{where['high']} must be int, not {tname(bound['high'])}")
    raise TypeError(f"randint(): argument 'size'{where['size']} must be tuple of ints, "
                    f"not {tname(bound['size'])}")


def randint(*args, low=None, high=None, size=None, generator=None, out=None, dtype=None,
            layout=None, device=None, pin_memory=False, requires_grad=False):
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``,
    each argument positional or keyword."""
    kwargs = {k: v for k, v in (("low", low), ("high", high), ("size", size)) if v is not None}
    n_options = (sum(v is not None for v in (generator, out, dtype, layout, device))
                 + pin_memory + requires_grad)
    lo, hi, size = _randint_args(args, kwargs, n_options)
    shape = parse_size((size,), None, "randint")
    dtype = out_dtype(dtype, out) or D.int64
    return _create(C.randint, shape, dtype, out, device, requires_grad, generator, low=lo, high=hi)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             pin_memory=False, requires_grad=False):
    """A random permutation of ``0 .. n-1``."""
    n = _int_arg(n, "randperm", "n", 1)
    dtype = out_dtype(dtype, out) or D.int64
    if device is not None:
        as_device(device)
    t = call(C.randperm, n=n, dtype=dtype, generator=_bits(generator))
    return finish_created(t, requires_grad, out, device)


_NORMAL_SIGNATURES = (
    " * (Tensor mean, Tensor std, *, dynograph.Generator generator = None, Tensor out = None)\n"
    " * (Tensor mean, float std = 1, *, dynograph.Generator generator = None, Tensor out = None)\n"
    " * (float mean, Tensor std, *, dynograph.Generator generator = None, Tensor out = None)\n"
    " * (float mean, float std, tuple of ints size, *, dynograph.Generator generator = None, "
    "Tensor out = None, dynograph.dtype dtype = None, dynograph.layout layout = None, "
    "dynograph.device device = None, bool pin_memory = False, bool requires_grad = False)\n")

_REAL = (builtins.int, builtins.float, np.number)


def normal(mean, std=None, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False):
    """Normal samples: ``normal(mean_t, std_t)``, ``normal(mean_t, std=1.0)``,
    ``normal(mean, std_t)``, ``normal(mean, std, size)``."""
    gen = _bits(generator)
    m_t, s_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if m_t and s_t:
        t = call(C.normal_tensor_tensor, mean, std, generator=gen)
    elif m_t and (std is None or isinstance(std, _REAL)):
        t = call(C.normal_tensor_float, mean, 1.0 if std is None else builtins.float(std),
                 generator=gen)
    elif s_t and isinstance(mean, _REAL):
        t = call(C.normal_float_tensor, builtins.float(mean), std, generator=gen)
    elif isinstance(mean, _REAL) and isinstance(std, _REAL) and size is not None:
        shape = sequence_size(size, "normal")
        dtype = out_dtype(dtype, out) or D.get_default_dtype()
        return _create(C.normal, shape, dtype, out, device, requires_grad, generator,
                       mean=builtins.float(mean), std=builtins.float(std))
    else:
        got = ", ".join(tname(x) for x in (mean, std, size) if x is not None)
        raise TypeError("normal() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n" + _NORMAL_SIGNATURES)
    return _into(t, out)


@tensor_method
def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws: with the probabilities in ``input``, or with one probability ``p``."""
    check_input(input, "bernoulli")
    gen = _bits(generator)
    if p is not None and not isinstance(p, _REAL):
        raise TypeError(
            f"bernoulli() received an invalid combination of arguments - got (Tensor, p={tname(p)}), "
            "but expected one of:\n * (Tensor input, *, dynograph.Generator generator = None, "
            "Tensor out = None)\n * (Tensor input, float p, *, dynograph.Generator generator = None)\n")
    if p is None:
        t = call(C.bernoulli, input, generator=gen)
    else:
        t = call(C.bernoulli_scalar, shape=tuple(input._data.shape), p=builtins.float(p),
                 dtype=input.dtype, generator=gen)
    return _into(t, out)


@tensor_method
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn from the categories whose weights are the last dim of ``input``."""
    check_input(input, "multinomial")
    n = _int_arg(num_samples, "multinomial", "num_samples", 2)
    t = call(C.multinomial, input, num_samples=n, replacement=builtins.bool(replacement),
             generator=_bits(generator))
    return finish_created(t, False, out)


def poisson(input, generator=None):
    """Poisson counts with the rates in ``input`` (same dtype)."""
    check_input(input, "poisson")
    return call(C.poisson, input, generator=_bits(generator))


def _like(input, op, dtype, device, requires_grad, memory_format, generator, **attrs):
    """A sample with ``input``'s shape laid out as ``empty_like(input)`` (PyTorch fills an
    ``empty_like`` result in place)."""
    shape = tuple(input._data.shape)
    device = device or (input.device if input.is_cuda else None)
    t = _create(op, shape, dtype, None, device, False, generator, **attrs)
    strides = None if t.is_cuda else like_strides(input, memory_format)
    if strides is not None and strides != t.stride():
        t = call(C.empty, shape=shape, dtype=dtype, strides=strides).copy_(t)
    return finish_created(t, requires_grad)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    """Uniform [0, 1) values with ``input``'s shape, dtype and layout."""
    check_input(input, "rand_like")
    return _like(input, C.uniform, dtype_arg(dtype) or input.dtype, device, requires_grad,
                 memory_format, generator, low=0.0, high=1.0)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None):
    """Standard normal values with ``input``'s shape, dtype and layout."""
    check_input(input, "randn_like")
    return _like(input, C.normal, dtype_arg(dtype) or input.dtype, device, requires_grad,
                 memory_format, generator, mean=0.0, std=1.0)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None,
                 device=None, requires_grad=False, memory_format=None):
    """Integers in [low, high) with ``input``'s shape, dtype and layout: ``randint_like(x,
    high)`` or ``randint_like(x, low, high)``."""
    check_input(input, "randint_like")
    if high is None:
        low, high = 0, low
    lo = _int_arg(low, "randint_like", "low", 2)
    hi = _int_arg(high, "randint_like", "high", 3)
    return _like(input, C.randint, dtype_arg(dtype) or input.dtype, device, requires_grad,
                 memory_format, generator, low=lo, high=hi)


# ---------------------------------------------------------------- in-place fills

def _overwrite(self, result):
    """Write the sample ``result`` into ``self``; under autograd self's history gets a zero
    gradient (the values no longer depend on it)."""
    check_no_internal_overlap(self)
    if records_write(self, None):
        return copy_recorded(self, result)
    if TRACE.tracer is not None:
        TRACE.tracer.write(self, result)
    write(self._data, result._data)
    self._bump_version()
    return self


def _fill(self, op, generator, **attrs):
    check_inplace_leaf(self)
    if self.is_cuda and _on_cuda(op, self.dtype, self.device, generator):
        if op is C.bernoulli_scalar:
            C.check_probability(attrs["p"])
        r = _device.random(op.name, tuple(self._data.shape), self.dtype, tuple(attrs.values()),
                           self.device)
    else:
        r = call(op, shape=tuple(self._data.shape), dtype=self.dtype, generator=_bits(generator),
                 **attrs)
    return _overwrite(self, r)


def _on_cuda(op, dtype, device, generator):
    """Whether a sample is drawn on a CUDA device by its Philox kernels (uniform and normal
    floating samples, bernoulli draws of one probability, from the device's own generator)."""
    if generator is not None or as_device(device).type != "cuda":
        return False
    return op is C.bernoulli_scalar or (op in (C.uniform, C.normal) and dtype.is_floating_point)


def _bounds(args, kwargs, fn, names):
    """Positional/keyword parameters (``from`` is a keyword) of an in-place fill."""
    if len(args) > len(names):
        raise TypeError(f"{fn}() takes at most {len(names)} arguments ({len(args)} given)")
    vals = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in vals:
            raise TypeError(f"{fn}() got an unexpected keyword argument '{k}'")
        vals[k] = v
    return vals


@tensor_method
def uniform_(self, *args, generator=None, **kwargs):
    """Fill with uniform values in [from, to) (defaults 0 and 1)."""
    v = _bounds(args, kwargs, "uniform_", ("from", "to"))
    return _fill(self, C.uniform, generator, low=builtins.float(v.get("from", 0.0)),
                 high=builtins.float(v.get("to", 1.0)))


@tensor_method
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal values."""
    return _fill(self, C.normal, generator, mean=builtins.float(mean), std=builtins.float(std))


def _random_range(dtype):
    """random_()'s default [0, high): every value the dtype holds exactly."""
    if dtype is D.bool:
        return 2
    if dtype.is_floating_point:
        return 2 ** C.MANTISSA_DIGITS[dtype] + 1
    return C.LIMITS[dtype][1] + 1


_RANDOM_SIGNATURES = (" * (*, dynograph.Generator generator = None)\n"
                      " * (int from, int to, *, dynograph.Generator generator = None)\n"
                      " * (int to, *, dynograph.Generator generator = None)\n")


@tensor_method
def random_(self, *args, generator=None, **kwargs):
    """Fill with integers: ``random_()`` (all the dtype holds exactly), ``random_(to)``,
    ``random_(from, to)`` (``to=None``: up to the dtype's maximum)."""
    one_bound = len(args) == 1 and "to" not in kwargs          # random_(to)
    v = _bounds(args, kwargs, "random_", ("to",) if one_bound else ("from", "to"))
    if ("from" in v and "to" not in v) or any(x is not None and as_int(x) is None for x in v.values()):
        got = ", ".join([tname(a) for a in args] + [f"{k}={tname(x)}" for k, x in kwargs.items()])
        raise TypeError("random_() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n" + _RANDOM_SIGNATURES)
    low = as_int(v.get("from", 0))
    high = v.get("to")
    high = _random_range(self.dtype) if high is None else as_int(high)
    return _fill(self, C.randint, generator, low=low, high=high)


@tensor_method
def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential values of rate ``lambd``."""
    return _fill(self, C.exponential, generator, lambd=builtins.float(lambd))


@tensor_method
def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success."""
    return _fill(self, C.geometric, generator, p=builtins.float(p))


@tensor_method
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp of normal(mean, std) values."""
    return _fill(self, C.log_normal, generator, mean=builtins.float(mean), std=builtins.float(std))


@tensor_method
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy values."""
    return _fill(self, C.cauchy, generator, median=builtins.float(median),
                 sigma=builtins.float(sigma))


def _expand_error(target, shape):
    for i in range(1, len(shape) + 1):
        if shape[-i] != 1 and shape[-i] != target[-i]:
            return RuntimeError(
                f"The expanded size of the tensor ({target[-i]}) must match the existing size "
                f"({shape[-i]}) at non-singleton dimension {len(target) - i}.  Target sizes: "
                f"{list(target)}.  Tensor sizes: {list(shape)}")
    return RuntimeError(f"the number of sizes provided ({len(target)}) must be greater or equal "
                        f"to the number of dimensions in the tensor ({len(shape)})")


@tensor_method
def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws of probability ``p`` (a number or a broadcastable tensor)."""
    if not isinstance(p, Tensor):
        return _fill(self, C.bernoulli_scalar, generator, p=builtins.float(p))
    check_inplace_leaf(self)
    target = tuple(self._data.shape)
    if tuple(p._data.shape) != target:
        try:
            if np.broadcast_shapes(p._data.shape, target) != target:
                raise ValueError
        except ValueError:
            raise _expand_error(target, tuple(p._data.shape)) from None
        p = p.expand(target)
    return _overwrite(self, call(C.bernoulli, p.detach(), generator=_bits(generator)))

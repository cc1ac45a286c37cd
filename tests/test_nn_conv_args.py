"""conv1d/2d/3d and conv_transpose1d/2d/3d reject every invalid argument combination that
PyTorch rejects, with its exception type and message; valid ones give its shape and dtype."""
import warnings

import pytest

import dynograph

# PyTorch's messages that come from one backend library's internals, not from a check of the
# arguments: dynograph raises the same exception type with a message naming the problem
BACKEND_NOISE = ("could not create a primitive descriptor", "could not construct a memory descriptor",
                 "dimensions are invalid")


def _cases(fn, n):
    """(label, kwargs) of one function: the valid base case and one change at a time."""
    S, K = (5,) * n, (3,) * n
    transposed = fn.startswith("conv_transpose")
    base = dict(x=(2, 4) + S, w=((4, 6) if transposed else (6, 4)) + K)
    w01 = base["w"][:2]
    changes = [{}, dict(x=(4,) + S), dict(x=S), dict(x=(1, 2, 4) + S), dict(w=base["w"][:-1]),
               dict(w=base["w"] + (3,)), dict(w=(6,)), dict(x=(2, 3) + S),
               dict(w=(6, 2) + K, groups=2), dict(w=(6, 2) + K, groups=3), dict(w=(4, 3) + K, groups=2),
               dict(w=w01 + (6,) * n), dict(w=w01 + (7,) * n, padding=1), dict(w=w01 + (3,) * n, dilation=3),
               dict(w=w01 + (7,) * n, padding=(0,) * (n - 1) + (1,)),
               dict(b=(6,)), dict(b=(5,)), dict(b=(6, 1)), dict(b=()), dict(b=(12,)),
               dict(b=(6,), bd="float64"), dict(b=(6,), bd="int64"), dict(xd="float64", wd="float64", b=(6,)),
               dict(x=(0, 4) + S), dict(x=(2, 0) + S, w=(6, 0) + K), dict(x=(2, 4) + (0,) * n),
               dict(x=(2, 4) + (0,) * n, padding=2), dict(w=(0, 4) + K)]
    changes += [dict(groups=g) for g in (2, 3, 4, 0, -1)]
    for name in ("stride", "dilation", "padding"):
        for v in (0, -1, 2, (1,) * (n + 1), (1,) * (n - 1), (2,) * n, (1,), [1] * n, 1.5, (1.5,) * n, "a",
                  None, True):
            changes.append({name: v})
    changes += [dict(padding=p) for p in ("same", "valid", "foo", "SAME")]
    changes += [dict(padding="same", stride=2), dict(padding="same", stride=(1,) * (n - 1) + (2,)),
                dict(padding="same", dilation=2), dict(padding="same", w=w01 + (2,) * n),
                dict(padding="same", x=S), dict(padding="same", w=(6,))]
    dtypes = ("float32", "float64", "int64", "int32", "float16", "bfloat16", "bool")
    changes += [dict(xd=a, wd=b) for a in dtypes for b in dtypes]
    if transposed:
        changes += [dict(output_padding=v) for v in (1, 2, (1,) * n, -1, (0,) * (n + 1), "a")]
        changes += [dict(output_padding=1, stride=2), dict(output_padding=1, dilation=2),
                    dict(output_padding=2, stride=2, dilation=2), dict(output_padding=2, stride=3),
                    dict(output_padding=1, stride=2, padding=4), dict(padding=3), dict(padding=10),
                    dict(w=(4, 3) + K, groups=2, b=(6,)), dict(w=(4, 3) + K, groups=2, b=(3,))]
    return [(repr(c), {**base, **c}) for c in changes]


def _call(T, fn, x, w, b=None, xd="float32", wd="float32", bd="float32", **kwargs):
    def make(shape, dtype):
        return None if shape is None else T.ones(shape, dtype=getattr(T, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(T.nn.functional, fn)(make(x, xd), make(w, wd), make(b, bd), **kwargs)
        except Exception as e:          # the error is the result under test
            return e


FUNCTIONS = [(f"{kind}{n}d", n) for kind in ("conv", "conv_transpose") for n in (1, 2, 3)]


@pytest.mark.parametrize("fn,n", FUNCTIONS)
def test_conv_argument_sweep(torch, fn, n):
    for label, kwargs in _cases(fn, n):
        expect, got = _call(torch, fn, **kwargs), _call(dynograph, fn, **kwargs)
        where = f"{fn}{label}"
        if not isinstance(expect, Exception):
            assert not isinstance(got, Exception), f"{where}: {got!r}"
            assert tuple(got.shape) == tuple(expect.shape), where
            assert str(got.dtype).split(".")[-1] == str(expect.dtype).split(".")[-1], where
            continue
        assert type(got).__name__ == type(expect).__name__, f"{where}: {got!r} vs {expect!r}"
        text = str(expect)
        if "invalid combination of arguments" in text:      # names every argument as passed
            assert "argument '" in str(got) and "must be tuple of ints" in str(got), where
        elif "should be a MKLDNN tensor" in text and kwargs.get("xd") == "bfloat16":
            # a bfloat16 input takes torch's oneDNN path on CPUs with bfloat16 instructions
            # (AVX-512 BF16), which words the dtype mismatch its own way; elsewhere torch says
            # what dynograph says
            assert str(got).startswith("expected scalar type ") and " but found " in str(got), where
        elif not any(noise in text for noise in BACKEND_NOISE):
            assert str(got) == text.replace("torch.", "dynograph."), where


def test_zero_channels_and_batch_values(torch):
    # the shapes PyTorch gives empty inputs, with gradients flowing
    x = dynograph.zeros(0, 3, 5, 5, requires_grad=True)
    w = dynograph.ones(2, 3, 3, 3, requires_grad=True)
    y = dynograph.nn.functional.conv2d(x, w, dynograph.ones(2))
    assert y.shape == (0, 2, 3, 3)
    y.sum().backward()
    assert x.grad.shape == x.shape and float(w.grad.abs().sum()) == 0.0

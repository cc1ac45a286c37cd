"""Dtype coverage: every op over every dtype — the result dtype and values torch gives, or the
error torch raises where it refuses a dtype (``"x_cpu" not implemented for 'Bool'``).  Index
arguments are swept over int64, int32 and the dtypes torch refuses."""
import pytest

from families_common import check, values

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def _tol(dt):
    return (1e-2, 1e-2) if dt in ("float16", "bfloat16") else (1e-5, 1e-6)


UNARY = ["abs", "neg", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "floor", "ceil", "round",
         "trunc", "frac", "sign", "sgn", "reciprocal", "square", "bitwise_not", "logical_not",
         "isnan", "isinf", "signbit", "erf", "erfinv", "lgamma", "digamma", "expm1", "log1p",
         "rsqrt", "nan_to_num", "positive", "relu", "deg2rad", "exp2", "i0", "sinc", "angle",
         "fix", "clone"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(torch, name):
    for dt in DTYPES:
        check(torch, lambda L: getattr(L, name)(values(L, (2, 3), getattr(L, dt), lo=0.1)), *_tol(dt))


BINARY = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
          "atan2", "maximum", "minimum", "fmax", "fmin", "hypot", "copysign", "logaddexp",
          "nextafter", "bitwise_and", "bitwise_or", "bitwise_left_shift", "gcd", "lcm",
          "logical_xor", "eq", "lt", "heaviside", "xlogy", "ldexp", "float_power"]


@pytest.mark.parametrize("name", BINARY)
def test_binary(torch, name):
    for dt in DTYPES:
        # positive values: no division by zero or negative powers, whose results are undefined
        # for integers
        check(torch, lambda L: getattr(L, name)(values(L, (2, 3), getattr(L, dt), lo=1, hi=3),
                                                values(L, (3,), getattr(L, dt), lo=1, hi=3)),
              *_tol(dt))


@pytest.mark.parametrize("name", ["clamp_min", "clamp_max", "clamp"])
def test_clamp_family_over_dtypes_and_bound_kinds(torch, name):
    def call(L, dt, bound):
        x = values(L, (2, 3), getattr(L, dt))
        b = bound(L, dt)
        if name == "clamp":
            return L.clamp(x, b, None)
        return getattr(L, name)(x, b)
    bounds = {"int": lambda L, dt: 1, "float": lambda L, dt: 0.5, "bool": lambda L, dt: True,
              "tensor_same": lambda L, dt: values(L, (3,), getattr(L, dt)),
              "tensor_0d_bool": lambda L, dt: L.tensor(True),
              "tensor_0d_float": lambda L, dt: L.tensor(0.5)}
    for dt in DTYPES:
        for bound in bounds.values():
            check(torch, lambda L: call(L, dt, bound), *_tol(dt))


REDUCTIONS = ["sum", "prod", "mean", "nansum", "amax", "amin", "argmax", "max", "min", "all",
              "any", "std", "var", "logsumexp", "cumsum", "cumprod", "count_nonzero", "median",
              "nanmedian", "sort", "argsort", "norm", "aminmax", "softmax", "log_softmax",
              "cummax", "mode"]


def _reduce(L, name, x):
    if name in ("cumsum", "cumprod", "softmax", "log_softmax", "cummax"):
        return getattr(L, name)(x, 1)
    if name == "norm":
        return x.norm()
    return getattr(L, name)(x) if name not in ("mode",) else L.mode(x, 1)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(torch, name):
    for dt in DTYPES:
        check(torch, lambda L: _reduce(L, name, values(L, (2, 3), getattr(L, dt))), *_tol(dt))


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_dtype_argument(torch, fn):
    for src in DTYPES:
        for dst in ("float16", "bfloat16", "float32", "float64", "int64"):
            def call(L):
                f = getattr(L.nn.functional, fn)
                return f(values(L, (2, 3), getattr(L, src)), 1, dtype=getattr(L, dst))
            check(torch, call, *_tol("float16" if "16" in src + dst else src))


INDEXED = {
    "gather": lambda L, x, i: L.gather(x, 1, i.reshape(2, 2)),
    "take_along_dim": lambda L, x, i: L.take_along_dim(x, i.reshape(2, 2), 1),
    "scatter": lambda L, x, i: L.scatter(x, 1, i.reshape(2, 2), 5.0),
    "scatter_src": lambda L, x, i: L.scatter(x, 1, i.reshape(2, 2), x[:, :2]),
    "scatter_add": lambda L, x, i: L.scatter_add(x, 1, i.reshape(2, 2), x[:, :2]),
    "scatter_reduce": lambda L, x, i: L.scatter_reduce(x, 1, i.reshape(2, 2), x[:, :2], "amax"),
    "index_select": lambda L, x, i: L.index_select(x, 1, i),
    "index_add": lambda L, x, i: L.index_add(x, 1, i, x[:, :4]),
    "index_copy": lambda L, x, i: L.index_copy(x, 1, i[:2], x[:, :2]),
    "index_fill": lambda L, x, i: L.index_fill(x, 1, i, -1.0),
    "index_reduce": lambda L, x, i: L.index_reduce(x, 1, i, x[:, :4], "amax"),
    "take": lambda L, x, i: L.take(x, i),
    "put": lambda L, x, i: L.put(x, i, x.reshape(-1)[:4]),
    "getitem": lambda L, x, i: x[:, i],
    "embedding": lambda L, x, i: L.nn.functional.embedding(i, x.T),
    "one_hot": lambda L, x, i: L.nn.functional.one_hot(i, 3),
    "bincount": lambda L, x, i: L.bincount(i),
    "repeat_interleave": lambda L, x, i: L.repeat_interleave(i),
    "nll_loss": lambda L, x, i: L.nn.functional.nll_loss(x.T[:2], i[:2]),
}


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_index_arguments_over_integer_dtypes(torch, name):
    for dt in ("int64", "int32", "int16", "uint8", "bool", "float32"):
        def call(L):
            x = values(L, (2, 3))
            i = L.tensor([0, 2, 1, 1]).to(getattr(L, dt))
            return INDEXED[name](L, x, i)
        check(torch, call)


@pytest.mark.parametrize("name", ["gather", "take_along_dim", "index_select", "scatter_add"])
def test_source_dtypes_of_index_ops(torch, name):
    for dt in DTYPES:
        def call(L):
            x = values(L, (2, 3), getattr(L, dt))
            return INDEXED[name](L, x, L.tensor([0, 2, 1, 1]))
        check(torch, call, *_tol(dt))


NN = {
    "relu": lambda F, x: F.relu(x),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "relu6": lambda F, x: F.relu6(x),
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "elu": lambda F, x: F.elu(x),
    "gelu": lambda F, x: F.gelu(x),
    "silu": lambda F, x: F.silu(x),
    "softplus": lambda F, x: F.softplus(x),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "softshrink": lambda F, x: F.softshrink(x),
    "threshold": lambda F, x: F.threshold(x, 0.5, 2.0),
    "normalize": lambda F, x: F.normalize(x),
    "layer_norm": lambda F, x: F.layer_norm(x, (3,)),
    "linear": lambda F, x: F.linear(x, x),
    "dropout_eval": lambda F, x: F.dropout(x, training=False),
    "pad": lambda F, x: F.pad(x, (1, 1)),
    "pad_reflect": lambda F, x: F.pad(x.unsqueeze(0), (1, 1), "reflect"),
    "avg_pool1d": lambda F, x: F.avg_pool1d(x.unsqueeze(0), 2),
    "max_pool1d": lambda F, x: F.max_pool1d(x.unsqueeze(0), 2),
    "adaptive_avg_pool1d": lambda F, x: F.adaptive_avg_pool1d(x.unsqueeze(0), 2),
    "interpolate": lambda F, x: F.interpolate(x.unsqueeze(0), scale_factor=2),
    "mse_loss": lambda F, x: F.mse_loss(x, x),
    "cross_entropy": lambda F, x: F.cross_entropy(x, F.one_hot(x.argmax(1) if x.dim() > 1 else x.argmax(), 3)
                                                  .argmax(-1)),
    "cross_entropy_smoothing": lambda F, x: F.cross_entropy(x, x.argmax(1), label_smoothing=0.1),
    "nll_loss": lambda F, x: F.nll_loss(x, x.argmax(1)),
    "nll_loss_all_ignored": lambda F, x: F.nll_loss(x, x.argmax(1) * 0 - 100),
}


@pytest.mark.parametrize("name", sorted(NN))
def test_nn_functional(torch, name):
    for dt in DTYPES:
        check(torch, lambda L: NN[name](L.nn.functional, values(L, (2, 3), getattr(L, dt))), *_tol(dt))

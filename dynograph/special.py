"""``dynograph.special``: PyTorch's special functions.

Most names are the elementwise functions dynograph already has under another name
(``expit`` is ``sigmoid``, ``psi`` is ``digamma``); the rest call the primitives of
compiler/ops/special.py.  ``i0``, ``igamma`` and ``igammac`` are also top-level functions
and Tensor methods, as in PyTorch.
"""
import dynograph as _dg
from dynograph.compiler.ops import special as _S
from ._dispatch import call as _call
from ._inplace import assign as _assign
from ._math import finish, need_tensor
from ._tensor import Tensor as _Tensor, tensor_method as _tensor_method

__all__ = [  # with the Bessel functions and the polynomials, added where they are made
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc",
    "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
    "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax",
    "xlog1py", "xlogy", "zeta",
]

_SQRT1_2 = 0.7071067811865476


def _unary(op, name):
    def fn(input, *, out=None):
        need_tensor(input, "special_" + name)
        return finish("special_" + name, _call(op, input), out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (torch.special.{name})."
    return fn


def _binary(op, name, numbers=True, fname=None):
    """(input, other): one of them may be a Python number where PyTorch allows it."""
    fname = fname or "special_" + name

    def fn(input, other, *, out=None):
        if not numbers:
            need_tensor(input, fname)
            need_tensor(other, fname, "other", 2)
        elif not isinstance(input, _Tensor) and not isinstance(other, _Tensor):
            got = ", ".join(type(a).__name__ for a in (input, other))
            raise TypeError(f"{fname}() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n * (Tensor input, Tensor other)\n"
                            " * (Number self, Tensor other)\n * (Tensor input, Number other)")
        return finish(fname, _call(op, input, other), out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (torch.special.{name})."
    return fn


i0 = _unary(_S.i0, "i0")
i0e = _unary(_S.special_i0e, "i0e")
i1 = _unary(_S.special_i1, "i1")
i1e = _unary(_S.special_i1e, "i1e")
ndtri = _unary(_S.special_ndtri, "ndtri")
log_ndtr = _unary(_S.special_log_ndtr, "log_ndtr")
erfcx = _unary(_S.special_erfcx, "erfcx")
entr = _unary(_S.special_entr, "entr")
for _name, _op in _S.BESSEL.items():
    globals()[_name] = _unary(_op, _name)
    __all__.append(_name)
xlog1py = _binary(_S.special_xlog1py, "xlog1py")
zeta = _binary(_S.special_zeta, "zeta")
gammainc = _binary(_S.igamma, "gammainc", numbers=False)
gammaincc = _binary(_S.igammac, "gammaincc", numbers=False)
for _name, _op in _S.POLYNOMIALS.items():
    globals()[_name] = _binary(_op, _name)
    globals()[_name].__doc__ = f"The {_name.replace('_', ' ')} of degree ``n`` at ``input``."
    __all__.append(_name)


def ndtr(input, *, out=None):
    """The standard normal distribution function, ``(1 + erf(x / sqrt(2))) / 2`` as in PyTorch."""
    need_tensor(input, "special_ndtr")
    return finish("special_ndtr", (1 + _dg.erf(input * _SQRT1_2)) * 0.5, out)


def multigammaln(input, p, *, out=None):
    """The multivariate log-gamma function of dimension ``p``."""
    return finish("special_multigammaln", _dg.mvlgamma(input, p), out)


def softmax(input, dim, *, dtype=None):
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return input.log_softmax(dim, dtype=dtype)


# the names torch.special shares with dynograph's elementwise functions
digamma = psi = _dg.digamma
erf, erfc, erfinv = _dg.erf, _dg.erfc, _dg.erfinv
exp2, expm1, log1p = _dg.exp2, _dg.expm1, _dg.log1p
expit = _dg.sigmoid
gammaln = _dg.lgamma
logit, logsumexp, polygamma = _dg.logit, _dg.logsumexp, _dg.polygamma
round, sinc, xlogy = _dg.round, _dg.sinc, _dg.xlogy  # noqa: A001


# ---------------------------------------------------------------- top-level i0, igamma(c)

igamma = _binary(_S.igamma, "igamma", numbers=False, fname="igamma")
igamma.__doc__ = "The regularized lower incomplete gamma function P(input, other)."
igammac = _binary(_S.igammac, "igammac", numbers=False, fname="igammac")
igammac.__doc__ = "The regularized upper incomplete gamma function Q(input, other)."


TOP_LEVEL = ("i0", "igamma", "igammac")
for _name in TOP_LEVEL:
    _fn = globals()[_name]
    _tensor_method(_fn)

    def _inplace(self, *args, _fn=_fn, **kwargs):
        return _assign(self, _fn(self, *args, **kwargs))
    _inplace.__name__ = _name + "_"
    _tensor_method(_inplace)

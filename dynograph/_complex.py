"""Complex tensors: building them (``complex``, ``polar``, ``view_as_complex``), taking them
apart (``real``, ``imag``, ``view_as_real``, ``abs``, ``angle``) and conjugation.

dynograph has no lazy conjugate bit: ``conj`` computes the conjugate (``is_conj()`` is always
False).  For real tensors these functions are what PyTorch makes them: ``real`` and ``conj``
return the input itself.  docs/complex.md lists what else works on complex tensors.
"""
from dynograph.compiler.ops import complex_numbers as CX
from .runtime import dtypes as D
from ._dispatch import call
from ._inplace import assign
from ._math import finish, need_tensor
from ._tensor import Tensor, tensor_method

__all__ = ["view_as_real", "view_as_complex", "complex", "polar", "real", "imag", "conj",
           "conj_physical", "conj_physical_", "resolve_conj", "isreal", "is_complex", "is_conj"]


def view_as_real(input):
    """A complex tensor's memory seen as real pairs: shape (..., 2), sharing memory."""
    need_tensor(input, "view_as_real")
    return call(CX.view_as_real, input)


def view_as_complex(input):
    """A real tensor of shape (..., 2) (last dim contiguous) seen as complex numbers."""
    need_tensor(input, "view_as_complex")
    return call(CX.view_as_complex, input)


def complex(real, imag, *, out=None):  # noqa: A001 - torch's name
    """``real + i imag`` from two float32 (or two float64) tensors, broadcast."""
    need_tensor(real, "complex", "real")
    need_tensor(imag, "complex", "imag", 2)
    return finish("complex", call(CX.make_complex, real, imag), out)


def polar(abs, angle, *, out=None):  # noqa: A002 - torch's names
    """``abs * (cos(angle) + i sin(angle))``."""
    need_tensor(abs, "polar", "abs")
    need_tensor(angle, "polar", "angle", 2)
    return finish("polar", call(CX.polar, abs, angle), out)


def real(input):
    """The real parts, as a view; for real tensors, ``input`` itself."""
    need_tensor(input, "real")
    return call(CX.real, input) if input.is_complex() else input


def imag(input):
    """The imaginary parts, as a view (complex tensors only)."""
    need_tensor(input, "imag")
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return call(CX.imag, input)


Tensor.real = property(real)
Tensor.imag = property(imag)


@tensor_method
def conj(input):
    """The complex conjugate (computed: dynograph has no lazy conjugate view); for real
    tensors, ``input`` itself."""
    need_tensor(input, "conj")
    return call(CX.conj_physical, input) if input.is_complex() else input


@tensor_method
def conj_physical(input, *, out=None):
    """The complex conjugate in new memory; for real tensors, ``input`` itself."""
    need_tensor(input, "conj_physical")
    if input.is_complex():
        return finish("conj_physical", call(CX.conj_physical, input), out)
    return input if out is None else finish("conj_physical", input.clone(), out)


@tensor_method
def conj_physical_(input):
    """Conjugate in place (real tensors are left as they are)."""
    need_tensor(input, "conj_physical_")
    return assign(input, call(CX.conj_physical, input)) if input.is_complex() else input


@tensor_method
def resolve_conj(input):
    """``input`` with a lazy conjugation applied: dynograph tensors have none."""
    return input


@tensor_method
def is_conj(input):
    """Whether the tensor is a lazily conjugated view (never, in dynograph)."""
    need_tensor(input, "is_conj")
    return False


@tensor_method
def isreal(input):
    """Whether each element is real: its imaginary part is 0 (always, for real dtypes)."""
    need_tensor(input, "isreal")
    if input.is_complex():
        return input.imag == 0
    return input.new_ones(input.shape, dtype=D.bool)


@tensor_method
def cfloat(self, memory_format=None):
    """``self.to(dynograph.complex64)``."""
    return self.to(D.complex64)


@tensor_method
def cdouble(self, memory_format=None):
    """``self.to(dynograph.complex128)``."""
    return self.to(D.complex128)


def is_complex(input):
    """Whether ``input`` has a complex dtype."""
    need_tensor(input, "is_complex")
    return input.is_complex()

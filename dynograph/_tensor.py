"""The Tensor class: a numpy buffer plus autograd fields.

Only the core lives here (construction from arrays, attributes, conversion, Python
protocols).  Each op module attaches its functions as methods with ``tensor_method``,
so the math of every op stays in one place (the op set) and its Python signature in
one other (the module that declares the public function).
"""
import sys

import numpy as np

from dynograph._trace_hook import TRACE
from dynograph.compiler.ops.creation import with_torch_strides
from dynograph.runtime import dtypes as D
from dynograph.runtime.device import CPU
from dynograph.runtime.cuda_memory import DeviceArray

FROM_NUMPY = D.FROM_NUMPY


class Size(tuple):
    """The shape of a tensor: a tuple that prints as ``dynograph.Size([2, 3])``."""

    def __repr__(self):
        if TRACE.tracer is not None:        # the user's code turns the sizes into text
            for n in self:
                TRACE.tracer.size_used(int.__int__(n), "value", None, sys._getframe(1))
        return f"dynograph.Size([{', '.join(str(int.__int__(n)) for n in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= int.__int__(s)
        return _traced_size(n)

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))


def _traced_size(n):
    """A size computed for the user's code: a SizeInt while tracing, to see how it is used."""
    if TRACE.tracer is None:
        return n
    return TRACE.tracer.sizes((n,), sys._getframe(2))[0]


class Tensor:
    """A multi-dimensional array with autograd.  ``_data`` is the numpy view it owns.

    Fields not set on an instance fall back to these class defaults, which keeps
    wrapping an op's result cheap.
    """

    __array_priority__ = 1000        # numpy defers ``array + tensor`` to Tensor.__radd__
    _rg = False                      # requires_grad (the property below validates writes)
    grad_fn = None
    _grad = None
    _base = None                     # the tensor this one is a view of
    _vc = None                       # version counter box shared by a base and its views
    _retains_grad = False
    _hooks = None
    _is_param = False

    # __init__ (torch.Tensor(...), the legacy constructor) and __repr__ are attached by
    # _creation and _printing, which build on this module

    # ---------------------------------------------------------------- construction

    @staticmethod
    def _wrap(array):
        if not array.size and type(array) is np.ndarray:
            array = with_torch_strides(array)
        t = object.__new__(Tensor)
        t._data = array
        return t

    # ---------------------------------------------------------------- attributes

    @property
    def dtype(self):
        return FROM_NUMPY[self._data.dtype]

    @property
    def shape(self):
        if TRACE.tracer is not None:
            return TRACE.tracer.sizes(self._data.shape, sys._getframe(1))
        return Size(self._data.shape)

    def size(self, dim=None):
        shape = self._data.shape
        if TRACE.tracer is not None:
            shape = TRACE.tracer.sizes(shape, sys._getframe(1))
        if dim is None:
            return Size(shape)
        from dynograph.compiler.ops.core import wrap_dim
        return shape[wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    ndimension = dim

    def numel(self):
        return _traced_size(self._data.size)

    nelement = numel

    def element_size(self):
        return self._data.itemsize

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return self._data.nbytes

    @property
    def device(self):
        d = self._data
        return d.device if type(d) is DeviceArray else CPU

    @property
    def is_cuda(self):
        return type(self._data) is DeviceArray

    @property
    def is_cpu(self):
        return type(self._data) is not DeviceArray

    @property
    def layout(self):
        return "strided"

    def is_floating_point(self):
        return self._data.dtype.kind == "f" or self.dtype is D.bfloat16

    def is_complex(self):
        return self._data.dtype.kind == "c"

    def stride(self, dim=None):
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        if dim is None:
            return strides
        from dynograph.compiler.ops.core import wrap_dim
        return strides[wrap_dim(dim, self._data.ndim)]

    def storage_offset(self):
        if type(self._data) is DeviceArray:
            return self._data.offset // self._data.itemsize
        base = self._data
        while isinstance(base.base, np.ndarray):
            base = base.base
        return (self._data.__array_interface__["data"][0]
                - base.__array_interface__["data"][0]) // self._data.itemsize

    def data_ptr(self):
        if type(self._data) is DeviceArray:
            return self._data.address
        return self._data.__array_interface__["data"][0]

    def is_contiguous(self, memory_format=None):
        return self._data.flags.c_contiguous or self._data.size <= 1

    def get_device(self):
        return self._data.index if type(self._data) is DeviceArray else -1

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        if value:
            if not (self.is_floating_point() or self.is_complex()):
                raise RuntimeError(
                    "only Tensors of floating point and complex dtype can require gradients")
        elif self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        self._rg = bool(value)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _version(self):
        return 0 if self._vc is None else self._vc[0]

    def _bump_version(self):
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        vc[0] += 1

    def _version_box(self):
        if self._vc is None:
            self._vc = [0]
        return self._vc

    # ---------------------------------------------------------------- conversion

    def numpy(self, *, force=False):
        if TRACE.tracer is not None:
            TRACE.tracer.graph_break('Tensor.numpy() hands the data to code the compiler cannot see')
        if self.requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        self._host_check()
        return self._data

    def _host_check(self):
        """numpy() and friends on a cuda tensor: torch's error."""
        if type(self._data) is DeviceArray:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")

    def _host_data(self):
        """The elements in host memory: the array itself, or a copy of a cuda tensor's."""
        d = self._data
        return d.to_host() if type(d) is DeviceArray else d

    def __array__(self, dtype=None, copy=None):
        if TRACE.tracer is not None:
            TRACE.tracer.graph_break('the tensor is converted to a numpy array (non-dynograph code)')
        self._host_check()
        if dtype is None:
            return self._data
        return self._data.astype(dtype, copy=False)

    def tolist(self):
        if TRACE.tracer is not None:
            TRACE.tracer.graph_break('Tensor.tolist() reads values into Python')
        data = self._host_data()
        return data.astype(np.float32).tolist() if D.is_bfloat16(data.dtype) else data.tolist()

    def item(self):
        if TRACE.tracer is not None:
            TRACE.tracer.graph_break('Tensor.item() reads a value into Python')
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        data = self._host_data()
        return float(data.reshape(())) if D.is_bfloat16(data.dtype) else data.reshape(()).item()

    def _scalar_check(self, what):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")

    def __bool__(self):
        if TRACE.tracer is not None:
            TRACE.tracer.graph_break("bool(tensor) lets a tensor's value steer Python control flow")
        if self._data.size != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is ambiguous"
                if self._data.size > 1 else
                "Boolean value of Tensor with no values is ambiguous")
        return bool(self.item())

    def __float__(self):
        self._scalar_check("float")
        return float(self.item())

    def __int__(self):
        self._scalar_check("int")
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        self._scalar_check("complex")
        return complex(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        if TRACE.tracer is not None:          # len() makes it a plain int: a use of the size
            TRACE.tracer.size_used(self._data.shape[0], "value", None, sys._getframe(1))
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, protocol):
        # pickling (used by multiprocessing): data, dtype and requires_grad
        data = self._host_data()
        return (_rebuild, (data.copy() if not data.flags.c_contiguous else data,
                           self.requires_grad, str(self.device)))


    def __format__(self, spec):
        if self._data.ndim == 0:        # torch formats 0-d tensors as their Python value
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    @property
    def is_meta(self):
        return False


def _rebuild(array, requires_grad, device="cpu"):
    t = Tensor._wrap(array)
    if device != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad = True
    return t


def tensor_method(fn=None, *, name=None):
    """Attach ``fn`` to Tensor as a method (its first argument is the tensor)."""
    def attach(f):
        setattr(Tensor, name or f.__name__, f)
        return f
    return attach(fn) if fn is not None else attach


def exporters(names):
    """The two decorators an area module (``dynograph/_<area>.py``) marks its API with:
    ``public`` exports a function as dynograph.<name> and Tensor.<name>, ``function`` as
    dynograph.<name> only; both append the name to ``names``, the module's ``__all__``."""
    def public(fn):
        names.append(fn.__name__)
        tensor_method(fn)
        return fn

    def function(fn):
        names.append(fn.__name__)
        return fn
    return public, function

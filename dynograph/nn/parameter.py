"""Parameter and Buffer: the tensor kinds a Module registers by attribute assignment."""
import copy

from dynograph._tensor import Tensor


class Parameter(Tensor):
    """A Tensor a Module treats as a learnable parameter (``requires_grad=True`` by default).

    It shares the numpy buffer and version counter of the tensor it wraps, like torch.
    Ops on a Parameter return plain Tensors (results are built with ``Tensor._wrap``).
    """

    _is_param = True

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            import dynograph
            data = dynograph.empty(0)
        if requires_grad and not (data.is_floating_point() or data.is_complex()):
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        p = object.__new__(cls)
        p._data = data._data
        p._vc = data._version_box()
        if requires_grad:
            p.requires_grad = True
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(Tensor._wrap(self._data.copy()), self.requires_grad)
        memo[id(self)] = result
        if self._grad is not None:
            result._grad = copy.deepcopy(self._grad, memo)
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data.copy(), self.requires_grad))


def _rebuild_parameter(array, requires_grad):
    return Parameter(Tensor._wrap(array), requires_grad)


class _BufferMeta(type):
    # Buffer(...) returns a plain Tensor flagged ``_is_buffer``; isinstance checks the flag
    def __instancecheck__(cls, instance):
        return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute.

    As torch.nn.Buffer, ``Buffer(data, persistent=True)`` returns a plain Tensor sharing
    ``data``'s buffer, flagged so that ``isinstance(t, Buffer)`` holds and carrying ``persistent``.
    """

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            import dynograph
            data = dynograph.empty(0)
        t = data.detach()
        if data.requires_grad:
            t.requires_grad = True
        t._is_buffer = True
        t.persistent = persistent
        return t

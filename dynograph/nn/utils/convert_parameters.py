"""Flatten parameters into one vector and copy a vector back into parameters."""
import dynograph as _d
from ..modules.module import typename_of

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, first_device):
    if first_device is not None and param.device != first_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter's values, in order."""
    device, parts = None, []
    for param in parameters:
        device = _check_same_device(param, device)
        parts.append(param.view(-1))
    return _d.cat(parts)


def vector_to_parameters(vec, parameters):
    """Replace each parameter's data with the next ``numel()`` values of ``vec``."""
    if not isinstance(vec, _d.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {typename_of(vec)}")
    device, pointer = None, 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n

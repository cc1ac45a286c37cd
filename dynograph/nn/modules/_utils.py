"""Argument parsing shared by the layer modules (as torch.nn.modules.utils)."""


def _ntuple(n):
    """A parser: a list or tuple as a tuple, anything else repeated ``n`` times."""
    def parse(x):
        if isinstance(x, (list, tuple)):
            return tuple(x)
        return (x,) * n
    return parse


_single, _pair, _triple, _quadruple = _ntuple(1), _ntuple(2), _ntuple(3), _ntuple(4)

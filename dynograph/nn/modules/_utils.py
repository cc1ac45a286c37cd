"""Argument parsing shared by the layer modules (as torch.nn.modules.utils)."""


def ntuple(n):
    """A parser: a list or tuple as a tuple, anything else repeated ``n`` times."""
    def parse(x):
        if isinstance(x, (list, tuple)):
            return tuple(x)
        return (x,) * n
    return parse


single, _pair, _triple, _quadruple = ntuple(1), ntuple(2), ntuple(3), ntuple(4)

"""dynograph.export: programs traced once, saved to a file, and run without their source.

    ep = dynograph.export.export(model, (x,), dynamic_shapes={"x": {0: Dim("batch")}})
    print(ep)                                   # the IR text and the preconditions
    dynograph.export.save(ep, "model.dgx")
    ep = dynograph.export.load("model.dgx")     # in another process, without model's source
    y = ep.module()(x)

The trace is the compiler's (``dynograph.compile``'s, with the whole graph required); see
docs/export.md for the file format, the preconditions and the versioning rule.
"""
from .dims import Dim
from .errors import ExportError
from .file import FORMAT, VERSION, load, save
from .program import ExportedProgram

__all__ = ["Dim", "ExportError", "ExportedProgram", "export", "load", "save", "FORMAT", "VERSION"]


def export(fn_or_module, args, kwargs=None, dynamic_shapes=None, *, strict=True, training=False):
    """Trace ``fn_or_module(*args, **kwargs)`` into an ``ExportedProgram``.

    The function runs for real on the example inputs (on private copies of the tensors):
    Python control flow is specialized away and every op is recorded.  ``training=False``
    (default) traces the forward pass for inference, under ``no_grad``; call ``model.eval()``
    first for dropout and batch normalization to behave as in inference.  ``training=True``
    traces a whole training step: ``loss.backward()`` and ``optimizer.step()`` inside the
    function become part of the program, whose ``state`` (parameters, optimizer state) each
    call of ``ep.module()`` then updates.  The traced call is a real step, as the first call of
    a compiled function is (two steps with ``dynamic_shapes``): the program starts from the
    state as it is after export.

    ``dynamic_shapes`` (torch.export's forms: a dict by input name or a tuple by position, each
    entry ``{dim: Dim(...)}``, a tuple of ``Dim``/None per dimension, or None) makes dimensions
    symbolic; they share one size, ``s0`` (the batch size).  Everything else is a precondition
    of the program: the input structure, dtypes, the other sizes, and non-tensor inputs' values.

    ``strict`` is accepted for torch.export's signature: the trace is always strict (a graph
    break is an ``ExportError``-like error naming the user's line).
    """
    from ._capture import capture
    from .program import build
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ExportError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    return build(capture(fn_or_module, args, kwargs or {}, dynamic_shapes, training))

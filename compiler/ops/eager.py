"""The eager functions derivative rules call, installed by the eager core.

A derivative rule computes with the tensors it receives: their methods and operators cover
most of it.  For the rest it calls the functions of this module:

    call(op, *args, **attrs)   run one primitive through the dispatcher (recorded by autograd,
                               so double backward works)
    cat, stack, solve, svd, det   the public functions of those names

They live in the eager core, a layer above the op set, so the op set never imports them:
``dynograph`` installs them here when it is imported (``install``), before any rule runs.
"""
_INSTALLED = {}


def install(**functions):
    """Called once by ``dynograph/__init__.py`` with the eager functions listed above."""
    _INSTALLED.update(functions)


def call(op, *args, **attrs):
    """Run the primitive ``op`` eagerly (the dispatcher's ``call``)."""
    return _INSTALLED["call"](op, *args, **attrs)


def __getattr__(name):
    try:
        return _INSTALLED[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (the eager core "
                             "installs cat, stack, solve, svd and det when dynograph is imported)") \
            from None

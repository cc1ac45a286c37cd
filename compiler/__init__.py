"""dynograph.compiler: the op set, the graph IR, the tracer, the passes and the code generators."""


def __getattr__(name):
    # imported lazily: the op set loads first, and the tracer needs dynograph's tensors
    if name == "explain":
        from .explain import explain
        return explain
    raise AttributeError(name)

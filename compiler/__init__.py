"""dynograph.compiler: the op set (and, later, the IR, tracer, passes and code generators)."""

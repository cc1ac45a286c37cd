"""dynograph.compiler: the op set, the graph IR, the tracer, the passes and the code generators.

Nothing is imported here: the op set loads first (the eager core needs it), and each layer
above imports the modules it needs (docs/architecture.md, "Layers")."""

"""Graph-to-graph passes.  Each is a pure function ``Graph -> Graph`` in its own module."""

"""Lowering: the scalar builder interface of the op set's rules (scalar.py) and the
backend-neutral loop-level kernel description (kernel.py)."""

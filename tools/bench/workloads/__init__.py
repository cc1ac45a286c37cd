"""Workload modules; importing this package registers all of them."""
from . import eager  # noqa: F401
from . import serialization  # noqa: F401
from . import data  # noqa: F401
from . import training  # noqa: F401
from . import compiler  # noqa: F401
from . import llvm  # noqa: F401
from . import llvm_compile  # noqa: F401

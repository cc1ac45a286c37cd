"""The Module base class, containers and layers of dynograph.nn."""
from .module import Module  # noqa: F401
from .container import (  # noqa: F401
    Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict,
)

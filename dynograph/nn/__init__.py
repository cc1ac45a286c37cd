"""dynograph.nn: modules, parameters, functional forms and initializers (built from dynograph ops)."""
from .parameter import Parameter, Buffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from . import functional, init  # noqa: F401
from . import utils  # noqa: F401
from . import parallel  # noqa: F401

"""dynograph: PyTorch's programming model, with a compiler to native code.

    import dynograph as torch
    x = torch.ones(2, 2, requires_grad=True)
    (x * 3).sum().backward()
"""
from dynograph.runtime.dtypes import (  # noqa: F401
    dtype, bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
    complex64, complex128, promote_types, get_default_dtype, set_default_dtype, finfo, iinfo)
from dynograph.runtime.device import device  # noqa: F401
from dynograph.runtime.host_memory import keep_freed_memory as _keep_freed_memory

from ._tensor import Tensor, Size  # noqa: F401
from . import _autograd_methods  # noqa: F401
from . import autograd  # noqa: F401
from .autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled,  # noqa: F401
                                 inference_mode, is_grad_enabled, is_inference_mode_enabled)
from .autograd.anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa: F401
from ._creation import *  # noqa: F401,F403
from ._math import *  # noqa: F401,F403
from ._complex import *  # noqa: F401,F403

from . import cuda, backends, version  # noqa: F401
from ._threads import get_num_threads, set_num_threads  # noqa: F401
from ._printing import *  # noqa: F401,F403
from ._reduce import *  # noqa: F401,F403
from ._shape import *  # noqa: F401,F403
from ._convert import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from . import linalg  # noqa: F401
from ._linalg_extra import (cholesky_solve, cholesky_inverse, triangular_solve,  # noqa: F401,E402
                            matrix_exp, lu_unpack, lu_legacy as lu, lu_solve_legacy as lu_solve,
                            vander_top_level as vander)
from ._linalg_aliases import *  # noqa: F401,F403  (torch.svd, torch.norm ...: built on linalg)
from ._indexing import *  # noqa: F401,F403
from ._statistics import *  # noqa: F401,F403
from ._combinatorics import *  # noqa: F401,F403
from ._copies import *  # noqa: F401,F403
from ._tensor_queries import *  # noqa: F401,F403
from ._constants import *  # noqa: F401,F403
from . import masked  # noqa: F401,E402
from ._random import *  # noqa: F401,F403
from . import random  # noqa: F401,E402
from . import nn, optim, utils  # noqa: F401,E402
from ._functional_exports import *  # noqa: F401,F403,E402
from ._aten_forms import *  # noqa: F401,F403,E402
from . import special  # noqa: F401,E402
from .special import i0, igamma, igammac  # noqa: F401,E402
from ._windows import *  # noqa: F401,F403,E402
from . import signal  # noqa: F401,E402
from . import fft  # noqa: F401,E402
from ._stft import stft, istft  # noqa: F401,E402
from .compiler.compiled import compile, trace  # noqa: F401,E402,A004
from .serialization import save, load  # noqa: F401,E402
from . import futures  # noqa: F401,E402

# derivative rules in the op set (a layer below) call these eager functions: compiler/ops/eager.py
from ._dispatch import call as _call  # noqa: E402
from .compiler.ops import eager as _rule_functions  # noqa: E402
_rule_functions.install(call=_call, cat=cat, stack=stack,  # noqa: F405
                        solve=linalg.solve, svd=linalg.svd, det=linalg.det)

# dtype aliases as torch spells them (defined last: they shadow builtins in this module)
float = float32   # noqa: A001  torch.float
double = float64
half = float16
long = int64
int = int32       # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128


def __getattr__(name):
    # dynograph.export and dynograph.onnx load on first use: onnx is an optional extra, and
    # `import dynograph` must not import it
    if name in ("export", "onnx"):
        import importlib
        return importlib.import_module(f"dynograph.{name}")
    raise AttributeError(f"module 'dynograph' has no attribute {name!r}")

from .version import __version__  # noqa: F401,E402

_keep_freed_memory()     # eager steps reuse freed host memory (runtime/host_memory.py)

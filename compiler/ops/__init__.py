"""The one op set.  Importing this package registers every primitive in ``REGISTRY``."""
from .core import REGISTRY, OpDef, TensorSpec, define  # noqa: F401
from . import elementwise  # noqa: F401
from . import reduction  # noqa: F401
from . import movement  # noqa: F401
from . import creation  # noqa: F401
from . import linalg  # noqa: F401
from . import indexing  # noqa: F401
from . import pooling  # noqa: F401
from . import normalization  # noqa: F401
from . import conv  # noqa: F401
from . import special  # noqa: F401
from . import spectral  # noqa: F401
from . import decompositions  # noqa: F401
from . import updates  # noqa: F401
from . import complex_numbers  # noqa: F401
complex_numbers.install()      # what each op above does with complex input
from . import collective  # noqa: F401,E402  (complex values reduce like any others)
from . import groups  # noqa: F401,E402  (last: derived from every op registered above)

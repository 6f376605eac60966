"""``nki.dtype``: the dtype namespace (an annotation alias in kernels; the same objects as
``nki.language``'s dtypes)."""
from .language.dtypes import *  # noqa: F401,F403
from .language.dtypes import DType, bool_  # noqa: F401

"""``nl.constants``."""
from ...nki.core import dtypes as _dt


def sizeinbytes(dtype) -> int:
    """Bytes per element of an NKI dtype."""
    return _dt.storage_dtype(_dt.as_dtype(dtype)).itemsize

"""``nki.tensor``: the tensor type (``NkiTensor``) kernels annotate with."""
from ...nki.core.tensor import NkiTensor  # noqa: F401

Tensor = NkiTensor
tensor = NkiTensor

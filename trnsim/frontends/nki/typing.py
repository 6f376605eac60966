"""``nki.typing``: annotation helpers (``nt.tensor[shape]``, ``nt.mutable_tensor``); no runtime
effect (new-API kernels may write any input; the simulator copies writes back)."""
from ..nki_legacy.typing import _Annotation, mutable_tensor, tensor  # noqa: F401

scalar = _Annotation("scalar")

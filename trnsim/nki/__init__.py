"""NKI semantics: tiles, buffers, indexing, rule checks and numpy execution of every instruction.
Importing it wires the tensor operators (see ``ops/__init__``) before any kernel runs."""
from . import ops as _ops  # noqa: F401

"""The seam between "what happens" (nki/, a torch capture) and "when" (timing/, fabric/): plain data only.

``Instruction``, ``Region``, ``Trace`` and ``LoopBlock`` (trace.py); no numpy, no NKI."""
from .trace import Instruction, InstructionList, LoopBlock, Region, Trace

__all__ = ["Instruction", "InstructionList", "LoopBlock", "Region", "Trace"]

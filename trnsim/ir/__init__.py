"""The seam between "what happens" (nki/, a torch capture) and "when" (timing/, fabric/).

``Instruction``, ``Region``, ``Trace`` and ``LoopBlock`` (trace.py); the one engine table
(engines.py); dtype widths (dtypes.py); the opcode registry (opcodes.py).  No numpy, no NKI."""
from . import dtypes, engines, opcodes
from .engines import ENGINES, EngineSpec
from .opcodes import OPCODES, OpcodeSpec, lookup, require_generation
from .trace import Instruction, InstructionList, LoopBlock, Region, Trace

__all__ = ["ENGINES", "EngineSpec", "Instruction", "InstructionList", "LoopBlock", "OPCODES",
           "OpcodeSpec", "Region", "Trace", "dtypes", "engines", "lookup", "opcodes",
           "require_generation"]

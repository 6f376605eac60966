"""Classify captured operators: trnsim op class, costable or not, CUDA-only, in the torch-neuronx list.

Both tables are package data (``data/op_classes.toml``, ``data/torch_neuronx_supported_ops.txt``), each
with its source; a user may pass their own files instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, FrozenSet, Optional, Tuple

from ...errors import ConfigError
from .records import CapturedOp

try:
    import tomllib as _toml
except ImportError:  # Python 3.10
    import tomli as _toml  # type: ignore

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
OP_CLASSES_FILE = os.path.join(DATA_DIR, "op_classes.toml")
SUPPORTED_FILE = os.path.join(DATA_DIR, "torch_neuronx_supported_ops.txt")

CUSTOM = "custom"      # an operator outside the aten namespace
UNKNOWN = "unknown"    # an aten operator no class lists


@dataclass(frozen=True)
class OpClass:
    """One class of ``op_classes.toml``: how its ops are costed."""
    name: str
    costable: bool
    op_kind: Optional[str]          # the trnsim.model.ops.Op kind, None when the op costs nothing
    flops_per_element: float
    ops: FrozenSet[str]
    cuda_only: FrozenSet[str]


@dataclass(frozen=True)
class OpTables:
    """The op-class table and the torch-neuronx documented list, loaded once."""
    classes: Tuple[OpClass, ...]
    by_op: Dict[str, OpClass]
    documented: FrozenSet[str]      # "aten::addmm", ...
    supported_source: str

    def op_class(self, op: CapturedOp) -> Optional[OpClass]:
        """The class of an aten op (None for custom or unlisted ops)."""
        if op.namespace != "aten":
            return None
        return self.by_op.get(base_name(op.name))

    def class_name(self, op: CapturedOp) -> str:
        """The class name of any op: a class of the table, ``custom`` or ``unknown``."""
        if op.namespace != "aten":
            return CUSTOM
        c = self.op_class(op)
        return c.name if c else UNKNOWN

    def is_cuda_only(self, op: CapturedOp) -> bool:
        """An aten op whose only kernels are CUDA ones (flash / efficient attention)."""
        c = self.op_class(op)
        return bool(c and base_name(op.name) in c.cuda_only)

    def is_costable(self, op: CapturedOp) -> bool:
        """Whether trnsim has a cost rule for the op's class."""
        c = self.op_class(op)
        return bool(c and c.costable)

    def in_list(self, qualname: str) -> bool:
        """Whether ``aten::name`` (or its in-place / functional twin) is on the documented list."""
        ns, _, name = qualname.partition("::")
        return any(f"{ns}::{v}" in self.documented for v in (name, base_name(name), base_name(name) + "_"))

    def is_documented(self, op: CapturedOp) -> bool:
        """On the torch-neuronx list: the op itself, or every op it lowers to (any spelling of each)."""
        if op.namespace != "aten":
            return False
        if self.in_list(op.qualname):
            return True
        if not op.lowers_to:
            return False
        return all(any(self.in_list(alt) for alt in step.split("|")) for step in op.lowers_to)


def base_name(name: str) -> str:
    """``add_`` -> ``add`` (export functionalizes in-place ops); ``_softmax`` keeps its leading underscore."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


@lru_cache(maxsize=8)
def load_tables(op_classes: str = OP_CLASSES_FILE, supported: str = SUPPORTED_FILE) -> OpTables:
    """Read the op-class TOML and the supported-ops text file (``#`` lines are comments)."""
    try:
        with open(op_classes, "rb") as f:
            raw = _toml.load(f)
        with open(supported, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read op tables: {e}", rule="op-tables", limit="readable TOML / text files",
                          value=str(e)) from None
    classes = []
    by_op: Dict[str, OpClass] = {}
    for name, body in raw.get("classes", {}).items():
        c = OpClass(name=name, costable=bool(body.get("costable", False)), op_kind=body.get("op_kind"),
                    flops_per_element=float(body.get("flops_per_element", 0)),
                    ops=frozenset(body.get("ops", ())) | frozenset(body.get("cuda_only", ())),
                    cuda_only=frozenset(body.get("cuda_only", ())))
        for op in c.ops:
            if op in by_op:
                raise ConfigError(f"operator {op!r} is listed in two classes", rule="op-tables",
                                  limit="one class per operator", value=f"{by_op[op].name}, {name}")
            by_op[op] = c
        classes.append(c)
    source = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("# source:")), "")
    documented = frozenset(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))
    return OpTables(tuple(classes), by_op, documented, source)

"""The opcode registry: per opcode its engines, cost class, lowest generation and operand roles.

One entry per instruction the trace can carry.  The NKI layer gates instructions and features on it
(``require_generation``: one check, one rule name "generation"); the timing model picks its cost
rule from ``cost_class`` (``lookup``), so an opcode that is not registered is an error there, never
a silent generic cost.  A new instruction is one row below plus its semantics (nki/) plus, when no
existing cost class fits, a cost rule (timing/costs.py).

Cost classes (which variant of the engine's timing rule applies; the engine that actually runs the
instruction picks the rule family -- Tensor, Vector, Scalar, GpSimd, Sync, DMA):
  matmul, matmul_mx        Tensor engine passes; MX runs K=512 in one pass at ``mx_speedup``
  two_input                Vector reads two full tensors per element (~2N cycles) [ARCH2]
  copy                     one-input pass-through (copy, tensor_scalar): bf16 fast path on Vector
                           and on Scalar
  copy_like                pass-through whose bf16 fast path exists on Vector only (memset,
                           reciprocal)
  stream                   any other elementwise/streaming instruction (cycles per element)
  sync                     bookkeeping on the Sync engine (loops, registers, barriers)
  dma, dma_transpose       DMA queues; a transpose pays the DMA-transpose efficiency
  collective               in-kernel collective between ranks (nki.collectives): its time comes from
                           the link figures (timing/collectives.py), not from the DMA-queue rates
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..errors import ConfigError, GenerationError, TrnsimError
from .engines import ENGINES

COST_CLASSES = ("matmul", "matmul_mx", "two_input", "copy", "copy_like", "stream", "sync", "dma",
                "dma_transpose", "collective")
GENERATION_NAME = {2: "NeuronCore-v2 (trn1)", 3: "NeuronCore-v3 (trn2)", 4: "NeuronCore-v4 (trn3)"}


class UnknownOpcodeError(ConfigError, KeyError):
    """An opcode the registry does not know (also a KeyError, for dict-like callers)."""
    rule = "unknown-opcode"

    def __str__(self) -> str:  # KeyError would quote the message
        return TrnsimError.__str__(self)


@dataclass(frozen=True)
class OpcodeSpec:
    """One instruction: engines it may run on (first = default), cost class, lowest generation
    (2 = NeuronCore-v2/trn1, 3 = v3/trn2, 4 = v4/trn3) and operand roles (NKI argument names)."""
    name: str
    engines: Tuple[str, ...]
    cost_class: str
    min_generation: int = 2
    operands: Tuple[str, ...] = ()

    @property
    def engine(self) -> str:
        """The default engine."""
        return self.engines[0]


def _op(name: str, engines: str, cost_class: str, min_generation: int, operands: str) -> OpcodeSpec:
    return OpcodeSpec(name, tuple(engines.split()), cost_class, min_generation,
                      tuple(operands.split()))


# ---- the table -------------------------------------------------------------------------------
# name, engines (first = default), cost class, lowest generation, operand roles.
# Generations: the NKI ISA docs and release notes (/work/shared/reference/nki-api.md); engines: the
# ISA pages' "engine" notes and the engines each instruction is traced on.
_TABLE = (
    # Tensor engine
    _op("nc_matmul", "tensor", "matmul", 2, "stationary moving dst"),
    _op("nc_matmul_mx", "tensor", "matmul_mx", 4,
        "stationary moving stationary_scale moving_scale dst"),
    # compiler-inserted partition-dim broadcast of a compute operand (nki/core/broadcast_lowering.py)
    _op("partition_broadcast", "tensor dma", "matmul", 2, "moving dst"),
    # Vector / GpSimd / Scalar elementwise
    _op("tensor_tensor", "vector gpsimd", "two_input", 2, "data1 data2 dst"),
    _op("scalar_tensor_tensor", "vector gpsimd", "two_input", 2, "data data1 dst"),
    _op("tensor_tensor_scan", "vector", "two_input", 2, "data0 data1 dst"),
    _op("select", "vector", "two_input", 2, "predicate on_true on_false dst"),
    _op("tensor_copy_predicated", "vector", "two_input", 2, "src predicate dst"),
    _op("select_reduce", "vector", "two_input", 2, "predicate on_true on_false dst reduce_res"),
    _op("tensor_copy", "vector scalar gpsimd", "copy", 2, "src dst"),
    _op("tensor_scalar", "vector scalar gpsimd", "copy", 2, "data operand0 operand1 dst"),
    _op("memset", "vector gpsimd scalar dma", "copy_like", 2, "dst"),
    _op("reciprocal", "vector", "copy_like", 2, "data dst"),
    _op("activation", "scalar", "stream", 2, "data bias scale dst"),
    _op("activation_reduce", "scalar", "stream", 2, "data bias scale dst reduce_res"),
    _op("tensor_reduce", "vector gpsimd", "stream", 2, "data dst"),
    _op("tensor_partition_reduce", "gpsimd", "stream", 2, "data dst"),
    _op("tensor_scalar_reduce", "vector", "stream", 2, "data operand0 dst reduce_res"),
    _op("tensor_scalar_cumulative", "vector", "stream", 2, "src imm0 imm1 dst"),
    _op("bn_stats", "vector", "stream", 2, "data dst"),
    _op("bn_aggr", "vector", "stream", 2, "data dst"),
    _op("max8", "vector", "stream", 2, "src dst"),
    _op("nc_find_index8", "vector", "stream", 2, "data vals dst"),
    _op("nc_match_replace8", "vector", "stream", 2, "data vals dst dst_idx"),
    _op("nc_transpose", "vector", "stream", 2, "data dst"),
    _op("nc_stream_shuffle", "vector", "stream", 2, "src dst"),
    _op("range_select", "vector", "stream", 3, "on_true_tile bound0 bound1 dst reduce_res"),
    _op("quantize_mx", "vector", "stream", 4, "src dst dst_scale"),
    _op("rand", "vector", "stream", 2, "dst"),
    _op("random_seed", "vector", "stream", 2, "seed"),
    _op("dropout", "vector", "stream", 2, "data prob dst"),
    _op("iota", "gpsimd", "stream", 2, "dst"),
    _op("affine_select", "gpsimd", "stream", 2, "on_true_tile dst"),
    _op("local_gather", "gpsimd", "stream", 2, "src_buffer index dst"),
    _op("nc_n_gather", "gpsimd", "stream", 2, "data indices dst"),
    _op("gather_flattened", "gpsimd", "stream", 2, "data indices dst"),
    _op("nonzero_with_count", "gpsimd", "stream", 3, "src dst"),
    _op("sequence_bounds", "gpsimd", "stream", 2, "segment_ids dst"),
    # Sync engine and cross-core bookkeeping
    _op("core_barrier", "gpsimd sync", "sync", 3, "data"),
    _op("register_load", "sync", "sync", 2, "src"),
    _op("register_store", "sync", "sync", 2, "dst"),
    _op("register_move", "sync", "sync", 2, ""),
    _op("dynamic_range", "sync", "sync", 2, ""),
    _op("fori_loop", "sync", "sync", 2, ""),
    _op("while_loop", "sync", "sync", 2, ""),
    # DMA
    _op("dma_copy", "dma", "dma", 2, "src dst"),
    _op("dma_transpose", "dma", "dma_transpose", 2, "src dst"),
    _op("dma_compute", "dma", "dma", 2, "srcs dst"),
    _op("sendrecv", "dma", "dma", 3, "src dst"),
    # ---- in-kernel collectives (nki.collectives; issue 10) ------------------------------------
    # Rank-to-rank traffic driven by the DMA rings; "relevant for Trn2, Trn3" on every API page
    # (awsdocs nki.collectives.*), hence generation 3.
    _op("all_reduce", "dma", "collective", 3, "srcs dsts"),
    _op("all_gather", "dma", "collective", 3, "srcs dsts"),
    _op("reduce_scatter", "dma", "collective", 3, "srcs dsts"),
    _op("all_to_all", "dma", "collective", 3, "srcs dsts"),
    _op("collective_permute", "dma", "collective", 3, "srcs dsts"),
    _op("collective_permute_implicit", "dma", "collective", 3, "srcs_by_channel dsts_by_channel"),
    _op("collective_permute_implicit_reduce", "dma", "collective", 3,
        "srcs0_by_channel srcs1_by_channel dsts_by_channel"),
    # ---- end of in-kernel collectives -----------------------------------------------------------
)

# Features gated below or beside an opcode: (key, lowest generation).  Keys: "<opcode>.<option>",
# "nl.<function>", "dtype.<name>", or a capability name; an opcode's own gate is its row above.
_FEATURE_TABLE = (
    ("matmul.double_row", 3),            # perf_mode double_row (fp8 K=256 per pass) [ARCH3]
    ("mx", 4),                           # microscaling matmul / quantize [ARCH4]
    ("dma.hwdge", 3),                    # dge_mode.hwdge on dma_copy / dma_transpose
    ("tensor_scalar.engine.scalar", 3),  # tensor_scalar on the Scalar engine
    ("tensor_scalar.engine.scalar.any_op", 4),  # v3's Scalar engine: only multiply[, add] or add
    ("tensor_copy.engine.scalar", 3),    # tensor_copy on the Scalar engine
    ("activation_reduce.non_add", 3),    # v2 reduces with add only
    ("tensor_scalar.op.square", 4),      # release notes 2.32: unary op0 on trn3
    ("tensor_scalar.op.relu", 4),
    ("nl.abs_max", 4),
    ("nl.abs_min", 4),
    ("dtype.float8_e4m3fn", 4),
    ("dtype.float8_e8m0fnu", 4),
    ("dtype.float8_e5m2_x4", 4),
    ("dtype.float8_e4m3fn_x4", 4),
    ("dtype.float4_e2m1fn_x4", 4),
)
# -----------------------------------------------------------------------------------------------

OPCODES: Dict[str, OpcodeSpec] = {s.name: s for s in _TABLE}
FEATURES: Dict[str, int] = dict(_FEATURE_TABLE)


def _check(spec: OpcodeSpec) -> OpcodeSpec:
    bad = [e for e in spec.engines if e not in ENGINES]
    if not spec.engines or bad:
        raise ConfigError(f"opcode {spec.name!r}: unknown engine(s) {bad}", rule="opcode-table",
                          limit=" | ".join(ENGINES), value=bad)
    if spec.cost_class not in COST_CLASSES:
        raise ConfigError(f"opcode {spec.name!r}: unknown cost class {spec.cost_class!r}",
                          rule="opcode-table", limit=" | ".join(COST_CLASSES),
                          value=spec.cost_class)
    return spec


for _s in _TABLE:
    _check(_s)


def lookup(opcode: str) -> OpcodeSpec:
    """The registry entry of ``opcode``; an unregistered one raises UnknownOpcodeError."""
    got = OPCODES.get(opcode)
    if got is None:
        raise UnknownOpcodeError(f"opcode {opcode!r} is not in the opcode registry",
                                 rule="unknown-opcode",
                                 limit=f"one of {len(OPCODES)} registered opcodes",
                                 value=opcode,
                                 hint="register it in trnsim/ir/opcodes.py (engines, cost class, "
                                      "lowest generation, operands)")
    return got


def register(spec: OpcodeSpec) -> OpcodeSpec:
    """Add (or replace) an opcode: the one step a new instruction needs in this layer."""
    OPCODES[spec.name] = _check(spec)
    return spec


def register_feature(name: str, min_generation: int) -> None:
    """Declare a feature key (``"matmul.double_row"``, ``"nl.abs_max"``, ...) and its lowest
    generation."""
    if not isinstance(min_generation, int) or isinstance(min_generation, bool) or \
            min_generation < 1:
        raise ConfigError(f"feature {name!r}: the lowest generation must be a positive integer",
                          rule="feature-table", limit=">= 1", value=min_generation)
    FEATURES[name] = min_generation


def min_generation(name: str) -> int:
    """Lowest generation of an opcode or feature key (a feature key wins over an opcode name)."""
    got = FEATURES.get(name)
    if got is not None:
        return got
    spec = OPCODES.get(name)
    if spec is not None:
        return spec.min_generation
    raise UnknownOpcodeError(f"{name!r} is neither a registered opcode nor a feature",
                             rule="unknown-opcode", limit="a registered opcode or feature key",
                             value=name,
                             hint="register_feature(name, min_generation) or add an opcode row")


def require_generation(name: str, generation: int, *, target: str = "",
                       where: Optional[str] = None) -> None:
    """Raise GenerationError (rule "generation", limit "gen<min>+", value "gen<generation>") when
    ``name`` (an opcode or feature key) needs a newer generation than ``generation``."""
    need = min_generation(name)
    if generation >= need:
        return
    on = f" (the target is {target})" if target else ""
    raise GenerationError(f"{name} needs {GENERATION_NAME.get(need, f'generation {need}')} or "
                          f"newer{on}", rule="generation", limit=f"gen{need}+",
                          value=f"gen{generation}", where=where,
                          hint="pick a newer target (TRNSIM_TARGET=trn2 | trn3)")

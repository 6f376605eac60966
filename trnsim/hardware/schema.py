"""Frozen dataclasses for hardware specs. Values come only from the data files (see loader.py).

Every spec carries ``sources``: a map from a figure's dotted path to where the figure comes from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple


@dataclass(frozen=True)
class OnChipMemory:
    """SBUF or PSUM of one NeuronCore: partitions x bytes, optionally split in banks."""
    partitions: int
    bytes_per_partition: int
    banks: int = 1
    bank_bytes: int = 0
    reserved_bytes_per_partition: int = 0
    # whose instruction order decides live ranges for the capacity check (nki/core/liveness.py)
    liveness: str = "program_order"
    # what neuronxcc (the legacy NKI compiler) does when live tiles overflow: "fail" or "spill"
    legacy_overflow: str = "fail"
    # how automatically allocated tiles get physical bytes for timing (nki/core/placement.py)
    placement: str = "private"
    # copies of a tile allocated in a loop body the compiler keeps live (nki/core/spill.py)
    loop_buffers: int = 1

    @property
    def total_bytes(self) -> int:
        """Capacity of the whole memory (all partitions)."""
        return self.partitions * self.bytes_per_partition

    @property
    def usable_bytes_per_partition(self) -> int:
        """Bytes per partition a kernel may allocate (the reserved part excluded)."""
        return self.bytes_per_partition - self.reserved_bytes_per_partition


@dataclass(frozen=True)
class TileSizes:
    """``nl.tile_size`` as the kernel sees it."""
    pmax: int
    psum_fmax: int
    gemm_stationary_fmax: int
    gemm_moving_fmax: int
    bn_stats_fmax: int
    psum_num_banks: int
    psum_min_align: int  # bytes; byte alignment of a PSUM free-dim address
    sbuf_min_align: int  # bytes; byte alignment of an SBUF free-dim address


@dataclass(frozen=True)
class TensorEngineRules:
    """Limits of one ``nc_matmul`` (stationary [K, M], moving [K, N] -> PSUM [M, N])."""
    max_contraction: int
    max_stationary_free: int
    max_moving_free: int
    max_moving_free_16bit_out: int
    input_dtypes: Tuple[str, ...]
    output_dtypes: Tuple[str, ...]
    transpose_keeps_16bit: bool
    double_row: bool
    mx: bool
    tile_granularity: int
    max_row_tiles: int
    max_column_tiles: int


@dataclass(frozen=True)
class AccessRules:
    """Engine access-pattern rules shared by Vector, Scalar and GpSimd instructions."""
    max_free_elements_sbuf: int
    max_free_elements_psum: int
    max_free_dims: int
    partition_alignment: Tuple[Tuple[int, ...], ...]  # (max partitions, start must be a multiple of)
    bn_stats_fmax: int
    max8_min: int
    max8_max: int


@dataclass(frozen=True)
class EngineMemoryAccess:
    """Which memories an engine reads/writes: strings over {'r','w'} (empty = no access)."""
    sbuf: str
    psum: str
    hbm: str


@dataclass(frozen=True)
class EngineAccessTable:
    """Memory access of each engine (the ISA's engine/memory table)."""
    tensor: EngineMemoryAccess
    vector: EngineMemoryAccess
    scalar: EngineMemoryAccess
    gpsimd: EngineMemoryAccess
    dma: EngineMemoryAccess


@dataclass(frozen=True)
class Clocks:
    """Engine clocks of one NeuronCore, Hz."""
    tensor_hz: float
    vector_hz: float
    scalar_hz: float
    gpsimd_hz: float
    profiler_base_hz: float


@dataclass(frozen=True)
class TensorTiming:
    """Tensor engine cost figures (cycles in the PE clock)."""
    mm_init_cycles: int
    fp32_passes: int
    ls_cycles_per_column: float
    result_latency_cycles: int
    fp8_speedup: float
    double_row_speedup: float
    mx_speedup: float
    fp32_transpose_speedup: float
    onezero_speedup: float
    throttle_start: float
    throttle_ramp_ns: float
    throttle_window_ns: float
    throttle_min_utilization: float


@dataclass(frozen=True)
class VectorTiming:
    """Vector engine cost figures (cycles in the Vector clock)."""
    elems_per_cycle: float
    two_input_factor: float
    access_bubble_cycles: float
    min_ii_cycles: float
    latency_cycles: float
    bf16_copy_speedup: float
    bf16_psum_or_strided_speedup: float
    bf16_tensor_tensor_speedup: float
    strided_penalty: float
    # two-input instructions pay ``two_input_factor`` only above this many elements per partition
    two_input_min_free: int
    # the fast 16-bit data path also takes FP8 operands (Vector and Scalar perf modes)
    fp8_on_16bit_path: bool = False
    # share of the access bubble hidden behind the previous instruction on the engine (0 = none)
    bubble_overlap: float = 0.0
    # a masked instruction costs its active elements per partition (False: the full tile)
    masked_active_only: bool = False


@dataclass(frozen=True)
class ScalarTiming:
    """Scalar (activation) engine cost figures (cycles in its clock)."""
    elems_per_cycle: float
    access_bubble_cycles: float
    min_ii_cycles: float
    latency_cycles: float
    reduce_extra_cycles: float
    bf16_speedup: float
    strided_penalty: float
    # share of the access bubble hidden behind the previous instruction on the engine (0 = none)
    bubble_overlap: float = 0.0
    # a masked instruction costs its active elements per partition (False: the full tile)
    masked_active_only: bool = False


@dataclass(frozen=True)
class GpSimdTiming:
    """GpSimd engine cost figures (cycles in its clock)."""
    elems_per_cycle_32bit: float
    access_bubble_cycles: float
    min_ii_cycles: float
    latency_cycles: float
    # two-input instructions pay ``two_input_factor`` only above this many elements per partition
    two_input_min_free: int
    # cycles per element for two-input (tensor_tensor-class) instructions, over one-input ones
    two_input_factor: float = 1.0
    # share of the access bubble hidden behind the previous instruction on the engine (0 = none)
    bubble_overlap: float = 0.0
    # a masked instruction costs its active elements per partition (False: the full tile)
    masked_active_only: bool = False


@dataclass(frozen=True)
class DmaTiming:
    """DMA cost figures: per-engine rate, efficiency curve, fixed latencies."""
    engine_bytes_per_ns: float
    partitions_per_engine: int
    efficiency_bytes: Tuple[float, ...]
    efficiency: Tuple[float, ...]
    efficiency_floor: float
    fixed_latency_ns: float
    hwdge_latency_ns: float
    transpose_hbm_efficiency: float
    transpose_sbuf_efficiency: float
    # the curve of transfers with an HBM side where a generation has its own (calibrated on measured
    # rows); empty: the efficiency curve above for every transfer
    hbm_efficiency_bytes: Tuple[float, ...] = ()
    hbm_efficiency: Tuple[float, ...] = ()
    # whether an SBUF-to-SBUF DMA transpose also pays the per-partition chunk curve above (True), or
    # runs at transpose_sbuf_efficiency of the engines' copy rate whatever its chunk (False)
    transpose_sbuf_curve: bool = True


@dataclass(frozen=True)
class SyncTiming:
    """Cross-engine synchronisation cost."""
    cross_engine_ns: float


@dataclass(frozen=True)
class PortTiming:
    """Shared-port rules between engines (v2 serializes them, v3 lifts them)."""
    vector_gpsimd_share_sbuf: bool
    vector_scalar_share_psum: bool


@dataclass(frozen=True)
class AssignTiming:
    """How the timing model places instructions the kernel left to the compiler (``engine_auto``):
    ``fixed`` keeps the traced default engine; ``earliest_finish`` takes the capable engine that
    finishes it first (a non-default one only when ``switch_margin_ns`` sooner)."""
    policy: str = "fixed"
    switch_margin_ns: float = 0.0
    engines: Tuple[str, ...] = ("vector", "gpsimd", "scalar")
    # two-input (tensor_tensor-class) instructions may move too (False: they keep their default)
    balance_two_input: bool = False


@dataclass(frozen=True)
class ReorderTiming:
    """How the compiler orders each Vector / Scalar / GpSimd stream: ``in_order`` (program order);
    ``window``: an engine that would idle until its next instruction's inputs are ready issues one
    of the next ``window_instructions - 1`` of its stream that is ready instead (timing/reorder.py)."""
    policy: str = "in_order"
    window_instructions: int = 1
    # under ``window``: the DMA trigger stream too -- a later transfer (within the window of the
    # DMA stream) whose inputs are produced before the next one's goes to the queues first
    dma_triggers: bool = False


@dataclass(frozen=True)
class CoreTiming:
    """Cost-model figures of one NeuronCore generation (hardware.md section 11)."""
    tensor: TensorTiming
    vector: VectorTiming
    scalar: ScalarTiming
    gpsimd: GpSimdTiming
    dma: DmaTiming
    sync: SyncTiming
    ports: PortTiming
    assign: AssignTiming = AssignTiming()
    reorder: ReorderTiming = ReorderTiming()


@dataclass(frozen=True)
class BroadcastRules:
    """How a compute-engine operand broadcast along the partition dim (a stride-0 partition view,
    which compute-engine access patterns cannot express) is executed: ``tensor`` (a ones-row
    matmul into PSUM), ``dma`` (an SBUF copy by DMA) or ``free`` (no instruction);
    ``partition_reuse``: ``resident`` (later consumers of the same view read the first copy while
    its source is unchanged) or ``none`` (a copy per consumer)."""
    partition: str = "free"
    partition_reuse: str = "none"


@dataclass(frozen=True)
class CoreSpec:
    """One NeuronCore generation (v2 = Trn1/Inf2, v3 = Trn2, v4 = Trn3)."""
    key: str
    name: str
    generation: int
    nc_version: str
    sbuf: OnChipMemory
    psum: OnChipMemory
    tile_size: TileSizes
    tensor: TensorEngineRules
    access: AccessRules
    engines: EngineAccessTable
    clocks: Clocks
    dma_engines: int
    dma_queues_per_engine: int
    dtypes: Tuple[str, ...]
    lnc: Tuple[int, ...]
    timing: CoreTiming
    # names that select this generation: the first is the canonical target (what
    # ``Options.target`` becomes), the rest are accepted spellings (gen3, v3, trn2u, ...)
    targets: Tuple[str, ...] = ()
    broadcast: BroadcastRules = BroadcastRules()
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def target(self) -> str:
        """The canonical target name of this generation ('' when the data gives none)."""
        return self.targets[0] if self.targets else ""

    def source(self, path: str) -> str:
        """Where the figure at dotted ``path`` comes from ('n/s' when not stated)."""
        return self.sources.get(f"{self.key}.{path}", "n/s")


@dataclass(frozen=True)
class PeakFlops:
    """Vendor-stated peak throughput of one chip, FLOP/s (OP/s for int8); None where not stated.

    These are the printed chip totals, which are not n_cores x per-core figures (hardware.md 12.4);
    they serve headlines and instance checks, never the timing model.
    """
    bf16: Optional[float] = None
    fp8: Optional[float] = None
    mxfp8: Optional[float] = None
    sparse: Optional[float] = None
    fp32: Optional[float] = None
    int8: Optional[float] = None


@dataclass(frozen=True)
class ChipSpec:
    """A Trainium/Inferentia chip: cores of one generation plus HBM and links."""
    key: str
    name: str
    core: str
    cores: int
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    hbm_stacks: int
    target: str
    neuronlink_ports: int = 0
    chip_link_bandwidth_bytes_per_s: float = 0.0
    cc_cores: int = 0
    dma_bandwidth_bytes_per_s: float = 0.0
    peak_flops: PeakFlops = field(default_factory=PeakFlops)
    tdp_watts: float = 0.0  # running power for energy estimates (0: no figure)
    # what /sys/devices/virtual/dmi/id/product_name reads under ``trnsim exec`` when this chip
    # is simulated ('' = the target name)
    dmi_product_name: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def hbm_bytes_per_core(self) -> int:
        """HBM capacity divided evenly over the chip's cores."""
        return self.hbm_bytes // self.cores

    def source(self, path: str) -> str:
        """Where the figure at dotted ``path`` comes from ('n/s' when not stated)."""
        return self.sources.get(f"{self.key}.{path}", "n/s")


@dataclass(frozen=True)
class StatedAggregates:
    """Instance or UltraServer totals exactly as the docs print them (SI units); None = not printed.

    Kept apart from chip x count so the two can be checked against each other.
    """
    bf16_flops: Optional[float] = None
    fp8_flops: Optional[float] = None
    mxfp8_flops: Optional[float] = None
    sparse_flops: Optional[float] = None
    fp32_flops: Optional[float] = None
    hbm_bytes: Optional[int] = None
    hbm_bandwidth_bytes_per_s: Optional[float] = None
    efa_bandwidth_bits_per_s: Optional[float] = None


TOPOLOGIES = ("single", "ring", "torus2d", "torus3d", "switch")


@dataclass(frozen=True)
class InstanceSpec:
    """An EC2 instance or an UltraServer: ``chips`` chips of one kind, their fabric and EFA.

    Link bandwidths are per chip; ``nodes`` is the number of servers (instances) joined into one
    UltraServer (1 for a plain instance) and ``node`` the instance key of one such server.
    """
    key: str
    name: str
    kind: str  # "instance" or "ultraserver"
    chip: str
    chips: int
    vcpus: int
    host_memory_bytes: int
    topology: str  # one of TOPOLOGIES
    topology_dims: Tuple[int, ...] = ()
    switch_levels: int = 0
    switch_level_bandwidth_bytes_per_s: Tuple[float, ...] = ()
    chip_link_bandwidth_bytes_per_s: float = 0.0
    inter_node_link_bandwidth_bytes_per_s: float = 0.0
    efa_bandwidth_bits_per_s: Optional[float] = None
    nodes: int = 1
    node: str = ""
    aliases: Tuple[str, ...] = ()
    stated: StatedAggregates = field(default_factory=StatedAggregates)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def chips_per_node(self) -> int:
        """Chips in one server of the UltraServer (all chips for a plain instance)."""
        return self.chips // self.nodes

    @property
    def efa_bits_per_s_per_chip(self) -> Optional[float]:
        """EFA bandwidth divided over the chips (None when the docs print none)."""
        return None if self.efa_bandwidth_bits_per_s is None else self.efa_bandwidth_bits_per_s / self.chips

    def source(self, path: str) -> str:
        """Where the figure at dotted ``path`` comes from ('n/s' when not stated)."""
        return self.sources.get(f"{self.key}.{path}", "n/s")

"""Per-instruction cost rules (pure functions of an Instruction and the core's figures).

Compute engines: an instruction occupies its engine for ``occupancy_ns`` (the initiation interval:
engines are deeply pipelined [ARCH2]) and its results are ready ``latency_ns`` later.
DMA: bytes, the contiguous chunk that sets DMA efficiency, and the engines it spreads over.
Every figure comes from ``CoreSpec.timing`` (hardware data files); nothing is hard-coded here.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import ConfigError
from ..hardware.schema import ChipSpec, CoreSpec
from ..ir.dtypes import FP8 as _FP8, FP32 as _FP32, SIXTEEN_BIT_FLOATS as _16BIT, width as _width
from ..ir.opcodes import OPCODES, lookup
from ..ir.trace import Instruction


def tensor_peak_flops_per_ns(core: CoreSpec) -> float:
    """Dense BF16 FLOP per ns of one core's PE array: 2 x rows x columns x clock (hardware.md 2.1).
    The HFU denominator of the estimate and the cost model."""
    return 2.0 * core.tensor.max_contraction * core.tensor.max_stationary_free * \
        core.clocks.tensor_hz / 1e9


def _elements(ins: Instruction, fig) -> int:
    """Elements per partition the engine streams: a masked partial tile's active ones (recorded as
    ``active_free``) when ``masked_active_only``, else the whole free size."""
    if fig.masked_active_only:
        return ins.attr("active_free", ins.free)
    return ins.free


def _hideable(fig, cycles: float) -> float:
    """Cycles of the access bubble that may overlap the previous instruction [ARCH2: "partly
    hidden by overlap"]: ``bubble_overlap`` of it, keeping at least the minimum II."""
    return min(fig.bubble_overlap * fig.access_bubble_cycles, max(0.0, cycles - fig.min_ii_cycles))


def _strided_region(r) -> bool:
    """Whether on-chip operand ``r`` steps through its partition's elements with a gap (innermost
    run of one element, more than one element per partition): the ARCH2 stride rule.  A
    per-partition scalar ([P, 1], e.g. an activation's scale column) is one element per
    partition, read once: not strided."""
    return r.memory != "hbm" and r.elements > r.partitions and r.contiguous <= _width(r.dtype)


def _cost_class(ins: Instruction) -> str:
    """The registry's cost class of ``ins`` (ir/opcodes.py); an unregistered opcode is an error."""
    spec = OPCODES.get(ins.opcode)
    return spec.cost_class if spec is not None else lookup(ins.opcode).cost_class


@dataclass(frozen=True)
class ComputeCost:
    """Occupancy (initiation interval) and result latency of one compute instruction."""
    occupancy_ns: float
    latency_ns: float
    flops: float = 0.0          # PE multiply-adds x 2 (HFU numerator, BF16-equivalent weighted)
    pe_bf16_equiv: float = 0.0
    # access-bubble time that may overlap the previous instruction on the same engine when this
    # one was already waiting behind it (``bubble_overlap`` x bubble, never below the minimum II)
    hidden_ns: float = 0.0


# engine-assignment policies for instructions left to the compiler (AssignTiming.policy)
ENGINE_POLICIES = ("fixed", "earliest_finish")


def _resolve_choice(override: Optional[str], env: str, data: str, choices: Tuple[str, ...],
                    rule: str, what: str, knobs: str) -> str:
    """``override``, else the environment variable ``env``, else the core's ``data``; one of
    ``choices`` (ConfigError naming ``rule`` otherwise)."""
    name = (override or os.environ.get(env) or data).strip().lower()
    if name not in choices:
        raise ConfigError(f"unknown {what} {name!r}", rule=rule, limit=choices, value=name,
                          hint=f"set {knobs} or {env} to one of " + ", ".join(choices))
    return name


def resolve_policy(core: CoreSpec, override: Optional[str] = None) -> str:
    """The engine-assignment policy: ``override``, else TRNSIM_ENGINE_POLICY, else the core's data."""
    return _resolve_choice(override, "TRNSIM_ENGINE_POLICY", core.timing.assign.policy,
                           ENGINE_POLICIES, "engine-policy", "engine-assignment policy",
                           "timing.assign.policy, Options.engine_policy")


# orders of each Vector / Scalar / GpSimd instruction stream (ReorderTiming.policy)
STREAM_ORDERS = ("in_order", "window")
# the engines whose streams the ``window`` order may reorder: the Tensor engine stays in program
# order (stationary-load reuse and the dI/dt throttle follow it), Sync is bookkeeping
REORDER_ENGINES = ("vector", "scalar", "gpsimd")


def resolve_stream_order(core: CoreSpec, override: Optional[str] = None) -> str:
    """The stream order: ``override``, else TRNSIM_STREAM_ORDER, else the core's data."""
    return _resolve_choice(override, "TRNSIM_STREAM_ORDER", core.timing.reorder.policy,
                           STREAM_ORDERS, "stream-order", "stream order",
                           "timing.reorder.policy, Options.stream_order")


@dataclass(frozen=True)
class DmaCost:
    """What one DMA instruction moves, over how many queues, at what rate and fixed cost."""
    bytes: int
    hbm_bytes: int
    engines: int
    rate_bytes_per_ns: float    # aggregate rate of the instruction over its engines
    fixed_ns: float
    chunk_bytes: float
    efficiency: float


class CostModel:
    """Cost rules bound to one core generation (and its chip's HBM share)."""

    def __init__(self, core: CoreSpec, chip: ChipSpec, lnc: int = 1,
                 hardware_file: Optional[str] = None, engine_policy: Optional[str] = None,
                 stream_order: Optional[str] = None):
        self.core = core
        self.chip = chip
        self.hardware_file = hardware_file  # in-kernel collectives read link figures from it
        t = core.timing
        self.t = t
        self.policy = resolve_policy(core, engine_policy)
        self.switch_margin_ns = t.assign.switch_margin_ns
        self.auto_pool = frozenset(t.assign.engines)
        self.balance_two_input = t.assign.balance_two_input
        self.stream_order = resolve_stream_order(core, stream_order)
        # instructions an engine's stream may pass (scheduler.py); 1 = program order
        self.reorder_window = t.reorder.window_instructions if self.stream_order == "window" else 1
        # engines whose streams may be reordered (their reads never collapse in deps.py); with a
        # window of 1 nothing is issued early: the in-order timeline (a test holds it to that)
        self.reorder_engines = REORDER_ENGINES if self.stream_order == "window" else ()
        # the DMA trigger stream ordered by readiness too (scheduler.py: dma_ahead)
        self.reorder_dma = bool(self.reorder_engines) and t.reorder.dma_triggers
        for name, fig in (("vector", t.vector), ("scalar", t.scalar), ("gpsimd", t.gpsimd)):
            if not 0.0 <= fig.bubble_overlap <= 1.0:
                raise ConfigError(f"timing.{name}.bubble_overlap must be within [0, 1]",
                                  rule="hardware-file-range", limit="0..1", value=fig.bubble_overlap)
        c = core.clocks
        self.pe_ns = 1e9 / c.tensor_hz
        self.dve_ns = 1e9 / c.vector_hz
        self.act_ns = 1e9 / c.scalar_hz
        self.pool_ns = 1e9 / c.gpsimd_hz
        self.hbm_bytes_per_ns = chip.hbm_bandwidth_bytes_per_s / 1e9 / chip.cores
        self.dma_engines = core.dma_engines
        self.pe_peak_flops_per_ns = tensor_peak_flops_per_ns(core)
        # (log2 chunk bytes, efficiency, floor) per curve: the generic figure, and the curve of
        # transfers with an HBM side where the generation has one of its own (calibrated, no floor)
        fig = ([math.log2(x) for x in t.dma.efficiency_bytes], list(t.dma.efficiency),
               list(t.dma.efficiency_bytes), t.dma.efficiency_floor)
        own = t.dma.hbm_efficiency
        self._curves = (fig, ([math.log2(x) for x in t.dma.hbm_efficiency_bytes], list(own),
                              list(t.dma.hbm_efficiency_bytes), 0.0) if own else fig)
        self._memo: dict = {}
        self._auto_memo: dict = {}
        self._mm_memo: dict = {}
        self._eff_memo: dict = {}

    # -- Tensor engine --------------------------------------------------------------------
    def matmul(self, ins: Instruction, stationary_changed: bool) -> ComputeCost:
        """Tensor-engine occupancy: max(N, init) cycles per pass, or the stationary load when the
        stationary tile changed; results after the PE result latency (memoized by shape)."""
        key = (ins.opcode, ins.free, ins.partitions, ins.dtype_in, ins.attrs, stationary_changed)
        try:
            got = self._mm_memo.get(key)
        except TypeError:  # unhashable attribute values: not memoized
            return self._matmul(ins, stationary_changed)
        if got is None:
            got = self._mm_memo[key] = self._matmul(ins, stationary_changed)
        return got

    def _matmul(self, ins: Instruction, stationary_changed: bool) -> ComputeCost:
        t = self.t.tensor
        mx = _cost_class(ins) == "matmul_mx"
        n = ins.attr("moving_free", ins.free) or 1
        m = ins.attr("stationary_free", 128) or 1
        k = ins.attr("contraction", ins.partitions) or ins.partitions
        din = ins.dtype_in
        passes = 1.0
        weight = 1.0  # profiler's BF16-equivalent instruction cost [XSCH]
        if din in _FP32:
            passes = float(t.fp32_passes)
            if ins.attr("transpose"):
                passes /= t.fp32_transpose_speedup
            if ins.attr("onezero"):
                passes /= t.onezero_speedup
            weight = float(t.fp32_passes)
        elif din in _FP8 and not ins.attr("perf_mode") and not ins.attr("mx"):
            passes = 1.0 / t.fp8_speedup
        if ins.attr("perf_mode") == "double_row" or mx:
            passes = 1.0  # K=256 (double_row) / 512 (MX) in the slot of one K=128 pass
        mm = max(n, t.mm_init_cycles) * passes
        ls = m * t.ls_cycles_per_column if stationary_changed else 0.0
        occ = max(mm, ls) * self.pe_ns
        flops = 2.0 * k * m * n
        speed = 1.0
        if ins.attr("perf_mode") == "double_row":
            speed = t.double_row_speedup
        elif mx:
            speed = t.mx_speedup
        return ComputeCost(occ, t.result_latency_cycles * self.pe_ns, flops,
                           flops * weight / speed)

    # -- Vector / Scalar / GpSimd -----------------------------------------------------------
    def compute(self, ins: Instruction) -> ComputeCost:
        """Vector / Scalar / GpSimd / Sync cost, memoized by everything the rules read."""
        key = (ins.engine, ins.opcode, ins.free, ins.dtype_in, ins.dtype_out,
               tuple((r.memory, _strided_region(r)) for r in ins.reads + ins.writes), ins.attr("reduce_op"), ins.attr("active_free"))
        got = self._memo.get(key)
        if got is not None:
            return got
        cls = _cost_class(ins)
        e = ins.engine
        if e == "vector":
            c = self._vector(ins, cls)
        elif e == "scalar":
            c = self._scalar(ins, cls)
        elif e == "gpsimd":
            c = self._gpsimd(ins, cls)
        else:  # sync engine bookkeeping (barriers, seeds)
            g = self.t.gpsimd
            c = ComputeCost(g.min_ii_cycles * self.pool_ns, 0.0)
        self._memo[key] = c
        return c

    def _sixteen_bit(self, ins: Instruction) -> bool:
        ds = {r.dtype for r in ins.reads + ins.writes}
        return bool(ds) and ds <= (_16BIT | (_FP8 if self.t.vector.fp8_on_16bit_path else frozenset()))

    @staticmethod
    def _strided(ins: Instruction) -> bool:
        return any(_strided_region(r) for r in ins.reads + ins.writes)

    def _vector(self, ins: Instruction, cls: str) -> ComputeCost:
        v = self.t.vector
        n = _elements(ins, v)
        two_input = cls == "two_input"
        factor = v.two_input_factor if (two_input and n > v.two_input_min_free) else 1.0
        # elements/partition/cycle: the data path every dtype gets (v3/v4: "256 for other data
        # types" = 2), times the BF16/FP16 perf-mode multiplier, which cores.toml states relative
        # to that path (4x over v2 = 2 x 2), so the peak stays the table's 512 BF16 [ARCH3]
        speed = v.elems_per_cycle
        psum = any(r.memory == "psum" for r in ins.reads + ins.writes)
        strided = self._strided(ins)
        if self._sixteen_bit(ins):
            if cls == "copy" or cls == "copy_like":
                speed *= v.bf16_psum_or_strided_speedup if (psum or strided) else v.bf16_copy_speedup
            elif two_input and not any(r.memory == "psum" for r in ins.reads):
                speed *= v.bf16_tensor_tensor_speedup
        if strided:
            speed /= v.strided_penalty
        cycles = max(v.min_ii_cycles, v.access_bubble_cycles + n * factor / speed)
        return ComputeCost(cycles * self.dve_ns, v.latency_cycles * self.dve_ns,
                           hidden_ns=_hideable(v, cycles) * self.dve_ns)

    def _scalar(self, ins: Instruction, cls: str) -> ComputeCost:
        s = self.t.scalar
        n = _elements(ins, s)
        speed = s.elems_per_cycle
        if cls == "copy" and self._sixteen_bit(ins):  # ACT's bf16 fast path: copy class only
            speed *= s.bf16_speedup
        if self._strided(ins):
            speed /= s.strided_penalty
        cycles = max(s.min_ii_cycles, s.access_bubble_cycles + n / speed)
        hidden = _hideable(s, cycles)
        if ins.attr("reduce_op") is not None:
            cycles += s.reduce_extra_cycles
        return ComputeCost(cycles * self.act_ns, s.latency_cycles * self.act_ns,
                           hidden_ns=hidden * self.act_ns)

    def _gpsimd(self, ins: Instruction, cls: str) -> ComputeCost:
        g = self.t.gpsimd
        n = _elements(ins, g)
        width = min((_width(r.dtype) for r in ins.reads + ins.writes), default=4)
        rate = g.elems_per_cycle_32bit * (4 // max(width, 1))
        factor = g.two_input_factor if (cls == "two_input" and n > g.two_input_min_free) else 1.0
        cycles = max(g.min_ii_cycles, g.access_bubble_cycles + n * factor / rate)
        return ComputeCost(cycles * self.pool_ns, g.latency_cycles * self.pool_ns,
                           hidden_ns=_hideable(g, cycles) * self.pool_ns)

    def auto_engines(self, ins: Instruction) -> tuple:
        """The engines the assignment policy may place ``ins`` on (default first), or () when the
        kernel fixed its engine, the policy is ``fixed`` or only one engine qualifies."""
        if self.policy == "fixed":
            return ()
        caps = ins.attr("engine_auto")
        if not caps or (not self.balance_two_input and _cost_class(ins) == "two_input"):
            return ()
        key = (caps, ins.engine, tuple([r.memory for r in ins.reads]),
               tuple([w.memory for w in ins.writes]))
        got = self._auto_memo.get(key)
        if got is None:
            got = self._auto_memo[key] = self._auto_engines(*key)
        return got

    def _auto_engines(self, caps, default, rmem, wmem) -> tuple:
        """``caps`` in the policy's pool that can read ``rmem`` and write ``wmem`` (the core's
        engine access table: GpSimd has no PSUM port)."""
        got = []
        for e in caps:
            acc = getattr(self.core.engines, e, None)
            if e != default and (e not in self.auto_pool or acc is None):
                continue
            if e != default and (any("r" not in getattr(acc, m, "") for m in rmem) or
                                 any("w" not in getattr(acc, m, "") for m in wmem)):
                continue
            got.append(e)
        return tuple(got) if len(got) > 1 else ()

    # -- DMA ------------------------------------------------------------------------------
    def efficiency(self, chunk_bytes: float, hbm: bool = False) -> float:
        """DMA efficiency for a contiguous chunk: the log-interpolated FIG-DMA curve, rescaled by the
        calibrated floor of the figure's unlabeled axis; with ``hbm`` (the transfer reads or writes
        HBM) the generation's own HBM curve where it has one (``timing.dma.hbm_efficiency``)."""
        key = (chunk_bytes, hbm)
        got = self._eff_memo.get(key)
        if got is None:
            got = self._eff_memo[key] = self._efficiency(chunk_bytes, self._curves[1 if hbm else 0])
        return got

    @staticmethod
    def _efficiency(chunk_bytes: float, curve) -> float:
        xs, ys, raw_x, floor = curve
        if chunk_bytes <= 0:
            return floor + (1 - floor) * ys[0]
        x = math.log2(chunk_bytes)
        if x <= xs[0]:
            # below the curve: proportional (each descriptor costs the time of the smallest one)
            y = ys[0] * min(1.0, chunk_bytes / raw_x[0])
        elif x >= xs[-1]:
            y = ys[-1]
        else:
            j = 1
            while xs[j] < x:
                j += 1
            f = (x - xs[j - 1]) / (xs[j] - xs[j - 1])
            y = ys[j - 1] + f * (ys[j] - ys[j - 1])
        return floor + (1.0 - floor) * y

    def dma(self, ins: Instruction) -> DmaCost:
        """Bytes, queues, rate (engines x per-engine rate x efficiency, capped by the HBM share)
        and fixed latency of one DMA instruction."""
        d = self.t.dma
        cls = _cost_class(ins)
        if cls == "collective":  # rank-to-rank traffic: link figures, not DMA-queue rates
            from .collectives import collective_transfer
            nbytes = int(ins.attr("bytes", 0) or 0)
            rate, fixed_ns, eff = collective_transfer(self.chip.key, getattr(self, "hardware_file", None),
                                                      ins.opcode, nbytes, int(ins.attr("ranks", 1) or 1),
                                                      int(ins.attr("chips", 1) or 1))
            return DmaCost(nbytes, 0, 1, rate, fixed_ns, float(nbytes), eff)
        transpose_class = cls == "dma_transpose"
        w = ins.writes[0] if ins.writes else None
        r = ins.reads[0] if ins.reads else None
        nbytes = 0
        if w is not None:
            nbytes = w.elements * _width(w.dtype)
        elif r is not None:
            nbytes = r.elements * _width(r.dtype)
        parts = max(1, ins.partitions)
        per_part = nbytes / parts
        chunk = per_part
        for reg in (r, w):
            if reg is not None:
                chunk = min(chunk, reg.contiguous)
        hbm = sum(1 for reg in (r, w) if reg is not None and reg.memory == "hbm")
        eff = self.efficiency(chunk, hbm > 0)
        if ins.attr("transpose") or transpose_class:
            src_on_chip = r is not None and r.memory != "hbm"
            if not src_on_chip:
                eff *= d.transpose_hbm_efficiency
            elif d.transpose_sbuf_curve:
                eff *= d.transpose_sbuf_efficiency
            else:
                eff = d.transpose_sbuf_efficiency
        engines = max(1, min(self.dma_engines, math.ceil(parts / d.partitions_per_engine)))
        rate = engines * d.engine_bytes_per_ns * eff
        if hbm:
            rate = min(rate, self.hbm_bytes_per_ns / hbm)
        # the nki front end records the mode as dge_mode (the ISA's keyword); "dge" kept for traces
        hw = ins.attr("dge_mode", ins.attr("dge")) == "hwdge"
        fixed = d.hwdge_latency_ns if hw else d.fixed_latency_ns
        return DmaCost(nbytes, nbytes * hbm, engines, rate, fixed, chunk, eff)

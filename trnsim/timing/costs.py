"""Per-instruction cost rules (pure functions of an Instruction and the core's figures).

Compute engines: an instruction occupies its engine for ``occupancy_ns`` (the initiation interval:
engines are deeply pipelined [ARCH2]) and its results are ready ``latency_ns`` later.
DMA: bytes, the contiguous chunk that sets DMA efficiency, and the engines it spreads over.
Every figure comes from ``CoreSpec.timing`` (hardware data files); nothing is hard-coded here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..hardware.schema import ChipSpec, CoreSpec
from ..ir.dtypes import FP8 as _FP8, FP32 as _FP32, SIXTEEN_BIT_FLOATS as _16BIT, width as _width
from ..ir.opcodes import OPCODES, lookup
from ..ir.trace import Instruction


def tensor_peak_flops_per_ns(core: CoreSpec) -> float:
    """Dense BF16 FLOP per ns of one core's PE array: 2 x rows x columns x clock (hardware.md 2.1).
    The HFU denominator of the estimate and the cost model."""
    return 2.0 * core.tensor.max_contraction * core.tensor.max_stationary_free * \
        core.clocks.tensor_hz / 1e9


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
                 hardware_file: Optional[str] = None):
        self.core = core
        self.chip = chip
        self.hardware_file = hardware_file  # in-kernel collectives read link figures from it
        t = core.timing
        self.t = t
        c = core.clocks
        self.pe_ns = 1e9 / c.tensor_hz
        self.dve_ns = 1e9 / c.vector_hz
        self.act_ns = 1e9 / c.scalar_hz
        self.pool_ns = 1e9 / c.gpsimd_hz
        self.hbm_bytes_per_ns = chip.hbm_bandwidth_bytes_per_s / 1e9 / chip.cores
        self.dma_engines = core.dma_engines
        self.pe_peak_flops_per_ns = tensor_peak_flops_per_ns(core)
        self._eff_x = [math.log2(x) for x in t.dma.efficiency_bytes]
        self._eff_y = list(t.dma.efficiency)
        self._memo: dict = {}
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
               tuple((r.memory, r.contiguous == _width(r.dtype) and r.elements > 1)
                     for r in ins.reads + ins.writes), ins.attr("reduce_op"))
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
            c = self._gpsimd(ins)
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
        return any(r.elements > 1 and r.contiguous <= _width(r.dtype)
                   for r in ins.reads + ins.writes if r.memory != "hbm")

    def _vector(self, ins: Instruction, cls: str) -> ComputeCost:
        v = self.t.vector
        n = ins.free
        two_input = cls == "two_input"
        factor = v.two_input_factor if (two_input and n > 128) else 1.0
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
        return ComputeCost(cycles * self.dve_ns, v.latency_cycles * self.dve_ns)

    def _scalar(self, ins: Instruction, cls: str) -> ComputeCost:
        s = self.t.scalar
        n = ins.free
        speed = s.elems_per_cycle
        if cls == "copy" and self._sixteen_bit(ins):  # ACT's bf16 fast path: copy class only
            speed *= s.bf16_speedup
        if self._strided(ins):
            speed /= s.strided_penalty
        cycles = max(s.min_ii_cycles, s.access_bubble_cycles + n / speed)
        if ins.attr("reduce_op") is not None:
            cycles += s.reduce_extra_cycles
        return ComputeCost(cycles * self.act_ns, s.latency_cycles * self.act_ns)

    def _gpsimd(self, ins: Instruction) -> ComputeCost:
        g = self.t.gpsimd
        n = ins.free
        width = min((_width(r.dtype) for r in ins.reads + ins.writes), default=4)
        rate = g.elems_per_cycle_32bit * (4 // max(width, 1))
        cycles = max(g.min_ii_cycles, g.access_bubble_cycles + n / rate)
        return ComputeCost(cycles * self.pool_ns, g.latency_cycles * self.pool_ns)

    # -- DMA ------------------------------------------------------------------------------
    def efficiency(self, chunk_bytes: float) -> float:
        """DMA efficiency for a contiguous chunk (log-interpolated FIG-DMA curve, rescaled by the
        calibrated floor of the figure's unlabeled axis)."""
        got = self._eff_memo.get(chunk_bytes)
        if got is None:
            got = self._eff_memo[chunk_bytes] = self._efficiency(chunk_bytes)
        return got

    def _efficiency(self, chunk_bytes: float) -> float:
        d = self.t.dma
        if chunk_bytes <= 0:
            return d.efficiency_floor + (1 - d.efficiency_floor) * self._eff_y[0]
        x = math.log2(chunk_bytes)
        xs, ys = self._eff_x, self._eff_y
        if x <= xs[0]:
            y = ys[0] * chunk_bytes / d.efficiency_bytes[0]  # below the figure: proportional
        elif x >= xs[-1]:
            y = ys[-1]
        else:
            j = 1
            while xs[j] < x:
                j += 1
            f = (x - xs[j - 1]) / (xs[j] - xs[j - 1])
            y = ys[j - 1] + f * (ys[j] - ys[j - 1])
        return d.efficiency_floor + (1.0 - d.efficiency_floor) * y

    def dma(self, ins: Instruction) -> DmaCost:
        """Bytes, queues, rate (engines x per-engine rate x efficiency, capped by the HBM share)
        and fixed latency of one DMA instruction."""
        d = self.t.dma
        cls = _cost_class(ins)
        if cls == "collective":  # rank-to-rank traffic: link figures, not DMA-queue rates
            from .collectives import collective_cost
            return collective_cost(self, ins)
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
        eff = self.efficiency(chunk)
        if ins.attr("transpose") or transpose_class:
            src_on_chip = r is not None and r.memory != "hbm"
            eff *= d.transpose_sbuf_efficiency if src_on_chip else d.transpose_hbm_efficiency
        engines = max(1, min(self.dma_engines, math.ceil(parts / d.partitions_per_engine)))
        rate = engines * d.engine_bytes_per_ns * eff
        hbm = sum(1 for reg in (r, w) if reg is not None and reg.memory == "hbm")
        if hbm:
            rate = min(rate, self.hbm_bytes_per_ns / hbm)
        fixed = d.hwdge_latency_ns if ins.attr("dge") == "hwdge" else d.fixed_latency_ns
        return DmaCost(nbytes, nbytes * hbm, engines, rate, fixed, chunk, eff)

"""Per-instruction cost rules (pure functions of an Instruction and the core's figures).

Compute engines: an instruction occupies its engine for ``occupancy_ns`` (the initiation interval:
engines are deeply pipelined [ARCH2]) and its results are ready ``latency_ns`` later.
DMA: bytes, the contiguous chunk that sets DMA efficiency, and the engines it spreads over.
Every figure comes from ``CoreSpec.timing`` (hardware data files); nothing is hard-coded here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

from ..hardware.schema import ChipSpec, CoreSpec
from ..ir.trace import Instruction, Region

_16BIT = frozenset(["bfloat16", "float16"])
_FP8 = frozenset(["float8_e4m3", "float8_e5m2", "float8_e3m4", "float8_e4m3fn"])
_FP32 = frozenset(["float32", "tfloat32"])
_WIDTH = {"float32": 4, "tfloat32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2,
          "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3": 1,
          "float8_e5m2": 1, "float8_e3m4": 1, "float8_e4m3fn": 1}

# instructions whose Vector cost reads two full tensors per element (~2N cycles [ARCH2])
TWO_INPUT = frozenset(["tensor_tensor", "scalar_tensor_tensor", "tensor_tensor_scan", "select",
                       "tensor_copy_predicated", "select_reduce"])
COPY_LIKE = frozenset(["tensor_copy", "tensor_scalar", "memset", "reciprocal"])


@dataclass(frozen=True)
class ComputeCost:
    occupancy_ns: float
    latency_ns: float
    flops: float = 0.0          # PE multiply-adds x 2 (HFU numerator, BF16-equivalent weighted)
    pe_bf16_equiv: float = 0.0


@dataclass(frozen=True)
class DmaCost:
    bytes: int
    hbm_bytes: int
    engines: int
    rate_bytes_per_ns: float    # aggregate rate of the instruction over its engines
    fixed_ns: float
    chunk_bytes: float
    efficiency: float


class CostModel:
    """Cost rules bound to one core generation (and its chip's HBM share)."""

    def __init__(self, core: CoreSpec, chip: ChipSpec, lnc: int = 1):
        self.core = core
        self.chip = chip
        t = core.timing
        self.t = t
        c = core.clocks
        self.pe_ns = 1e9 / c.tensor_hz
        self.dve_ns = 1e9 / c.vector_hz
        self.act_ns = 1e9 / c.scalar_hz
        self.pool_ns = 1e9 / c.gpsimd_hz
        self.hbm_bytes_per_ns = chip.hbm_bandwidth_bytes_per_s / 1e9 / chip.cores
        self.dma_engines = core.dma_engines
        self.pe_peak_flops_per_ns = 2.0 * core.tensor.max_contraction * \
            core.tensor.max_stationary_free * c.tensor_hz / 1e9
        self._eff_x = [math.log2(x) for x in t.dma.efficiency_bytes]
        self._eff_y = list(t.dma.efficiency)
        self._memo: dict = {}

    # -- Tensor engine --------------------------------------------------------------------
    def matmul(self, ins: Instruction, stationary_changed: bool) -> ComputeCost:
        t = self.t.tensor
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
        if ins.attr("perf_mode") == "double_row" or ins.opcode == "nc_matmul_mx":
            passes = 1.0  # K=256 (double_row) / 512 (MX) in the slot of one K=128 pass
        mm = max(n, t.mm_init_cycles) * passes
        ls = m * t.ls_cycles_per_column if stationary_changed else 0.0
        occ = max(mm, ls) * self.pe_ns
        flops = 2.0 * k * m * n
        speed = 1.0
        if ins.attr("perf_mode") == "double_row":
            speed = t.double_row_speedup
        elif ins.opcode == "nc_matmul_mx":
            speed = t.mx_speedup
        return ComputeCost(occ, t.result_latency_cycles * self.pe_ns, flops,
                           flops * weight / speed)

    # -- Vector / Scalar / GpSimd -----------------------------------------------------------
    def compute(self, ins: Instruction) -> ComputeCost:
        key = (ins.engine, ins.opcode, ins.free, ins.dtype_in, ins.dtype_out,
               tuple((r.memory, r.contiguous == _WIDTH.get(r.dtype, 4) and r.elements > 1)
                     for r in ins.reads + ins.writes), ins.attr("reduce_op"))
        got = self._memo.get(key)
        if got is not None:
            return got
        e = ins.engine
        if e == "vector":
            c = self._vector(ins)
        elif e == "scalar":
            c = self._scalar(ins)
        elif e == "gpsimd":
            c = self._gpsimd(ins)
        else:  # sync engine bookkeeping (barriers, seeds)
            g = self.t.gpsimd
            c = ComputeCost(g.min_ii_cycles * self.pool_ns, 0.0)
        self._memo[key] = c
        return c

    def _sixteen_bit(self, ins: Instruction) -> bool:
        ds = {r.dtype for r in ins.reads + ins.writes}
        return bool(ds) and ds <= (_16BIT | (_FP8 if self.core.generation >= 4 else frozenset()))

    @staticmethod
    def _strided(ins: Instruction) -> bool:
        return any(r.elements > 1 and r.contiguous <= _WIDTH.get(r.dtype, 4)
                   for r in ins.reads + ins.writes if r.memory != "hbm")

    def _vector(self, ins: Instruction) -> ComputeCost:
        v = self.t.vector
        n = ins.free
        factor = v.two_input_factor if (ins.opcode in TWO_INPUT and n > 128) else 1.0
        speed = v.elems_per_cycle
        psum = any(r.memory == "psum" for r in ins.reads + ins.writes)
        strided = self._strided(ins)
        if self._sixteen_bit(ins):
            if ins.opcode in COPY_LIKE:
                speed *= v.bf16_psum_or_strided_speedup if (psum or strided) else v.bf16_copy_speedup
            elif ins.opcode in TWO_INPUT and not any(r.memory == "psum" for r in ins.reads):
                speed *= v.bf16_tensor_tensor_speedup
        if strided:
            speed /= v.strided_penalty
        cycles = max(v.min_ii_cycles, v.access_bubble_cycles + n * factor / speed)
        return ComputeCost(cycles * self.dve_ns, v.latency_cycles * self.dve_ns)

    def _scalar(self, ins: Instruction) -> ComputeCost:
        s = self.t.scalar
        n = ins.free
        speed = s.elems_per_cycle
        if ins.opcode in ("tensor_scalar", "tensor_copy") and self._sixteen_bit(ins):
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
        width = min((_WIDTH.get(r.dtype, 4) for r in ins.reads + ins.writes), default=4)
        rate = g.elems_per_cycle_32bit * (4 // max(width, 1))
        cycles = max(g.min_ii_cycles, g.access_bubble_cycles + n / rate)
        return ComputeCost(cycles * self.pool_ns, g.latency_cycles * self.pool_ns)

    # -- DMA ------------------------------------------------------------------------------
    def efficiency(self, chunk_bytes: float) -> float:
        """DMA efficiency for a contiguous chunk (log-interpolated FIG-DMA curve, rescaled by the
        calibrated floor of the figure's unlabeled axis)."""
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
        d = self.t.dma
        w = ins.writes[0] if ins.writes else None
        r = ins.reads[0] if ins.reads else None
        nbytes = 0
        if w is not None:
            nbytes = w.elements * _WIDTH.get(w.dtype, 4)
        elif r is not None:
            nbytes = r.elements * _WIDTH.get(r.dtype, 4)
        parts = max(1, ins.partitions)
        per_part = nbytes / parts
        chunk = per_part
        for reg in (r, w):
            if reg is not None:
                chunk = min(chunk, reg.contiguous)
        eff = self.efficiency(chunk)
        if ins.attr("transpose") or ins.opcode == "dma_transpose":
            src_on_chip = r is not None and r.memory != "hbm"
            eff *= d.transpose_sbuf_efficiency if src_on_chip else d.transpose_hbm_efficiency
        engines = max(1, min(self.dma_engines, math.ceil(parts / d.partitions_per_engine)))
        rate = engines * d.engine_bytes_per_ns * eff
        hbm = sum(1 for reg in (r, w) if reg is not None and reg.memory == "hbm")
        if hbm:
            rate = min(rate, self.hbm_bytes_per_ns / hbm)
        fixed = d.hwdge_latency_ns if ins.attr("dge") == "hwdge" else d.fixed_latency_ns
        return DmaCost(nbytes, nbytes * hbm, engines, rate, fixed, chunk, eff)

"""Parquet tables named and typed like Neuron Explorer's profile schema (Instruction, DmaPacket,
Summary; schema reference tools/neuron-explorer/profile-schema-reference.rst), so a simulated and a
measured profile can be opened with the same tools.  Needs the optional extra ``pyarrow``."""
from __future__ import annotations

import os
from typing import Dict, List

from ..outputs import atomic_path
from ..errors import ConfigError
from ..ir.dtypes import width as _width
from ..timing.estimate import Estimate


def _pa():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet output needs pyarrow: pip install 'trnsim[parquet]'",
                          rule="optional-dependency", value="pyarrow") from None
    return pa, pq


def tables(est: Estimate) -> Dict[str, Dict[str, list]]:
    """Column dicts for Instruction, DmaPacket and Summary (schema field names)."""
    ins_cols: Dict[str, list] = {k: [] for k in (
        "start_ts", "end_ts", "duration_ns", "engine", "timeline_track", "pcore_idx", "opcode", "id",
        "pc", "nki_source_location", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes",
        "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes", "raw_flops", "adjusted_flops",
        "tensor_instruction_type")}
    dma_cols: Dict[str, list] = {k: [] for k in (
        "start_ts", "end_ts", "duration_ns", "pcore_idx", "id", "packet_idx", "engine_idx",
        "read_bytes", "write_bytes", "transfer_bytes", "throughput", "variable", "queue_name",
        "queue_idx")}
    for c in est.cores:
        tl = c.timeline
        start, end, busy_end = tl.start.tolist(), tl.end.tolist(), tl.busy_end.tolist()
        pcs: Dict[str, int] = {}
        for i, ins in enumerate(c.trace.instructions):
            nbytes = {}
            for kind, regs in (("read", ins.reads), ("write", ins.writes)):
                for r in regs:
                    k = f"{r.memory}_{kind}_bytes"
                    nbytes[k] = nbytes.get(k, 0) + r.elements * _width(r.dtype)
            pc = pcs.get(ins.engine, 0)
            pcs[ins.engine] = pc + 1
            ins_cols["start_ts"].append(int(round(start[i])))
            ins_cols["end_ts"].append(int(round(end[i])))
            ins_cols["duration_ns"].append(int(round(busy_end[i] - start[i])))
            ins_cols["engine"].append(ins.engine)
            ins_cols["timeline_track"].append(f"NC{c.core}:{ins.engine}")
            ins_cols["pcore_idx"].append(c.core)
            ins_cols["opcode"].append(ins.opcode)
            ins_cols["id"].append(i)
            ins_cols["pc"].append(pc)
            ins_cols["nki_source_location"].append(f"{ins.source.file}:{ins.source.line}")
            for k in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
                      "psum_read_bytes", "psum_write_bytes"):
                ins_cols[k].append(int(nbytes.get(k, 0)))
            is_pe = ins.engine == "tensor"
            m, n, k_ = ins.attr("stationary_free", 0), ins.attr("moving_free", 0), \
                ins.attr("contraction", 0)
            flops = 2 * m * n * k_ if is_pe else 0
            ins_cols["raw_flops"].append(int(flops))
            ins_cols["adjusted_flops"].append(int(flops * (4 if is_pe and ins.dtype_in in
                                                           ("float32", "tfloat32") else 1)))
            ins_cols["tensor_instruction_type"].append(
                ("TRANSPOSE" if ins.attr("transpose") else "REGULAR") if is_pe else "")
        parts_of: Dict[int, int] = {}
        for i, _, _, _ in tl.dma_parts:
            parts_of[i] = parts_of.get(i, 0) + 1
        last, ins, share = -1, None, 0
        for i, q, s, e in tl.dma_parts:
            if i != last:  # the parts of one transfer are adjacent: look it up once
                last, ins = i, c.trace.instructions[i]
                share = sum(r.elements * _width(r.dtype) for r in ins.writes) // parts_of[i]
            dma_cols["start_ts"].append(int(round(s)))
            dma_cols["end_ts"].append(int(round(e)))
            dma_cols["duration_ns"].append(int(round(e - s)))
            dma_cols["pcore_idx"].append(c.core)
            dma_cols["id"].append(len(dma_cols["id"]))
            dma_cols["packet_idx"].append(i)
            dma_cols["engine_idx"].append(q)
            dma_cols["read_bytes"].append(int(share))
            dma_cols["write_bytes"].append(int(share))
            dma_cols["transfer_bytes"].append(int(share))
            dma_cols["throughput"].append(float(share / max(e - s, 1e-9) * 1e9))
            dma_cols["variable"].append(ins.writes[0].name if ins.writes else "")
            dma_cols["queue_name"].append(f"q{q}")
            dma_cols["queue_idx"].append(q)
    f = est.figures()
    lat_s = est.latency_ns / 1e9
    eng = f.engines
    summary = {
        "total_time": [lat_s],
        "hfu_estimated_percent": [100.0 * f.hfu],
        "dma_active_time": [eng.get("DMA (any queue)", 0.0) * lat_s],
        "dma_active_time_percent": [100.0 * eng.get("DMA (any queue)", 0.0)],
        "hbm_read_bytes": [sum(ins_cols["hbm_read_bytes"])],
        "hbm_write_bytes": [sum(ins_cols["hbm_write_bytes"])],
        "tensor_engine_active_time_percent": [100.0 * eng.get("Tensor", 0.0)],
        "vector_engine_active_time_percent": [100.0 * eng.get("Vector", 0.0)],
        "scalar_engine_active_time_percent": [100.0 * eng.get("Scalar", 0.0)],
        "gpsimd_engine_active_time_percent": [100.0 * eng.get("GpSimd", 0.0)],
        "sync_engine_active_time_percent": [100.0 * eng.get("Sync", 0.0)],
        "tensor_engine_instruction_count": [f.instructions_by_engine.get("tensor", 0)],
        "vector_engine_instruction_count": [f.instructions_by_engine.get("vector", 0)],
        "scalar_engine_instruction_count": [f.instructions_by_engine.get("scalar", 0)],
        "gpsimd_engine_instruction_count": [f.instructions_by_engine.get("gpsimd", 0)],
        "hardware_flops": [int(f.pe_flops)],
    }
    return {"Instruction": ins_cols, "DmaPacket": dma_cols, "Summary": summary}


def write_parquet(est: Estimate, directory: str) -> List[str]:
    """Write the Instruction / DmaPacket / Summary tables as Parquet files (needs pyarrow);
    returns their paths."""
    pa, pq = _pa()
    os.makedirs(directory, exist_ok=True)
    out = []
    for name, cols in tables(est).items():
        path = os.path.join(directory, f"{name}.parquet")
        with atomic_path(path) as tmp:
            pq.write_table(pa.table(cols), tmp)
        out.append(path)
    return out

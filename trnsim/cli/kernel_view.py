"""Terminal tables of ``trnsim kernel``: the profile's hotspots, stalls, speed of light and DMA
detail (from ``trnsim.profile.insight.analyze``), and the side-by-side table of several targets."""
from __future__ import annotations

from typing import Dict, List

from rich.markup import escape

from ..ir.engines import ENGINE_TABLE
from .output import table

# "Vector" -> "Vector (DVE)": the engine table's labels with the profiler aliases
DISPLAY = {e.label: e.display for e in ENGINE_TABLE}


def us(ns: float) -> str:
    """ns shown in microseconds."""
    return f"{ns / 1e3:,.3f} us"


def pct(x: float) -> str:
    """A share 0..1 as a percentage."""
    return f"{100 * x:.1f} %"


def _engines(engines: dict) -> str:
    return ", ".join(f"{DISPLAY.get(k, k)} {v}" for k, v in engines.items())


def speed_rows(sol: dict) -> List[tuple]:
    """Figure rows of the speed of light (roofline point and HFU)."""
    rows = [("achieved HBM bandwidth", f"{sol['achieved_hbm_bytes_per_s'] / 1e9:,.1f} GB/s of "
             f"{sol['peak_hbm_bytes_per_s'] / 1e9:,.1f} ({pct(sol['hbm_share'])})")]
    if sol["flops"]:
        ai = sol["arithmetic_intensity"]
        rows += [("achieved PE FLOPs", f"{sol['achieved_flops_per_s'] / 1e12:,.2f} TFLOP/s of "
                  f"{sol['peak_flops_per_s'] / 1e12:,.1f} BF16 ({pct(sol['flops_share'])})"),
                 ("roofline point", f"{ai:,.1f} FLOP/B vs ridge {sol['ridge_point']:,.1f}: "
                  f"{sol['bound']}-bound")]
    else:
        rows.append(("roofline point", "no PE work: memory traffic only"))
    return rows


def engine_rows(engines: Dict[str, float], prof: dict) -> List[tuple]:
    """Busy share per engine (``RunFigures.engines``), and what each compute engine's idle time
    waits on most."""
    lat = prof["latency_ns"] or 1.0
    rows = []
    for k, v in engines.items():
        if k.startswith("DMA:q"):
            continue
        st = prof["stalls"].get("DMA" if k == "DMA (any queue)" else k)
        why = ""
        if st:
            waits = [(w, t) for w, t in st["waiting_on"].items() if w != "after its last instruction"]
            why = ", ".join(f"{DISPLAY.get(w, w)} {pct(t / lat)}" for w, t in waits[:3])
        rows.append((DISPLAY.get(k, k), pct(v), why))
    qs = [v for k, v in engines.items() if k.startswith("DMA:q")]
    if qs:
        rows.append(("DMA queues (min / max)", f"{pct(min(qs))} / {pct(max(qs))}", ""))
    return rows


def hotspot_table(prof: dict, top: int):
    """The top source lines by engine time."""
    rows = [(h["source"], escape(h["code"][:60]), us(h["time_ns"]), pct(h["share"]), f"{h['instructions']:,}",
             _engines(h["engines"])) for h in prof["hotspots"]["by_line"][:top]]
    return table(f"hotspots: top {len(rows)} source lines by engine time",
                 ["line", "code", "time", "share", "instructions", "engines"], rows)


def opcode_table(prof: dict, top: int):
    """The top opcodes (per engine) by engine time."""
    rows = [(o["opcode"], DISPLAY.get(o["engine"], o["engine"]), us(o["time_ns"]), pct(o["share"]),
             f"{o['instructions']:,}") for o in prof["hotspots"]["by_opcode"][:top]]
    return table("per opcode", ["opcode", "engine", "time", "share", "instructions"], rows)


def dma_line(prof: dict) -> str:
    """One line: transfers, bytes, mean efficiency and the labelled fixed-cost gaps."""
    d = prof["dma"]["summary"]
    gaps = [g for g in prof["dma"]["fixed_gaps"] if g["label"] != "all engines wait"]
    g = "; ".join(f"{x['label']} {us(x['dur_ns'])}" for x in gaps)
    return (f"DMA: {d['transfers']:,} transfers, {d['bytes']:,} B, mean efficiency "
            f"{pct(d['mean_efficiency'])} (bytes-weighted {pct(d['bytes_weighted_efficiency'])})"
            + (f"; idle gaps: {g}" if g else ""))


def detail_tables(prof: dict, top: int) -> list:
    """--detail: the longest stalls, transfers, the end of the critical path, memory peaks."""
    out = []
    waits = sorted(((s["wait_ns"], eng, s) for eng, st in prof["stalls"].items()
                    for s in st["top"]), key=lambda x: -x[0])[:top]
    rows = []
    for ns, eng, s in waits:
        w = s["waited_on"]
        rows.append((DISPLAY.get(eng, eng), s["instruction"], s["opcode"], s["source"], us(ns),
                     f"{DISPLAY.get(w['engine'], w['engine'])} #{w['instruction']} {w['opcode']} "
                     f"({w['source']})"))
    out.append(table("longest stalls", ["engine", "instr", "opcode", "line", "wait", "waited on"],
                     rows))
    out.append(table("longest DMA transfers",
                     ["instr", "line", "direction", "bytes", "contiguous B/partition", "efficiency",
                      "queues", "time"],
                     [(t["instruction"], t["source"], t["direction"], f"{t['bytes']:,}",
                       t["contiguous_bytes_per_partition"], pct(t["efficiency"]),
                       len(t["queues"]), us(t["dur_ns"])) for t in prof["dma"]["transfers"][:top]]))
    path = prof["critical_path"][-top:]
    out.append(table(f"critical path: last {len(path)} of {prof['critical_path_length']:,} steps",
                     ["instr", "engine", "opcode", "line", "start", "end"],
                     [(p["instruction"], DISPLAY.get(p["engine"], p["engine"]), p["opcode"],
                       p["source"], us(p["start_ns"]), us(p["end_ns"])) for p in path]))
    occ = prof["occupancy"]
    out.append(table("on-chip memory over time", ["memory", "peak per partition", "capacity"],
                     [(m.upper(), f"{o['peak']:,} B", f"{o['capacity_bytes_per_partition']:,} B")
                      for m, o in occ.items()]))
    return out


def targets_table(cmp):
    """Several targets side by side (a ``TargetComparison``): latency, speed-up, engine shares,
    HFU, HBM GB/s (the verdicts, long lines, are printed under it)."""
    ts = list(cmp.targets)
    rows_of = [cmp.targets[t] for t in ts]
    rows = [("latency", *[f"{r.latency_us:,.3f} us" for r in rows_of]),
            (f"speed-up vs {ts[0]}", *[f"{r.speedup_vs_first:.2f}x" for r in rows_of])]
    engines = []
    for r in rows_of:
        for k in r.engines:
            if k not in engines:
                engines.append(k)
    for k in engines:
        rows.append((DISPLAY.get(k, k) + " busy", *[pct(r.engines.get(k, 0.0)) for r in rows_of]))
    rows += [("HFU", *[pct(r.hfu) for r in rows_of]),
             ("HBM bandwidth", *[f"{r.hbm_gbps:,.1f} GB/s" for r in rows_of])]
    return table(f"{cmp.kernel} on {', '.join(ts)}", ["figure", *ts], rows)

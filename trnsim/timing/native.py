"""The C implementation of dependency analysis and list scheduling (``_native.c``), when built.

``pip install -e .`` compiles it as an optional extension; without a compiler the package still
works through the pure-Python reference (deps.py, scheduler.py), which this code must match
exactly.  ``TRNSIM_NATIVE=0`` forces the Python path (checked on every call, so tests can flip it).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..ir.trace import Trace
from .costs import CostModel
from .regions import BUCKET_HBM, BUCKET_ONCHIP
from .encode import EncodedTrace, cost_table, encode
from .rules import GAP_WINDOW
from .assign import IN_ORDER_ENGINE
from ..ir.engines import ENGINE_CODE
from .timeline import DepGraph, DmaParts, Timeline

from .native_ext import NotTuples, available, module, resolve  # noqa: F401  (this module's API)
from .native_ext import _mod


def dependencies_encoded(enc: EncodedTrace, reorder: Sequence[str] = ()) -> DepGraph:
    """Dependencies of an encoded trace (same rule as deps.dependencies)."""
    is_hbm = bytes(1 if m == "hbm" else 0 for m in enc.memories)
    # an instruction left to the compiler may move to another engine, one on a reordered stream
    # may finish after a later reader: their reads never collapse into a later same-engine
    # reader's (deps.py: collapse_engine), as DMA reads never do
    dma = ENGINE_CODE["dma"]
    moving = {ENGINE_CODE[e] for e in reorder}
    seng = np.array([dma if r.attr("engine_auto") or c in moving else c
                     for r, c in zip(enc.reps, enc.shape_engine)], dtype=np.uint8)
    indptr, indices = _mod.dependencies(
        enc.n, enc.shape, enc.shape_nregs, enc.shape_nreads, seng, enc.reg_mem,
        enc.dep_geo, is_hbm, BUCKET_ONCHIP, BUCKET_HBM, ENGINE_CODE["dma"])
    return DepGraph(np.frombuffer(indptr, dtype=np.int64), np.frombuffer(indices, dtype=np.int32))


def dependencies(trace: Trace, reorder: Sequence[str] = ()) -> DepGraph:
    """Dependencies of ``trace`` computed in C (``reorder``: see deps.dependencies)."""
    return dependencies_encoded(encode(trace), reorder)


def schedule_encoded(enc: EncodedTrace, model: CostModel, deps: Optional[Sequence] = None
                     ) -> Timeline:
    """List-schedule an encoded trace (same rules as scheduler.schedule)."""
    tab = cost_table(enc, model)
    graph = dependencies_encoded(enc, model.reorder_engines) if deps is None \
        else DepGraph.from_lists(deps)
    if len(graph) != enc.n:
        raise ValueError(f"dependency list has {len(graph)} entries for {enc.n} instructions")
    n = enc.n
    start = np.zeros(n)
    end = np.zeros(n)
    busy_end = np.zeros(n)
    eng = np.zeros(n, dtype=np.uint8)
    t = model.t
    th = t.tensor
    nq = model.dma_engines
    res = _mod.schedule(
        n, enc.shape, tab.kind, tab.engine, tab.nreads, tab.nregs, tab.occ, tab.occ_same, tab.lat,
        tab.flops, tab.bf16eq, tab.dma_bytes, tab.hbm_bytes, tab.dma_engines, tab.dur, tab.fixed,
        tab.ports, enc.reg_geo, graph.indptr,
        graph.indices, start, end, busy_end, eng, len(ENGINE_CODE), nq, t.sync.cross_engine_ns,
        th.throttle_start, th.throttle_ramp_ns, th.throttle_window_ns,
        th.throttle_min_utilization, GAP_WINDOW, tab.hidden, tab.alt_off, tab.alt_engine,
        tab.alt_occ, tab.alt_lat, tab.alt_hidden, tab.alt_ports, model.switch_margin_ns,
        bytes(1 if e in model.reorder_engines or (e == "dma" and model.reorder_dma) else 0
              for e in ENGINE_CODE), model.reorder_window,
        ENGINE_CODE[IN_ORDER_ENGINE])
    (flops, bf16eq, hbm, dmab, throttled, g_ins, g_s, g_e, g_off, g_q, qbusy, qorder) = res
    qdtype = np.uint8 if nq <= 256 else np.uint16
    parts = DmaParts(np.frombuffer(g_ins, np.int32), np.frombuffer(g_s, np.float64),
                     np.frombuffer(g_e, np.float64), np.frombuffer(g_off, np.int64),
                     np.frombuffer(g_q, qdtype), np.frombuffer(qbusy, np.float64), qorder)
    return Timeline(start, end, busy_end, eng, parts, flops, bf16eq, hbm, dmab, throttled,
                    deps if deps is not None else graph)


def schedule(trace: Trace, model: CostModel, deps: Optional[Sequence] = None) -> Timeline:
    """Encode and list-schedule ``trace`` in C."""
    return schedule_encoded(encode(trace), model, deps)

"""The Perfetto trace explains: critical-path flow events valid in the trace-event format, SBUF /
PSUM counter tracks equal to the occupancy series, the DMA queues grouped in a process of their own
(sorted after the compute engines), DMA slices carrying bytes / contiguity / efficiency / queue
(checked against a hand calculation), and the fixed-cost gaps labelled on a notes thread."""
import math

import numpy as np



# fixtures `matmul` and `double`: tests/profile/conftest.py

def _index(doc):
    """Declared processes and threads (name by id), slices by (pid, tid), and the other events."""
    procs, threads, sort_p, sort_t = {}, {}, {}, {}
    slices, rest = {}, []
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M":
            if ev["name"] == "process_name":
                procs[ev["pid"]] = ev["args"]["name"]
            elif ev["name"] == "thread_name":
                threads[(ev["pid"], ev["tid"])] = ev["args"]["name"]
            elif ev["name"] == "process_sort_index":
                sort_p[ev["pid"]] = ev["args"]["sort_index"]
            elif ev["name"] == "thread_sort_index":
                sort_t[(ev["pid"], ev["tid"])] = ev["args"]["sort_index"]
        elif ev["ph"] == "X":
            slices.setdefault((ev["pid"], ev["tid"]), []).append(ev)
        else:
            rest.append(ev)
    return procs, threads, sort_p, sort_t, slices, rest


def check_flows(doc):
    """Trace-event rules for v1 flow events; returns the arrows as (s, f) pairs in id order."""
    procs, threads, _, _, slices, rest = _index(doc)
    s = {ev["id"]: ev for ev in rest if ev["ph"] == "s"}
    f = {ev["id"]: ev for ev in rest if ev["ph"] == "f"}
    assert len(s) == sum(ev["ph"] == "s" for ev in rest)       # ids unique per phase
    assert len(f) == sum(ev["ph"] == "f" for ev in rest)
    assert set(s) == set(f)                                    # every start has its finish
    pairs = []
    for i in sorted(s):
        a, b = s[i], f[i]
        assert a["cat"] == b["cat"] and a["name"] == b["name"]
        assert b["bp"] == "e"                                  # binds to the enclosing slice
        assert a["ts"] <= b["ts"]
        bound = []
        for ev in (a, b):
            assert ev["pid"] in procs and (ev["pid"], ev["tid"]) in threads
            inside = [x for x in slices.get((ev["pid"], ev["tid"]), ())
                      if x["ts"] - 1e-9 <= ev["ts"] <= x["ts"] + x["dur"] + 1e-9]
            assert inside, f"flow {ev} binds to no slice"
            bound.append(inside[0])
        pairs.append(tuple(bound))
    return pairs


def test_critical_path_flows_are_valid_trace_events(matmul):
    from trnsim.profile.insight import analyze
    from trnsim.profile.perfetto import trace_events
    a = analyze(matmul)
    doc = trace_events(matmul, analysis=a)
    pairs = check_flows(doc)
    path = [p["instruction"] for p in a["critical_path"]]
    assert len(path) >= 2 and len(pairs) == len(path) - 1
    # the arrows follow the path, slice to slice
    assert [x["args"]["instruction"] for x, _ in pairs] == path[:-1]
    assert [y["args"]["instruction"] for _, y in pairs] == path[1:]


def _fake(est):
    """A hand-written analysis: a three-step path, a three-point occupancy series, two gaps."""
    tl = est.cores[0].timeline
    pe = int(np.flatnonzero(tl.engine_code == 0)[0])
    dma = max((int(i) for i in np.flatnonzero(tl.engine_code == 5) if tl.end[i] <= tl.start[pe]),
              key=lambda i: tl.end[i])      # a transfer that finished before the matmul began
    after = int(np.flatnonzero(tl.engine_code == 1)[0]) if (tl.engine_code == 1).any() else \
        int(np.flatnonzero(tl.engine_code == 2)[0])
    step = lambda i: {"instruction": i, "engine": "x", "opcode": "x", "source": "x",  # noqa: E731
                      "start_ns": float(tl.start[i]), "end_ns": float(tl.end[i])}
    return {"core": 0, "critical_path": [step(dma), step(pe), step(after)],
            "occupancy": {"sbuf": {"t_ns": [0.0, 100.0, 2500.0], "bytes_per_partition": [0, 512, 256],
                                   "capacity_bytes_per_partition": 196608, "peak": 512},
                          "psum": {"t_ns": [0.0, 1200.0], "bytes_per_partition": [0, 2048],
                                   "capacity_bytes_per_partition": 16384, "peak": 2048}},
            "dma": {"transfers": [], "fixed_gaps": [
                {"label": "start-up", "start_ns": 0.0, "dur_ns": 250.0},
                {"label": "before the final store", "start_ns": 9000.0, "dur_ns": 125.5}]}}, \
        (dma, pe, after)


def test_flows_counters_and_gaps_from_a_hand_written_analysis(matmul):
    from trnsim.profile.perfetto import trace_events
    fake, (dma, pe, after) = _fake(matmul)
    doc = trace_events(matmul, analysis=fake)
    procs, threads, _, _, slices, rest = _index(doc)
    pairs = check_flows(doc)
    assert [(x["args"]["instruction"], y["args"]["instruction"]) for x, y in pairs] == \
        [(dma, pe), (pe, after)]
    names = {threads[(x["pid"], x["tid"])] for x, _ in pairs}
    assert "Tensor (PE)" in names and names - {"Tensor (PE)"} <= {f"DMA q{q}" for q in range(16)}
    # counters: one event per series point, same times (us) and values, on a declared process
    for name, key in (("SBUF occupancy", "sbuf"), ("PSUM occupancy", "psum")):
        got = [(ev["ts"], ev["args"]["bytes per partition"]) for ev in rest
               if ev["ph"] == "C" and ev["name"] == name]
        series = fake["occupancy"][key]
        assert got == [(t / 1e3, v) for t, v in zip(series["t_ns"], series["bytes_per_partition"])]
        assert all(ev["pid"] in procs for ev in rest if ev["ph"] == "C")
    # the gaps: labelled slices on the notes thread of the compute process
    notes = [k for k, v in threads.items() if v == "Notes"]
    assert len(notes) == 1
    gaps = [(x["name"], x["ts"], x["dur"]) for x in slices[notes[0]]]
    assert gaps == [("start-up", 0.0, 0.25), ("before the final store", 9.0, 0.1255)]
    # no analysis: none of it
    bare = trace_events(matmul, analysis=False)
    assert not [ev for ev in bare["traceEvents"] if ev["ph"] in ("s", "f", "C")]


def test_dma_queues_are_one_group_after_the_compute_engines(matmul):
    from trnsim.profile.perfetto import trace_events
    procs, threads, sort_p, sort_t, slices, _ = _index(trace_events(matmul, analysis=False))
    compute = [p for p, n in procs.items() if n.startswith("NC0 (")]
    group = [p for p, n in procs.items() if n == "NC0 DMA (16 queues)"]
    assert len(compute) == 1 and len(group) == 1
    (pc,), (pd,) = compute, group
    assert sort_p[pc] < sort_p[pd]                       # compute engines first
    assert sorted((sort_t[(pd, t)], n) for (p, t), n in threads.items() if p == pd) == \
        [(q + 1, f"DMA q{q}") for q in range(16)]
    eng = sorted((sort_t[(pc, t)], n) for (p, t), n in threads.items() if p == pc)
    assert [n for _, n in eng] == ["Tensor (PE)", "Vector (DVE)", "Scalar (ACT)", "GpSimd (POOL)",
                                   "Sync (SP)", "Notes"]
    dma_slices = [x for (p, _), xs in slices.items() if p == pd for x in xs]
    n_parts = len(matmul.cores[0].timeline.dma_parts)
    assert len(dma_slices) == n_parts and all(x["cat"] == "DMA" for x in dma_slices)
    assert not [x for (p, _), xs in slices.items() if p == pc for x in xs if x["cat"] == "DMA"]


def test_dma_slices_carry_bytes_contiguity_efficiency_and_queue(double):
    from trnsim.profile.perfetto import trace_events
    procs, threads, _, _, slices, _ = _index(trace_events(double, analysis=False))
    pd = [p for p, n in procs.items() if " DMA " in n][0]
    load = [x for (p, t), xs in slices.items() if p == pd for x in xs if x["args"]["instruction"] == 0]
    spec = double.cores[0].spec
    d = spec.timing.dma
    # by hand: 128 partitions x 2048 bf16 = 524288 bytes, 4096 contiguous bytes per partition,
    # spread over ceil(128 / partitions per engine) queues (at most the core's 16)
    assert {x["args"]["bytes"] for x in load} == {128 * 2048 * 2}
    assert {x["args"]["contiguous_bytes_per_partition"] for x in load} == {4096}
    assert len(load) == min(spec.dma_engines, math.ceil(128 / d.partitions_per_engine))
    assert sorted(x["args"]["queue"] for x in load) == sorted(t - 1 for (p, t), xs in slices.items()
                                                              if p == pd and any(x in xs for x in load))
    # efficiency: an HBM load, so the core's own HBM curve where it has one (trn1: calibrated, no
    # floor), else the FIG-DMA curve over its calibrated floor, interpolated in log2(bytes) at 4096
    own = bool(d.hbm_efficiency)
    xs = [math.log2(b) for b in (d.hbm_efficiency_bytes if own else d.efficiency_bytes)]
    ys = list(d.hbm_efficiency if own else d.efficiency)
    x = math.log2(4096)
    if x >= xs[-1]:
        y = ys[-1]
    else:
        j = next(k for k in range(1, len(xs)) if xs[k] >= x)
        y = ys[j - 1] + (x - xs[j - 1]) / (xs[j] - xs[j - 1]) * (ys[j] - ys[j - 1])
    floor = 0.0 if own else d.efficiency_floor
    want = floor + (1 - floor) * y
    assert {x["args"]["efficiency"] for x in load} == {round(want, 4)}
    assert all(threads[(pd, x["tid"])] == f"DMA q{x['args']['queue']}" for x in load)


def test_streamed_file_equals_the_document(matmul, tmp_path):
    import json
    from trnsim.profile.perfetto import trace_events, write_perfetto
    fake, _ = _fake(matmul)
    p = tmp_path / "t.json"
    write_perfetto(matmul, str(p), analysis=fake)
    assert json.loads(p.read_text()) == trace_events(matmul, analysis=fake)

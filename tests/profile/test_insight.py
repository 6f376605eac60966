"""The profile explains (trnsim.profile.insight.analyze): hotspots against hand-counted kernels,
stall attribution on a two-engine ping-pong, the critical path, occupancy against hand-sized
tiles, the speed-of-light hand formula and the verdict of a kernel without matmul. Times are
checked against the Timeline with plain loops written here; counts, bytes and sizes by hand."""
import inspect
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.hardware import load_catalog  # noqa: E402
from trnsim.options import Options  # noqa: E402
from trnsim.profile.insight import analyze  # noqa: E402
from trnsim.profile.verdict import bottleneck  # noqa: E402
from trnsim.timing import estimate_run  # noqa: E402

P, F = 128, 512          # one fp32 tile: 128 partitions x 2048 B


@nki.jit
def four_tiles(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[i * 128:(i + 1) * 128, :])  # L_LOAD
        e = nisa.activation(op=nl.exp, data=t)  # L_EXP
        s = nisa.tensor_scalar(e, np.multiply, 2.0, engine=nisa.vector_engine)  # L_MUL
        nl.store(out[i * 128:(i + 1) * 128, :], value=s)  # L_STORE
    return out


@nki.jit
def ping_pong(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in range(3):  # Scalar and Vector alternate, each waiting for the other's result
        t = nisa.activation(op=nl.exp, data=t)
        t = nisa.tensor_scalar(t, np.multiply, 0.5, engine=nisa.vector_engine)
    nl.store(out, value=t)
    return out


@nki.jit
def three_live(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)                    # 2048 B per partition, live until the exp
    e = nisa.activation(op=nl.exp, data=t)   # 2048 B, reuses t's space (t dies at the exp)
    s = nisa.tensor_scalar(e, np.multiply, 2.0, engine=nisa.vector_engine)  # likewise
    nl.store(out, value=s)
    return out


@nki.jit
def two_live(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)                    # 2048 B per partition, live until the add
    y = nl.load(b)                    # 2048 B, live until the add
    z = nisa.tensor_tensor(x, y, np.add, engine=nisa.vector_engine)  # 2048 B, until the store
    nl.store(out, value=z)
    return out


@nki.jit
def one_matmul(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.load(a)                   # (K=128, M=128) bf16
    bt = nl.load(b)                   # (K=128, N=512) bf16
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)   # 2048 B per partition
    ps[...] = nisa.nc_matmul(at, bt)
    r = nl.copy(ps, dtype=nl.float32)
    nl.store(out, value=r)
    return out


def _line(fn, marker: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(src) if marker in s)


def _src(line: int) -> str:
    return f"test_insight.py:{line}"


def _est(kernel, *args, target="trn2", **opts):
    return estimate_run(kernel.run(*args, options=Options(target=target, **opts)))


@pytest.fixture(scope="module")
def tiles():
    a = np.random.default_rng(0).standard_normal((4 * P, F)).astype(np.float32)
    est = _est(four_tiles, a)
    return est, analyze(est, top=50)


def test_contract_keys(tiles):
    _, r = tiles
    assert {"core", "hotspots", "stalls", "critical_path", "dma", "speed_of_light", "occupancy",
            "verdict"} <= set(r)
    assert set(r["hotspots"]) == {"by_line", "by_opcode"}
    assert {"transfers", "fixed_gaps", "summary"} <= set(r["dma"])
    assert {"flops", "peak_flops_per_s", "flops_share", "hbm_bytes", "peak_hbm_bytes_per_s",
            "hbm_share", "arithmetic_intensity", "ridge_point", "bound", "hfu"} <= set(r["speed_of_light"])
    for m in ("sbuf", "psum"):
        assert {"t_ns", "bytes_per_partition", "capacity_bytes_per_partition", "peak"} <= set(r["occupancy"][m])
    import json
    json.dumps(r)  # JSON-ready: plain numbers, strings, lists and dicts only


def test_hotspots_by_line_hand_counted(tiles):
    est, r = tiles
    rows = {h["source"]: h for h in r["hotspots"]["by_line"]}
    want = {"L_LOAD": ("DMA", "nl.load"), "L_EXP": ("Scalar", "nisa.activation"),
            "L_MUL": ("Vector", "nisa.tensor_scalar"), "L_STORE": ("DMA", "nl.store")}
    tl = est.cores[0].timeline
    trace = est.cores[0].trace
    for marker, (engine, code) in want.items():
        line = _line(four_tiles, marker)
        h = rows[_src(line)]
        assert h["instructions"] == 4 and h["engines"] == {engine: 4}   # one per iteration
        assert code in h["code"]
        # engine time: occupancy (compute) or transfer (DMA) of the line's instructions
        t = sum(tl.busy_end[i] - tl.start[i] for i, ins in enumerate(trace)
                if ins.source.line == line)
        assert h["time_ns"] == pytest.approx(t)
    total = sum(tl.busy_end[i] - tl.start[i] for i in range(len(trace)))
    assert sum(h["share"] for h in r["hotspots"]["by_line"]) == pytest.approx(1.0)
    assert [h["time_ns"] for h in r["hotspots"]["by_line"]] == \
        sorted((h["time_ns"] for h in r["hotspots"]["by_line"]), reverse=True)
    assert rows[_src(_line(four_tiles, "L_EXP"))]["share"] == pytest.approx(
        rows[_src(_line(four_tiles, "L_EXP"))]["time_ns"] / total)


def test_hotspots_by_opcode_hand_counted(tiles):
    _, r = tiles
    ops = {(o["opcode"], o["engine"]): o["instructions"] for o in r["hotspots"]["by_opcode"]}
    assert ops == {("dma_copy", "DMA"): 8, ("activation", "Scalar"): 4,
                   ("tensor_scalar", "Vector"): 4}


def test_top_limits_rows(tiles):
    est, _ = tiles
    r = analyze(est, top=2)
    assert len(r["hotspots"]["by_line"]) == 2 and len(r["hotspots"]["by_opcode"]) == 2


def test_hotspots_of_a_fast_forwarded_loop_count_every_iteration():
    @nki.jit
    def long_loop(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(64):
            t = nl.load(a[i * 128:(i + 1) * 128, :])
            s = nisa.tensor_scalar(t, np.multiply, 2.0, engine=nisa.vector_engine)  # L_FF
            nl.store(out[i * 128:(i + 1) * 128, :], value=s)
        return out
    a = np.zeros((64 * P, 64), np.float32)
    # program order: with the compiler's reordering (timing/reorder.py) the next load is hoisted
    # and the tiles' lifetimes abut, so the occupancy no longer returns to 0 between iterations
    est = _est(long_loop, a, timing_only=True, fast_forward="all", stream_order="in_order")
    assert est.cores[0].trace.instructions.blocks, "the loop should be synthesized"
    r = analyze(est)
    rows = {h["source"]: h for h in r["hotspots"]["by_line"]}
    assert rows[_src(_line(long_loop, "L_FF"))]["instructions"] == 64
    assert r["dma"]["summary"]["transfers"] == 128                     # 64 loads + 64 stores
    assert r["dma"]["summary"]["bytes"] == 2 * 64 * P * 64 * 4
    # occupancy inside the synthesized iterations: each holds a 256 B tile (64 fp32) at a time
    occ = r["occupancy"]["sbuf"]
    tl = est.cores[0].timeline
    first, blk = next((f, b) for f, b in est.cores[0].trace.instructions.segments()
                      if not isinstance(b, list))
    t0, t1 = tl.start[first], tl.start[first + blk.n - 1]
    inside = [lv for t, lv in zip(occ["t_ns"], occ["bytes_per_partition"]) if t0 < t < t1]
    assert occ["peak"] == 64 * 4 and len(inside) > blk.count and set(inside) == {0, 64 * 4}


@pytest.fixture(scope="module")
def pingpong():
    a = np.random.default_rng(1).standard_normal((P, F)).astype(np.float32) * 0.1
    est = _est(ping_pong, a)
    return est, analyze(est, top=10)


def test_stalls_of_a_two_engine_ping_pong(pingpong):
    est, r = pingpong
    tl, trace = est.cores[0].timeline, est.cores[0].trace
    engines = [ins.engine for ins in trace]
    assert engines == ["dma"] + ["scalar", "vector"] * 3 + ["dma"]
    lat = est.latency_ns
    for label, name, other in (("Vector", "vector", "Scalar"), ("Scalar", "scalar", "Vector")):
        st = r["stalls"][label]
        idx = [i for i, e in enumerate(engines) if e == name]
        busy = sum(tl.busy_end[i] - tl.start[i] for i in idx)
        assert st["busy_ns"] == pytest.approx(busy)
        assert st["idle_ns"] == pytest.approx(lat - busy)
        # each instruction waits for the other engine's previous result (the first Scalar one:
        # for the load), so every gap before an instruction is attributed to that engine
        gaps, free = [], 0.0
        for i in idx:
            gaps.append(tl.start[i] - free)
            free = tl.busy_end[i]
        waits = st["waiting_on"]
        if name == "vector":
            assert waits["Scalar"] == pytest.approx(sum(gaps))
        else:
            dma_key = [k for k in waits if k.startswith("DMA:q")]
            assert len(dma_key) == 1 and waits[dma_key[0]] == pytest.approx(gaps[0])
            assert waits["Vector"] == pytest.approx(sum(gaps[1:]))
        assert waits["after its last instruction"] == pytest.approx(lat - free)
        assert sum(waits.values()) == pytest.approx(st["idle_ns"])
        top = st["top"][0]
        assert top["waited_on"]["instruction"] == top["instruction"] - 1  # the one just before
        assert top["waited_on"]["engine"] == other or top["waited_on"]["engine"].startswith("DMA")
        assert top["wait_ns"] == pytest.approx(max(gaps))


def test_dma_stalls_of_the_ping_pong(pingpong):
    est, r = pingpong
    tl = est.cores[0].timeline
    st = r["stalls"]["DMA"]
    # two transfers: the load at the start, the store after the last Vector result
    assert st["busy_ns"] == pytest.approx((tl.end[0] - tl.start[0]) + (tl.end[7] - tl.start[7]))
    w = st["waiting_on"]
    assert w["start-up"] == pytest.approx(tl.start[0])          # nothing before the first load
    sync = est.cores[0].spec.timing.sync.cross_engine_ns
    assert w["Vector"] == pytest.approx(tl.end[6] + sync - tl.end[0])
    assert w["fixed DMA latency"] == pytest.approx(tl.start[7] - (tl.end[6] + sync))
    assert st["top"][0]["instruction"] == 7 and st["top"][0]["waited_on"]["instruction"] == 6
    assert sum(w.values()) == pytest.approx(st["idle_ns"])


def test_critical_path_of_a_chain_is_the_whole_chain(pingpong):
    est, r = pingpong
    path = r["critical_path"]
    assert [p["instruction"] for p in path] == list(range(8))   # load, 6 alternating ops, store
    assert [p["engine"][:3] for p in path[1:7]] == ["Sca", "Vec"] * 3
    assert path[-1]["end_ns"] == pytest.approx(est.latency_ns)
    assert all(b["start_ns"] >= a["end_ns"] - 1e-6 for a, b in zip(path, path[1:]))
    assert r["critical_path_length"] == 8


def test_fixed_gaps_are_labelled(pingpong):
    est, r = pingpong
    tl = est.cores[0].timeline
    gaps = r["dma"]["fixed_gaps"]
    assert gaps[0]["label"] == "start-up" and gaps[0]["start_ns"] == 0.0
    assert gaps[0]["dur_ns"] == pytest.approx(tl.start.min())   # nothing runs before the load
    final = [g for g in gaps if g["label"] == "before the final store"]
    assert len(final) == 1
    assert final[0]["start_ns"] + final[0]["dur_ns"] == pytest.approx(tl.start[7])


def test_dma_transfer_detail_hand_sized(tiles):
    _, r = tiles
    t = r["dma"]["transfers"]
    assert len(t) == 8
    for x in t:
        assert x["bytes"] == P * F * 4                        # one fp32 tile
        assert x["contiguous_bytes_per_partition"] == F * 4   # whole rows are contiguous
        assert x["direction"] in ("hbm->sbuf", "sbuf->hbm") and x["queues"]
        assert 0 < x["efficiency"] <= 1
    assert sorted(x["direction"] for x in t) == ["hbm->sbuf"] * 4 + ["sbuf->hbm"] * 4
    assert [x["dur_ns"] for x in t] == sorted((x["dur_ns"] for x in t), reverse=True)
    s = r["dma"]["summary"]
    assert s["transfers"] == 8 and s["bytes"] == 8 * P * F * 4


def test_occupancy_matches_hand_sized_tiles():
    a = np.zeros((P, F), np.float32)
    est = _est(two_live, a, a)
    r = analyze(est)
    tl = est.cores[0].timeline
    occ = r["occupancy"]["sbuf"]
    tile = F * 4                                   # 2048 B per partition each
    # x and y are both live at the add; z takes the space they free after it
    assert occ["peak"] == 2 * tile == est.figures().sbuf_peak_bytes_per_partition
    assert occ["bytes_per_partition"][0] == 0 and occ["bytes_per_partition"][-1] == 0
    assert set(occ["bytes_per_partition"]) == {0, tile, 2 * tile}
    level_at = dict(zip(occ["t_ns"], occ["bytes_per_partition"]))
    assert level_at[float(tl.start[2])] == 2 * tile   # the add starts: x and y live
    assert level_at[float(tl.start[3])] == tile       # the store starts: z only
    assert occ["t_ns"][-1] == pytest.approx(est.latency_ns)
    assert occ["capacity_bytes_per_partition"] == load_catalog().core_for("trn2").sbuf.bytes_per_partition
    assert occ["t_ns"] == sorted(occ["t_ns"])
    assert r["occupancy"]["psum"]["peak"] == 0
    # a result reuses the space of inputs that die at its instruction: one tile at a time
    r3 = analyze(_est(three_live, a))
    assert r3["occupancy"]["sbuf"]["peak"] == tile


def test_psum_occupancy_and_speed_of_light_hand_formula():
    a = np.ones((128, 128), ml_dtypes.bfloat16)
    b = np.ones((128, 512), ml_dtypes.bfloat16)
    est = _est(one_matmul, a, b)
    r = analyze(est)
    assert r["occupancy"]["psum"]["peak"] == 512 * 4              # one fp32 PSUM bank tile
    sol = r["speed_of_light"]
    core = load_catalog().core_for("trn2")
    chip = load_catalog().chip_for("trn2")
    flops = 2 * 128 * 128 * 512                                   # 2 K M N
    peak = 2 * 128 * 128 * core.clocks.tensor_hz                  # PE rows x columns x 2 x clock
    hbm = 128 * 128 * 2 + 128 * 512 * 2 + 128 * 512 * 4           # two bf16 loads, fp32 store
    bw = chip.hbm_bandwidth_bytes_per_s / chip.cores
    lat_s = est.latency_ns / 1e9
    assert sol["flops"] == flops and sol["hbm_bytes"] == hbm
    assert sol["peak_flops_per_s"] == pytest.approx(peak)
    assert sol["peak_hbm_bytes_per_s"] == pytest.approx(bw)
    assert sol["flops_share"] == pytest.approx(flops / (peak * lat_s))
    assert sol["hbm_share"] == pytest.approx(hbm / (bw * lat_s))
    assert sol["arithmetic_intensity"] == pytest.approx(flops / hbm)
    assert sol["ridge_point"] == pytest.approx(peak / bw)
    assert sol["bound"] == ("compute" if flops / hbm >= peak / bw else "memory")
    assert sol["hfu"] == pytest.approx(flops / (peak * lat_s))    # bf16: weight 1


def test_verdict_of_a_kernel_without_matmul(tiles, pingpong):
    for est, r in (tiles, pingpong):
        assert est.figures().engines["Tensor"] == 0
        for line in (bottleneck(est.figures()), r["verdict"]):
            assert "Tensor engine waits" not in line
        if not r["verdict"].startswith("latency-bound"):
            assert "no matmul" in r["verdict"]
    est, r = pingpong
    # the chain's compute engines wait on each other: the verdict names what the busiest waits on
    busiest = max(("Vector", "Scalar"), key=lambda k: r["stalls"][k]["busy_ns"])  # DMA may lead
    other = {"Vector": "Scalar", "Scalar": "Vector"}[busiest]
    shares = {"Vector": 0.6, "Scalar": 0.3, "Tensor": 0.0, "DMA (any queue)": 0.1}
    v = bottleneck(replace(est.figures(), engines=shares),
                   {k: s["waiting_on"] for k, s in r["stalls"].items()})
    assert v.startswith("Vector-bound") and "no matmul" in v and "Tensor engine" not in v
    assert "its idle time is spent mostly waiting on Scalar" in v   # Vector waits on Scalar
    assert other in r["verdict"] or "DMA" in r["verdict"] or r["verdict"].startswith("latency")


def test_verdict_with_matmul_still_names_the_tensor_engine():
    a = np.ones((128, 128), ml_dtypes.bfloat16)
    b = np.ones((128, 512), ml_dtypes.bfloat16)
    est = _est(one_matmul, a, b)
    shares = {"Tensor": 0.2, "Vector": 0.1, "DMA (any queue)": 0.9, "DMA (mean of queues)": 0.8}
    assert bottleneck(replace(est.figures(), engines=shares)).endswith(
        "while the Tensor engine waits 80%")


def test_the_profile_explains_the_run_with_its_own_hardware_file(tmp_path):
    # a what-if file halving the DMA efficiency curve's floor-rescaled figure: the profile's DMA
    # detail must use the run's rules (its --hardware file), not a model rebuilt from defaults.
    # 2048 B contiguous per partition reads 0.81 off the FIG-DMA curve; with efficiency_floor 0.5
    # it is 0.5 + 0.5 x 0.81 = 0.905 (costs.py: floor + (1 - floor) x curve)
    hw = tmp_path / "floor.toml"
    hw.write_text('[cores.v3.timing.dma]\nefficiency_floor = { value = 0.5, source = "test" }\n')
    a = np.zeros((4 * P, F), np.float32)
    default = analyze(_est(four_tiles, a))["dma"]["transfers"]
    whatif = analyze(_est(four_tiles, a, hardware_file=str(hw)))["dma"]["transfers"]
    assert [x["efficiency"] for x in default] == pytest.approx([0.81] * len(default))
    assert [x["efficiency"] for x in whatif] == pytest.approx([0.905] * len(whatif))

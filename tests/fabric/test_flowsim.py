"""The flow simulator: hand formulas on a ring, link capacities never exceeded, max-min optimality."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trnsim.fabric import build_topology, collective, load_fabric_config
from trnsim.fabric.closed_form import ring_all_reduce_s
from trnsim.fabric.flowsim import maxmin_rates, simulate_step
from trnsim.fabric.schedule import Step
from trnsim.hardware import load_catalog

GiB = 2 ** 30


def _inf2_ring_port_bw(cfg, eff):
    spec = load_catalog().instance("inf2.48xlarge")
    # per chip figure = the sum of its 2 ring ports in one direction
    return spec.chip_link_bandwidth_bytes_per_s / 2 * eff


@pytest.mark.parametrize("size", [1024.0, 4 * 2 ** 20, 1 * GiB])
def test_ring_all_reduce_on_one_ring_matches_the_hand_formula(size):
    cfg = load_fabric_config()
    rt = cfg.runtime("inf2")
    N = 12
    ranks = [2 * c for c in range(N)]  # core 0 of each of the 12 chips of the ring
    res = collective("inf2.48xlarge", "all-reduce", size, ranks=ranks, algorithm="ring", in_graph=False)
    B = 2 * _inf2_ring_port_bw(cfg, rt.bandwidth_efficiency)  # both directions of the ring carry data
    alpha = cfg.step_s
    steps = rt.step_overhead_s * 2 * (N - 1)  # the runtime's cost per message, one per ring step
    want = rt.launch_overhead_s + steps + 2 * (N - 1) * alpha + 2 * (N - 1) / N * size / B
    assert res.time_us * 1e-6 == pytest.approx(want, rel=1e-9)
    # the closed form agrees (and is what the fast path uses)
    closed = rt.launch_overhead_s + steps + ring_all_reduce_s(N, size, B / 2, alpha, channels=2)
    assert res.time_us * 1e-6 == pytest.approx(closed, rel=1e-9)
    assert res.busbw_gbps == pytest.approx(size / (res.time_us * 1e-6) * 2 * (N - 1) / N / 1e9)


def test_ring_formula_with_overridden_runtime(fabric_file):
    hw = fabric_file("""
        [fabric.runtime.inf2]
        launch_overhead_s = { value = 0.0, source = "test" }
        step_overhead_s = { value = 0.0, source = "test" }
        bandwidth_efficiency = { value = 1.0, source = "test" }
        default_lnc = { value = 1, source = "test" }
        [fabric.latency]
        step_s = { value = 2e-6, source = "test" }
        efa_step_s = { value = 15e-6, source = "test" }
        forward_hop_s = { value = 0.5e-6, source = "test" }
    """)
    N, S = 12, 256 * 2 ** 20
    res = collective("inf2.48xlarge", "all-reduce", S, ranks=[2 * c for c in range(N)], algorithm="ring",
                     hardware_file=hw, in_graph=False)
    B = 2 * (192 * GiB / 2)  # 96 GiB/s per ring link each way, two ring directions
    assert res.time_us * 1e-6 == pytest.approx(2 * (N - 1) * 2e-6 + 2 * (N - 1) / N * S / B, rel=1e-9)


def test_two_cores_of_one_chip_move_bytes_at_the_core_pair_rate():
    cfg = load_fabric_config()
    rt = cfg.runtime("trn1")
    S = 64 * 2 ** 20
    res = collective("trn1.2xlarge", "all-reduce", S, algorithm="ring", in_graph=False)
    # two ranks: the chip's core-to-core capacity is min(2 x core DMA rate, 2 x core-pair rate)
    cap = min(2 * rt.core_dma_bytes_per_s, 2 * rt.core_pair_bytes_per_s)
    # 2 steps; in each both cores send S/2 (split over two ring channels) over the core-to-core path
    want = rt.launch_overhead_s + 2 * rt.step_overhead_s + 2 * (cfg.step_s + S / cap)
    assert res.time_us * 1e-6 == pytest.approx(want, rel=1e-9)


def test_four_ranks_of_a_chip_reach_more_bus_bandwidth_than_two():
    # the measured order (calibration rows P213 P216 P217): a rank of a 4-rank group drives three core pairs
    two = collective("trn2", "all-reduce", GiB, ranks=2, lnc=2)
    four = collective("trn2", "all-reduce", GiB, ranks=4, lnc=2)
    assert four.busbw_gbps > two.busbw_gbps


_TOPO = build_topology("trn2.48xlarge", instances=2, lnc=2)
flows = st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31), st.floats(1.0, 1e9)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(flows)
def test_flow_simulator_never_exceeds_a_link(fl):
    step = Step(np.array([f[0] for f in fl]), np.array([f[1] for f in fl]), np.array([f[2] for f in fl]))
    r = simulate_step(_TOPO, step, record=True)
    assert r.intervals
    for t0, t1, load in r.intervals:
        assert t1 >= t0
        assert np.all(load <= r.capacity * (1 + 1e-9))
    # bytes on each link: every flow's bytes on every link of its route(s)
    want = {}
    for s, d, b in fl:
        for frac, links, _ in _TOPO.route(s, d):
            for link in links:
                want[link] = want.get(link, 0.0) + b * frac
    got = dict(zip(r.link_ids.tolist(), r.link_bytes.tolist()))
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9)
    # no step can beat its busiest link, nor its slowest start
    assert r.time_s >= max(got[k] / c for k, c in zip(r.link_ids.tolist(), r.capacity.tolist())) * (1 - 1e-9)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True), min_size=1, max_size=12),
       st.lists(st.floats(0.5, 10.0), min_size=6, max_size=6))
def test_maxmin_rates_are_feasible_and_every_flow_has_a_bottleneck(paths, caps):
    cap = np.array(caps)
    ef = np.array([f for f, p in enumerate(paths) for _ in p])
    el = np.array([link for p in paths for link in p])
    rate = maxmin_rates(cap, ef, el, len(paths))
    load = np.bincount(el, weights=rate[ef], minlength=cap.size)
    assert np.all(load <= cap * (1 + 1e-9))
    for f, p in enumerate(paths):
        # max-min: some link of the flow is full and no flow on it goes faster
        assert any(load[link] >= cap[link] * (1 - 1e-9) and
                   all(rate[g] <= rate[f] * (1 + 1e-9) for g, q in enumerate(paths) if link in q)
                   for link in p)


def test_flows_share_a_link_fairly_from_the_moment_the_later_one_starts():
    # chip 0 -> 1 (one hop, starts after step_s) and chip 0 -> 2 (two hops, half each way round the x ring,
    # starts after step_s + forward_hop_s): the x+ half shares chip 0's x+ link with the first flow
    t = build_topology("trn2.48xlarge", lnc=2)
    cfg = load_fabric_config()
    C = t.dim_bw[0] * t.efficiency
    f, u = cfg.forward_hop_s, 10e-6
    a = C * (f + u)  # alone for f, then C*u left at C/2 -> 2u more
    b = 2 * C * u  # each half C*u: the shared half at C/2 (2u), the other alone at C (u)
    r = simulate_step(t, Step(np.array([0, 0]), np.array([1, 2]), np.array([a, b])))
    assert r.time_s == pytest.approx(cfg.step_s + f + 2 * u, rel=1e-9)


def test_dual_ring_uses_two_disjoint_hamiltonian_cycles_of_the_4x4_torus():
    from trnsim.fabric.algorithms.dualring import decomposition
    a, b = decomposition(4, 4)

    def edges(cyc):
        out = set()
        for p, q in zip(cyc, cyc[1:] + cyc[:1]):
            (px, py), (qx, qy) = (p % 4, p // 4), (q % 4, q // 4)
            # torus neighbours: one coordinate differs by 1 mod 4, the other is equal
            assert (px == qx and (py - qy) % 4 in (1, 3)) or (py == qy and (px - qx) % 4 in (1, 3))
            out.add(frozenset((p, q)))
        return out

    assert sorted(a) == sorted(b) == list(range(16))
    ea, eb = edges(list(a)), edges(list(b))
    assert len(ea) == len(eb) == 16 and not ea & eb  # together: all 32 links of the torus


def test_dual_ring_all_reduce_matches_the_hand_formula():
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    N, S = 16, 1 * GiB
    ranks = [4 * c for c in range(N)]  # one rank per chip at LNC=2
    res = collective("trn2.48xlarge", "all-reduce", S, ranks=ranks, algorithm="dual-ring", in_graph=False)
    port = 1.024e12 / 4 * rt.bandwidth_efficiency  # per port, per direction
    # four channels (two cycles x two directions), each on its own links: 4 ports' worth per chip
    want = rt.launch_overhead_s + 2 * (N - 1) * (rt.step_overhead_s + cfg.step_s) + 2 * (N - 1) / N * S / (4 * port)
    assert res.time_us * 1e-6 == pytest.approx(want, rel=1e-9)

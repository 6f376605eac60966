"""The fast path (closed forms per algorithm) against the flow simulator and against hand formulas.

Stated tolerance: on regular groups the fast path equals the flow simulator (rel 1e-9) wherever a step's
flows start together (ring, dual-ring, torus-rings, hierarchical, switch and single-chip schedules); where a
mesh step mixes routes of different hop counts it is a lower bound no more than 15% below the simulator."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trnsim.fabric import FabricComm, build_topology, load_fabric_config
from trnsim.fabric.closed_form import expand, step_pieces
from trnsim.fabric.flowsim import _expand
from trnsim.fabric.schedule import Step
from trnsim.hardware import load_catalog

GiB, MiB = 2 ** 30, 2 ** 20
TOLERANCE = 0.15

_SYSTEMS = [("trn1.32xlarge", 2, 1), ("trn2.48xlarge", 2, 2), ("trn2-ultraserver", 1, 2), ("trn3-gen2", 2, 2),
            ("inf2.48xlarge", 1, 1), ("trn1.2xlarge", 3, 1)]
_TOPOS = [build_topology(s, i, lnc) for s, i, lnc in _SYSTEMS]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(_TOPOS) - 1), st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 10 ** 6),
                                                          st.floats(0.0, 1e9)), min_size=1, max_size=40))
def test_vectorized_routes_put_the_same_bytes_on_the_same_links_as_the_simulator(t, flows):
    topo = _TOPOS[t]
    n = topo.n_chips
    step = Step(np.array([a % n for a, _, _ in flows]), np.array([b % n for _, b, _ in flows]),
                np.array([c for _, _, c in flows]))
    b1, l1, f1, k1 = _expand(topo, step)
    b2, l2, f2, k2 = expand(topo, step)
    top = int(max(k1.max(initial=0), k2.max(initial=0))) + 1
    assert np.allclose(np.bincount(k1, b1[f1], top), np.bincount(k2, b2[f2], top), rtol=1e-12)
    o1, o2 = np.lexsort((b1, l1.round(15))), np.lexsort((b2, l2.round(15)))
    assert np.allclose(l1[o1], l2[o2], rtol=1e-12) and np.allclose(b1[o1], b2[o2], rtol=1e-12)
    p1, p2 = np.array(step_pieces(topo, step, _expand)), np.array(step_pieces(topo, step))
    assert p1.shape == p2.shape and np.allclose(p1, p2, rtol=1e-12)


_GROUPS = [  # (system, instances, lnc, ranks): the shapes the model layer asks for
    ("trn1.32xlarge", 1, 1, range(2)), ("trn1.32xlarge", 1, 1, range(8)), ("trn1.32xlarge", 1, 1, range(32)),
    ("trn1.32xlarge", 1, 1, range(0, 32, 2)), ("trn1.32xlarge", 4, 1, range(0, 128, 32)),
    ("trn1.32xlarge", 4, 1, range(0, 128, 8)), ("trn2.48xlarge", 1, 2, range(16)),
    ("trn2.48xlarge", 1, 2, range(0, 64, 8)), ("trn2.48xlarge", 1, 2, range(64)),
    ("trn2.48xlarge", 2, 2, range(128)), ("trn2-ultraserver", 1, 2, range(0, 256, 4)),
    ("trn3-gen1", 1, 2, range(32)), ("inf2.48xlarge", 1, 1, range(24)),
]


@pytest.mark.parametrize("system, instances, lnc, ranks", _GROUPS)
def test_fast_path_agrees_with_the_flow_simulator_on_regular_groups(system, instances, lnc, ranks):
    fast = FabricComm(system, instances, lnc, runtime=False)
    sim = FabricComm(system, instances, lnc, runtime=False, simulate=True)
    ranks = list(ranks)
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        for size in (4096, 1 * MiB, 256 * MiB):
            (fa, ft), (sa, s) = fast.choose(op, size, ranks), sim.choose(op, size, ranks)
            assert s * (1 - TOLERANCE) <= ft <= s * (1 + 1e-9), (op, size, fa, sa)
            if fa in ("ring", "dual-ring", "torus-rings", "hierarchical") and fa == sa:
                assert ft == pytest.approx(s, rel=1e-9)


def test_fast_dual_ring_all_reduce_equals_the_hand_formula():
    cfg = load_fabric_config()
    N, S = 16, 1 * GiB
    comm = FabricComm("trn2.48xlarge", lnc=2, runtime=False)
    algo, t = comm.choose("all-reduce", S, [4 * c for c in range(N)])  # one rank on each of the 16 chips
    port = 1.024e12 / 4  # nominal: 1,024 GB/s per chip over 4 ports, per direction; no runtime efficiency
    assert algo == "dual-ring"
    assert t == pytest.approx(2 * (N - 1) * cfg.step_s + 2 * (N - 1) / N * S / (4 * port), rel=1e-9)


def test_runtime_constants_come_on_top_of_the_nominal_network_time():
    cfg = load_fabric_config()
    rt = cfg.runtime("inf2")
    N, S = 12, 256 * MiB
    ranks = [2 * c for c in range(N)]  # core 0 of each chip of the 12-chip ring
    B = 192 * GiB / 2  # one ring port per direction
    nominal = FabricComm("inf2.48xlarge", runtime=False).time_s("all-reduce", S, ranks)
    assert nominal == pytest.approx(2 * (N - 1) * cfg.step_s + 2 * (N - 1) / N * S / (2 * B), rel=1e-9)
    full = FabricComm("inf2.48xlarge", in_graph=False).time_s("all-reduce", S, ranks)  # launched on its own
    # 256 MiB is in the runtime's ring class; it pays its cost per message, one per ring step
    want = rt.launch_overhead_s + 2 * (N - 1) * (cfg.step_s + rt.step_overhead_s) \
        + 2 * (N - 1) / N * S / (2 * B * rt.bandwidth_efficiency)
    assert full == pytest.approx(want, rel=1e-9)


def test_one_chip_group_by_hand():
    # 8 cores of one trn2 chip (LNC=1): each drives its DMA at the core rate, so the chip's core-to-core path
    # carries min(8 x core rate, 8 x 7 x core-pair rate); a mesh all-gather moves (n-1) x S through it
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    cap = min(8 * rt.core_dma_bytes_per_s, 56 * rt.core_pair_bytes_per_s)
    S = 64 * MiB
    algo, t = FabricComm("trn2.48xlarge", runtime=False).choose("all-gather", S, range(8))
    assert algo == "direct" and t == pytest.approx(cfg.step_s + 7 * S / cap, rel=1e-9)


def test_irregular_groups_are_simulated():
    comm = FabricComm("trn1.32xlarge", runtime=False)
    ranks = [0, 3, 6, 9]  # chips 0, 1, 3, 4 with cores 0, 1, 0, 1: not a grid over (core, x, y)
    sim = FabricComm("trn1.32xlarge", runtime=False, simulate=True)
    assert comm.time_s("all-reduce", 8 * MiB, ranks) == sim.time_s("all-reduce", 8 * MiB, ranks)
    assert comm.time_s("all-reduce", 8 * MiB, [7]) == 0.0 and comm.time_s("all-reduce", 0, ranks) == 0.0

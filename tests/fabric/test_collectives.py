"""collective() and FabricComm: bounds from hand calculations, algorithm choice, scale, bad input."""
import pytest

from trnsim.errors import ConfigError, TrnsimError
from trnsim.fabric import FabricComm, collective, load_fabric_config, parse_size, parse_sweep
from trnsim.hardware import load_catalog

GiB, MiB = 2 ** 30, 2 ** 20


@pytest.mark.parametrize("size", [1 * MiB, 256 * MiB])
def test_all_to_all_on_a_torus_is_bounded_by_bisection_bandwidth(size):
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    res = collective("trn2.48xlarge", "all-to-all", size, in_graph=False)  # 64 ranks (LNC=2) on a 4x4 torus
    # cut the 4x4 torus between x = 1|2 and x = 3|0: 2 links per row x 4 rows cross each way
    port = 1.024e12 / 4 * rt.bandwidth_efficiency  # per port, per direction
    crossing = 32 * 32 * size / 64  # each of 32 ranks sends size/64 to each of the other half's 32
    bound = crossing / (8 * port)
    from trnsim.fabric.closed_form import torus_all_to_all_bound_s
    assert torus_all_to_all_bound_s((4, 4), 4, size, port) == pytest.approx(bound)
    t = res.time_us * 1e-6
    assert t >= bound + rt.launch_overhead_s
    assert res.algorithm in ("direct", "pairwise")


def test_switch_beats_torus_for_all_to_all_on_64_chips():
    # same chips (64), same ranks (256 at LNC=2), same per-rank buffer
    torus = collective("trn2-ultraserver", "all-to-all", 256 * MiB, in_graph=False)
    switch = collective("trn3-gen1", "all-to-all", 256 * MiB, in_graph=False)
    assert (torus.ranks, switch.ranks) == (256, 256)
    assert switch.time_us < torus.time_us
    # the switch: each chip pushes 4 ranks x 252/256 of the buffer through its own port, non-blocking
    cfg = load_fabric_config()
    rt = cfg.runtime("trn3")
    port = 2048 * GiB * rt.p2p_efficiency  # the chip's switch port, per direction, at all-to-all's fraction
    push = 4 * 256 * MiB * 252 / 256 / port
    fixed = rt.launch_overhead_s + 255 * rt.step_overhead_s  # a mesh step: one message per peer
    lo = fixed + cfg.step_s + push
    hi = fixed + cfg.step_s + 2 * cfg.forward_hop_s + push
    assert lo * (1 - 1e-9) <= switch.time_us * 1e-6 <= hi * (1 + 1e-9)
    from trnsim.fabric.closed_form import switch_all_to_all_s
    assert switch_all_to_all_s(64, 4, 256 * MiB, port, cfg.step_s) == pytest.approx(lo - fixed)


def test_send_recv_between_torus_neighbours():
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    S = 64 * MiB
    comm = FabricComm("trn2.48xlarge", in_graph=False)  # lnc=1: 8 cores per chip, core 8 on chip 1 (x neighbour)
    t = comm.time_s("send-recv", S, [0, 8])
    # one x port, one direction, at the point-to-point fraction; one message
    assert t == pytest.approx(rt.launch_overhead_s + rt.step_overhead_s + cfg.step_s
                              + S / (1.024e12 / 4 * rt.p2p_efficiency))
    assert comm.time_s("all-reduce", S, [5]) == 0.0
    assert comm.n_ranks == 128


def test_fabric_comm_matches_collective_and_grows_with_size():
    comm = FabricComm("trn2-ultraserver", lnc=2)
    ranks = list(range(64))  # 16 chips: one instance of the UltraServer
    t1 = comm.time_s("all-gather", 1 * MiB, ranks)
    t2 = comm.time_s("allgather", 64 * MiB, ranks)
    assert 0 < t1 < t2
    assert t2 == pytest.approx(collective("trn2-ultraserver", "all-gather", 64 * MiB, ranks, lnc=2).time_us * 1e-6)


def test_every_op_runs_and_reports_bus_bandwidth_by_the_nccl_tests_factors():
    n = 64
    for op, factor in (("all-reduce", 2 * (n - 1) / n), ("all-gather", (n - 1) / n),
                       ("reduce-scatter", (n - 1) / n), ("all-to-all", (n - 1) / n),
                       ("broadcast", 1.0), ("send-recv", 1.0)):
        r = collective("trn2.48xlarge", op, 16 * MiB)
        assert r.ranks == n and r.time_us > 0
        assert r.algbw_gbps == pytest.approx(16 * MiB / (r.time_us * 1e-6) / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * factor)
        assert set(r.to_dict()) >= {"time_us", "algbw_gbps", "busbw_gbps", "algorithm", "busiest_link",
                                    "hierarchical"}


def test_the_runtime_picks_by_size_class_and_a_forced_one_is_used():
    r = collective("trn1.32xlarge", "all-reduce", 256 * MiB)
    rings = [t for a, t in r.candidates if a in ("ring", "dual-ring", "torus-rings", "hierarchical")]
    assert r.time_us == pytest.approx(min(rings))  # above rdh_max_bytes: the fastest of the ring class
    fastest = collective("trn1.32xlarge", "all-reduce", 256 * MiB, algorithm="auto")
    assert fastest.time_us == pytest.approx(min(t for _, t in fastest.candidates))
    forced = collective("trn1.32xlarge", "all-reduce", 256 * MiB, algorithm="rdh")
    assert forced.algorithm == "rdh" and forced.time_us >= r.time_us
    small = collective("trn1.32xlarge", "all-reduce", 4096, algorithm="runtime")
    assert small.algorithm == "direct"  # Mesh below 1 MB [CCA]


def test_hierarchical_across_instances_and_folded_at_ultracluster_scale():
    r = collective("trn2.48xlarge", "all-reduce", 1 * GiB, instances=65536)
    assert r.chips == 1048576 and r.hierarchical
    assert r.algorithm.startswith("hierarchical")
    assert "representative" in r.folded
    # a flat ring over a million chips is not attempted, and says why
    assert any("max_flat_chips" in why for _, why in r.skipped)


def test_hierarchical_ring_equals_its_phases_by_hand():
    # 2 x trn1.2xlarge, 2 cores each: intra RS (1 step), inter AR (2 steps), intra AG (1 step)
    cfg = load_fabric_config()
    rt = cfg.runtime("trn1")
    S = 256 * MiB
    r = collective("trn1.2xlarge", "all-reduce", S, instances=2, algorithm="hierarchical", in_graph=False)
    pair = min(2 * rt.core_dma_bytes_per_s, 2 * rt.core_pair_bytes_per_s)  # the two cores' path, both ways
    efa = 25e9 / 8 * rt.efa_efficiency
    # intra reduce-scatter / all-gather: each core sends S/2 to the other over the core-to-core path
    intra = cfg.step_s + 2 * (S / 2) / pair
    # inter all-reduce on S/2 per rank over 2 instances: each rank sends S/4 per pass, 2 ranks per NIC
    inter = cfg.efa_step_s + 2 * (S / 4) / efa
    want = rt.launch_overhead_s + 4 * rt.step_overhead_s + 2 * intra + 2 * inter  # 4 ring steps in all
    assert r.time_us * 1e-6 == pytest.approx(want, rel=1e-9)


def test_sizes_parse():
    assert parse_size("1GiB") == GiB and parse_size("8B") == 8 and parse_size(512) == 512
    assert parse_size("1.5KiB") == 1536 and parse_size("2MB") == 2e6
    assert parse_sweep("8B:64B") == [8, 16, 32, 64]
    for bad in ("12XB", "-4", "GiB", "0"):
        with pytest.raises(ConfigError) as e:
            parse_size(bad)
        assert e.value.rule == "fabric-size"


@pytest.mark.parametrize("kwargs, rule", [
    (dict(system="trn2-ultrasrv", op="all-reduce"), "fabric-system"),
    (dict(system="trn1.32xlarge", op="all-reduse"), "fabric-op"),
    (dict(system="trn1.32xlarge", op="all-reduce", ranks=33), "fabric-ranks"),
    (dict(system="trn1.32xlarge", op="all-reduce", ranks=[0, 32]), "fabric-ranks"),
    (dict(system="trn1.32xlarge", op="all-reduce", ranks=[0, 1, 1]), "fabric-ranks"),
    (dict(system="trn1.32xlarge", op="all-reduce", ranks=24, algorithm="rdh"), "fabric-algorithm"),
    (dict(system="trn1.32xlarge", op="all-to-all", algorithm="ring"), "fabric-algorithm"),
    (dict(system="trn1.32xlarge", op="all-reduce", algorithm="tree"), "fabric-algorithm"),
    (dict(system="inf2.48xlarge", op="all-reduce", instances=2), "fabric-instances"),
    (dict(system="trn1.32xlarge", op="all-reduce", lnc=2), "fabric-lnc"),
])
def test_bad_input_names_rule_limit_and_value(kwargs, rule):
    kwargs.setdefault("size_bytes", MiB)
    with pytest.raises(TrnsimError) as e:
        collective(**kwargs)
    assert e.value.rule == rule
    assert e.value.value is not None and e.value.limit is not None


def test_ranks_that_do_not_fit_say_the_limit():
    with pytest.raises(ConfigError) as e:
        collective("trn1.32xlarge", "all-reduce", MiB, ranks=63, instances=2)
    assert "multiple of 2 up to 64" in str(e.value.limit)


def test_alltoallv_uniform_equals_all_to_all_and_skew_costs_more():
    import numpy as np
    from trnsim.fabric import alltoallv
    n, S = 64, 64 * MiB
    uniform = np.full((n, n), S / n)
    a = alltoallv("trn2.48xlarge", uniform)
    b = collective("trn2.48xlarge", "all-to-all", S, algorithm="direct")
    assert a.time_us == pytest.approx(b.time_us, rel=1e-9)
    skew = uniform.copy()
    skew[:, 0] *= 8  # every rank sends 8x to rank 0 (a hot expert)
    assert alltoallv("trn2.48xlarge", skew).time_us > a.time_us
    with pytest.raises(ConfigError) as e:
        alltoallv("trn2.48xlarge", np.ones((3, 3)))
    assert e.value.rule == "fabric-alltoallv" and e.value.limit == "(64, 64)"


def test_hierarchical_on_two_trn2_instances_uses_both_torus_cycles_inside():
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    S = 1 * GiB
    ranks = [4 * c for c in range(16)] + [64 + 4 * c for c in range(16)]  # one rank per chip, LNC=2
    r = collective("trn2.48xlarge", "all-reduce", S, ranks=ranks, instances=2, algorithm="hierarchical",
                   in_graph=False)
    B = 1.024e12 / 4 * rt.bandwidth_efficiency  # one torus port, one direction
    E = 200e9 / 8 * rt.efa_efficiency  # one chip's EFA share, one direction
    inside = 15 * (cfg.step_s + S / 16 / 4 / B)  # 15 ring steps of S/16 over 4 channels on 4 ports
    between = cfg.efa_step_s + S / 16 / 2 / E  # 2 instances: each rank sends half its S/16 to its peer
    want = rt.launch_overhead_s + 32 * rt.step_overhead_s + 2 * inside + 2 * between  # 2 x (15 + 1) steps
    assert r.time_us * 1e-6 == pytest.approx(want, rel=1e-9)

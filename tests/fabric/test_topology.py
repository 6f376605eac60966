"""Topologies: per-port capacities derived by hand from the catalog's per-chip figures, routing, names."""
import pytest

from trnsim.errors import ConfigError
from trnsim.fabric import build_topology, load_fabric_config
from trnsim.hardware import load_catalog

GiB = 2 ** 30


def test_trn1_torus_port_capacity_is_a_quarter_of_the_chip_figure_each_way():
    t = build_topology("trn1.32xlarge")
    assert (t.dims, t.cores_per_chip, t.n_ranks) == ((4, 4), 2, 32)
    # 384 GiB/s per chip = the sum of its 4 ports in one direction -> 96 GiB/s per port per direction
    assert t.dim_bw == (96 * GiB, 96 * GiB)


def test_reading_the_figure_as_both_directions_halves_every_port(fabric_file):
    hw = fabric_file("""
        [fabric.links]
        figure_counts_both_directions = { value = true, source = "test" }
    """)
    t = build_topology("trn1.32xlarge", hardware_file=hw)
    assert t.dim_bw == (48 * GiB, 48 * GiB)  # 384 GiB/s / 4 ports / 2 directions
    assert build_topology("trn3-gen1", hardware_file=hw).switch_bw == 2048 * GiB / 2


def test_trn1n_doubles_trn1():
    assert build_topology("trn1n.32xlarge").dim_bw[0] == 2 * build_topology("trn1.32xlarge").dim_bw[0]


def test_trn2_ultraserver_z_links_run_at_the_inter_instance_figure():
    t = build_topology("trn2-ultraserver")
    assert t.dims == (4, 4, 4) and t.n_chips == 64 and t.lnc == 2 and t.n_ranks == 256
    assert t.dim_bw[:2] == (1.024e12 / 4,) * 2  # 1,024 GB/s over 4 x/y ports, per direction
    assert t.dim_bw[2] == 256e9 / 2  # 256 GB/s over the 2 z ports


def test_trn3_switch_systems():
    g1, g2 = build_topology("trn3-gen1"), build_topology("trn3-gen2")
    assert (g1.dims, g2.dims) == ((16, 4), (4, 36))
    assert g1.n_chips == 64 and g2.n_chips == 144
    assert g2.switch_bw == 2048 * GiB  # the chip's one port into the switch, per direction


def test_efa_per_chip_from_the_instance_figure():
    t = build_topology("trn2.48xlarge", instances=4)
    assert t.efa_bw == 3.2e12 / 16 / 8  # 200 Gbps per chip, full duplex
    assert build_topology("trn1n.32xlarge", instances=2).efa_bw == 1600e9 / 16 / 8


def test_torus_route_is_dimension_order_and_splits_ties():
    t = build_topology("trn2.48xlarge")
    (frac, links, lat), = t.route(0, 1)  # x neighbour: one hop, one step latency
    assert frac == 1.0 and len(links) == 1 and lat == t.step_s
    paths = t.route(0, 2)  # two hops either way round a ring of 4: half each way
    assert [p[0] for p in paths] == [0.5, 0.5] and all(len(p[1]) == 2 for p in paths)
    assert all(p[2] == pytest.approx(t.step_s + t.forward_hop_s) for p in paths)
    paths = t.route(0, 10)  # (0,0) -> (2,2): ties in both dims -> 4 paths of 4 hops
    assert len(paths) == 4 and sum(p[0] for p in paths) == pytest.approx(1.0)
    assert {len(p[1]) for p in paths} == {4}


def test_efa_route_between_instances():
    t = build_topology("trn1.32xlarge", instances=2)
    (frac, links, lat), = t.route(3, 16 + 3)
    assert lat == load_fabric_config().efa_step_s
    assert [t.link_name(x) for x in links] == ["chip 3 EFA out", "chip 19 EFA in"]


def test_unknown_system_suggests_the_nearest():
    with pytest.raises(ConfigError) as e:
        build_topology("trn2-ultrasever")
    assert e.value.rule == "fabric-system" and "trn2-ultraserver" in e.value.hint


def test_bare_chip_and_lnc_rules():
    t = build_topology("trn2", lnc=1)
    assert (t.n_chips, t.n_ranks) == (1, 8)
    with pytest.raises(ConfigError) as e:
        build_topology("trn2", instances=2)
    assert e.value.rule == "fabric-instances"
    with pytest.raises(ConfigError) as e:
        build_topology("trn1.32xlarge", lnc=2)
    assert e.value.rule == "fabric-lnc" and e.value.value == 2


def test_catalog_aliases_resolve():
    assert build_topology("u-trn2x64").system == "trn2-ultraserver"
    assert "fabric" in load_catalog().extra

"""Instances and UltraServers: stated aggregates against chip x count, topology, doc conflicts.

Expected numbers are the doc figures (hardware.md section 8) typed here by hand, not read back.
"""
import math
import os

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from trnsim.errors import ConfigError
from trnsim.hardware import load_catalog
from trnsim.hardware.loader import DATA_DIR

GiB = 2 ** 30
TF = 1e12


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_every_instance_of_section_8_is_there(cat):
    assert set(cat.instances) == {
        "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge",
        "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge",
        "trn2.48xlarge", "trn2u.48xlarge", "trn2-ultraserver",
        "trn2.3xlarge",   # one trn2 chip: the instance of the trn2 LoRA calibration rows (P001-P006)
        "trn3-gen1-ultraserver", "trn3-gen2-ultraserver"}


@pytest.mark.parametrize("key,chip,chips,vcpus,host_gib", [
    ("trn1.2xlarge", "trn1", 1, 8, 32),
    ("trn1.32xlarge", "trn1", 16, 128, 512),
    ("trn1n.32xlarge", "trn1", 16, 128, 512),
    ("inf2.xlarge", "inf2", 1, 4, 16),
    ("inf2.8xlarge", "inf2", 1, 32, 128),
    ("inf2.24xlarge", "inf2", 6, 96, 384),
    ("inf2.48xlarge", "inf2", 12, 192, 768),
    ("trn2.48xlarge", "trn2", 16, 192, 2048),
    ("trn2u.48xlarge", "trn2", 16, 192, 2048),
    ("trn2-ultraserver", "trn2", 64, 768, 8192),
    ("trn3-gen1-ultraserver", "trn3", 64, 768, 8192),
    ("trn3-gen2-ultraserver", "trn3", 144, 2304, 27648),
])
def test_instance_table_rows(cat, key, chip, chips, vcpus, host_gib):
    i = cat.instance(key)
    assert (i.chip, i.chips, i.vcpus, i.host_memory_bytes) == (chip, chips, vcpus, host_gib * GiB)


# --- stated aggregates vs chip x count, where the docs agree -------------------------------------
@pytest.mark.parametrize("key,n,chip_gib", [
    ("trn1.32xlarge", 16, 32), ("trn1n.32xlarge", 16, 32), ("inf2.24xlarge", 6, 32),
    ("inf2.48xlarge", 12, 32), ("trn2.48xlarge", 16, 96), ("trn2-ultraserver", 64, 96),
    ("trn3-gen1-ultraserver", 64, 144), ("trn3-gen2-ultraserver", 144, 144),
])
def test_hbm_capacity_is_chips_times_chip(cat, key, n, chip_gib):
    i = cat.instance(key)
    assert i.chips == n
    assert i.stated.hbm_bytes == n * chip_gib * GiB
    assert cat.chips[i.chip].hbm_bytes * i.chips == n * chip_gib * GiB


def test_trn1_32xlarge_hbm_is_16_x_32_gib(cat):
    assert cat.instance("trn1.32xlarge").stated.hbm_bytes == 512 * GiB == 16 * 32 * GiB


@pytest.mark.parametrize("key,n", [("trn1.2xlarge", 1), ("trn1.32xlarge", 16), ("inf2.xlarge", 1),
                                   ("inf2.24xlarge", 6), ("inf2.48xlarge", 12)])
def test_trn1_inf2_flops_and_bandwidth_multiply_exactly(cat, key, n):
    i = cat.instance(key)
    chip = cat.chips[i.chip]
    assert i.stated.bf16_flops == pytest.approx(n * 190 * TF, rel=1e-12)
    assert i.stated.fp32_flops == pytest.approx(n * 47.5 * TF, rel=1e-12)
    assert i.stated.bf16_flops == pytest.approx(n * chip.peak_flops.bf16, rel=1e-12)
    # the instance tables print HBM bandwidth in GiB/s: 820 GiB/s per chip
    assert i.stated.hbm_bandwidth_bytes_per_s == n * 820 * GiB


def test_trn2_aggregates_agree_to_print_precision(cat):
    inst, us = cat.instance("trn2.48xlarge"), cat.instance("trn2-ultraserver")
    # 16 chips: 16 x 667 = 10,672 TF printed 10.7 PF; 16 x 1,299 = 20,784 -> 20.8; 16 x 181 = 2,896 -> 2.9
    assert round(16 * 667 / 1000, 1) * 1e15 == pytest.approx(inst.stated.bf16_flops)
    assert round(16 * 1299 / 1000, 1) * 1e15 == pytest.approx(inst.stated.fp8_flops)
    assert round(16 * 181 / 1000, 1) * 1e15 == pytest.approx(inst.stated.fp32_flops)
    assert round(16 * 2563 / 1000) * 1e15 == pytest.approx(inst.stated.sparse_flops)
    assert 16 * 2.9e12 == pytest.approx(inst.stated.hbm_bandwidth_bytes_per_s)
    # the UltraServer table prints 4 x the instance (42.8, 83.2), slightly above 64 x chip (42.69, 83.14)
    assert us.stated.bf16_flops == pytest.approx(4 * inst.stated.bf16_flops)
    assert abs(us.stated.bf16_flops - 64 * 667 * TF) < 0.15e15
    assert abs(us.stated.fp8_flops - 64 * 1299 * TF) < 0.15e15
    assert us.stated.hbm_bandwidth_bytes_per_s == pytest.approx(64 * 2.9e12)


@pytest.mark.parametrize("key,n", [("trn3-gen1-ultraserver", 64), ("trn3-gen2-ultraserver", 144)])
def test_trn3_aggregates_are_exact_multiples(cat, key, n):
    i = cat.instance(key)
    chip = cat.chips["trn3"]
    assert i.stated.bf16_flops == pytest.approx(n * 671 * TF, rel=1e-12)
    assert i.stated.mxfp8_flops == pytest.approx(n * 2517 * TF, rel=1e-12)
    assert i.stated.fp32_flops == pytest.approx(n * 183 * TF, rel=1e-12)
    assert i.stated.hbm_bandwidth_bytes_per_s == pytest.approx(n * 4.9e12, rel=1e-12)
    assert i.stated.mxfp8_flops == pytest.approx(n * chip.peak_flops.mxfp8, rel=1e-12)
    assert i.efa_bandwidth_bits_per_s == pytest.approx(n * 200e9)  # 200 Gbps per chip


# --- topology -------------------------------------------------------------------------------------
def test_topologies(cat):
    assert cat.instance("trn1.2xlarge").topology == "single"
    assert cat.instance("inf2.48xlarge").topology == "ring"
    for k in ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge"):
        i = cat.instance(k)
        assert (i.topology, i.topology_dims) == ("torus2d", (4, 4))
    us = cat.instance("trn2-ultraserver")
    assert (us.topology, us.topology_dims) == ("torus3d", (4, 4, 4))
    assert us.nodes == 4 and us.node == "trn2u.48xlarge"
    assert us.nodes * cat.instance(us.node).chips == 64
    gen2 = cat.instance("trn3-gen2-ultraserver")
    assert gen2.topology == "switch" and gen2.switch_levels == 2
    assert gen2.nodes * 4 == 144  # 36 servers x 4 chips
    assert cat.instance("trn3-gen1-ultraserver").chips_per_node == 16


def test_every_torus_holds_its_chips(cat):
    for i in cat.instances.values():
        if i.topology.startswith("torus"):
            assert math.prod(i.topology_dims) == i.chips, i.key


def test_link_bandwidths(cat):
    # trn1n doubles the NeuronLink bandwidth of trn1.32xlarge on the same chip: 384 vs 768 GiB/s
    assert cat.instance("trn1.32xlarge").chip_link_bandwidth_bytes_per_s == 384 * GiB
    assert cat.instance("trn1n.32xlarge").chip_link_bandwidth_bytes_per_s == 768 * GiB
    us = cat.instance("trn2-ultraserver")
    # 1,024 GB/s intra + 256 GB/s inter = the chip's 1.28 TB/s
    assert us.chip_link_bandwidth_bytes_per_s + us.inter_node_link_bandwidth_bytes_per_s == \
        pytest.approx(cat.chips["trn2"].chip_link_bandwidth_bytes_per_s)
    assert cat.instance("trn2.48xlarge").inter_node_link_bandwidth_bytes_per_s == 0
    # inf2: 2 ring links of 96 GiB/s (figure) = 192 GiB/s per chip
    assert cat.instance("inf2.24xlarge").chip_link_bandwidth_bytes_per_s == 2 * 96 * GiB
    assert cat.instance("inf2.xlarge").efa_bandwidth_bits_per_s is None  # not stated in I-INF2


# --- documented conflicts and the choices made ------------------------------------------------------
def test_trn2_ultraserver_efa_conflict_12_8(cat):
    us = cat.instance("trn2-ultraserver")
    assert us.stated.efa_bandwidth_bits_per_s == 3200e9  # as printed
    assert us.efa_bandwidth_bits_per_s == 64 * 200e9 == 4 * cat.instance("trn2u.48xlarge").efa_bandwidth_bits_per_s
    src = us.source("efa_bandwidth_bits_per_s")
    assert src.startswith("choice:") and "12.8" in src


def test_trn1_link_header_conflict_12_9(cat):
    src = cat.instance("trn1.32xlarge").source("chip_link_bandwidth_bytes_per_s")
    assert "GIT-TRN1" in src and "12.9" in src


def test_trn3_neuronlink_conflict_12_7(cat):
    g1 = cat.instance("trn3-gen1-ultraserver")
    assert g1.chip_link_bandwidth_bytes_per_s == 2048 * GiB
    assert cat.chips["trn3"].chip_link_bandwidth_bytes_per_s == 2.56e12
    assert sum(g1.switch_level_bandwidth_bytes_per_s) == pytest.approx(704e9)  # 256 + 320 + 128 GB/s
    assert "12.7" in g1.source("chip_link_bandwidth_bytes_per_s")
    assert "12.7" in g1.source("nodes")


def test_chip_conflicts_cc_cores_12_3_and_tflops_12_4(cat):
    for key in ("trn2", "trn3"):
        chip = cat.chips[key]
        assert chip.cc_cores == 20
        assert "16" in chip.sources[f"{key}.cc_cores"] and "12.3" in chip.sources[f"{key}.cc_cores"]
    assert cat.chips["trn1"].cc_cores == 6
    trn2 = cat.chips["trn2"]
    # printed chip total 667 TF is not 8 cores x 79 TF = 632 TF; the printed figure is kept
    assert trn2.peak_flops.bf16 == 667 * TF
    assert trn2.peak_flops.bf16 != pytest.approx(trn2.cores * 79 * TF, rel=0.01)
    assert "12.4" in trn2.sources["trn2.peak_flops.bf16"]
    assert [cat.chips[k].neuronlink_ports for k in ("trn1", "inf2", "trn2", "trn3")] == [4, 2, 4, 4]


# --- lookup ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,key", [
    ("trn2-ultraserver", "trn2-ultraserver"), ("Trn2 UltraServer", "trn2-ultraserver"),
    ("TRN2_ULTRASERVER", "trn2-ultraserver"), ("u-trn2x64", "trn2-ultraserver"),
    ("Trn1.32xlarge", "trn1.32xlarge"), ("Trn3 Gen2 UltraServer", "trn3-gen2-ultraserver"),
    (" inf2.xlarge ", "inf2.xlarge"),
])
def test_instance_lookup(cat, name, key):
    assert cat.instance(name).key == key


def test_unknown_instance_lists_valid_names(cat):
    with pytest.raises(ConfigError) as ei:
        cat.instance("trn9.huge")
    assert "trn9.huge" in str(ei.value) and "trn2.48xlarge" in str(ei.value)


# --- data hygiene -------------------------------------------------------------------------------------
def _figures(table, path=""):
    for k, v in table.items():
        p = f"{path}.{k}" if path else k
        if isinstance(v, dict) and "value" in v:
            yield p, v
        elif isinstance(v, dict):
            yield from _figures(v, p)


def test_every_builtin_figure_names_a_known_source():
    with open(os.path.join(DATA_DIR, "sources.toml"), "rb") as f:
        tags = set(tomllib.load(f)["tags"])
    checked = 0
    for name in sorted(os.listdir(DATA_DIR)):
        if not name.endswith(".toml") or name == "sources.toml":
            continue
        with open(os.path.join(DATA_DIR, name), "rb") as f:
            data = tomllib.load(f)
        known = tags | set(data.get("tags", {}))  # a file may define its own tags (gpus.toml)
        for path, fig in _figures(data):
            src = str(fig.get("source", "")).strip()
            assert src, f"{name}: {path} has no source"
            if src.split(":")[0] in ("derived", "choice", "calibration"):
                continue
            unknown = [w for w in src.split() if w not in known]
            assert not unknown, f"{name}: {path} cites unknown tags {unknown}"
            checked += 1
    assert checked > 200  # the walk really visited the data files

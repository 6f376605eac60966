"""The Neuron runtime model: the algorithm class by size, the published orderings, the runtime terms by
hand, and closed-form pruning that never changes the choice."""
import pytest

from trnsim.fabric import FabricComm, collective, load_fabric_config
from trnsim.fabric.collectives import _cached
from trnsim.fabric.runtime import size_class

MiB, GiB = 2 ** 20, 2 ** 30


@pytest.mark.parametrize("size, cls", [(4, "mesh"), (128 * 1024, "mesh"), (2 * MiB, "rdh"), (512 * MiB, "ring")])
def test_the_runtime_class_follows_the_size_as_the_trn2_rows_print(size, cls):
    # P207-P211: 16 ranks print mesh, mesh, rdh, kangaring at 4 B, 128 KiB, 2 MiB, 512 MiB
    assert size_class(size, load_fabric_config()) == cls
    r = collective("trn2.48xlarge", "all-reduce", size, ranks=16, in_graph=False)  # as nccom-test ran them
    if size in (4, 2 * MiB):
        assert r.algorithm == {"mesh": "direct", "rdh": "rdh"}[cls]
    if size == 512 * MiB:
        assert r.algorithm in ("ring", "dual-ring", "torus-rings")


def test_a_message_is_never_slower_than_a_larger_one():
    # the class boundaries would otherwise make a just-smaller message slower (the mesh's bytes move slowly)
    comm = FabricComm("trn2.48xlarge", lnc=2)
    cfg = load_fabric_config()
    sizes = [4, 4096, 131072, 900e3, cfg.mesh_max_bytes, 4 * MiB, 50e6, cfg.rdh_max_bytes, 64 * MiB, GiB]
    times = [comm.time_s("all-reduce", s, range(16)) for s in sizes]
    assert times == sorted(times)
    sim = [collective("trn2.48xlarge", "all-reduce", s, ranks=16).time_us for s in sizes[:6]]
    assert sim == sorted(sim)


def test_a_mesh_all_reduce_by_hand():
    # 2 ranks of one trn2 chip, 4 KiB (mesh class): launch + one message per peer per pass + the hop latency
    # + the bytes over the core-pair path (each rank sends S/2 per pass; two ranks share 2 x pair rate)
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2")
    S = 4096
    pair = min(2 * rt.core_dma_bytes_per_s * 2, 2 * rt.core_pair_bytes_per_s * 2)  # LNC=2: two cores' DMA
    want = rt.launch_overhead_s + 2 * rt.step_overhead_s + 2 * (cfg.step_s + S / pair)
    r = collective("trn2", "all-reduce", S, ranks=2, lnc=2, in_graph=False)
    assert r.algorithm == "direct" and r.time_us * 1e-6 == pytest.approx(want, rel=1e-9)  # below the padded RDH
    assert FabricComm("trn2", lnc=2, in_graph=False).time_s("all-reduce", S, [0, 1]) == pytest.approx(want, rel=1e-9)
    # inside a compiled graph: its one fixed cost instead of the launch and the per-message costs
    graph = rt.graph_call_overhead_s + 2 * (cfg.step_s + S / pair)
    assert FabricComm("trn2", lnc=2).time_s("all-reduce", S, [0, 1]) == pytest.approx(graph, rel=1e-9)
    assert collective("trn2", "all-reduce", S, ranks=2, lnc=2).time_us * 1e-6 == pytest.approx(graph, rel=1e-9)


def test_orderings_group_size_message_size_and_span():
    cfg = load_fabric_config()
    chip = FabricComm("trn2", lnc=2)
    node = FabricComm("trn2.48xlarge", lnc=2)
    two = FabricComm("trn2.48xlarge", instances=2, lnc=2)
    S = 64 * MiB
    # message size: more bytes, more time
    sizes = [node.time_s("all-reduce", s, range(16)) for s in (4, 64 * 1024, MiB, 16 * MiB, GiB)]
    assert sizes == sorted(sizes)
    # span: two cores of one chip < two chips of one instance < two instances (the same two-rank group shape)
    t_chip = chip.time_s("all-reduce", S, [0, 1])
    t_node = node.time_s("all-reduce", S, [0, 4])
    t_efa = two.time_s("all-reduce", S, [0, 64])
    assert t_chip < t_node < t_efa
    # group size inside a chip: 4 ranks reach more bus bandwidth than 2 (P216 vs P213 / P217)
    bus2 = collective("trn2", "all-reduce", GiB, ranks=2, lnc=2).busbw_gbps
    bus4 = collective("trn2", "all-reduce", GiB, ranks=4, lnc=2).busbw_gbps
    assert bus4 > bus2
    assert cfg.mesh_max_bytes < cfg.rdh_max_bytes


@pytest.mark.parametrize("system, instances, ranks, size", [
    ("trn1.32xlarge", 2, 64, 33554432), ("trn2.48xlarge", 4, None, GiB), ("trn2.48xlarge", 1, 16, 2 * MiB),
    ("trn2-ultraserver", 1, None, 64 * MiB)])
def test_closed_form_pruning_never_changes_the_choice(system, instances, ranks, size):
    # the pruned search against simulating every candidate of the class (algorithm forced one by one)
    r = collective(system, "all-reduce", size, ranks=ranks, instances=instances)
    _cached.cache_clear()
    forced = []
    for name, _ in r.candidates:
        f = collective(system, "all-reduce", size, ranks=ranks, instances=instances, algorithm=name)
        forced.append(f.time_us)
    assert r.time_us <= min(forced) * (1 + 1e-9) or r.algorithm == "hierarchical-rdh"


def test_runtime_off_is_the_nominal_fastest():
    nominal = FabricComm("trn2.48xlarge", lnc=2, runtime=False)
    full = FabricComm("trn2.48xlarge", lnc=2)
    for size in (4096, 2 * MiB, GiB):
        assert nominal.time_s("all-reduce", size, range(64)) < full.time_s("all-reduce", size, range(64))


def test_size_by_group_table_by_hand():
    from trnsim.fabric import collective_table
    comm = FabricComm("trn2.48xlarge", instances=2, lnc=2)
    rows = collective_table(comm, [("all-reduce", 16384, range(4), 80), ("all_reduce", 16384, range(4), 80),
                                   ("all-gather", MiB, range(0, 128, 4), 2), ("all-to-all", 4 * MiB, range(64), 1)])
    assert [r.ranks for r in rows] == [4, 32, 64]
    tp, dp, ep = rows
    assert tp.calls == 160 and tp.links == ("intra-chip",)
    assert tp.time_per_call_s == comm.time_s("all-reduce", 16384, range(4))
    assert tp.total_s == pytest.approx(160 * tp.time_per_call_s)
    assert dp.links == ("NeuronLink", "EFA") and ep.links == ("intra-chip", "NeuronLink")
    gpu = collective_table(FabricComm("p5.48xlarge", instances=2), [("all-reduce", 16384, range(8), 1),
                                                                   ("all-reduce", MiB, [0, 8], 1)])
    assert gpu[0].links == ("NVLink",) and gpu[0].algorithm == "ring/LL"
    assert gpu[1].links == ("EFA",)
    assert gpu[0].to_dict()["links"] == ["NVLink"]


def test_every_fitted_runtime_figure_names_calibration_rows_that_exist():
    import csv
    import re
    import tomllib
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    ids = set()
    for name in ("collectives.csv", "collectives_trn2.csv"):
        with open(root / "bench" / "data" / name, newline="") as f:
            ids |= {r["id"] for r in csv.DictReader(f)}
    fab = tomllib.loads((root / "trnsim" / "hardware" / "data" / "fabric.toml").read_text())
    named = 0
    for chip, table in fab["runtime"].items():
        for key, fig in table.items():
            src = fig["source"]
            assert src.startswith(("calibration:", "choice:", "LNC", "CCA", "CC")), (chip, key, src)
            for rid in re.findall(r"\b[CP]\d{3}\b", src):
                assert rid in ids, (chip, key, rid)
                named += 1
    assert named >= 20

"""GPU systems as fabric topologies: NCCL's cost model over NVLink domains and the network, checked by hand
from the data-file figures (gpus.toml, fabric.toml [nccl.*])."""
import json
import math
import tomllib
from pathlib import Path

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.fabric import FabricComm, collective

DATA = Path(__file__).resolve().parents[2] / "trnsim" / "hardware" / "data"


def _fig(v):
    return v["value"] if isinstance(v, dict) and "value" in v else v


@pytest.fixture(scope="module")
def data():
    gpus = tomllib.loads((DATA / "gpus.toml").read_text())
    fab = tomllib.loads((DATA / "fabric.toml").read_text())
    return gpus, {k: _fig(v) for k, v in fab["nccl"]["hopper"].items()}


def test_ring_ll_16k_all_reduce_on_8_h100_by_hand(data):
    gpus, h = data
    nvl = _fig(gpus["gpus"]["h100-sxm"]["nvlink_bandwidth_bytes_per_s"]) / 2  # per direction
    n, size = 8, 16384
    steps = 2 * (n - 1)
    lat = (h["base_latency_us"]["ring"][0] + steps * h["nvlink_hop_us"]["ring"][0]) * 1e-6
    bw = nvl * h["nvlink_efficiency"] * h["ring_protocol_bandwidth"][0] * n / steps
    want = lat + size / bw + h["launch_overhead_us"] * 1e-6
    algo, t = FabricComm("p5.48xlarge").choose("all-reduce", size, range(8))
    assert algo == "ring/LL"
    assert t == pytest.approx(want, rel=1e-9)
    assert 10e-6 <= t <= 20e-6  # the order nccl-tests reports for small all-reduces on one HGX H100 box


def test_large_all_reduce_in_one_domain_uses_nvls_and_all_gather_uses_ring_simple(data):
    gpus, h = data
    nvl = _fig(gpus["gpus"]["h100-sxm"]["nvlink_bandwidth_bytes_per_s"]) / 2
    size = 2 ** 30
    algo, t = FabricComm("p5.48xlarge").choose("all-reduce", size, range(8))
    want = (h["base_latency_us"]["nvls"][2] + h["nvlink_hop_us"]["nvls"][2]) * 1e-6 + size / (nvl * h["nvls_algbw_fraction"])
    assert algo == "nvls/Simple" and t == pytest.approx(want, rel=1e-9)
    algo, t = FabricComm("p5.48xlarge").choose("all-gather", size, range(8))
    lat = (h["base_latency_us"]["ring"][2] + 7 * h["nvlink_hop_us"]["ring"][2]) * 1e-6
    assert algo == "ring/Simple"
    assert t == pytest.approx(lat + size * 7 / 8 / (nvl * h["nvlink_efficiency"]), rel=1e-9)


def test_two_nodes_ring_is_bound_by_the_nics_of_a_node(data):
    gpus, h = data
    sysd = gpus["systems"]["p5.48xlarge"]
    net = _fig(sysd["network_bandwidth_bits_per_s"]) / 8 / _fig(sysd["gpus"])  # per GPU per direction
    nvl = _fig(gpus["gpus"]["h100-sxm"]["nvlink_bandwidth_bytes_per_s"]) / 2
    size, n = 2 ** 30, 16
    bus = min(nvl * h["nvlink_efficiency"], 8 * net * h["network_efficiency"])
    lat = (h["base_latency_us"]["ring"][2] + 28 * h["nvlink_hop_us"]["ring"][2] + 2 * h["net_hop_us"]["ring"][2]) * 1e-6
    algo, t = FabricComm("p5.48xlarge", instances=2).choose("all-reduce", size, range(16))
    assert algo == "ring/Simple" and t == pytest.approx(lat + size / (bus * n / 30), rel=1e-9)
    # one GPU per node (a data-parallel group across nodes): only that GPU's own network share
    algo, t1 = FabricComm("p5.48xlarge", instances=2).choose("all-reduce", size, [0, 8])
    assert t1 > t and t1 == pytest.approx(
        (h["base_latency_us"]["ring"][2] + 2 * h["net_hop_us"]["ring"][2]) * 1e-6 + size / (net * h["network_efficiency"]), rel=1e-9) \
        or algo.startswith("tree")


def test_orderings_size_group_and_span():
    c = FabricComm("p5.48xlarge", instances=2)
    assert c.time_s("all-reduce", 2 ** 20, range(8)) < c.time_s("all-reduce", 2 ** 24, range(8))
    assert c.time_s("all-reduce", 16384, range(2)) < c.time_s("all-reduce", 16384, range(8))
    assert c.time_s("all-reduce", 16384, range(8)) < c.time_s("all-reduce", 16384, range(16))
    b200 = FabricComm("p6-b200.48xlarge")
    assert b200.time_s("all-gather", 2 ** 30, range(8)) < FabricComm("p5.48xlarge").time_s("all-gather", 2 ** 30, range(8))


def test_gb300_rack_is_one_domain_of_72():
    c = FabricComm("gb300-nvl72")
    assert c.n_ranks == 72
    assert "nvls" in c.choose("all-reduce", 2 ** 30, range(72))[0]
    two = FabricComm("gb300-nvl72", instances=2)
    assert two.time_s("all-reduce", 2 ** 30, range(144)) > c.time_s("all-reduce", 2 ** 30, range(72))


def test_runtime_off_is_nominal_links():
    nominal = FabricComm("p5.48xlarge", runtime=False)
    size = 2 ** 30
    # NVLS at the full NVLink rate per direction: each GPU sends and receives the buffer once, no latency
    assert nominal.choose("all-reduce", size, range(8)) == ("nvls/Simple", pytest.approx(size / 450e9, rel=1e-9))
    # a ring: 7/8 of the buffer over one direction of each GPU's NVLink
    assert nominal.time_s("all-gather", size, range(8)) == pytest.approx(7 / 8 * size / 450e9, rel=1e-9)


def test_errors_are_trnsim_errors():
    with pytest.raises(ConfigError) as e:
        FabricComm("p5.48xlarge").time_s("all-reduce", 1024, [0, 9])
    assert e.value.rule == "fabric-ranks"
    with pytest.raises(ConfigError) as e:
        collective("p5.48xlarge", "all-reduce", 1024, ranks=13, instances=2)
    assert e.value.rule == "fabric-ranks"
    with pytest.raises(ConfigError) as e:
        collective("p5.48xlarge", "all-gather", 1024, algorithm="nvls")
    assert e.value.rule == "fabric-algorithm"


def test_cli_table_and_json(capsys):
    assert main(["collective", "all-reduce", "--system", "p5.48xlarge", "--size", "16KiB", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["algorithm"] == "ring/LL" and d["ranks"] == 8 and d["busiest_link"] == "NVLink"
    assert d["time_us"] == pytest.approx(FabricComm("p5.48xlarge").time_s("all-reduce", 16384, range(8)) * 1e6)
    assert main(["collective", "all-reduce", "--system", "p5", "--instances", "2", "--size", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "16 GPUs" in out and "EFA" in out
    assert math.isfinite(collective("p5e", "broadcast", 2 ** 20).time_us)

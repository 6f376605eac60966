"""``trnsim hw list`` / ``trnsim hw show`` through ``trnsim.cli.main.main``."""
import json

from trnsim.cli.main import main

GiB = 2 ** 30


def _json(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def test_hw_list_json(capsys):
    data = _json(capsys, ["hw", "list", "--json"])
    assert set(data) == {"cores", "chips", "instances"}
    cores = {c["key"]: c for c in data["cores"]}
    assert set(cores) == {"v2", "v3", "v4"}
    assert cores["v2"]["chips"] == ["inf2", "trn1"]
    assert cores["v3"]["sbuf_bytes"] == 128 * 224 * 1024
    assert cores["v2"]["tensor_hz"] == 2.8e9
    chips = {c["key"]: c for c in data["chips"]}
    assert chips["trn2"]["cores"] == 8 and chips["trn2"]["hbm_bytes"] == 96 * GiB
    assert chips["trn3"]["bf16_flops"] == 671e12
    inst = {i["key"]: i for i in data["instances"]}
    assert len(inst) == 13
    assert (inst["trn2.3xlarge"]["chips"], inst["trn2.3xlarge"]["cores"]) == (1, 8)   # one whole trn2 chip
    us = inst["trn2-ultraserver"]
    assert (us["chips"], us["nodes"], us["topology"], us["topology_dims"]) == (64, 4, "torus3d", [4, 4, 4])
    assert us["hbm_bytes"] == 64 * 96 * GiB  # chips x chip HBM
    assert us["cores"] == 64 * 8
    assert inst["inf2.xlarge"]["efa_bandwidth_bits_per_s"] is None


def test_hw_show_trn2_json(capsys):
    data = _json(capsys, ["hw", "show", "trn2", "--json"])
    assert {"kind", "key", "name", "figures", "core", "instances"} <= set(data)
    assert (data["kind"], data["key"]) == ("chip", "trn2")
    figs = {f["path"]: f for f in data["figures"]}
    assert {"cores", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "cc_cores", "peak_flops.bf16"} <= set(figs)
    hbm = figs["hbm_bytes"]
    assert hbm["value"] == 96 * GiB
    assert hbm["source"] == "ARCH3 TRN2"
    # tags expanded to the documents they stand for
    assert "nki/guides/architecture/trainium2_arch.rst" in hbm["document"]
    assert "about-neuron/arch/neuron-hardware/trainium2.rst" in hbm["document"]
    assert "12.3" in figs["cc_cores"]["note"]
    assert figs["peak_flops.int8"]["status"] == "not stated" and figs["peak_flops.int8"]["value"] is None
    # a target shows its chip and that chip's cores
    assert data["core"]["kind"] == "core" and data["core"]["key"] == "v3"
    core_figs = {f["path"]: f for f in data["core"]["figures"]}
    assert core_figs["clocks.tensor_hz"]["value"] == 2.4e9
    assert {"trn2.48xlarge", "trn2u.48xlarge", "trn2-ultraserver"} <= set(data["instances"])


def test_hw_show_target_alias_and_core(capsys):
    assert _json(capsys, ["hw", "show", "gen4", "--json"])["key"] == "trn3"
    core = _json(capsys, ["hw", "show", "v2", "--json"])
    assert core["kind"] == "core" and core["chips"] == ["inf2", "trn1"]
    figs = {f["path"]: f["value"] for f in core["figures"]}
    assert figs["sbuf.bytes_per_partition"] == 192 * 1024


def test_hw_show_ultraserver_json(capsys):
    data = _json(capsys, ["hw", "show", "Trn2 UltraServer", "--json"])
    assert (data["kind"], data["key"]) == ("ultraserver", "trn2-ultraserver")
    totals = {t["figure"]: t for t in data["totals"]}
    assert totals["hbm_bytes"]["chip_x_count"] == totals["hbm_bytes"]["stated"] == 6144 * GiB
    assert totals["bf16_flops"]["chip_x_count"] == 64 * 667e12
    assert abs(totals["bf16_flops"]["stated_over_derived"] - 42.8 / 42.688) < 1e-9
    figs = {f["path"]: f for f in data["figures"]}
    assert figs["efa_bandwidth_bits_per_s"]["value"] == 12800e9
    assert figs["efa_bandwidth_bits_per_s"]["source"].startswith("choice:")
    assert figs["stated.efa_bandwidth_bits_per_s"]["value"] == 3200e9


def test_every_listed_instance_can_be_shown(capsys):
    keys = [i["key"] for i in _json(capsys, ["hw", "list", "--json"])["instances"]]
    for k in keys:
        assert _json(capsys, ["hw", "show", k, "--json"])["key"] == k


def test_hw_show_unknown_name_exits_2(capsys):
    rc = main(["hw", "show", "nope"])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.out == ""
    err = "".join(captured.err.split())  # rich wraps long lines
    assert "'nope'" in err
    assert "Validnamesare" in err
    for name in ("v3", "trn2", "trn2.48xlarge", "trn2-ultraserver"):
        assert name in err
    assert "Traceback" not in captured.err


def test_hardware_file_option_overrides(capsys, hw_file):
    path = hw_file("""
        [chips.trn2]
        hbm_bytes = { value = 206158430208, source = "choice: what-if 192 GiB" }
        """)
    data = _json(capsys, ["hw", "list", "--json", "--hardware", path])
    inst = {i["key"]: i for i in data["instances"]}
    assert inst["trn2.48xlarge"]["hbm_bytes"] == 16 * 192 * GiB
    show = _json(capsys, ["hw", "show", "trn2", "--json", "--hardware", path])
    hbm = {f["path"]: f for f in show["figures"]}["hbm_bytes"]
    assert hbm["value"] == 192 * GiB and hbm["source"] == "choice: what-if 192 GiB"


def test_bad_hardware_file_exits_2(capsys, hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partition = { value = -1, source = "ARCH3" }
        """)
    rc = main(["hw", "show", "trn2", "--hardware", path])
    err = "".join(capsys.readouterr().err.split())
    assert rc == 2
    assert "v3.sbuf.bytes_per_partition" in err and "mustnotbenegative" in err


def test_text_output(capsys):
    assert main(["hw", "show", "trn1.32xlarge"]) == 0
    out = capsys.readouterr().out
    assert "about-neuron/arch/neuron-hardware/trn1-arch.rst" in "".join(out.split())
    assert "384 GiB/s" in out
    assert main(["hw", "list"]) == 0
    out = capsys.readouterr().out
    for key in ("trn2-ultraserver", "trn3-gen2-ultraserver", "inf2.48xlarge"):
        assert key in out

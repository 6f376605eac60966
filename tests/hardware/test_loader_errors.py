"""Malformed user hardware files fail with HardwareFileError naming the file and the key."""
import pytest

from trnsim.errors import HardwareFileError, TrnsimError
from trnsim.hardware import get_core, load_catalog


def _error(path) -> HardwareFileError:
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(path)
    err = ei.value
    assert isinstance(err, TrnsimError)
    assert path in str(err), f"message does not name the file: {err}"
    return err


def test_bad_toml_syntax_names_file_and_line(hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partition = { value = 262144, source = "ARCH3"
        """)
    err = _error(path)
    assert err.rule == "hardware-file-syntax"
    assert "line 3" in str(err)  # tomllib reports the line of the unclosed inline table


def test_missing_source(hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partition = { value = 262144 }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-source"
    assert "v3.sbuf.bytes_per_partition" in str(err)


def test_empty_source_is_missing(hw_file):
    path = hw_file("""
        [chips.trn2]
        hbm_bytes = { value = 1, source = "  " }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-source"
    assert "trn2.hbm_bytes" in str(err)


def test_unknown_key(hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partitionn = { value = 262144, source = "ARCH3" }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-unknown-key"
    assert "bytes_per_partitionn" in str(err) and "v3.sbuf" in str(err)


def test_unknown_top_level_section(hw_file):
    path = hw_file("""
        [tpus.v5e]
        name = "TPU v5e"
        """)  # (gpus became a real section with gpus.toml, issue 11)
    err = _error(path)
    assert err.rule == "hardware-file-unknown-key"
    assert "tpus" in str(err)


def test_wrong_type(hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partition = { value = "224 KiB", source = "ARCH3" }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-type"
    assert "v3.sbuf.bytes_per_partition" in str(err) and "integer" in str(err)


def test_wrong_type_in_instance(hw_file):
    path = hw_file("""
        [instances."trn2.48xlarge"]
        vcpus = { value = 192.5, source = "I-TRN2" }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-type"
    assert "trn2.48xlarge.vcpus" in str(err)


def test_negative_value(hw_file):
    path = hw_file("""
        [cores.v2.clocks]
        tensor_hz = { value = -2.8e9, source = "ARCH2" }
        """)
    err = _error(path)
    assert err.rule == "hardware-file-range"
    assert "v2.clocks.tensor_hz" in str(err) and "-2800000000" in str(err)


def test_chip_naming_unknown_core(hw_file):
    path = hw_file("""
        [chips.trn2]
        core = "v9"
        """)
    err = _error(path)
    assert err.rule == "hardware-file-reference"
    assert "trn2" in str(err) and "'v9'" in str(err)


def test_instance_naming_unknown_chip(hw_file):
    path = hw_file("""
        [instances."trn2.48xlarge"]
        chip = "trn9"
        """)
    err = _error(path)
    assert err.rule == "hardware-file-reference"
    assert "trn2.48xlarge.chip" in str(err) and "'trn9'" in str(err)


def test_torus_dims_must_hold_the_chips(hw_file):
    path = hw_file("""
        [instances."trn1.32xlarge"]
        topology_dims = { value = [4, 8], source = "choice: test" }
        """)
    err = _error(path)
    assert "trn1.32xlarge" in str(err) and "32" in str(err) and "16" in str(err)


def test_unknown_topology(hw_file):
    path = hw_file("""
        [instances."inf2.24xlarge"]
        topology = { value = "mesh", source = "choice: test" }
        """)
    err = _error(path)
    assert "inf2.24xlarge.topology" in str(err) and "mesh" in str(err)


def test_ultraserver_node_count_must_match(hw_file):
    path = hw_file("""
        [instances."trn2-ultraserver"]
        nodes = { value = 2, source = "choice: test" }
        """)
    err = _error(path)
    assert "trn2-ultraserver" in str(err) and "trn2u.48xlarge" in str(err)


def test_missing_file():
    with pytest.raises(HardwareFileError) as ei:
        load_catalog("/nonexistent/dir/hw.toml")
    assert "/nonexistent/dir/hw.toml" in str(ei.value)


# ------------------------------------------------------------------------------------ overrides
def test_override_one_figure_is_honoured(hw_file):
    path = hw_file("""
        [cores.v3.sbuf]
        bytes_per_partition = { value = 262144, source = "choice: what-if 256 KiB SBUF on v3" }
        """)
    cat = load_catalog(path)
    v3 = cat.cores["v3"]
    assert v3.sbuf.bytes_per_partition == 256 * 1024
    assert v3.sbuf.total_bytes == 128 * 256 * 1024
    assert v3.source("sbuf.bytes_per_partition").startswith("choice: what-if")
    # everything else is still the built-in figure
    assert v3.sbuf.partitions == 128
    assert v3.psum.bytes_per_partition == 16 * 1024
    assert cat.cores["v2"].sbuf.bytes_per_partition == 192 * 1024
    assert get_core("trn2", user_file=path).sbuf.bytes_per_partition == 256 * 1024
    # the built-in catalog is untouched
    assert load_catalog().cores["v3"].sbuf.bytes_per_partition == 224 * 1024


def test_override_from_environment(hw_file, monkeypatch):
    path = hw_file("""
        [chips.trn2]
        hbm_bytes = { value = 206158430208, source = "choice: what-if 192 GiB" }
        """)
    monkeypatch.setenv("TRNSIM_HARDWARE", path)
    assert load_catalog().chips["trn2"].hbm_bytes == 192 * 2 ** 30
    monkeypatch.delenv("TRNSIM_HARDWARE")
    assert load_catalog().chips["trn2"].hbm_bytes == 96 * 2 ** 30


def test_user_file_adds_an_ultraserver(hw_file):
    path = hw_file("""
        [instances."trn2-ultraserver-x8"]
        name = "what-if 8-node Trn2 UltraServer"
        kind = "ultraserver"
        chip = "trn2"
        node = "trn2u.48xlarge"
        aliases = ["Big Trn2"]
        nodes = { value = 8, source = "choice: what-if" }
        chips = { value = 128, source = "choice: what-if" }
        vcpus = { value = 1536, source = "choice: what-if" }
        host_memory_bytes = { value = 17592186044416, source = "choice: what-if" }
        topology = { value = "torus3d", source = "choice: what-if" }
        topology_dims = { value = [4, 4, 8], source = "choice: what-if" }
        chip_link_bandwidth_bytes_per_s = { value = 1.024e12, source = "I-TRN2" }
        """)
    cat = load_catalog(path)
    us = cat.instance("big trn2")
    assert us.key == "trn2-ultraserver-x8"
    assert us.chips_per_node == 16
    assert us.topology_dims == (4, 4, 8)
    assert us.efa_bandwidth_bits_per_s is None  # not given -> not stated
    assert "trn2-ultraserver" in cat.instances  # built-ins kept

"""Target names, DMI names and ``base`` inheritance come from the data files (a generation is data)."""
import pytest

from trnsim.errors import ConfigError, HardwareFileError
from trnsim.hardware import load_catalog
from trnsim.options import Options, canonical_target

# every spelling trnsim accepted before targets moved into cores.toml, and what it meant
SPELLINGS = {
    "trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "v2": "trn1", "trn1n": "trn1",
    "trn2": "trn2", "gen3": "trn2", "v3": "trn2", "trn2u": "trn2",
    "trn3": "trn3", "gen4": "trn3", "v4": "trn3",
}


@pytest.mark.parametrize("name,want", sorted(SPELLINGS.items()))
def test_builtin_spellings(name, want):
    assert canonical_target(name) == want
    assert canonical_target(name.upper() + ".48xlarge") == want  # instance types name a family
    assert Options(target=name).target == want


def test_the_catalog_lists_exactly_those_spellings():
    assert load_catalog().targets == SPELLINGS


def test_unknown_target_names_the_valid_ones():
    with pytest.raises(ConfigError) as ei:
        canonical_target("trn7")
    e = ei.value
    assert e.rule == "target" and e.value == "trn7"
    assert all(t in e.limit for t in ("trn1", "trn2", "trn3", "gen4"))


@pytest.mark.parametrize("target,dmi", [("trn1", "trn1.32xlarge"), ("gen3", "trn2.48xlarge"),
                                        ("trn3", "trn3.48xlarge")])
def test_dmi_product_name_is_data(target, dmi, monkeypatch):
    from trnsim.compat import _dmi_product_name
    monkeypatch.setenv("TRNSIM_TARGET", target)
    assert _dmi_product_name() == dmi
    assert load_catalog().chip_for(target).dmi_product_name == dmi


def test_dmi_product_name_follows_a_user_file(hw_file, monkeypatch):
    from trnsim.compat import _dmi_product_name
    path = hw_file("""
        [chips.trn2]
        dmi_product_name = { value = "trn2u.48xlarge", source = "choice: test" }
        """)
    monkeypatch.setenv("TRNSIM_HARDWARE", path)
    monkeypatch.setenv("TRNSIM_TARGET", "trn2")
    assert _dmi_product_name() == "trn2u.48xlarge"


def test_base_inherits_figures_and_says_so(hw_file):
    path = hw_file("""
        [cores.v3b]
        base = "v3"
        name = "v3 with a bigger SBUF"
        targets = { value = ["trn2b"], source = "choice: test" }
        [cores.v3b.sbuf]
        bytes_per_partition = { value = 262144, source = "choice: what-if 256 KiB" }
        [chips.trn2b]
        base = "trn2"
        name = "Trn2 what-if"
        core = "v3b"
        target = "trn2b"
        """)
    cat = load_catalog(path)
    v3, v3b = cat.cores["v3"], cat.cores["v3b"]
    assert v3b.sbuf.bytes_per_partition == 256 * 1024 and v3.sbuf.bytes_per_partition == 224 * 1024
    assert v3b.sbuf.partitions == v3.sbuf.partitions and v3b.timing == v3.timing
    assert v3b.generation == 3 and v3b.targets == ("trn2b",)
    assert v3b.source("sbuf.bytes_per_partition") == "choice: what-if 256 KiB"
    assert v3b.source("clocks.tensor_hz").endswith("inherited from v3")
    assert cat.chip_for("trn2b").key == "trn2b" and cat.core_for("trn2b").key == "v3b"
    assert cat.chips["trn2b"].dmi_product_name == ""  # never inherited
    assert cat.canonical_target("trn2") == "trn2"     # the built-in target is untouched


def test_base_cycle_is_an_error(hw_file):
    path = hw_file("""
        [cores.a]
        base = "b"
        [cores.b]
        base = "a"
        """)
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(path)
    assert ei.value.rule == "hardware-file-reference" and "cycle" in str(ei.value)


def test_chip_target_must_be_its_cores_target(hw_file):
    path = hw_file("""
        [chips.trn2]
        target = "trn3"
        """)
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(path)
    assert (ei.value.limit, ei.value.value) == ("trn2", "trn3")


def test_target_names_are_lower_case(hw_file):
    path = hw_file("""
        [cores.v3]
        targets = { value = ["trn2", "Gen3"], source = "choice: test" }
        """)
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(path)
    assert ei.value.value == "Gen3"

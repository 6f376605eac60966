"""Power model: hand-computed system power at a utilization, overrides, errors, nameplate ceilings."""
import pytest

from trnsim.cost.formulas import run_energy
from trnsim.cost.power import POWER_FILE, PowerError, load_power_model, system_power
from trnsim.errors import HardwareFileError
from trnsim.hardware.catalog import load_catalog
from trnsim.hardware.gpus import load_gpu_catalog


def _model():
    return load_power_model().with_overrides(pue=1.2, host_overhead_fraction=0.25, idle_fraction=0.1)


def test_gpu_system_power_by_hand():
    # p5.48xlarge: 8 x 700 W H100 (datasheet TDP); host 0.25 x 5,600 = 1,400 W
    p = system_power("p5.48xlarge", 1.0, _model())
    assert p.accelerators == 8 and p.watts_per_accelerator == 700.0
    assert p.it_watts == pytest.approx(5600 + 1400)
    assert p.facility_watts == pytest.approx(7000 * 1.2)
    # half busy: 5,600 x (0.1 + 0.9 x 0.5) = 3,080 W; the host does not scale
    h = system_power("p5", 0.5, _model())
    assert h.accelerator_watts == pytest.approx(3080.0) and h.host_watts == pytest.approx(1400.0)


def test_trainium_power_and_chip_override():
    m = _model().with_overrides(chip_watts={"trn2": 450.0})
    p = system_power("trn2.48xlarge", 1.0, m)
    assert p.accelerators == 16 and p.accelerator_watts == pytest.approx(16 * 450.0)
    # energy of a 2-hour run on 3 instances, by hand: 3 x (7,200 + 1,800) W x 2 h x 1.2 = 64.8 kWh
    e = run_energy(3, 7200, p.it_watts, p.pue, 1e9)
    assert e.kwh == pytest.approx(3 * 9000 * 2 * 1.2 / 1000)


def test_measured_system_watts_override():
    m = _model().with_overrides(system_watts={"p5": 9000.0})
    assert system_power("p5.48xlarge", 1.0, m).it_watts == pytest.approx(9000.0)
    # idle scaling still applies to the accelerator share: 9,000 x (5,600 x 0.55 + 1,400) / 7,000
    assert system_power("p5.48xlarge", 0.5, m).it_watts == pytest.approx(9000 * (3080 + 1400) / 7000)


def test_every_trainium_instance_has_a_power_figure():
    m = load_power_model()
    for key, inst in load_catalog().instances.items():
        assert system_power(key, 1.0, m).accelerators == inst.chips
    for fig in m.provenance.values():
        assert fig.source
    # chip power sits next to the chip in the hardware catalog, with its source and confidence
    src = load_catalog().chips["trn2"].source("tdp_watts")
    assert "P289" in src and "confidence: low" in src and m.chip_watts["trn2"] == 500.0


def test_one_hardware_file_sets_a_chips_power(tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text('[chips.trn2]\ntdp_watts = { value = 640.0, source = "choice: a what-if" }\n')
    m = load_power_model(hardware_file=str(hw)).with_overrides(pue=1.0, host_overhead_fraction=0.5)
    # trn2.48xlarge: 16 chips x 640 W busy, host 0.5 x 16 x 640
    assert system_power("trn2.48xlarge", 1.0, m).it_watts == pytest.approx(16 * 640 * 1.5)
    bad = tmp_path / "bad.toml"
    bad.write_text('[chips.trn2]\ntdp_watts = { value = -1.0, source = "choice: wrong" }\n')
    with pytest.raises(HardwareFileError) as e:
        load_power_model(hardware_file=str(bad))
    assert e.value.rule == "hardware-file-range"


def test_busy_power_stays_under_the_nameplate():
    m = load_power_model()
    cat = load_gpu_catalog()
    for key, s in cat.systems.items():
        assert system_power(key, 1.0, m).it_watts <= s.system_power_watts


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(PowerError) as e:
        system_power("p99.48xlarge")
    assert e.value.value == "p99.48xlarge"
    with pytest.raises(PowerError):
        system_power("p5", 1.5)
    with pytest.raises(PowerError):
        load_power_model().with_overrides(pue=0.9)
    text = open(POWER_FILE).read()
    p = tmp_path / "power.toml"
    p.write_text(text.replace("pue = { value = 1.15", "pee = { value = 1.15", 1))
    with pytest.raises(HardwareFileError) as e:
        load_power_model(str(p))
    assert "defaults.pue" in str(e.value)
    p.write_text(text.replace("pue = { value = 1.15", "pue = { value = 1.15, source = \"AWS-PUE\" }\n#", 1)
                 .replace('AWS-PUE = "', 'AWS-PUX = "', 1))
    with pytest.raises(HardwareFileError) as e:
        load_power_model(str(p))
    assert "defaults.pue" in str(e.value) and e.value.rule == "data-file-source"
    p.write_text(text + '\n[chips.trn2]\nwatts = { value = 500.0, source = "choice: old place" }\n')
    with pytest.raises(HardwareFileError) as e:
        load_power_model(str(p))
    assert e.value.rule == "power-file-chips"

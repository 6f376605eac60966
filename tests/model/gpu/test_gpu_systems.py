"""GPU systems as data: figures, provenance, lookups, user overrides and malformed files."""
import pytest

from trnsim.errors import ConfigError, HardwareFileError
from trnsim.hardware.gpus import GPU_FILE, load_gpu_catalog

SYSTEMS = ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge",
           "gb300-nvl72")


def test_the_six_systems_load_with_sources():
    cat = load_gpu_catalog()
    assert set(SYSTEMS) <= set(cat.systems)
    for key in SYSTEMS:
        s = cat.systems[key]
        for f in ("gpus", "nvlink_domain", "network_bandwidth_bits_per_s", "system_power_watts"):
            fig = s.provenance[f"systems.{key}.{f}"]
            assert fig.source and fig.confidence in ("high", "medium", "low")
        g = cat.gpus[s.gpu]
        for f in ("bf16_flops", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "nvlink_bandwidth_bytes_per_s",
                  "tdp_watts"):
            assert g.provenance[f"gpus.{g.key}.{f}"].source
    # every tag cited has a document and a date
    for tag in cat.tags.values():
        assert tag["doc"] and tag["date"]


def test_datasheet_arithmetic():
    cat = load_gpu_catalog()
    h100 = cat.gpu("h100-sxm")
    # the H100 datasheet prints 1,979 / 3,958 TFLOPS with sparsity: dense is half
    assert h100.bf16_flops == pytest.approx(1979e12 / 2, rel=1e-3)
    assert h100.fp8_flops == pytest.approx(3958e12 / 2, rel=1e-3)
    # p5.48xlarge: 3,200 Gbps EFA over 8 GPUs = 400 Gbps each
    assert cat.system("p5.48xlarge").network_bits_per_s_per_gpu == pytest.approx(400e9)
    # GB300 NVL72 rack totals as NVIDIA prints them: ~20.7 TB HBM, 576 TB/s, 130 TB/s NVLink, 72 GPUs
    rack = cat.system("gb300-nvl72")
    g = cat.gpus[rack.gpu]
    assert rack.gpus == rack.nvlink_domain == 72
    assert rack.gpus * g.hbm_bytes == pytest.approx(20.7e12, rel=0.01)
    assert rack.gpus * g.hbm_bandwidth_bytes_per_s == pytest.approx(576e12, rel=1e-6)
    assert rack.gpus * g.nvlink_bandwidth_bytes_per_s == pytest.approx(130e12, rel=0.01)
    assert rack.gpus * g.fp4_flops == pytest.approx(1080e15, rel=1e-6)


def test_lookup_by_alias_and_errors():
    cat = load_gpu_catalog()
    assert cat.system("P5").key == "p5.48xlarge"
    assert cat.system("u-p6e-gb300x72").key == "gb300-nvl72"
    assert cat.gpu("p6-b200.48xlarge").key == "b200"
    with pytest.raises(ConfigError) as e:
        cat.system("p7.48xlarge")
    assert e.value.value == "p7.48xlarge"
    with pytest.raises(ConfigError) as e:
        cat.gpu("h100-sxm").peak_flops("fp4")
    assert e.value.rule == "precision" and e.value.value == "fp4"


def test_user_hardware_file_overrides_a_gpu_figure(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[gpus.gpus.h100-sxm]\ntdp_watts = { value = 600.0, source = "choice: my power cap" }\n')
    cat = load_gpu_catalog(user_file=str(f))
    assert cat.gpu("h100-sxm").tdp_watts == 600.0
    assert load_gpu_catalog().gpu("h100-sxm").tdp_watts == 700.0


def _broken(tmp_path, old, new):
    text = open(GPU_FILE).read()
    assert old in text
    p = tmp_path / "gpus.toml"
    p.write_text(text.replace(old, new, 1))
    return str(p)


@pytest.mark.parametrize("old,new,names", [
    ('tdp_watts = { value = 700.0, source = "NV-H100 CAL"', 'tdp_wats = { value = 700.0, source = "NV-H100 CAL"',
     "gpus.h100-sxm"),
    ('hbm_bytes = { value = 80e9, source = "NV-H100"', 'hbm_bytes = { value = "80GB", source = "NV-H100"',
     "gpus.h100-sxm.hbm_bytes"),
    ('gpus = { value = 8, source = "AWS-P5" }\nnvlink_domain = { value = 8, source = "AWS-P5", note',
     'gpus = { value = 8, source = "AWS-P9" }\nnvlink_domain = { value = 8, source = "AWS-P5", note',
     "systems.p5.48xlarge.gpus"),
    ('gpu = "b200"', 'gpu = "b201"', "systems.p6-b200.48xlarge.gpu"),
    ('source = "NV-HGXB300", confidence = "low", note = "~1,100 W',
     'source = "NV-HGXB300", confidence = "maybe", note = "~1,100 W', "gpus.b300.tdp_watts"),
    ('nvlink_domain = { value = 72,', 'nvlink_domain = { value = 144,', "systems.gb300-nvl72"),
])
def test_malformed_gpu_file_names_the_key(tmp_path, old, new, names):
    with pytest.raises(HardwareFileError) as e:
        load_gpu_catalog(path=_broken(tmp_path, old, new))
    assert names in str(e.value)


def test_gpu_file_syntax_error_names_the_file(tmp_path):
    p = tmp_path / "gpus.toml"
    p.write_text("[gpus.h100\n")
    with pytest.raises(HardwareFileError) as e:
        load_gpu_catalog(path=str(p))
    assert str(p) in str(e.value)

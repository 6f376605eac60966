"""A new generation end to end from one hardware file (hardware/examples/trn4-projection.toml): compute (core,
chip), system (instance), fabric (collective runtime) and power (the chip's tdp_watts, inherited from trn3)."""
import os

import pytest

import trnsim
from trnsim.cost.power import load_power_model, system_power
from trnsim.fabric import collective
from trnsim.model import estimate_inference

HW = os.path.join(os.path.dirname(trnsim.__file__), "hardware", "examples", "trn4-projection.toml")


def test_a_projected_generation_is_one_file(tmp_path):
    kw = dict(tp=64, batch=1, input_len=2048, output_len=256)
    e4 = estimate_inference("llama-3.1-70b", "trn4-proj-ultraserver", hardware_file=HW, **kw)
    assert e4.instance == "trn4-proj-ultraserver" and e4.cores == 64 and e4.lnc == 2
    # batch-1 decode streams the weights: the same file at trn3's 4.9 TB/s instead of the projected
    # 19.6 TB/s streams them 4x slower
    text = open(HW).read()
    slow = tmp_path / "trn4-slow-hbm.toml"
    key = "hbm_bandwidth_bytes_per_s = { value = "
    slow.write_text(text.replace(key + "1.96e13", key + "4.9e12"))
    e_slow = estimate_inference("llama-3.1-70b", "trn4-proj-ultraserver", hardware_file=str(slow), **kw)
    assert e_slow.breakdown["decode_weights_ms"] / e4.breakdown["decode_weights_ms"] == pytest.approx(4.0, rel=1e-9)
    # the estimate's collectives are the fabric's, read from the same file
    ar = e4.collectives["decode"]["all-reduce"]
    one = collective("trn4-proj-ultraserver", "all-reduce", 8192 * 2, list(range(64)), lnc=2,
                     hardware_file=HW).time_us * 1e-6
    assert ar["calls"] == 161 and ar["seconds"] == pytest.approx(161 * one, rel=1e-12)
    # power: 64 chips x 1,000 W (trn3's, inherited) busy, host overhead on top
    m = load_power_model(hardware_file=HW)
    p = system_power("trn4-proj-ultraserver", 1.0, m)
    assert p.accelerators == 64 and p.it_watts == pytest.approx(64 * 1000.0 * (1 + m.host_overhead_fraction))

"""GPU systems through the one estimator: compute, memory fit, refusals, the calibration rows."""
import pytest

from trnsim.model import estimate_inference, estimate_training
from trnsim.model.gpu.efficiency import estimator_figures
from trnsim.model.gpu.refit import predict_rows
from trnsim.errors import ConfigError


def test_unknown_estimator_figure_is_an_error():
    with pytest.raises(ConfigError):
        estimator_figures({"comm.warp_speed": 2.0})


def test_compute_time_on_one_gpu_follows_the_flops():
    # one HGX box: doubling the sequences per step doubles the forward + backward compute exactly
    a = estimate_training("llama-3-8b", "p5.48xlarge", 1, tp=8, seq=2048, global_batch=8, recompute="full")
    b = estimate_training("llama-3-8b", "p5.48xlarge", 1, tp=8, seq=2048, global_batch=16, recompute="full")
    fwd_bwd = lambda e: e.breakdown["forward"] + e.breakdown["backward"]  # noqa: E731
    assert fwd_bwd(b) == pytest.approx(2 * fwd_bwd(a), rel=1e-9)
    assert 0.1 < a.mfu < 0.8


def test_memory_fit_error_on_a_gpu():
    with pytest.raises(ConfigError) as e:
        estimate_training("llama-3.1-70b", "p5.48xlarge", 1, tp=1, seq=4096)
    assert e.value.rule == "memory-fit"
    assert "per GPU" in str(e.value) and "NeuronCore" not in str(e.value)


def test_refusals_name_gpus_on_a_gpu_system_and_neuroncores_on_trainium():
    with pytest.raises(ConfigError) as e:
        estimate_inference("llama-3-8b", "p5.48xlarge", tp=16, batch=1)
    assert "GPUs" in str(e.value) and "NeuronCore" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        estimate_training("llama-3-8b", "p5.48xlarge", tp=3)
    assert "GPUs" in str(e.value) and "NeuronCore" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        estimate_training("llama-3-8b", "trn1.32xlarge", tp=3)
    assert "NeuronCores" in str(e.value)
    with pytest.raises(ConfigError) as e:
        estimate_inference("llama-3-8b", "p5.48xlarge", lnc=2)
    assert e.value.rule == "lnc"


def test_inference_decode_is_memory_bound():
    # batch-1 decode reads every weight once per token: TPOT >= weights / HBM bandwidth
    e = estimate_inference("llama-3-8b", "p5.48xlarge", tp=1, batch=1, input_len=128, output_len=128)
    weights = 8.03e9 * 2
    assert e.tpot_ms / 1e3 >= weights / 3.35e12
    assert e.tpot_ms / 1e3 < 3 * weights / 3.35e12


def test_calibration_rows_reproduced_within_ten_percent():
    rows = predict_rows()
    assert {r.row for r in rows} == {"P294", "P301", "P310"}
    for r in rows:
        assert abs(r.error) < 0.10, (r.row, r.error)

"""The GPU side of the model machinery: NVLink / network collectives by hand, the estimator's calibration."""
import pytest

from trnsim.model import estimate_inference, estimate_training
from trnsim.model.gpu.comm import GpuComm
from trnsim.model.gpu.efficiency import estimator_figures
from trnsim.model.gpu.refit import predict_rows
from trnsim.errors import ConfigError

F = {"comm.nvlink_efficiency": 1.0, "comm.network_efficiency": 1.0, "comm.nvlink_latency_s": 1e-6,
     "comm.network_latency_s": 10e-6, "comm.call_overhead_s": 0.0}


def _figs():
    return estimator_figures(F)


def test_all_reduce_inside_one_hgx_box_by_hand():
    c = GpuComm("p5.48xlarge", 1, figures=_figs())
    size = 1e9
    bw = 900e9 / 2      # H100 NVLink: 900 GB/s both directions
    ring = 2 * (7 / 8 * size / bw + 7 * 1e-6)
    assert c.time_s("all-reduce", size, list(range(8))) == pytest.approx(ring)


def test_all_gather_over_two_boxes_by_hand():
    c = GpuComm("p5.48xlarge", 2, figures=_figs())
    size = 1.6e9
    nvl, net = 900e9 / 2, 3.2e12 / 8 / 8        # 400 Gb/s EFA per GPU
    # 8 ranks in each box first (buffer / 8 left), then 2 boxes over the network
    want = (7 / 8 * size / nvl + 7e-6) + (1 / 2 * size / 8 / net + 10e-6)
    assert c.time_s("all-gather", size, list(range(16))) == pytest.approx(want)


def test_unknown_collective_and_figure_are_errors():
    with pytest.raises(ConfigError):
        GpuComm("p5.48xlarge").time_s("all-shuffle", 1.0, [0, 1])
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

"""Training and inference estimates: definitions checked by hand (MFU, bubble, overlap, decode as a weight
read), the request-mix simulation against a hand timeline, the Python API's records."""
import json
import time

import pytest

from trnsim.model.neuron import ServingSetup

from trnsim.hardware import get_chip
from trnsim.model import Op, OpTime, estimate_inference, estimate_training, load_model
from trnsim.model.context import make_context
from trnsim.model.infer import step_seconds
from trnsim.model.parallel import Parallel, resolve

NO_GAP = dict(compute=1.0, memory=1.0, vector=1.0, comm=1.0, collective_overhead_s=0.0)


def test_training_record_and_mfu_definition():
    e = estimate_training("llama-2-7b", "trn1.32xlarge", nodes=16, tp=8, dp=64, seq=4096, global_batch=1024,
                          zero=1, sp=True, recompute="selective")
    d = json.loads(json.dumps(e.to_dict()))
    for k in ("step_time_s", "seq_per_s", "tokens_per_s", "mfu", "memory_per_core_gib", "sim_seconds",
              "breakdown", "comm", "error_band", "ops_by_how"):
        assert k in d
    assert e.seq_per_s == pytest.approx(1024 / e.step_time_s)
    assert e.tokens_per_s == pytest.approx(1024 * 4096 / e.step_time_s)
    # model FLOPs per token: 6 x (weights doing matmul work: no embedding, no norms) + causal attention
    h, L, inter, V, seq = 4096, 32, 11008, 32000, 4096
    n = L * (4 * h * h + 3 * h * inter) + V * h
    attn = 3 * 2 * L * 32 * (128 + 128) * seq * 0.5
    norms = 6 * (2 * L * h + h)                 # the norm weights count as parameters in 6 N
    assert e.model_flops_per_step == pytest.approx((6 * n + norms + attn) * 1024 * seq)
    chip = get_chip("trn1")
    # MFU: model FLOPs (6 N + attention, per token) over the cores' stated bf16 peak
    assert e.mfu == pytest.approx(e.model_flops_per_step / (e.step_time_s * 512 * chip.peak_flops.bf16 / 2))
    b = e.breakdown
    parts = b["forward"] + b["backward"] + b["recompute"] + b["embedding_and_head"] + b["optimizer"] \
        + b["pipeline_bubble"] + b["comm_exposed"]
    assert parts == pytest.approx(e.step_time_s)
    for c in e.comm.values():
        assert c["exposed"] + c["overlapped"] == pytest.approx(c["seconds"])
    # the band is the calibration's recorded one for training rows (data/calibration.toml)
    from trnsim.model.datafiles import load
    band = load("calibration")["roofline"]["trn1"]["band_train"]
    assert band > 0 and e.error_band["step_time_s"] == pytest.approx(band)


@pytest.mark.parametrize("pp,vp,m", [(4, 1, 8), (4, 2, 8), (2, 1, 32)])
def test_pipeline_bubble_fraction(pp, vp, m):
    tp = 32 // pp
    e = estimate_training("llama-2-7b", "trn1.32xlarge", tp=tp, pp=pp, vp=vp, seq=1024, micro_batch=1,
                          global_batch=m, recompute="full")
    assert e.micro_batches == m
    b = e.breakdown["pipeline_bubble"]
    busy = e.step_time_s - b - e.breakdown["optimizer"]
    assert b / (busy + b) == pytest.approx((pp - 1) / (vp * m + pp - 1))


def test_decode_is_a_weight_read_on_one_core():
    cfg = load_model("llama-2-7b")
    e = estimate_inference(cfg, "trn1.32xlarge", tp=1, batch=1, input_len=16, output_len=16,
                           efficiency=NO_GAP, check_memory=False)
    chip = get_chip("trn1")
    bw = chip.hbm_bandwidth_bytes_per_s / chip.cores
    weights = (cfg.layers * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096) * 2
    # roofline decode: every matmul weight read once; vector work on one token is negligible
    assert e.tpot_ms / 1e3 == pytest.approx(weights / bw, rel=0.02)


def test_prefill_is_compute_bound_at_long_prompts():
    cfg = load_model("llama-2-7b")
    e = estimate_inference(cfg, "trn1.32xlarge", tp=1, batch=1, input_len=4096, output_len=1,
                           efficiency=NO_GAP, check_memory=False)
    peak = 128 * 128 * 2 * 2.8e9
    mm = 2 * 4096 * cfg.layers * (4 * 4096**2 + 3 * 4096 * 11008)
    attn = 2 * 32 * 4096 * 4096 * 256 * 0.5 * cfg.layers
    assert e.breakdown["prefill_compute_ms"] / 1e3 >= (mm + attn) / peak


class _Flat:
    """Every op takes 1 ms: makes step times countable by hand."""
    calibration_key = "flat"

    def time(self, op: Op) -> OpTime:
        return OpTime(1e-3, "simulated")


def test_injected_op_costs_are_used_and_reported():
    e = estimate_inference("llama-2-7b", "trn1.32xlarge", tp=1, batch=1, input_len=8, output_len=8,
                           costs=_Flat(), efficiency=NO_GAP, check_memory=False)
    assert set(e.ops_by_how) == {"simulated"}
    # 32 layers x 11 ops (norm, qkv, rope, attention, o, residual, norm, gate_up, swiglu, down, residual)
    # + embedding + final norm + LM head
    assert e.tpot_ms == pytest.approx(32 * 11 + 3)


def test_serving_light_load_matches_a_hand_timeline():
    ctx = make_context("llama-2-7b", "trn1.32xlarge")
    par = resolve(Parallel(tp=8, dp=1), ctx.cfg, ctx.system, ranks=8)
    e = estimate_inference("llama-2-7b", "trn1.32xlarge", tp=8, input_len=256, output_len=64, rate=1e-4,
                           requests=20)
    s = e.serving
    setup = ServingSetup()
    prefill = step_seconds(ctx, par, 1, 256, 256, False, setup)["total"]
    # the deployment compiles for 256 + 64 -> 512 tokens: buckets 128, 256, 512; every decode step of this
    # request attends over the 512 bucket (positions 257..319), and runs padded to the compiled batch (the
    # default 64 slots)
    decode = step_seconds(ctx, par, 64, 1, 512, True, setup)["total"]
    # requests never overlap at 1e-4/s (seed 0: smallest gap 1288 s): latency = prefill + 63 decode steps of batch 1
    assert s.latency_s_p50 == pytest.approx(prefill + 63 * decode, rel=1e-6)
    assert s.ttft_ms_p50 == pytest.approx(prefill * 1e3, rel=1e-6)
    assert s.mean_batch == pytest.approx(1.0)


def test_serving_batches_under_load():
    e = estimate_inference("llama-2-7b", "trn1.32xlarge", tp=8, input_len=128, output_len=128, rate=200,
                           requests=100, max_batch=16)
    s = e.serving
    assert 1 < s.mean_batch <= 16
    assert s.latency_s_p50 <= s.latency_s_p90 <= s.latency_s_p99


def test_one_estimate_is_fast_when_warm():
    estimate_training("llama-3.1-8b", "trn1.32xlarge", nodes=32, tp=32, dp=32, zero=1, seq=8192,
                      global_batch=1024)
    t = time.perf_counter()
    e = estimate_training("llama-3.1-8b", "trn1.32xlarge", nodes=32, tp=32, dp=32, zero=1, seq=8192,
                          global_batch=1024)
    assert time.perf_counter() - t < 0.5 and e.sim_seconds < 0.5


def test_moe_expert_parallel_training_has_all_to_all():
    e = estimate_training("mixtral-8x7b", "trn2.48xlarge", nodes=2, lnc=2, tp=8, ep=8, zero=1, seq=4096,
                          global_batch=64, recompute="full")
    a2a = e.comm["ep.all-to-all"]
    assert a2a["bytes"] == 4096 * 2 * 4096 * 2                # tokens x top-2 x hidden, bf16
    assert a2a["count"] == 2 * 32 * 3                          # dispatch + combine; fwd, recompute, bwd

"""Neuron serving as it runs (buckets, compiled batch, head padding, MoE load, speculation) and the serving
simulation (closed loop, overload verdict, MLPerf scenarios), checked against hand calculations."""
import json
import math

import pytest

from trnsim.errors import TrnsimError
from trnsim.model import estimate_inference, load_model
from trnsim.model.context import make_context
from trnsim.model.neuron import ServingSetup, Speculation, powers_of_two
from trnsim.model.parallel import Parallel, resolve
from trnsim.model.step import StepTimes, step_seconds
from trnsim.model.transformer import Layout, inference_graph, moe_rank_load

S3 = ServingSetup(seq_len=4096, prefill_buckets=(512, 4096), decode_buckets=(512, 4096), batch_buckets=(1, 4, 16))
# the hand timelines below charge collectives as the context does (the fabric's in-graph calls)
SA = ServingSetup()


def _ctx(model="llama-3.1-8b", inst="trn2.48xlarge", tp=8, ep=1):
    ctx = make_context(model, inst, lnc=2, training=False)
    par = resolve(Parallel(tp=tp, dp=ep, ep=ep), ctx.cfg, ctx.system, ranks=tp * ep, pad_heads=True)
    from dataclasses import replace
    return ctx, replace(par, dp=1)


def test_default_buckets_are_powers_of_two_up_to_seq_len():
    assert powers_of_two(128, 2048) == (128, 256, 512, 1024, 2048)
    assert powers_of_two(128, 768) == (128, 256, 512, 768)


def test_a_prompt_pays_its_bucket():
    from dataclasses import replace
    s3 = replace(S3)
    e128 = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=128, output_len=64, serving=s3)
    e512 = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=512, output_len=64, serving=s3)
    e513 = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=513, output_len=64, serving=s3)
    assert e128.ttft_ms == pytest.approx(e512.ttft_ms)          # both in the 512 bucket
    ctx, par = _ctx()
    hand = step_seconds(ctx, par, 1, 4096, 4096, False, s3)["total"]
    assert e513.ttft_ms == pytest.approx(hand * 1e3)              # one token more: the 4096 bucket


def test_a_prompt_past_the_largest_bucket_is_refused():
    with pytest.raises(TrnsimError, match="largest compiled bucket"):
        estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=5000, output_len=8, serving=S3)


def test_decode_runs_padded_to_the_compiled_batch():
    e = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, batch=1, input_len=100, output_len=10,
                           max_batch=32, serving=SA)
    ctx, par = _ctx()
    setup = ServingSetup(max_batch=32, prefill_batch=1)
    # 100 + 10 -> seq_len 128: every step attends over the 128 bucket, at the compiled batch of 32
    hand = step_seconds(ctx, par, 32, 1, 128, True, setup)["total"]
    assert e.tpot_ms == pytest.approx(hand * 1e3)
    assert e.breakdown["decode_batch"] == 32


def test_heads_are_padded_where_tp_does_not_divide_them():
    e = estimate_inference("llama-2-13b", "trn2.48xlarge", tp=32, lnc=2, input_len=128, output_len=16)
    assert e.tpot_ms > 0 and any("padded" in n for n in e.notes)
    cfg = load_model("llama-2-13b")
    g = inference_graph(cfg, Layout(tp=32), 1, 1, 128, True)
    core = next(o.op for o in g.ops if o.op.name == "attn.core")
    assert core.heads == math.ceil(40 / 32)                        # 2 heads per rank: 64 padded heads
    from trnsim.model import estimate_training
    with pytest.raises(TrnsimError, match="attention heads"):   # training still needs tp | heads
        estimate_training("llama-2-13b", "trn2.48xlarge", lnc=2, tp=32, dp=2, seq=2048, global_batch=8)


def test_moe_rank_load_by_hand():
    cfg = load_model("qwen3-30b-a3b")                              # 128 experts, top-8
    busiest, active = moe_rank_load(cfg, 1, 8)
    assert busiest == pytest.approx(1 + math.sqrt(2 * math.log(8)))  # mean 1 slot, max of 8 Poisson ranks
    assert active == pytest.approx(1.0)                            # 16 local experts x (1 - 15/16)
    busiest, active = moe_rank_load(cfg, 32, 8)
    assert active == pytest.approx(16 * (1 - (1 - 8 / 128) ** 32))
    assert busiest == pytest.approx(32 + math.sqrt(2 * 32 * math.log(8)))


def test_moe_decode_grows_with_batch_and_dense_does_not_much():
    moe = [estimate_inference("qwen3-30b-a3b", "trn3-gen1-ultraserver", tp=8, ep=8, lnc=2, batch=b,
                              input_len=512, output_len=256, serving=S3).tpot_ms for b in (1, 16)]
    dense = [estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, batch=b, input_len=512,
                                output_len=256).tpot_ms for b in (1, 16)]
    assert moe[1] / moe[0] > 1.3 * dense[1] / dense[0]


def test_speculation_tokens_per_step_by_hand():
    assert Speculation("eagle", 3, 0.5).tokens_per_step() == pytest.approx((1 - 0.5 ** 4) / 0.5)
    assert Speculation("eagle", 3, 1.0).tokens_per_step() == 4.0
    assert Speculation().tokens_per_step() == 1.0


def test_one_closed_loop_user_is_a_hand_timeline():
    # one user: requests never overlap; latency = TTFT + 63 decode steps at the compiled batch of 1
    e = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=256, output_len=64,
                           concurrency=1, max_batch=1, requests=3, serving=SA)
    ctx, par = _ctx()
    setup = ServingSetup(max_batch=1, prefill_batch=1)
    pre = step_seconds(ctx, par, 1, 256, 256, False, setup)["total"]
    dec = step_seconds(ctx, par, 1, 1, 512, True, setup)["total"]   # 256 + 64 -> seq_len 512: 512 bucket
    s = e.serving
    assert s.mode == "closed" and s.mean_batch == pytest.approx(1.0)
    assert s.latency_s_p50 == pytest.approx(pre + 63 * dec, rel=1e-9)
    assert s.output_tokens_per_s == pytest.approx(64 / (pre + 63 * dec), rel=1e-9)


def test_overload_verdict_names_the_sustainable_rate():
    lo = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=512, output_len=128, rate=0.5,
                            max_batch=8, requests=40).serving
    cap = lo.sustainable_rate_per_s
    hi = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=512, output_len=128,
                            rate=3 * cap, max_batch=8, requests=40).serving
    assert not lo.overloaded and hi.overloaded
    assert f"{cap:.3g}" in hi.verdict and "overloaded" in hi.verdict


def test_prefix_cache_and_chunked_prefill():
    base = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=2048, output_len=64)
    hit = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=2048, output_len=64,
                             serving=ServingSetup(prefix_hit=0.75))
    assert hit.ttft_ms < 0.6 * base.ttft_ms                   # 512 new tokens in place of 2048
    ch = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, input_len=1024, output_len=64,
                            concurrency=4, max_batch=4, requests=8, serving=ServingSetup(chunk=256))
    assert ch.serving.requests == 8 and ch.serving.output_tokens_per_s > 0


def test_mlperf_offline_and_server():
    kw = dict(tp=8, lnc=2, input_len=512, output_len=64, max_batch=8, requests=32)
    off = estimate_inference("llama-3.1-8b", "trn2.48xlarge", scenario="offline", **kw).serving
    one = estimate_inference("llama-3.1-8b", "trn2.48xlarge", concurrency=1, **kw).serving
    assert off.scenario == "offline" and off.output_tokens_per_s > 2 * one.output_tokens_per_s
    srv = estimate_inference("llama-3.1-8b", "trn2.48xlarge", scenario="server", ttft_limit_ms=500,
                             tpot_limit_ms=50, **kw).serving
    assert srv.scenario == "server" and srv.ttft_ms_p99 <= 500 and srv.tpot_ms_p99 <= 50
    assert srv.rate_per_s <= srv.sustainable_rate_per_s * 1.0001


def test_bad_serving_settings_are_named():
    with pytest.raises(TrnsimError, match="prefix-cache"):
        estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, lnc=2, serving=ServingSetup(prefix_hit=1.5))
    with pytest.raises(TrnsimError, match="closed-loop"):
        from trnsim.model.serving import Workload, check_workload
        check_workload(Workload(mode="closed", concurrency=0), 8)


def test_cli_serving_flags(capsys):
    from trnsim.cli.main import main
    rc = main(["estimate", "infer", "--model", "llama-3.1-8b", "--tp", "8", "--lnc", "2", "--concurrency", "2",
               "--max-batch", "2", "--requests", "6", "--spec", "eagle", "--spec-tokens", "3", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["serving"]["mode"] == "closed" and d["breakdown"]["tokens_per_step"] > 1
    rc = main(["estimate", "infer", "--model", "llama-3.1-8b", "--tp", "8", "--lnc", "2", "--rate", "50",
               "--max-batch", "4", "--requests", "20"])
    out = capsys.readouterr().out
    assert rc == 0 and "WARNING: overloaded" in out


def test_unfused_decode_loads_selected_experts_one_by_one():
    from trnsim.model.efficiency import op_class
    from trnsim.model.ops import roofline_for
    dsv3 = load_model("deepseek-v3")                   # 2048 / 64 = 32 columns per rank: no fused kernel
    names = {o.op.name for o in inference_graph(dsv3, Layout(tp=64, ep_in_tp=True, pe_pad=128), 1, 1, 256, True).ops}
    assert "moe.selected.gate_up" in names and "moe.experts.gate_up" not in names
    q = load_model("qwen3-30b-a3b")                    # EP8 over TP8: 768 columns per rank, fused
    g = inference_graph(q, Layout(tp=8, ep=8, ep_in_tp=True, pe_pad=128), 1, 1, 256, True)
    assert "moe.experts.gate_up" in {o.op.name for o in g.ops}
    sel = next(o.op for o in inference_graph(dsv3, Layout(tp=64, ep_in_tp=True, pe_pad=128), 1, 1, 256,
                                               True).ops if o.op.name == "moe.selected.gate_up")
    assert op_class(sel, roofline_for("trn2", 2)) == "expert"


def test_all_experts_prefill_runs_every_local_expert_over_every_token():
    cfg = load_model("llama-4-scout")                  # 16 experts, top-1, experts 8192 wide
    T, tp = 2048, 64
    lay = Layout(tp=tp, ep_in_tp=True, moe_all_experts=True)
    op = next(o.op for o in inference_graph(cfg, lay, 1, T, T, False).ops if o.op.name == "moe.experts.gate_up")
    assert op.batch == 16 and op.m == T
    assert op.flops == 2.0 * T * 5120 * (2 * 8192 // tp) * 16


def test_draft_model_speculation():
    from trnsim.model import ServingSetup as S, Speculation as Sp
    base = estimate_inference("llama-3.3-70b", "trn2.48xlarge", tp=32, lnc=2, input_len=512, output_len=128)
    spec = estimate_inference("llama-3.3-70b", "trn2.48xlarge", tp=32, lnc=2, input_len=512, output_len=128,
                              serving=S(spec=Sp("draft", 4, 0.8, "llama-3.1-8b")))
    # (1 - 0.8^5) / 0.2 = 3.36 tokens per target step; each step adds 4 draft steps of the 8B model
    assert spec.breakdown["tokens_per_step"] == pytest.approx((1 - 0.8 ** 5) / 0.2)
    assert spec.tpot_ms < base.tpot_ms and spec.ttft_ms > base.ttft_ms   # the draft prefills the prompt too
    with pytest.raises(TrnsimError, match="draft model"):
        estimate_inference("llama-3.3-70b", "trn2.48xlarge", tp=32, lnc=2, serving=S(spec=Sp("draft", 4, 0.8)))


def test_collectives_are_the_fabrics_in_graph_calls_or_standalone_on_request():
    from trnsim.fabric import FabricComm
    ctx, par = _ctx()
    assert StepTimes(ctx, par, ServingSetup(), 512).ctx.comm is ctx.comm          # the fabric's default
    st = StepTimes(ctx, par, ServingSetup(in_graph_collectives=False), 512)
    alone = FabricComm("trn2.48xlarge", lnc=2, in_graph=False).time_s("all-reduce", 8192, list(range(8)))
    assert st.ctx.comm.time_s("all-reduce", 8192, list(range(8))) == pytest.approx(alone)
    assert alone > ctx.comm.time_s("all-reduce", 8192, list(range(8)))         # launches cost more

"""The closed loop as benchmark clients measure it: staggered starts, warm-up and cool-down left out. A stand-in
step-time function (prefill P seconds, each decode step D seconds, whatever the batch) makes every event time
a hand calculation."""
import pytest

from trnsim.errors import TrnsimError
from trnsim.model.serving import Workload, check_workload, simulate, start_spacing

P, D = 1.0, 0.125          # binary-exact, so no event lands on another by rounding
OUT = 8                    # 1 token from the prefill + 7 decode steps


class StandIn:
    """Step times that ignore batch and context: the hand timeline below needs nothing else."""
    tokens_per_step = 1.0

    def prefill(self, n, b=1):
        return {"total": P, "fixed": 0.0}

    def decode(self, b, kv):
        return {"total": D}

    def mean_decode(self, b, n_in, steps):
        return D


def test_start_spacing_is_one_over_the_rate_at_the_users_batch():
    # 2 users at batch 2: each request costs a prefill and its half of 7 shared decode steps
    assert start_spacing(StandIn(), 2, 8, 16, OUT) == pytest.approx(P + 7 * D / 2)


def test_two_staggered_users_reach_the_hand_steady_state():
    # User A sends at 0: prefill [0, 1], decode steps end 1.125, 1.25, 1.375, 1.5. User B sends at 1.4375 (the
    # spacing), waits for the step in flight, prefill [1.5, 2.5]. Both decode to 2.875, where A is done. The
    # server has already launched the next step (B alone, to 3.0) when A's next request comes, so A2 is prefilled
    # [3.0, 4.0]: TTFT = P + D = 1.125. From then on the users alternate: each request waits one step, is
    # prefilled, decodes 7 steps and sits out the other user's prefill and lone step: latency 2P + 8D = 3.0 s.
    # 6 requests: ids 0, 1 (the ramp) and 4, 5 (each user's last, as users stop) are left out.
    w = Workload(mode="closed", concurrency=2, requests=6, input_dist="16", output_dist=str(OUT),
                 stagger="even", warmup=1, cooldown=True)
    e = simulate(StandIn(), w, max_batch=2)
    assert e.ttft_ms_p50 == pytest.approx((P + D) * 1e3)
    assert e.ttft_ms_p99 == pytest.approx((P + D) * 1e3)
    assert e.latency_s_p50 == pytest.approx(2 * P + 8 * D)
    # Little's law for a closed loop without think time: 2 users / 3.0 s, 8 tokens each
    assert e.requests_per_s == pytest.approx(2 / (2 * P + 8 * D))
    assert e.output_tokens_per_s == pytest.approx(2 * OUT / (2 * P + 8 * D))


def test_synchronised_users_wait_for_each_other_every_time():
    # both send at 0 and keep resending together: TTFTs are P and 2P on every round, the median 1.5 P; neither
    # decodes before both are prefilled, so both finish together, 2P + 7D after they sent
    w = Workload(mode="closed", concurrency=2, requests=6, input_dist="16", output_dist=str(OUT))
    e = simulate(StandIn(), w, max_batch=2)
    assert e.ttft_ms_p50 == pytest.approx(1.5 * P * 1e3)
    assert e.latency_s_p50 == pytest.approx(2 * P + 7 * D)


def test_too_few_requests_keep_them_all_and_negative_warmup_is_refused():
    w = Workload(mode="closed", concurrency=2, requests=2, input_dist="16", output_dist=str(OUT),
                 stagger="even", warmup=1, cooldown=True)
    e = simulate(StandIn(), w, max_batch=2)
    # the ramp is all there is: A's TTFT is P; B sends at P + 3.5D, waits for the step ending P + 4D and is
    # prefilled by 2P + 4D, a TTFT of P + 0.5D; the median of the two is P + 0.25D
    assert e.ttft_ms_p50 == pytest.approx((P + 0.25 * D) * 1e3)
    with pytest.raises(TrnsimError, match="warm-up"):
        check_workload(Workload(mode="closed", concurrency=2, warmup=-1), 2)


def test_random_phases_lie_within_one_period_and_unknown_stagger_is_refused():
    import numpy as np
    from trnsim.model.serving import start_times
    w = Workload(mode="closed", concurrency=4, requests=8, stagger="random")
    t = start_times(StandIn(), w, 4, [16] * 8, [OUT] * 8, 1, np.random.default_rng(0))
    period = 4 * (P + 7 * D / 4)   # 4 users at batch 4: each request's prefill and a quarter of 7 steps
    assert t[0] == 0.0 and len(t) == 4 and all(0.0 <= x < period for x in t)
    with pytest.raises(TrnsimError, match="stagger"):
        check_workload(Workload(mode="closed", concurrency=2, stagger="ramp"), 2)


def test_the_data_file_settings_reach_the_simulation():
    # through estimate_inference: overriding the stagger back to all-at-once restores the synchronised loop
    from trnsim.model import estimate_inference
    from trnsim.model.neuron import ServingSetup
    kw = dict(tp=8, lnc=2, input_len=512, output_len=64, concurrency=4, max_batch=4, requests=16)
    even = estimate_inference("llama-3.1-8b", "trn2.48xlarge", **kw).serving
    sync = estimate_inference("llama-3.1-8b", "trn2.48xlarge", serving=ServingSetup(
        overrides={"closed_loop.stagger": ""}), **kw).serving
    # synchronised users queue behind up to 3 other prompts; evenly spread ones behind none
    assert sync.ttft_ms_p50 > 1.5 * even.ttft_ms_p50


def test_cli_stagger_flag(capsys):
    import json
    from trnsim.cli.main import main
    ttft = {}
    for st in ("none", "even"):
        rc = main(["estimate", "infer", "--model", "llama-3.1-8b", "--tp", "8", "--lnc", "2", "--concurrency", "4",
                   "--max-batch", "4", "--input", "512", "--output", "64", "--requests", "16", "--stagger", st,
                   "--json"])
        d = json.loads(capsys.readouterr().out)
        assert rc == 0 and "steady state: 8 of 16 requests" in d["serving"]["verdict"]
        ttft[st] = d["serving"]["ttft_ms_p50"]
    assert ttft["none"] > 1.5 * ttft["even"]


def test_random_phase_draws_are_pooled_and_must_be_positive():
    # with 1 user the phase is irrelevant: every draw is the hand timeline (TTFT P, latency P + 7D)
    w = Workload(mode="closed", concurrency=1, requests=5, input_dist="16", output_dist=str(OUT),
                 stagger="random", warmup=1, cooldown=True, draws=3)
    e = simulate(StandIn(), w, max_batch=1)
    assert "pooled over 3 draws" in e.verdict
    assert e.ttft_ms_p50 == pytest.approx(P * 1e3) and e.latency_s_p99 == pytest.approx(P + 7 * D)
    with pytest.raises(TrnsimError, match="draw"):
        check_workload(Workload(mode="closed", concurrency=2, draws=0), 2)

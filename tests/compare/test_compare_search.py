"""compare's training layouts come from the planner: the layout compare picks is the planner's best over
compare's slice of the space, and both are the brute-force fastest over that slice enumerated here by hand
(tp, pp, sp, recompute; ZeRO-1; tokens per step rounded up to whole dp rounds)."""
import itertools
import math

import pytest

from trnsim.compare import Workload
from trnsim.compare.search import choose, setting, train_space
from trnsim.compare.systems import resolve_system
from trnsim.model import estimate_training
from trnsim.model.memory import MemoryFitError
from trnsim.model.parallel import ParallelError
from trnsim.plan import plan

SEQ, BATCH_TOKENS = 2048, 64 * 2048


def test_compare_space_is_the_data_file_with_the_systems_caps():
    sp = train_space(resolve_system("trn1.32xlarge"))
    assert sp["tp_max"] == 32 and sp["lnc"] == [1]         # trn1: 32 logical cores per instance, LNC 1
    assert sp["pp_max"] == setting("train", "pp_max") and sp["zero"] == [1]
    assert train_space(resolve_system("trn2.48xlarge"))["lnc"] == [2]   # Neuron's trn2 default


def test_compare_and_plan_agree_with_a_brute_force_search():
    w = Workload(model="llama-3.1-8b", task="train", tokens=1e9, seq=SEQ, batch_tokens=BATCH_TOKENS,
                 max_instances=1)
    ref = resolve_system("trn1.32xlarge")
    got = choose(ref, w)
    r = plan("llama-3.1-8b", "trn1.32xlarge", count=1, seq=SEQ, batch_tokens=BATCH_TOKENS, workers=1,
             space=train_space(ref), top=1)
    best, arg = 0.0, None
    for tp, pp, sp, rc in itertools.product((1, 2, 4, 8, 16, 32), (1, 2, 4, 8, 16), (False, True),
                                            ("none", "selective", "full")):
        if 32 % (tp * pp):
            continue
        dp = 32 // (tp * pp)
        gb = math.ceil(BATCH_TOKENS / SEQ / dp) * dp
        try:
            e = estimate_training("llama-3.1-8b", "trn1.32xlarge", tp=tp, pp=pp, sp=sp, zero=1, seq=SEQ,
                                  global_batch=gb, recompute=rc)
        except (ParallelError, MemoryFitError):
            continue
        if e.tokens_per_s > best:
            best, arg = e.tokens_per_s, (tp, pp, sp, rc)
    assert arg is not None
    c = r.best[0].config
    assert (c["tp"], c["pp"], c["sp"], c["recompute"]) == arg
    assert r.best[0].tokens_per_s == pytest.approx(best, rel=1e-12)
    assert (got.config["tp"], got.config["pp"], got.config["sp"], got.config["recompute"]) == arg
    assert got.metrics["tokens_per_s"] == pytest.approx(best, rel=1e-12)
    assert got.instances == 1 and got.config["global_batch"] == 64


def test_batch_tokens_round_up_per_layout_and_score_per_nominal_batch():
    # 48 sequences on dp 32 (tp 1): two rounds of 32 = 64; on dp 16 (tp 2): three rounds of 16 = 48
    r = plan("bert-large", "trn1.32xlarge", count=1, seq=SEQ, batch_tokens=48 * SEQ, workers=1, top=50,
             space=dict(tp_max=2, pp_max=1, cp=[1], sp=[False], zero=[1], micro_batch=[1], recompute=["full"]))
    by_tp = {b.config["tp"]: b for b in r.best}
    assert by_tp[1].global_batch == 64 and by_tp[2].global_batch == 48
    for b in r.best:
        assert b.score == pytest.approx(b.step_time_s * 48 / b.global_batch, rel=1e-12)


def test_gpu_systems_go_through_the_same_search():
    """One p5.48xlarge (8 H100s, one NVLink domain): compare's layout is the brute-force fastest over the same
    slice, enumerated here; no GPU branch anywhere on the way."""
    w = Workload(model="llama-3.1-8b", task="train", tokens=1e9, seq=SEQ, batch_tokens=BATCH_TOKENS,
                 max_instances=1)
    got = choose(resolve_system("p5.48xlarge"), w)
    best, arg = 0.0, None
    for tp, pp, sp, rc in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (False, True), ("none", "selective", "full")):
        if 8 % (tp * pp):
            continue
        dp = 8 // (tp * pp)
        try:
            e = estimate_training("llama-3.1-8b", "p5.48xlarge", tp=tp, pp=pp, sp=sp, zero=1, seq=SEQ,
                                  global_batch=math.ceil(BATCH_TOKENS / SEQ / dp) * dp, recompute=rc)
        except (ParallelError, MemoryFitError):
            continue
        if e.tokens_per_s > best:
            best, arg = e.tokens_per_s, (tp, pp, sp, rc)
    assert (got.config["tp"], got.config["pp"], got.config["sp"], got.config["recompute"]) == arg
    assert got.metrics["tokens_per_s"] == pytest.approx(best, rel=1e-12)


def test_a_dp_1_layout_stays_in_a_zero_1_only_search():
    """One p5.48xlarge at tp=8: one replica over the 8 GPUs (dp = 1); with ZeRO-1 the only ZeRO stage
    searched, such a layout is that layout's one copy, not a duplicate to drop."""
    r = plan("llama-3.1-8b", "p5.48xlarge", count=1, seq=SEQ, global_batch=8, workers=1, top=100,
             space=dict(tp_max=8, pp_max=1, cp=[1], sp=[True], zero=[1], micro_batch=[1], recompute=["full"]))
    assert "duplicate-zero" not in r.drop_counts()
    assert any(b.config["tp"] == 8 and b.config["dp"] == 1 for b in r.best)


def test_scale_out_stops_at_the_fewest_instances_meeting_the_deadline():
    """A stub speed by hand: 1 instance takes 100 days, 2 take 20 (a better layout fits there), 4 take 10.
    The ideal speed-up asks for 2 ** ceil(log2(100 / 30)) = 4 instances; 2 already meet the 30-day deadline."""
    from types import SimpleNamespace

    from trnsim.compare.search import _scale_out
    w = Workload(model="llama-3.1-8b", task="train", tokens=1e12, deadline_s=30 * 86400.0)
    days = {1: 100.0, 2: 20.0, 4: 10.0}
    tried = []

    def best_at(n):
        tried.append(n)
        return SimpleNamespace(tokens_per_s=1e12 / (days[n] * 86400.0))
    best, nodes = _scale_out(best_at, best_at(1), 1, w)
    assert nodes == 2 and tried == [1, 2]
    assert 1e12 / best.tokens_per_s / 86400 == pytest.approx(20.0)

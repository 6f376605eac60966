"""The "try ..." of a refused estimate comes from the planner (trnsim.plan.hints) through trnsim.api: every
layout it names passes the rules and fits, and the refused layout's own neighbours that it skips do not."""
import pytest

from trnsim import api
from trnsim.model import estimate_inference, estimate_training
from trnsim.model.config import load_model
from trnsim.model.memory import MemoryFitError
from trnsim.model.parallel import Parallel
from trnsim.plan.hints import nearest_inference, nearest_training


def _apply(flags: str, base: dict) -> dict:
    kw = dict(base)
    words = flags.split()
    for k, v in zip(words[::2], words[1::2]):
        key = k[2:].replace("-", "_")
        kw[key] = v if key == "recompute" else int(v)
    return kw


def test_training_hints_fit_and_are_the_fewest_changes():
    # the historical layout named (NxD's defaults, ZeRO-1 + SP + selective recompute, would fit)
    base = dict(tp=8, seq=8192, zero=0, sp=False, recompute="none")
    with pytest.raises(MemoryFitError) as e:
        api.estimate_training("llama-3.1-8b", "trn1.32xlarge", **base)
    hint = e.value.hint
    assert hint.startswith("try ") and "GiB" in e.value.message
    flags = hint[4:].split(" or ")
    assert 1 <= len(flags) <= 2
    for f in flags:   # every suggestion estimates without a memory error
        assert estimate_training("llama-3.1-8b", "trn1.32xlarge", **_apply(f, base)).step_time_s > 0
    # one-flag suggestions come first; the one-flag changes the planner did not name do not fit
    single = [f for f in flags if len(f.split()) == 2]
    assert single == flags[:len(single)]
    for f in ("--tp 16", "--zero 1", "--recompute full"):
        if f not in flags:
            with pytest.raises(MemoryFitError):
                estimate_training("llama-3.1-8b", "trn1.32xlarge", **_apply(f, base))


def test_training_hints_by_hand_on_a_tiny_budget():
    """32 ranks, llama-3.1-8b at tp=8: with an HBM share of 0 nothing fits, with a huge one the layout itself
    would fit and the nearest fitting neighbour is ZeRO-1 alone (one flag, fewest ranks)."""
    cfg = load_model("llama-3.1-8b")
    par = Parallel(tp=8, dp=4)
    assert nearest_training(cfg, par, 32, 0.0, 1, 2048, "none") == []
    got = nearest_training(cfg, par, 32, 1e15, 1, 2048, "none")
    # one flag on 8 ranks each, tied and then in text order; --tp 16 / --pp 2 need 16 ranks per replica
    assert got == ["--recompute full", "--zero 1"]


def test_inference_hint_names_a_replica_that_fits():
    with pytest.raises(MemoryFitError) as e:
        api.estimate_inference("llama-3.1-70b", "trn1.32xlarge", tp=4)
    assert e.value.hint.startswith("try --tp 16 or --precision fp8")
    assert estimate_inference("llama-3.1-70b", "trn1.32xlarge", tp=16).memory_per_core_gib < 16
    with pytest.raises(MemoryFitError):
        estimate_inference("llama-3.1-70b", "trn1.32xlarge", tp=8)   # the one-step doubling does not fit
    # by hand: 32 ranks, tp=4 pp=1; a stub that accepts 16 ranks or more picks tp=16 (one flag, fewest ranks,
    # shallower than pp=4); one that accepts nothing gives nothing
    assert nearest_inference(4, 1, 32, lambda t, p: t * p >= 16) == ["--tp 16"]
    assert nearest_inference(4, 1, 32, lambda t, p: t * p >= 16, limit=3) == ["--tp 16", "--pp 4", "--tp 32"]
    assert nearest_inference(4, 1, 32, lambda t, p: t * p >= 16, tp_cap=8) == ["--pp 4"]
    assert nearest_inference(4, 1, 32, lambda t, p: False) == []


def test_costs_are_wired_once_in_the_api():
    from trnsim.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        api.estimate_training("llama-3.1-8b", "trn1.32xlarge", tp=32, costs="guessed")
    assert e.value.rule == "costs"
    assert api._costs_for("roofline", "trn1.32xlarge", None, None) is None
    sentinel = object()
    assert api._costs_for(sentinel, "trn1.32xlarge", None, None) is sentinel


def test_gpu_hints_keep_tp_inside_the_nvlink_domain():
    # 4 x p5.48xlarge: 32 H100s, NVLink domains of 8; llama-3-70b at tp=8 does not fit at 4k
    base = dict(nodes=4, tp=8, seq=4096, zero=0, sp=False, recompute="none")   # not Megatron's defaults
    with pytest.raises(MemoryFitError) as e:
        api.estimate_training("llama-3-70b", "p5.48xlarge", **base)
    hint = e.value.hint
    assert "per GPU" in e.value.message and hint.startswith("try ")
    assert "--tp 16" not in hint and "--tp 32" not in hint
    for f in hint[4:].split(" or "):
        kw = _apply(f, base)
        assert estimate_training("llama-3-70b", "p5.48xlarge", **kw).step_time_s > 0

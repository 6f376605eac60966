"""plan with LoRA and a framework layout: the same layout as the estimator, one estimate each."""
import pytest

from trnsim.model import estimate_training
from trnsim.plan import plan

SPACE = {"tp_max": 8, "pp_max": 1, "cp": [1], "zero": [1], "sp": [True], "micro_batch": [1],
         "recompute": ["selective"], "vp": [1]}


def test_plan_lora_matches_the_estimator_and_trains_fewer_states():
    kw = dict(count=1, seq=2048, global_batch=32, backend="local", workers=1, space=SPACE)
    lora = plan("llama-2-7b", "trn1.32xlarge", lora_rank=16, **kw)
    full = plan("llama-2-7b", "trn1.32xlarge", **kw)
    best = lora.best[0]
    c = best.config
    e = estimate_training("llama-2-7b", "trn1.32xlarge", tp=c["tp"], pp=c["pp"], dp=c["dp"], sp=c["sp"], zero=c["zero"],
                          seq=2048, global_batch=32, recompute="selective", lora_rank=16)
    assert best.step_time_s == pytest.approx(e.step_time_s, rel=1e-9)
    assert best.step_time_s <= full.best[0].step_time_s
    # a frozen base: no weight gradients and no AdamW over it, so the same layout steps faster
    f = full.best[0]
    same = next(r for r in lora.best if r.config == f.config)
    assert same.step_time_s < f.step_time_s
    assert same.memory_per_core_gib < f.memory_per_core_gib

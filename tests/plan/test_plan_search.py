"""The search itself: the count table adds up, the best layout is the one a brute-force loop over the
estimator finds, and the cost / energy objectives score by hand-checkable formulas."""
import itertools
import math

import pytest

from trnsim.model import estimate_training
from trnsim.model.memory import MemoryFitError
from trnsim.model.parallel import ParallelError
from trnsim.plan import PlanError, plan

SPACE = dict(tp_max=32, pp_max=8, cp=[1, 2], micro_batch=[1, 2], recompute=["none", "full"], zero=[0, 1],
             sp=[False, True])
CASE = dict(model="llama-3.1-8b", system="trn1.32xlarge", count=1, seq=2048, global_batch=64)


@pytest.fixture(scope="module")
def small():
    return plan(**CASE, space=SPACE, workers=1, top=5)


def test_the_count_table_adds_up_to_the_grid(small):
    # trn1.32xlarge: 32 logical cores, LNC 1 only; tp in divisors of 32 up to 32 (6), pp up to 8 (4),
    # cp 2, sp 2, zero 2, micro-batch 2, recompute 2, vp 1, ep 1 (dense)
    assert small.enumerated == 6 * 4 * 2 * 2 * 2 * 2 * 2
    assert sum(small.drop_counts().values()) + small.estimated == small.enumerated
    assert small.memory_checked == small.estimated + small.drop_counts().get("memory-fit", 0)
    assert len(small.best) == 5 and [b.rank for b in small.best] == [1, 2, 3, 4, 5]
    assert all(a.score <= b.score for a, b in zip(small.best, small.best[1:]))


def test_the_best_layout_is_the_brute_force_minimum(small):
    best, accepted = math.inf, []
    for tp, pp, cp, mb, rc, zero, sp in itertools.product((1, 2, 4, 8, 16, 32), (1, 2, 4, 8), (1, 2), (1, 2),
                                                          ("none", "full"), (0, 1), (False, True)):
        try:
            e = estimate_training("llama-3.1-8b", "trn1.32xlarge", nodes=1, tp=tp, pp=pp, cp=cp, sp=sp, zero=zero,
                                  seq=2048, global_batch=64, micro_batch=mb, recompute=rc)
        except (ParallelError, MemoryFitError):
            continue
        accepted.append((e.step_time_s, tp, pp, cp, mb, rc, zero, sp, e.parallel["dp"]))
        best = min(best, e.step_time_s)
    argmin = {a[1:] for a in accepted if a[0] == best}
    top = small.best[0]
    c = top.config
    assert top.step_time_s == pytest.approx(best, rel=1e-12)
    assert (c["tp"], c["pp"], c["cp"], c["micro_batch"], c["recompute"], c["zero"], c["sp"], c["dp"]) in argmin
    # the estimator accepts exactly the planner's estimated layouts, plus ZeRO-1 at dp=1 (the planner's duplicates)
    planner = {(r.config.tp, r.config.pp, r.config.cp, r.config.micro_batch, r.config.recompute, r.config.zero,
                r.config.sp) for r in small.rows if r.status == "ok"}
    brute = {a[1:8] for a in accepted if not (a[6] == 1 and a[8] == 1)}
    assert planner == brute and len(planner) == small.estimated


def test_cost_and_energy_objectives_by_hand():
    kw = dict(CASE, count=[1, 2], space=dict(SPACE, recompute=["full"], sp=[True], zero=[1]), workers=1)
    t = plan(**kw, top=100)
    c = plan(**kw, top=100, objective="cost", price=lambda system: 21.5)
    e = plan(**kw, top=100, objective="energy", power=lambda system, u: 5000.0 + 3000.0 * u)
    by_label = {b.label: b for b in t.best}
    for b in c.best:
        assert b.score == pytest.approx(b.config["count"] * 21.5 * b.step_time_s / 3600.0, rel=1e-12)
        assert b.step_time_s == by_label[b.label].step_time_s
    for b in e.best[:5]:
        est = estimate_training("llama-3.1-8b", "trn1.32xlarge", nodes=b.config["count"], tp=b.config["tp"],
                                pp=b.config["pp"], cp=b.config["cp"], sp=True, zero=1, seq=2048, global_batch=64,
                                micro_batch=b.config["micro_batch"], recompute="full")
        watts = 5000.0 + 3000.0 * min(1.0, est.hfu)
        assert b.score == pytest.approx(b.config["count"] * watts * est.step_time_s, rel=1e-9)
    # two instances finish a step sooner but cost more per step than one, here
    assert t.best[0].config["count"] == 2
    assert c.best[0].config["count"] == 1


@pytest.mark.parametrize("kw,rule", [
    (dict(model="llama-9000"), "model"),
    (dict(system="trn9.48xlarge"), "instance"),
    (dict(global_batch=0), "batch"),
    (dict(global_batch=None), "batch"),
    (dict(count=0), "plan-count"),
    (dict(objective="speed"), "plan-objective"),
    (dict(objective="cost"), "plan-price"),
    (dict(backend="dask"), "plan-backend"),
    (dict(space=dict(warp=[1])), "plan-space"),
    (dict(space=dict(lnc=[2])), "lnc"),                          # trn1 has LNC 1 only
    (dict(model="llama-3.1-405b", global_batch=1), "plan-empty"),  # 405B does not fit on one trn1.32xlarge
])
def test_bad_input_is_a_clear_error(kw, rule):
    with pytest.raises(Exception) as ei:
        plan(**{**CASE, "space": dict(micro_batch=[1], recompute=["full"]), "workers": 1, **kw})
    err = ei.value
    from trnsim.errors import TrnsimError
    assert isinstance(err, TrnsimError)
    assert err.rule.startswith(rule) or err.rule == rule, (err.rule, str(err))
    if rule == "plan-empty":
        assert isinstance(err, PlanError) and "memory-fit" in err.message


def test_recompute_first_fit_estimates_only_the_least_recompute_that_fits(small):
    first = plan(**CASE, space=dict(SPACE, recompute_first_fit=True), workers=1, top=5)
    full = {r.config: r for r in small.rows if r.status == "ok"}
    kept = {r.config for r in first.rows if r.status == "ok"}
    # by hand from the full search: per layout, the first of none / full (the grid's order) that was estimated
    want = set()
    for c in sorted(full, key=lambda c: ("none", "full").index(c.recompute)):
        if not any(k._replace(recompute="") == c._replace(recompute="") for k in want):
            want.add(c)
    assert kept == want
    assert first.drop_counts()["recompute-dominated"] == len(full) - len(want)
    assert first.best[0].label == small.best[0].label and first.best[0].score == small.best[0].score
    # the same drop counts however the batches are cut
    two = plan(**CASE, space=dict(SPACE, recompute_first_fit=True), workers=2, top=5)
    assert two.drop_counts() == first.drop_counts()

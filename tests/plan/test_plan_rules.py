"""The planner's fast structural rules against the model layer's own (resolve + check_batch) as the
oracle: same verdict and the same rule name on every point of a grid, dense and MoE."""
import itertools

import pytest

from trnsim.model.config import load_model
from trnsim.model.parallel import Parallel, ParallelError, check_batch, make_system, resolve
from trnsim.plan import RULES, Config, ModelFacts, SearchSpace, violation
from trnsim.plan.space import divisors, grids

PLANNER_ONLY = {"parallel-vp-pp", "duplicate-zero"}   # layouts the estimator accepts but the planner skips


def _model_verdict(cfg, system, c, seq, gb):
    try:
        par = resolve(Parallel(tp=c.tp, pp=c.pp, cp=c.cp, ep=c.ep, vp=c.vp, sp=c.sp, zero=c.zero), cfg, system)
        check_batch(par, seq, gb, c.micro_batch)
    except ParallelError as e:
        return e.rule
    return None


@pytest.mark.parametrize("model,instance,nodes,seq,gb", [
    ("llama-3.1-70b", "trn2.48xlarge", 2, 8192, 96),     # 64 heads, 8 KV heads, 80 layers
    ("mixtral-8x7b", "trn1.32xlarge", 1, 3000, 64),       # MoE (8 experts); 3000 not divisible by cp 16
    ("qwen3-30b-a3b", "trn2.48xlarge", 1, 4096, 40),      # 128 experts, gb 40 breaks many dp
])
def test_planner_rules_agree_with_the_model_layer(model, instance, nodes, seq, gb):
    cfg = load_model(model)
    facts = ModelFacts.of(cfg)
    system = make_system(instance, nodes, None)
    checked = set()
    for tp, pp, vp, cp, ep, sp, zero, mb in itertools.product(
            (1, 2, 3, 4, 8, 16, 32), (1, 2, 4, 5, 8), (1, 2), (1, 2, 16), (1, 2, 8, 16), (False, True), (0, 1),
            (1, 2, 3)):
        c = Config(nodes, system.lnc, tp, pp, vp, cp, ep, sp, zero, mb, "none")
        mine = violation(c, facts, system.cores, seq, gb)
        theirs = _model_verdict(cfg, system, c, seq, gb)
        if mine is None:
            assert theirs is None, (c, theirs)
        elif mine[0] in PLANNER_ONLY:
            assert theirs is None, (c, mine)
        else:
            assert mine[0] == theirs, (c, mine, theirs)
        checked.add(mine[0] if mine else None)
    # the grid really exercises most rules (the test would be empty otherwise)
    assert len(checked - {None}) >= 6 and None in checked


def test_every_rule_has_a_meaning_and_grids_are_divisors():
    assert all(RULES.values())
    assert divisors(2048, 256) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert divisors(1152, 20) == (1, 2, 3, 4, 6, 8, 9, 12, 16, 18)
    g = grids(SearchSpace.default(), cores=1024, fast_domain=256, experts=0)
    assert g.tp[-1] == 256 and g.ep == (1,)
    assert g.pp[-1] == 64        # the pp_max cap of space.toml


def test_expert_parallel_degrees_divide_cores_and_experts():
    g = grids(SearchSpace.default(), cores=256, fast_domain=128, experts=8)
    assert g.ep == (1, 2, 4, 8)
    g = grids(SearchSpace.default(dict(ep_max=16)), cores=96, fast_domain=96, experts=128)
    assert g.ep == (1, 2, 4, 8, 16)


def test_zero_caps_mean_the_machine():
    g = grids(SearchSpace.default(dict(tp_max=0, pp_max=0, ep_max=0)), cores=64, fast_domain=16, experts=64)
    assert g.tp[-1] == 16 and g.pp[-1] == 64 and g.ep[-1] == 64


def test_one_rule_set_by_hand():
    """A tiny model enumerated by hand: 4 heads, 2 KV heads, 6 layers on 8 ranks, global batch 4 of seq 8.
    tp must divide 4 heads and divide or be divided by 2 KV heads: 1, 2, 4; pp may split 6 layers unevenly
    but not exceed them, and tp x pp must divide 8: pp in 1, 2, 4; dp = 8 / (tp x pp) must divide the batch
    of 4: dp 8 is out."""
    from trnsim.model.layout_rules import ModelFacts as Facts, batch, structure
    tiny = Facts(name="tiny", heads=4, kv_heads=2, is_mla=False, layers=6, experts=0)
    by_hand = {(1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2)}
    seen, rules_hit = set(), {}
    for tp, pp in itertools.product((1, 2, 4, 8), (1, 2, 4, 8)):
        bad = structure(tiny, 8, tp, pp)
        if bad is None:
            bad = batch(8 // (tp * pp), tp, 1, False, 8, 4, 1)
        if bad is None:
            seen.add((tp, pp))
        else:
            rules_hit[(tp, pp)] = bad.rule
        # the planner charges the same layout to the same rule
        c = Config(1, 1, tp, pp, 1, 1, 1, False, 0, 1, "none")
        mine = violation(c, tiny, 8, 8, 4)
        assert (mine[0] if mine else None) == (bad.rule if bad else None)
    assert seen == by_hand
    assert rules_hit[(1, 1)] == "batch-dp"             # dp 8 does not divide a batch of 4
    assert rules_hit[(8, 1)] == "parallel-tp-heads"    # 8 does not divide 4 heads
    assert rules_hit[(1, 8)] == "parallel-pp-layers"   # 8 stages for 6 layers
    assert rules_hit[(4, 4)] == "parallel-cores"       # 16 ranks on 8


def test_planner_rules_are_the_model_layers_plus_two():
    from trnsim.model.layout_rules import RULES as MODEL_RULES
    from trnsim.plan.rules import PLANNER_ONLY as ONLY
    assert list(RULES)[:len(MODEL_RULES)] == list(MODEL_RULES)
    assert set(RULES) - set(MODEL_RULES) == set(ONLY) | {"memory-fit"}

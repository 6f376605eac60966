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
    g = grids(SearchSpace.default(), cores=1024, cores_per_node=256, experts=0)
    assert g.tp[-1] == 256 and g.ep == (1,)
    assert g.pp[-1] == 64        # the pp_max cap of space.toml


def test_expert_parallel_degrees_divide_cores_and_experts():
    g = grids(SearchSpace.default(), cores=256, cores_per_node=128, experts=8)
    assert g.ep == (1, 2, 4, 8)
    g = grids(SearchSpace.default(dict(ep_max=16)), cores=96, cores_per_node=96, experts=128)
    assert g.ep == (1, 2, 4, 8, 16)


def test_zero_caps_mean_the_machine():
    g = grids(SearchSpace.default(dict(tp_max=0, pp_max=0, ep_max=0)), cores=64, cores_per_node=16, experts=64)
    assert g.tp[-1] == 16 and g.pp[-1] == 64 and g.ep[-1] == 64

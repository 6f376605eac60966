"""trnsim.api composes the planner with op costs and prices: the CLI's plan and compare go through it."""
import pytest

from trnsim import api
from trnsim.compare import Workload
from trnsim.compare.search import choose
from trnsim.compare.systems import resolve_system
from trnsim.cost import PriceBook
from trnsim.errors import ConfigError

CASE = dict(count=1, seq=2048, global_batch=64, workers=1, top=3,
            space=dict(micro_batch=[1], recompute=["full"], sp=[True], zero=[1], cp=[1]))


def test_api_plan_prices_cost_from_the_price_book():
    book = PriceBook.load(overrides={"trn1.32xlarge": 21.5})
    r = api.plan("llama-3.1-8b", "trn1.32xlarge", objective="cost", prices=book, **CASE)
    for b in r.best:   # USD per step = instances x price per hour x step / 3600, by hand
        assert b.score == pytest.approx(1 * 21.5 * b.step_time_s / 3600.0, rel=1e-12)


def test_api_plan_rejects_an_unknown_cost_source():
    with pytest.raises(ConfigError) as e:
        api.plan("llama-3.1-8b", "trn1.32xlarge", costs="measured", **CASE)
    assert e.value.rule == "costs"


def test_api_compare_is_compare_with_the_planner_layouts():
    kw = dict(tokens=1e9, seq=2048, batch_tokens=64 * 2048, max_instances=1)
    c = api.compare("llama-3.1-8b", ["trn1.32xlarge"], prices=PriceBook.load(overrides={"trn1.32xlarge": 21.5}),
                    **kw)
    mine = choose(resolve_system("trn1.32xlarge"), Workload(model="llama-3.1-8b", **kw))
    row = c.rows[0]
    assert row.choice.config == mine.config and row.choice.time_s == mine.time_s
    # cost of the run by hand: instances x price x hours
    assert row.to_dict()["cost_usd"] == pytest.approx(mine.instances * 21.5 * mine.time_s / 3600.0, rel=1e-9)

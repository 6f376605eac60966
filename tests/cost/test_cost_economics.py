"""Joining prices, power and formulas for one system, by hand; price-performance vs a baseline."""
import pytest

from trnsim.cost.economics import ranking, system_economics, with_baseline
from trnsim.cost.power import load_power_model
from trnsim.cost.prices import PriceBook, PriceError
from trnsim.cost.sensitivity import sensitivity


def test_two_systems_by_hand():
    book = PriceBook.load(overrides={"trn2.48xlarge": 20.0, "p5.48xlarge": 50.0})
    pm = load_power_model().with_overrides(pue=1.1, host_overhead_fraction=0.5, idle_fraction=0.0,
                                           chip_watts={"trn2": 500.0})
    # 1e9 tokens: trn2 2 instances x 10 h; p5 3 instances x 8 h
    t = system_economics("trn2.48xlarge", 36000, 1e9, 2, book, pm)
    g = system_economics("p5", 28800, 1e9, 3, book, pm)
    assert t.cost.cost_usd == pytest.approx(2 * 10 * 20.0)            # $400
    assert g.cost.cost_usd == pytest.approx(3 * 8 * 50.0)             # $1,200
    assert t.cost.usd_per_mtok == pytest.approx(400 / 1000)
    # trn2: 16 x 500 W + 50 % host = 12 kW; x 2 instances x 10 h x 1.1 = 264 kWh
    assert t.energy.kwh == pytest.approx(12 * 2 * 10 * 1.1)
    # p5: 8 x 700 W + 50 % = 8.4 kW; x 3 x 8 h x 1.1 = 221.76 kWh
    assert g.energy.kwh == pytest.approx(8.4 * 3 * 8 * 1.1)
    both = with_baseline([t, g], "p5.48xlarge")
    assert both[0].price_performance == pytest.approx(1200 / 400)
    assert both[1].price_performance == pytest.approx(1.0)
    d = both[0].to_dict()
    for k in ("system", "time_s", "cost_usd", "usd_per_mtok", "energy_kwh", "tokens_per_mwh"):
        assert k in d
    assert ranking(both) == {"trn2.48xlarge": 1, "p5.48xlarge": 2}
    assert ranking(both, "energy_kwh") == {"p5.48xlarge": 1, "trn2.48xlarge": 2}
    rep = sensitivity([r.as_sensitivity_input() for r in both])
    assert rep.base.winner == "trn2.48xlarge" and not rep.winner_changes
    with pytest.raises(PriceError):
        with_baseline(both, "p6-b200.48xlarge")


def test_missing_price_surfaces():
    with pytest.raises(PriceError) as e:
        system_economics("trn2.48xlarge", 3600, 1e6, 1, PriceBook.load())
    assert "--price trn2.48xlarge=" in str(e.value)

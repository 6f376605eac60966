"""Pure cost formulas against a small case computed by hand."""
import pytest

from trnsim.cost.formulas import (CostError, break_even, energy_kwh, engineering_cost, price_performance,
                                  run_cost, run_energy, tokens_per_mwh)


def test_run_cost_by_hand():
    # 2 instances x 90 minutes at $10/h = $30; 3 M tokens -> $10 per 1M tokens
    c = run_cost(instances=2, seconds=5400, usd_per_hour=10.0, tokens=3e6)
    assert c.hours == pytest.approx(1.5)
    assert c.cost_usd == pytest.approx(30.0)
    assert c.usd_per_mtok == pytest.approx(10.0)
    assert c.to_dict()["cost_usd"] == pytest.approx(30.0)


def test_energy_by_hand():
    # 2 x 5,000 W for 1.5 h = 15 kWh of IT energy; x PUE 1.2 = 18 kWh
    e = run_energy(instances=2, seconds=5400, it_watts_per_instance=5000.0, pue=1.2, tokens=3e6)
    assert e.kwh == pytest.approx(18.0)
    assert e.tokens_per_mwh == pytest.approx(3e6 / 0.018)
    assert e.joules_per_token == pytest.approx(18.0 * 3.6e6 / 3e6)  # 21.6 J
    assert energy_kwh(1000.0, 3600.0) == pytest.approx(1.0)
    assert tokens_per_mwh(1e6, 1000.0) == pytest.approx(1e6)


def test_price_performance_and_break_even():
    assert price_performance(10.0, 15.0) == pytest.approx(1.5)
    eng = engineering_cost({"custom kernels": 80, "porting and testing": 40}, 150.0, {"data egress": 500.0})
    assert eng.hours == 120 and eng.usd == pytest.approx(18500.0)
    b = break_even(eng.usd, usd_per_mtok_new=8.0, usd_per_mtok_old=10.0)
    # $18,500 / ($2 per 1M tokens) = 9.25 B tokens
    assert b.tokens == pytest.approx(9.25e9) and b.pays_back
    never = break_even(18500.0, usd_per_mtok_new=10.0, usd_per_mtok_old=9.0)
    assert never.tokens is None and not never.pays_back and never.to_dict()["pays_back"] is False


@pytest.mark.parametrize("call", [
    lambda: run_cost(1, -1.0, 10.0, 1e6),
    lambda: run_cost(1, 10.0, 10.0, 0),
    lambda: run_energy(1, 10.0, 100.0, 0.9, 1e6),
    lambda: price_performance(0.0, 1.0),
    lambda: engineering_cost({"x": -3}, 100.0),
    lambda: run_cost(1, float("nan"), 10.0, 1e6),
])
def test_bad_inputs_raise_cost_error(call):
    with pytest.raises(CostError) as e:
        call()
    assert e.value.limit is not None

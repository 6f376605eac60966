"""Ranking sensitivity: a constructed flip is detected and said plainly; a robust winner is not."""
import pytest

from trnsim.cost.formulas import CostError
from trnsim.cost.sensitivity import SystemResult, sensitivity


def _two(time_b, price_b=9.5, watts_b=5000.0):
    # A: 100 s at $10/h -> $0.2778; B: time_b at price_b
    return [SystemResult("A", 100.0, 1e6, 1, 10.0, 5000.0, 1.0),
            SystemResult("B", time_b, 1e6, 1, price_b, watts_b, 1.0)]


def test_flip_inside_the_band_is_reported():
    # B costs 110 s x $9.5/h = $0.2903 vs A $0.2778: A wins, but A's price +25 % ($0.3472) loses
    r = sensitivity(_two(110.0))
    assert r.base.winner == "A"
    assert r.winner_changes
    labels = [c.label for c in r.flips]
    assert "A price +25 %" in labels and "A utilization -25 %" in labels
    assert "A price -25 %" not in labels
    assert "The winner changes inside the +-25 % band" in r.summary()
    assert r.to_dict()["winner_changes"] is True
    # 2 systems x (3 factors x 2 signs + 8 corners) + 1 adversarial case
    assert len(r.cases) == 29


def test_robust_winner():
    r = sensitivity(_two(300.0))
    assert not r.winner_changes
    assert r.summary().startswith("A stays first on usd_per_mtok in all 29 cases")


def test_only_the_adversarial_corner_flips():
    # B costs exactly twice A: A's worst corner alone (x 1.25 / 0.75 = 1.67) or B's best alone
    # (x 0.75 / 1.25 = 0.6 -> 1.2) keeps A first; both at once (1.67 vs 1.2) do not
    r = sensitivity(_two(100.0 * 2 * 10.0 / 9.5))
    assert [c.label for c in r.flips] == ["A at its worst and every other system at its best"]


def test_power_moves_only_the_energy_ranking():
    two = _two(100.0, price_b=12.0, watts_b=4200.0)  # B: pricier, lower power
    assert sensitivity(two, "usd_per_mtok").base.winner == "A"
    r = sensitivity(two, "kwh_per_mtok")
    assert r.base.winner == "B"
    # B's power +25 % (5,250 W) loses to A's 5,000 W
    assert "B power +25 %" in [c.label for c in r.flips]
    # on cost, no power case changes anything
    cost = sensitivity(_two(110.0), "usd_per_mtok", factors=("power",))
    assert not cost.winner_changes


def test_bad_arguments():
    with pytest.raises(CostError):
        sensitivity(_two(110.0), "usd")
    with pytest.raises(CostError):
        sensitivity(_two(110.0), band=1.5)
    with pytest.raises(CostError):
        sensitivity(_two(110.0), factors=("weather",))
    with pytest.raises(CostError):
        sensitivity([SystemResult("A", 1, 1, 1, 1, 1), SystemResult("A", 2, 1, 1, 1, 1)])

"""compare(): cost, energy, price overrides, missing prices, sensitivity flips, start delays, by hand."""
import pytest

from trnsim.compare import Workload, compare
from trnsim.cost import PriceBook, PriceError, load_power_model

W = Workload(model="llama-3-8b", task="train", tokens=1e9)


def _power():
    # every figure explicit so the hand calculation below needs nothing from the data files
    return load_power_model().with_overrides(pue=1.2, host_overhead_fraction=0.3, idle_fraction=0.2,
                                             chip_watts={"trn1": 250.0, "trn2": 500.0})


def test_cost_and_energy_by_hand(stub_chooser):
    # trn1.32xlarge: 16 chips. 4 instances for 10 h at $20/h, 1e9 tokens, busy the whole time
    choose = stub_chooser({"trn1.32xlarge": (36000.0, 4, 1e9, 1.0, 0.1),
                           "trn2.48xlarge": (18000.0, 2, 1e9, 0.5, 0.2)})
    prices = PriceBook.load(overrides={"trn1.32xlarge": 20.0, "trn2.48xlarge": 50.0})
    c = compare(W, ["trn1.32xlarge", "trn2.48xlarge"], prices, _power(), baseline="trn1.32xlarge",
                choose_fn=choose)
    r1 = c.row("trn1.32xlarge").to_dict()
    assert r1["cost_usd"] == pytest.approx(4 * 10 * 20.0)                      # $800
    assert r1["usd_per_mtok"] == pytest.approx(800.0 / 1e3)                    # 1e9 tokens = 1000 Mtok
    # 16 x 250 W x (0.2 + 0.8 x 1.0) = 4000 W chips + 0.3 x 16 x 250 = 1200 W host = 5200 W per instance
    assert r1["energy_kwh"] == pytest.approx(5200 * 4 * 10 / 1000 * 1.2)        # 249.6 kWh
    assert r1["tokens_per_mwh"] == pytest.approx(1e9 / 0.2496)
    assert r1["error_band"]["cost_usd"] == pytest.approx([720.0, 880.0])
    r2 = c.row("trn2.48xlarge").to_dict()
    # 2 x 5 h x $50 = $500; trn2: 16 chips x 500 W x (0.2 + 0.8 x 0.5) = 4800 W + host 2400 W = 7200 W
    assert r2["cost_usd"] == pytest.approx(500.0)
    assert r2["energy_kwh"] == pytest.approx(7200 * 2 * 5 / 1000 * 1.2)
    assert r2["price_performance"] == pytest.approx(800.0 / 500.0)
    assert c.winner == "trn2.48xlarge"


def test_price_override_scales_cost_not_time(stub_chooser):
    choose = stub_chooser({"p5.48xlarge": (7200.0, 2, 1e9, 1.0, 0.25), "trn1.32xlarge": (7200.0, 4, 1e9, 1.0, 0.1)})
    a = compare(W, ["p5.48xlarge", "trn1.32xlarge"], PriceBook.load(overrides={"p5.48xlarge": 40.0}),
                baseline="p5.48xlarge", choose_fn=choose)
    b = compare(W, ["p5.48xlarge", "trn1.32xlarge"], PriceBook.load(overrides={"p5.48xlarge": 80.0}),
                baseline="p5.48xlarge", choose_fn=choose)
    pa, pb = a.row("p5").to_dict(), b.row("p5").to_dict()
    assert pa["cost_usd"] == pytest.approx(2 * 2 * 40.0) and pb["cost_usd"] == pytest.approx(2 * 2 * 80.0)
    assert pa["time_s"] == pb["time_s"] == 7200.0
    assert pa["price"]["user"] is True
    # trn1's price-performance against p5 doubles when p5 costs twice as much
    assert b.row("trn1.32xlarge").econ.price_performance == pytest.approx(
        2 * a.row("trn1.32xlarge").econ.price_performance)


def test_published_price_is_used_without_override(stub_chooser):
    choose = stub_chooser({"trn1.32xlarge": (3600.0, 1, 1e6, 1.0, 0.1), "p5.48xlarge": (3600.0, 1, 1e6, 1.0, 0.1)})
    c = compare(W, ["trn1.32xlarge", "p5.48xlarge"], PriceBook.load(), choose_fn=choose)
    p = c.row("trn1.32xlarge").to_dict()["price"]
    assert p["id"] == "P274" and p["usd_per_hour"] == 21.5 and p["as_of"]   # prices.toml: dated, with its row


def test_missing_price_names_the_system_and_how_to_give_one(stub_chooser):
    with pytest.raises(PriceError) as e:
        compare(W, ["trn2.48xlarge", "p5.48xlarge"], PriceBook.load(), choose_fn=stub_chooser({}))
    assert "trn2.48xlarge" in str(e.value) and "--price trn2.48xlarge=" in e.value.hint
    with pytest.raises(PriceError) as e:   # several: all named at once, before any estimate runs
        compare(W, ["trn2.48xlarge", "gb300-nvl72"], PriceBook.load(), choose_fn=stub_chooser({}))
    assert "trn2.48xlarge" in str(e.value) and "gb300-nvl72" in str(e.value)


def test_sensitivity_flip_on_a_constructed_case(stub_chooser):
    # A: $1.00 per Mtok, B: $1.10 per Mtok -> 25 % on price flips the winner
    close = stub_chooser({"trn1.32xlarge": (3600.0, 1, 10e6 * 21.5 / 1.0 / 10, 1.0, 0.1),
                          "p5.48xlarge": (3600.0, 1, 10e6 * 55.04 / 1.1 / 10, 1.0, 0.1)})
    c = compare(W, ["trn1.32xlarge", "p5.48xlarge"], PriceBook.load(), choose_fn=close)
    assert c.row("trn1.32xlarge").econ.cost.usd_per_mtok == pytest.approx(1.0)
    assert c.row("p5").econ.cost.usd_per_mtok == pytest.approx(1.1)
    assert c.sensitivity.winner_changes and "winner changes" in c.summary()
    # 3x apart: no case inside +-25 % flips it
    far = stub_chooser({"trn1.32xlarge": (3600.0, 1, 10e6 * 21.5 / 1.0 / 10, 1.0, 0.1),
                        "p5.48xlarge": (3600.0, 1, 10e6 * 55.04 / 3.0 / 10, 1.0, 0.1)})
    c = compare(W, ["trn1.32xlarge", "p5.48xlarge"], PriceBook.load(), choose_fn=far)
    assert not c.sensitivity.winner_changes and "stays first" in c.summary()


def test_start_delay_adds_to_time_to_result(stub_chooser):
    choose = stub_chooser({"trn1.32xlarge": (86400.0, 1, 1e9, 1.0, 0.1), "p5.48xlarge": (86400.0, 1, 1e9, 1.0, 0.1)})
    c = compare(W, ["trn1.32xlarge", "p5.48xlarge"], PriceBook.load(), start_delays={"trn1.32xlarge": 90 * 86400.0},
                choose_fn=choose)
    assert c.row("trn1.32xlarge").time_to_result_s == pytest.approx(91 * 86400.0)
    assert c.row("p5").time_to_result_s == pytest.approx(86400.0)

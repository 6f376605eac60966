"""Prices as data: dated entries, kinds, user overrides, clear errors for missing prices."""
import csv
import os
import re

import pytest

from trnsim.cost.formulas import run_cost
from trnsim.cost.prices import (PRICE_KINDS, PRICES_FILE, PriceBook, PriceError, parse_price_args,
                                parse_prices, read_price_overrides)
from trnsim.errors import HardwareFileError, TrnsimError
from trnsim.hardware.figures import read_toml


def test_every_price_has_source_date_region_and_id():
    prices, gaps = parse_prices(read_toml(PRICES_FILE), PRICES_FILE)
    # 16 rows P273-P288 and prices.csv rows 3-12 (rows 1-2 are P287-P288, kept as `also`)
    assert len(prices) == 26
    for p in prices:
        assert p.id and p.source and p.date and p.as_of and p.region and p.kind in PRICE_KINDS
    # the P-rows and prices.csv rows the brief names are all there
    ids = {p.id for p in prices}
    assert {f"P{i}" for i in range(273, 289)} <= ids
    assert {f"prices.csv#{i}" for i in range(3, 13)} <= ids
    assert {p.also for p in prices} >= {"prices.csv#1", "prices.csv#2"}


def test_newest_price_of_a_kind_is_picked():
    book = PriceBook.load()
    p = book.price("trn1.32xlarge")
    # P274 (SkyPilot, 2025H2+) $21.50 beats prices.csv#8 (Neuron docs, to 2024-09-16), same figure
    assert (p.id, p.usd_per_hour, p.region) == ("P274", 21.5, "us-east-1")
    assert "as of" in p.describe() and "P274" in p.describe()
    assert book.hourly("p5") == pytest.approx(55.04)
    assert book.of_kind("capacity-block").hourly("p5.48xlarge") == pytest.approx(39.33)
    assert book.of_kind("reserved").hourly("trn1.32xlarge") == pytest.approx(8.197)
    assert book.of_kind("spot").hourly("trn2.48xlarge") == pytest.approx(23.0631)
    assert book.of_kind("reserved").hourly("inf2.48xlarge") == pytest.approx(5.608)


def test_missing_on_demand_price_names_the_system_and_how_to_give_one():
    with pytest.raises(PriceError) as e:
        PriceBook.load().price("trn2.48xlarge")
    msg = str(e.value)
    assert isinstance(e.value, TrnsimError) and e.value.value == "trn2.48xlarge"
    assert "no on-demand price for trn2.48xlarge" in msg
    assert "publishes no on-demand price" in msg and "P281" in msg
    assert "--price trn2.48xlarge=USD_PER_HOUR" in msg and "--price-kind spot" in msg


def test_system_with_no_price_at_all():
    with pytest.raises(PriceError) as e:
        PriceBook.load().price("gb300-nvl72")
    assert "gb300-nvl72" in str(e.value) and "--price gb300-nvl72=" in str(e.value)
    with pytest.raises(PriceError) as e:
        PriceBook.load().price("trn3-gen2")   # an alias of the UltraServer, resolved
    assert "trn3-gen2-ultraserver" in str(e.value)


def test_overrides_change_the_result_as_expected(tmp_path):
    book = PriceBook.load(overrides={"trn2.48xlarge": 20.5, "p5": 40.0})
    p = book.price("trn2.48xlarge")
    assert p.user and p.usd_per_hour == 20.5
    assert book.hourly("p5.48xlarge") == 40.0          # alias p5 -> p5.48xlarge
    base = run_cost(4, 7200, PriceBook.load().hourly("p5.48xlarge"), 1e9)
    mine = run_cost(4, 7200, book.hourly("p5.48xlarge"), 1e9)
    assert base.cost_usd == pytest.approx(4 * 2 * 55.04)
    assert mine.cost_usd == pytest.approx(4 * 2 * 40.0)
    assert mine.usd_per_mtok / base.usd_per_mtok == pytest.approx(40.0 / 55.04)
    # user prices win whatever the kind
    assert book.of_kind("spot").hourly("p5.48xlarge") == 40.0
    assert book.with_overrides({"p5.48xlarge": 30.0}).hourly("p5") == 30.0


def test_override_files_and_args(tmp_path):
    t = tmp_path / "mine.toml"
    t.write_text('"trn2.48xlarge" = 21.0\n["p5en.48xlarge"]\nusd_per_hour = 50.0\n')
    c = tmp_path / "mine.csv"
    c.write_text("system,usd_per_hour\ntrn2.48xlarge,19.0\n")
    assert read_price_overrides(str(t)) == {"trn2.48xlarge": 21.0, "p5en.48xlarge": 50.0}
    book = PriceBook.load(override_files=[str(t), str(c)])
    assert book.hourly("trn2.48xlarge") == 19.0        # later file wins
    assert book.hourly("p5en.48xlarge") == 50.0
    assert parse_price_args(["trn2.48xlarge=20.5", " p5 = 3e1 "]) == {"trn2.48xlarge": 20.5, "p5": 30.0}
    for bad in (["trn2.48xlarge"], ["trn2.48xlarge=cheap"], ["trn2.48xlarge=-3"], ["=4"]):
        with pytest.raises(PriceError):
            parse_price_args(bad)
    c.write_text("system,usd_per_hour\ntrn2.48xlarge,zero\n")
    with pytest.raises(PriceError) as e:
        read_price_overrides(str(c))
    assert "trn2.48xlarge" in str(e.value)


def test_misspelt_override_is_pointed_out():
    with pytest.raises(PriceError) as e:
        PriceBook.load(overrides={"trn2.48xlage": 20.0}).price("trn2.48xlarge")
    # refused when the book is built, not only when that system's price is asked for
    assert e.value.rule == "price-system" and "did you mean trn2.48xlarge" in str(e.value)


def test_bad_kind():
    with pytest.raises(PriceError) as e:
        PriceBook.load(kind="free")
    assert e.value.limit == PRICE_KINDS


@pytest.mark.parametrize("old,new,names", [
    ('date = "2025-07-01"\nas_of = "2025H2 or later (catalog snapshot)"\nsource = "SKY"\n\n[[prices]]\nid = "P274"',
     'as_of = "2025H2 or later (catalog snapshot)"\nsource = "SKY"\n\n[[prices]]\nid = "P274"', "(P273) is missing date"),
    ('kind = "capacity-block"\nusd_per_hour = 2.235', 'kind = "block"\nusd_per_hour = 2.235', "(P283).kind"),
    ('usd_per_hour = 55.04', 'usd_per_hour = -55.04', "(P276).usd_per_hour"),
    ('usd_per_hour = 63.296', 'usd_per_hour = 63.296\ncurrency = "EUR"', "(P278) has unknown keys"),
])
def test_malformed_price_file_names_the_key(tmp_path, old, new, names):
    text = open(PRICES_FILE).read()
    assert old in text
    p = tmp_path / "prices.toml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(HardwareFileError) as e:
        PriceBook.load(path=str(p))
    assert names in str(e.value)


SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")


def test_prices_match_the_shared_tables():
    ref = os.path.join(SHARED, "reference", "prices-power-2026.csv")
    cal = os.path.join(SHARED, "calibration", "prices.csv")
    if not (os.path.exists(ref) and os.path.exists(cal)):
        pytest.skip("shared/ tables not present")
    with open(ref, newline="") as f:
        prows = {r["id"]: r for r in csv.DictReader(f)}
    with open(cal, newline="") as f:
        crows = list(csv.DictReader(f))
    prices, _ = parse_prices(read_toml(PRICES_FILE), PRICES_FILE)
    for p in prices:
        for rid in (p.id, p.also):
            if rid.startswith("P"):
                row = prows[rid]
                assert row["instance"].startswith(p.system) or p.system in row["instance"]
                nums = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", row["value"].replace(",", ""))]
                assert p.usd_per_hour in nums
            elif rid.startswith("prices.csv#"):
                row = crows[int(rid.split("#")[1]) - 1]
                assert row["instance"] == p.system
                assert float(row["hourly_price_usd"]) == pytest.approx(p.usd_per_hour)

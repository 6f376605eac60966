"""Published claims tested: the verdict rules checked by hand, the claims file's checks, and the command."""
import json
import subprocess
import sys

import pytest

from trnsim.compare.claims import (FAILS, FAILS_AT_PRICE, HOLDS, HOLDS_IF_PRICE, ClaimError, cost_verdict,
                                   load_claims, ratio_verdict, test_claim)
from trnsim.compare.search import Choice
from trnsim.compare.systems import resolve_system
from trnsim.cost import PriceBook

VERDICTS = {HOLDS, FAILS, FAILS_AT_PRICE, HOLDS_IF_PRICE, "not tested"}


def test_cost_verdict_by_hand():
    # subject at $20/h costs 0.8x the reference per token; the claim needs <= 0.7x:
    # cost scales with price, so the break-even price is 20 * 0.7 / 0.8 = 17.5
    v, be = cost_verdict(0.8, 0.7, 20.0)
    assert v == FAILS_AT_PRICE and be == pytest.approx(17.5)
    v, be = cost_verdict(0.6, 0.7, 20.0)
    assert v == HOLDS and be == pytest.approx(20 * 0.7 / 0.6)
    # no price for the subject: the ratio was computed at $1/h, so break-even = 0.7 / 0.035 = $20/h
    v, be = cost_verdict(0.035, 0.7, None)
    assert v == HOLDS_IF_PRICE and be == pytest.approx(20.0)


def test_ratio_verdict_tolerance():
    assert ratio_verdict(5.1, 5.0) == HOLDS
    assert ratio_verdict(4.9, 5.0) == FAILS
    assert ratio_verdict(4.36, 4.4, 0.05) == HOLDS      # 4.36 >= 4.18
    assert ratio_verdict(4.1, 4.4, 0.05) == FAILS


def test_builtin_claims_load_and_name_their_sources():
    claims = load_claims()
    assert len(claims) >= 5
    for c in claims:
        assert c.source and c.reading and c.text


def test_malformed_claims_file_is_a_clear_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[claims.x]\ntext = "t"\nsource = "s"\nkind = "cost_per_token"\nsubject = "a"\n'
                 'reference = "b"\nreading = "r"\n')
    with pytest.raises(ClaimError, match="max_cost_ratio"):
        load_claims(str(p))
    p.write_text('[claims.x]\ntext = "t"\nsource = "s"\nkind = "guess"\nsubject = "a"\nreference = "b"\n'
                 'reading = "r"\n')
    with pytest.raises(ClaimError, match="unknown kind"):
        load_claims(str(p))


def test_peak_ratio_is_the_catalog_ratio():
    c = next(c for c in load_claims() if c.kind == "peak_ratio")
    r = test_claim(c)
    # 144 Trn3 chips x 2,517 TFLOPS FP8 against 64 Trn2 chips x 1,299 TFLOPS (hardware.md; S3: 362 vs 83 PF)
    assert r.figure == pytest.approx(144 * 2517e12 / (64 * 1299e12), rel=0.01)
    assert r.verdict == HOLDS


def _fixed(key, instances, time_s, tokens=1e9):
    return Choice(system=resolve_system(key), config={"tp": 1}, instances=instances, time_s=time_s,
                  tokens=tokens, busy=1.0, error_band=0.1, metrics={})


def test_cost_claim_from_choices_by_hand():
    """With the configurations fixed, the verdict follows from prices x instances x time alone."""
    from trnsim.compare.claims import Claim
    c = Claim(key="k", text="t", source="s", kind="cost_per_token", subject="trn1.32xlarge",
              reference="p5.48xlarge", reading="r", workload={"model": "llama-2-7b", "task": "train",
                                                                 "tokens": 1e9}, max_cost_ratio=0.7)
    prices = PriceBook.load().with_overrides({"trn1.32xlarge": 10.0, "p5.48xlarge": 50.0})
    runs = {"trn1.32xlarge": _fixed("trn1.32xlarge", 2, 3600.0), "p5.48xlarge": _fixed("p5.48xlarge", 1, 3600.0)}
    r = test_claim(c, prices, choose_fn=lambda ref, w: runs[ref.key])
    # trn1: 2 x $10 x 1 h = $20; p5: 1 x $50 x 1 h = $50 -> 0.4x <= 0.7x; break-even 10 * 0.7 / 0.4 = $17.5
    assert r.figure == pytest.approx(0.4)
    assert r.verdict == HOLDS
    assert r.break_even_usd_per_hour == pytest.approx(17.5)


def test_claims_command_json():
    out = subprocess.run([sys.executable, "-m", "trnsim", "claims", "--json"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert len(d["claims"]) == len(load_claims())
    for r in d["claims"]:
        assert r["verdict"] in VERDICTS and r["source"]

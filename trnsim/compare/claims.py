"""Published claims tested: each claim of ``data/claims.toml`` read as a comparison trnsim can compute,
its figure set beside the claimed one, and a verdict: holds, does not hold (at today's prices), or holds if
the subject's hourly price is at most a break-even price.

The verdict rules are pure functions (``cost_verdict``, ``ratio_verdict``), so they can be checked by hand;
``test_claims`` runs the comparisons through the same configuration search as ``trnsim compare``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..cost import PowerModel, PriceBook, PriceError
from ..cost.formulas import run_cost, run_energy
from ..cost.power import system_power
from ..errors import ConfigError
from ..hardware.catalog import load_catalog
from ..hardware.loader import read_toml
from .search import Choice, choose
from .systems import resolve_system
from .workload import DAY_S, Workload

CLAIMS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "claims.toml")
KINDS = ("cost_per_token", "tokens_per_energy", "speedup", "peak_ratio")
HOLDS, FAILS, FAILS_AT_PRICE, HOLDS_IF_PRICE, UNTESTED = (
    "holds", "does not hold", "does not hold at today's prices", "holds if the price is at most", "not tested")


class ClaimError(ConfigError):
    """A malformed claims file."""
    rule = "claims-file"


@dataclass(frozen=True)
class Claim:
    """One published claim and how it is read as a test."""
    key: str
    text: str
    source: str
    kind: str
    subject: str
    reference: str
    reading: str
    workload: Mapping = field(default_factory=dict)
    max_cost_ratio: Optional[float] = None
    min_ratio: Optional[float] = None
    tolerance: float = 0.0


@dataclass(frozen=True)
class ClaimResult:
    """trnsim's figure for one claim and the verdict."""
    claim: Claim
    verdict: str
    figure: Optional[float]          # the ratio trnsim computes (meaning set by the claim's kind)
    claimed: Optional[float]         # the bound the claim is tested against
    break_even_usd_per_hour: Optional[float] = None
    prices: Mapping[str, str] = field(default_factory=dict)   # system -> price as used, with date and source
    detail: str = ""

    @property
    def sentence(self) -> str:
        """The verdict as one line (with the break-even price where there is one)."""
        if self.verdict in (HOLDS_IF_PRICE, FAILS_AT_PRICE) and self.break_even_usd_per_hour is not None:
            be = f"${self.break_even_usd_per_hour:,.2f}/h for {self.claim.subject}"
            if self.verdict == HOLDS_IF_PRICE:
                return f"{HOLDS_IF_PRICE} {be}"
            return f"{FAILS_AT_PRICE}; holds at {be} or less"
        return self.verdict

    def to_dict(self) -> dict:
        """JSON record."""
        c = self.claim
        return {"claim": c.key, "text": c.text, "source": c.source, "kind": c.kind, "subject": c.subject,
                "reference": c.reference, "reading": c.reading, "verdict": self.verdict,
                "sentence": self.sentence, "figure": self.figure, "claimed": self.claimed,
                "break_even_usd_per_hour": self.break_even_usd_per_hour, "prices": dict(self.prices),
                "detail": self.detail}


# --------------------------------------------------------------------------------------- verdict rules
def cost_verdict(cost_ratio: float, max_cost_ratio: float, subject_usd_per_hour: Optional[float]
                 ) -> Tuple[str, float]:
    """(verdict, break-even hourly price of the subject) for a $-per-token claim.  ``cost_ratio`` is the
    subject's cost per token over the reference's at ``subject_usd_per_hour`` (or at $1/h when the subject
    has no price): cost scales with the hourly price, so the break-even price is
    price x max_cost_ratio / cost_ratio."""
    if not (cost_ratio > 0 and max_cost_ratio > 0):
        raise ValueError("cost ratios must be positive")
    price = 1.0 if subject_usd_per_hour is None else subject_usd_per_hour
    break_even = price * max_cost_ratio / cost_ratio
    if subject_usd_per_hour is None:
        return HOLDS_IF_PRICE, break_even
    return (HOLDS if cost_ratio <= max_cost_ratio else FAILS_AT_PRICE), break_even


def ratio_verdict(ratio: float, min_ratio: float, tolerance: float = 0.0) -> str:
    """Holds when ``ratio`` reaches ``min_ratio`` less the stated tolerance (a rounded claim)."""
    return HOLDS if ratio >= min_ratio * (1.0 - tolerance) else FAILS


# --------------------------------------------------------------------------------------- the claims file
def load_claims(path: Optional[str] = None) -> List[Claim]:
    """Every claim of ``path`` (default: the built-in file), checked."""
    path = path or CLAIMS_FILE
    raw = read_toml(path).get("claims")
    if not isinstance(raw, dict) or not raw:
        raise ClaimError(f"{path} has no [claims.NAME] tables", value=path)
    out = []
    for key, t in raw.items():
        if not isinstance(t, dict):
            raise ClaimError(f"claim {key!r} in {path} is not a table", value=key)
        missing = [k for k in ("text", "source", "kind", "subject", "reference", "reading") if k not in t]
        if missing:
            raise ClaimError(f"claim {key!r} in {path} lacks {', '.join(missing)}", value=key)
        if t["kind"] not in KINDS:
            raise ClaimError(f"claim {key!r}: unknown kind {t['kind']!r}", limit=KINDS, value=t["kind"])
        need = "max_cost_ratio" if t["kind"] == "cost_per_token" else "min_ratio"
        if not isinstance(t.get(need), (int, float)) or not t[need] > 0:
            raise ClaimError(f"claim {key!r} needs a positive {need}", limit="> 0", value=t.get(need))
        out.append(Claim(key=key, **{k: v for k, v in t.items() if k in Claim.__dataclass_fields__}))
    return out


def _workload(c: Claim) -> Workload:
    w = dict(c.workload)
    if "deadline_days" in w:
        w["deadline_s"] = float(w.pop("deadline_days")) * DAY_S
    return Workload(**w)


# --------------------------------------------------------------------------------------- computing
def _unit_cost(ch: Choice, usd_per_hour: float) -> float:
    return run_cost(ch.instances, ch.time_s, usd_per_hour, ch.tokens).usd_per_mtok


def _tokens_per_mwh(ch: Choice, power: Optional[PowerModel]) -> float:
    pw = system_power(ch.system.key, ch.busy, power)
    return run_energy(ch.instances, ch.time_s, pw.it_watts, pw.pue, ch.tokens).tokens_per_mwh


def _system_fp8(key: str, hardware_file: Optional[str]) -> float:
    cat = load_catalog(hardware_file)
    inst = cat.instance(key)
    chip = cat.chips[inst.chip]
    rate = chip.peak_flops.fp8 or chip.peak_flops.mxfp8
    if not rate:
        raise ClaimError(f"{inst.chip} has no FP8 rate in the catalog", value=inst.chip)
    return inst.chips * float(rate)


def _price(prices: PriceBook, key: str) -> Tuple[Optional[float], str]:
    try:
        p = prices.price(key)
    except PriceError:
        return None, "no price"
    return p.usd_per_hour, p.describe()


def test_claim(c: Claim, prices: Optional[PriceBook] = None, power: Optional[PowerModel] = None,
               choose_fn: Callable[..., Choice] = choose, hardware_file: Optional[str] = None) -> ClaimResult:
    """trnsim's figure and verdict for one claim."""
    prices = prices or PriceBook.load()
    subj, ref = resolve_system(c.subject).key, resolve_system(c.reference).key
    if c.kind == "peak_ratio":
        r = _system_fp8(subj, hardware_file) / _system_fp8(ref, hardware_file)
        return ClaimResult(c, ratio_verdict(r, c.min_ratio, c.tolerance), r, c.min_ratio,
                           detail="dense FP8 FLOP/s of the whole system, from the hardware catalog")
    w = _workload(c)
    try:
        a, b = choose_fn(resolve_system(subj), w), choose_fn(resolve_system(ref), w)
    except ConfigError as e:
        return ClaimResult(c, UNTESTED, None, c.max_cost_ratio or c.min_ratio, detail=e.message)
    cfg = f"{subj}: {a.instances} x, {_config(a)}; {ref}: {b.instances} x, {_config(b)}"
    if c.kind == "tokens_per_energy":
        r = _tokens_per_mwh(a, power) / _tokens_per_mwh(b, power)
        return ClaimResult(c, ratio_verdict(r, c.min_ratio, c.tolerance), r, c.min_ratio, detail=cfg)
    p_sub, d_sub = _price(prices, subj)
    p_ref, d_ref = _price(prices, ref)
    used = {subj: d_sub, ref: d_ref}
    if c.kind == "speedup":
        r = b.time_s / a.time_s
        verdict = ratio_verdict(r, c.min_ratio, c.tolerance)
        return ClaimResult(c, verdict, r, c.min_ratio, prices=used, detail=cfg)
    if p_ref is None:
        return ClaimResult(c, UNTESTED, None, c.max_cost_ratio, prices=used,
                           detail=f"no price for the reference {ref}: give one with --price {ref}=USD_PER_HOUR")
    ratio = _unit_cost(a, 1.0 if p_sub is None else p_sub) / _unit_cost(b, p_ref)
    verdict, be = cost_verdict(ratio, c.max_cost_ratio, p_sub)
    return ClaimResult(c, verdict, ratio if p_sub is not None else None, c.max_cost_ratio, be, used, cfg)


def _config(ch: Choice) -> str:
    keys = ("tp", "pp", "dp", "batch", "replicas")
    return " ".join(f"{k}={ch.config[k]}" for k in keys if k in ch.config)


def test_claims(prices: Optional[PriceBook] = None, power: Optional[PowerModel] = None,
                claims: Optional[Sequence[Claim]] = None, progress: Optional[Callable[[str], None]] = None,
                hardware_file: Optional[str] = None) -> List[ClaimResult]:
    """Every claim (default: the built-in file) tested with ``prices`` (default: the catalog's)."""
    out = []
    for c in claims if claims is not None else load_claims():
        if progress:
            progress(c.key)
        out.append(test_claim(c, prices, power, hardware_file=hardware_file))
    return out


test_claim.__test__ = False   # not a pytest test function despite the name
test_claims.__test__ = False


def verdict_counts(results: Sequence[ClaimResult]) -> Dict[str, int]:
    """How many claims got each verdict."""
    out: Dict[str, int] = {}
    for r in results:
        out[r.verdict] = out.get(r.verdict, 0) + 1
    return out

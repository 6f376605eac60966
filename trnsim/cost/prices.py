"""Prices as data: ``cost/data/prices.toml`` plus the user's own (``--price SYSTEM=USD`` / ``--prices FILE``).

A ``PriceBook`` answers "USD per hour of this system" for one price kind; a user price wins over any
published one.  A system without a price is a ``PriceError`` naming it and saying how to give one.
"""
from __future__ import annotations

import csv
import difflib
import os
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import ConfigError, HardwareFileError
from ..hardware.catalog import instance_name_key
from ..hardware.figures import read_toml

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
PRICES_FILE = os.path.join(DATA, "prices.toml")
PRICE_KINDS = ("on-demand", "capacity-block", "reserved", "spot")


class PriceError(ConfigError):
    """No usable price for a system, or a malformed price given by the user."""
    rule = "price"


@dataclass(frozen=True)
class Price:
    """One hourly price with where and when it came from (``user`` = given by the caller)."""
    system: str
    usd_per_hour: float
    kind: str
    id: str = ""
    source: str = ""
    date: str = ""
    as_of: str = ""
    region: str = ""
    note: str = ""
    also: str = ""  # the same figure's id in another source table
    user: bool = False

    def describe(self) -> str:
        """One line for tables: amount, kind, region, date and row id."""
        if self.user:
            return f"${self.usd_per_hour:,.4g}/h (your price{', ' + self.source if self.source else ''})"
        return (f"${self.usd_per_hour:,.4g}/h {self.kind}, {self.region}, as of {self.as_of} "
                f"[{self.id}]")

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return asdict(self)


_ENTRY_KEYS = {"id", "also", "system", "kind", "usd_per_hour", "region", "date", "as_of", "source", "note"}


def parse_prices(raw: Mapping, file: str) -> Tuple[List[Price], Dict[Tuple[str, str], str]]:
    """Validate a prices.toml table: returns the prices and the known gaps ``(system, kind) -> note``."""
    sources = raw.get("sources", {})
    out: List[Price] = []
    for i, e in enumerate(raw.get("prices", [])):
        where = f"prices[{i}]" + (f" ({e.get('id')})" if isinstance(e, Mapping) and e.get("id") else "")
        if not isinstance(e, Mapping):
            raise HardwareFileError(f"{file}: {where} must be a table", rule="price-file", value=repr(e))
        unknown = set(e) - _ENTRY_KEYS
        if unknown:
            raise HardwareFileError(f"{file}: {where} has unknown keys {sorted(unknown)}",
                                    rule="price-file-unknown-key", limit=sorted(_ENTRY_KEYS),
                                    value=sorted(unknown))
        for k in ("id", "system", "kind", "usd_per_hour", "date", "as_of", "source", "region"):
            if k not in e or e[k] in ("", None):
                raise HardwareFileError(f"{file}: {where} is missing {k}", rule="price-file-missing",
                                        value=f"{where}.{k}",
                                        hint="every price needs id, system, kind, usd_per_hour, region, "
                                             "date, as_of and source")
        if e["kind"] not in PRICE_KINDS:
            raise HardwareFileError(f"{file}: {where}.kind", rule="price-file-range", limit=PRICE_KINDS,
                                    value=e["kind"])
        v = e["usd_per_hour"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise HardwareFileError(f"{file}: {where}.usd_per_hour must be a positive number",
                                    rule="price-file-range", limit="> 0", value=v)
        src = str(e["source"])
        out.append(Price(system=str(e["system"]), usd_per_hour=float(v), kind=e["kind"], id=str(e["id"]),
                         source=f"{src}: {sources[src]}" if src in sources else src, date=str(e["date"]),
                         as_of=str(e["as_of"]), region=str(e["region"]), note=str(e.get("note", "")),
                         also=str(e.get("also", ""))))
    gaps = {}
    for i, e in enumerate(raw.get("unpublished", [])):
        if not isinstance(e, Mapping) or not {"system", "kind", "note", "id"} <= set(e):
            raise HardwareFileError(f"{file}: unpublished[{i}] needs system, kind, id and note",
                                    rule="price-file-missing", value=f"unpublished[{i}]")
        gaps[(instance_name_key(e["system"]), e["kind"])] = f"{e['note']} [{e['id']}]"
    return out, gaps


def parse_price_args(items: Iterable[str]) -> Dict[str, float]:
    """``["trn2.48xlarge=20.5", ...]`` (the ``--price`` option) -> ``{"trn2.48xlarge": 20.5}``."""
    out = {}
    for it in items or ():
        name, sep, val = str(it).partition("=")
        if not sep or not name.strip():
            raise PriceError(f"--price takes SYSTEM=USD_PER_HOUR, got {it!r}", limit="SYSTEM=USD_PER_HOUR",
                             value=it)
        out[name.strip()] = _usd(val, name.strip(), "--price")
    return out


def _usd(val, system: str, where: str) -> float:
    try:
        v = float(val)
    except (TypeError, ValueError):
        raise PriceError(f"{where}: price of {system} is not a number", limit="USD per hour > 0",
                         value=val) from None
    if not v > 0 or v != v or v == float("inf"):
        raise PriceError(f"{where}: price of {system} must be a positive number", limit="> 0", value=val)
    return v


def read_price_overrides(path: str) -> Dict[str, float]:
    """A user price file: TOML (``"trn2.48xlarge" = 20.5`` or a table with ``usd_per_hour``) or CSV
    with columns ``system`` (or ``instance``) and ``usd_per_hour`` (or ``hourly_price_usd``, ``price``)."""
    if path.lower().endswith(".csv"):
        return _read_price_csv(path)
    raw = read_toml(path, "price-file")
    out = {}
    for name, v in raw.items():
        if isinstance(v, Mapping):
            if "usd_per_hour" not in v:
                raise PriceError(f"{path}: [{name}] has no usd_per_hour", limit="usd_per_hour = NUMBER",
                                 value=sorted(v))
            v = v["usd_per_hour"]
        out[name] = _usd(v, name, path)
    return out


def _read_price_csv(path: str) -> Dict[str, float]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise PriceError(f"price file not found: {path}", value=path) from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise PriceError(f"cannot read price file {path}: {e}", value=path,
                         hint="a UTF-8 CSV with columns system,usd_per_hour") from None
    out = {}
    for i, r in enumerate(rows, start=2):
        name = (r.get("system") or r.get("instance") or "").strip()
        val = next((r[k] for k in ("usd_per_hour", "hourly_price_usd", "price") if r.get(k)), None)
        if not name or val is None:
            raise PriceError(f"{path}: line {i} needs a system and a usd_per_hour column",
                             limit="columns system,usd_per_hour", value=r)
        out[name] = _usd(val, name, f"{path} line {i}")
    return out


def canonical_system(name: str) -> str:
    """The catalog key of a Trainium instance or GPU system (aliases resolved); else the name as given."""
    from ..hardware.catalog import load_catalog
    from ..hardware.gpus import load_gpu_catalog
    try:
        return load_catalog().instance(name).key
    except ConfigError:
        pass
    try:
        return load_gpu_catalog().system(name).key
    except ConfigError:
        return str(name).strip()


def known_systems(prices: Iterable[Price] = ()) -> List[str]:
    """Every system a price may name: catalog instances and UltraServers, GPU systems, priced systems."""
    from ..hardware.catalog import load_catalog
    from ..hardware.gpus import load_gpu_catalog
    return sorted(set(load_catalog().instances) | set(load_gpu_catalog().systems) | {p.system for p in prices})


def check_priced_system(name: str, prices: Iterable[Price] = ()) -> str:
    """``name`` when it names a known system (aliases included); a misspelt one is a PriceError with
    "did you mean", never silently ignored in favour of the published price."""
    from ..checks import unknown_name
    prices = tuple(prices)
    key = canonical_system(name)
    names = known_systems(prices)
    if instance_name_key(key) in {instance_name_key(n) for n in names}:
        return key
    raise unknown_name("system", str(name), names, rule="price-system", where=f"--price / --prices: {name}",
                       error=PriceError)


class PriceBook:
    """Published prices of one kind plus the user's overrides; ``price(system)`` picks the newest."""

    def __init__(self, prices: Iterable[Price], gaps: Optional[Mapping[Tuple[str, str], str]] = None,
                 kind: str = "on-demand", overrides: Optional[Mapping[str, float]] = None):
        if kind not in PRICE_KINDS:
            raise PriceError(f"unknown price kind {kind!r}", rule="price-kind", limit=PRICE_KINDS, value=kind)
        self.kind = kind
        self.prices = tuple(prices)
        self.gaps = dict(gaps or {})
        for k in (overrides or {}):
            check_priced_system(k, self.prices)
        self.overrides = {instance_name_key(canonical_system(k)): (k, _usd(v, k, "price override"))
                          for k, v in (overrides or {}).items()}

    @classmethod
    def load(cls, kind: str = "on-demand", overrides: Optional[Mapping[str, float]] = None,
             override_files: Iterable[str] = (), path: Optional[str] = None) -> "PriceBook":
        """The built-in (or ``path``) price data, then ``override_files`` in order, then ``overrides``."""
        p = path or PRICES_FILE
        prices, gaps = parse_prices(read_toml(p, "price-file"), p)
        over: Dict[str, float] = {}
        for f in override_files:
            over.update(read_price_overrides(f))
        over.update(overrides or {})
        return cls(prices, gaps, kind, over)

    def with_overrides(self, overrides: Mapping[str, float]) -> "PriceBook":
        """A copy with more user prices on top."""
        merged = {name: v for name, v in self.overrides.values()}
        merged.update(overrides)
        return PriceBook(self.prices, self.gaps, self.kind, merged)

    def with_published(self, prices: Iterable[Price]) -> "PriceBook":
        """A copy with more non-user prices (e.g. an example's derived prices, labelled by their source)."""
        return PriceBook(tuple(self.prices) + tuple(prices), self.gaps, self.kind,
                         {n: v for n, v in self.overrides.values()})

    def of_kind(self, kind: str) -> "PriceBook":
        """The same book answering for another price kind (user prices still win)."""
        return PriceBook(self.prices, self.gaps, kind, {n: v for n, v in self.overrides.values()})

    def published(self, system: str) -> List[Price]:
        """Every published price of ``system``, all kinds, newest first."""
        want = instance_name_key(canonical_system(system))
        ps = [p for p in self.prices if instance_name_key(p.system) == want]
        return sorted(ps, key=lambda p: p.date, reverse=True)

    def price(self, system: str) -> Price:
        """The price to use for ``system``: the user's, else the newest published one of this kind."""
        key = canonical_system(system)
        want = instance_name_key(key)
        if want in self.overrides:
            name, v = self.overrides[want]
            return Price(system=key, usd_per_hour=v, kind="user", source="--price / --prices", user=True)
        all_kinds = self.published(key)
        mine = [p for p in all_kinds if p.kind == self.kind]
        if mine:
            return mine[0]
        why = self.gaps.get((want, self.kind), f"trnsim's price data has no {self.kind} price for {key}")
        others = "; ".join(p.describe() for p in all_kinds if p.kind != self.kind)
        hint = f"give one with --price {key}=USD_PER_HOUR (or --prices FILE)"
        near = difflib.get_close_matches(want, list(self.overrides), n=1, cutoff=0.8)
        if near:
            hint += f"; you gave a price for {self.overrides[near[0]][0]!r}: a misspelling of {key}?"
        if others:
            kinds = sorted({p.kind for p in all_kinds if p.kind != self.kind})
            hint += f", or choose --price-kind {'|'.join(kinds)}"
        raise PriceError(f"no {self.kind} price for {key}: {why}" +
                         (f". Published for it: {others}" if others else ""),
                         limit=f"a price of kind {self.kind} or your own", value=key, hint=hint)

    def hourly(self, system: str) -> float:
        """USD per hour of one ``system`` (instance or rack)."""
        return self.price(system).usd_per_hour

"""The buyer's question for a set of jobs: should each move from the GPU baseline to Trainium, and what would
it save?  ``decide`` runs ``compare`` for every job (data/example_jobs.toml for ``evaluate --example``), prices
systems without a published price by their break-even hourly price, adds the one-time migration cost
(porting, first-run compilation, keeping two paths for 12 months) and says when it pays back."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from ..cost import PowerModel, PriceBook, PriceError
from ..errors import ConfigError
from ..hardware.loader import read_toml
from .engine import Comparison, compare
from .engineering import compile_item, load_defaults, porting_items
from .search import choose
from .systems import SystemRef, resolve_system
from .workload import DAY_S, Workload

JOBS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "example_jobs.toml")
EXAMPLE_SYSTEMS = ("trn1.32xlarge", "trn2.48xlarge", "trn3-gen1-ultraserver", "p5.48xlarge", "p5en.48xlarge",
                   "p6-b200.48xlarge")


@dataclass(frozen=True)
class Job:
    """One workload of the decision and how often it runs."""
    key: str
    title: str
    source: str
    reading: str
    runs_per_month: float
    workload: Mapping


@dataclass(frozen=True)
class Unpriced:
    """A system with no price: its run and the hourly price at which it costs what the baseline does."""
    system: str
    instances: int
    time_s: float
    break_even_usd_per_hour: float


@dataclass(frozen=True)
class JobResult:
    """One job's comparison (priced systems), its unpriced systems, or why it could not be estimated."""
    job: Job
    comparison: Optional[Comparison] = None
    unpriced: Tuple[Unpriced, ...] = ()
    error: str = ""

    def run_cost(self, system: str) -> Optional[float]:
        """Dollars of one run on ``system`` (None when it did not run or has no price)."""
        if self.comparison is None:
            return None
        return next((r.econ.cost.cost_usd for r in self.comparison.rows if r.system == system), None)

    def best_trainium(self) -> Optional[str]:
        """The priced Trainium system with the lowest cost per run."""
        if self.comparison is None:
            return None
        rows = [r for r in self.comparison.rows if r.choice.system.kind == "trainium"]
        return min(rows, key=lambda r: r.econ.cost.cost_usd).system if rows else None

    def monthly_saving(self, system: str) -> Optional[float]:
        """Baseline's monthly bill minus ``system``'s for this job (negative: the move costs more)."""
        if self.comparison is None:
            return None
        base, mine = self.run_cost(self.comparison.baseline), self.run_cost(system)
        if base is None or mine is None:
            return None
        return (base - mine) * self.job.runs_per_month


@dataclass(frozen=True)
class Decision:
    """Every job's result, the migration cost, the verdict."""
    jobs: Tuple[JobResult, ...]
    baseline: str
    migration_items: Tuple[Tuple[str, float], ...]
    compatibility: Optional[Mapping] = None
    notes: Tuple[str, ...] = field(default=())

    @property
    def moves(self) -> List[Tuple[JobResult, str, float]]:
        """(job, Trainium system, monthly saving) for every job cheaper on Trainium than on the baseline."""
        out = []
        for j in self.jobs:
            best = j.best_trainium()
            s = j.monthly_saving(best) if best else None
            if s is not None and s > 0:
                out.append((j, best, s))
        return out

    @property
    def migration_usd(self) -> float:
        """One-time and 12-month migration dollars (porting, two paths, compilation of the jobs moved)."""
        return sum(v for _, v in self.migration_items)

    def payback_months(self) -> Optional[float]:
        """Months of savings that pay the migration back (None: nothing saves money)."""
        saving = sum(s for _, _, s in self.moves)
        return self.migration_usd / saving if saving > 0 else None

    def summary(self) -> str:
        """The answer in plain sentences."""
        moves = self.moves
        if not moves:
            return (f"No job is cheaper on a priced Trainium system than on {self.baseline} at these prices: "
                    "stay, or see the break-even prices below.")
        saving = sum(s for _, _, s in moves)
        parts = ", ".join(f"{j.job.title[0].lower() + j.job.title[1:]} to {sys_} (${s:,.0f}/month)" for j, sys_, s in moves)
        pb = self.payback_months()
        return (f"Move {parts}: ${saving:,.0f} a month saved against {self.baseline}; the ${self.migration_usd:,.0f}"
                f" migration cost pays back in {pb:.1f} months." if pb is not None and pb <= 12 else
                f"Moving {parts} saves ${saving:,.0f} a month, but the ${self.migration_usd:,.0f} migration cost "
                f"takes {pb:.1f} months to pay back.")

    def to_dict(self) -> dict:
        """JSON record: jobs (each with its comparison), migration, verdict."""
        jobs = []
        for j in self.jobs:
            d = {"key": j.job.key, "title": j.job.title, "source": j.job.source, "reading": j.job.reading,
                 "runs_per_month": j.job.runs_per_month, "error": j.error or None,
                 "comparison": j.comparison.to_dict() if j.comparison else None,
                 "unpriced": [u.__dict__ for u in j.unpriced], "best_trainium": j.best_trainium()}
            best = d["best_trainium"]
            d["monthly_saving_usd"] = j.monthly_saving(best) if best else None
            jobs.append(d)
        return {"baseline": self.baseline, "jobs": jobs, "migration": dict(self.migration_items),
                "migration_usd": self.migration_usd, "payback_months": self.payback_months(),
                "compatibility": self.compatibility, "summary": self.summary(), "notes": list(self.notes)}


def load_jobs(path: Optional[str] = None) -> List[Job]:
    """The jobs of ``path`` (default: the built-in example's)."""
    path = path or JOBS_FILE
    raw = read_toml(path).get("jobs")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path} has no [[jobs]]", rule="jobs-file", value=path)
    out = []
    for t in raw:
        missing = [k for k in ("key", "title", "source", "reading", "runs_per_month", "workload") if k not in t]
        if missing:
            raise ConfigError(f"a job in {path} lacks {', '.join(missing)}", rule="jobs-file", value=t.get("key"))
        if not (isinstance(t["runs_per_month"], (int, float)) and t["runs_per_month"] > 0):
            raise ConfigError(f"job {t['key']}: runs_per_month must be positive", rule="jobs-file",
                              limit="> 0", value=t["runs_per_month"])
        out.append(Job(**{k: t[k] for k in Job.__dataclass_fields__}))
    return out


def workload_of(job: Job) -> Workload:
    """The job's Workload (``deadline_days`` in days)."""
    w = dict(job.workload)
    if "deadline_days" in w:
        w["deadline_s"] = float(w.pop("deadline_days")) * DAY_S
    try:
        return Workload(**w)
    except TypeError as e:   # a field this version's Workload does not have (e.g. LoRA settings)
        raise ConfigError(f"job {job.key}: {e}", rule="jobs-file", value=sorted(w)) from None


def _priced(prices: PriceBook, key: str) -> bool:
    try:
        prices.price(key)
        return True
    except PriceError:
        return False


def run_job(job: Job, refs: Sequence[SystemRef], baseline: str, prices: PriceBook,
            power: Optional[PowerModel] = None, progress: Optional[Callable[[str], None]] = None) -> JobResult:
    """Compare the job over the priced systems; break-even prices for the rest."""
    try:
        w = workload_of(job)
    except ConfigError as e:
        return JobResult(job, error=e.message)
    priced = [r for r in refs if _priced(prices, r.key)]
    try:
        comp = compare(w, priced, prices, power, baseline, progress=progress)
    except ConfigError as e:
        return JobResult(job, error=e.message)
    base_cost = next((r.econ.cost for r in comp.rows if r.system == comp.baseline), None)
    unpriced = []
    for r in refs:
        if r in priced or base_cost is None:
            continue
        try:
            ch = choose(r, w)
        except ConfigError:
            continue
        # the hourly price at which one run costs what the baseline's does
        hours = ch.instances * ch.time_s / 3600.0
        unpriced.append(Unpriced(r.key, ch.instances, ch.time_s, base_cost.cost_usd / hours))
    return JobResult(job, comp, tuple(unpriced))


def example_prices_book(prices: PriceBook, systems: Sequence[str]) -> Tuple[PriceBook, Tuple[str, ...]]:
    """``prices`` with the example's derived prices (engineering.toml) for listed systems that have none,
    labelled as derived, and a note per price added."""
    from ..cost.prices import Price
    from .engineering import example_prices, source_of
    add, notes = [], []
    for k, v in example_prices().items():
        if k in systems and not _priced(prices, k):
            src = "compare/data/engineering.toml [example_prices]: " + source_of(f"example_prices.{k}")
            add.append(Price(system=k, usd_per_hour=v, kind=prices.kind, id="example", source=src,
                             region="derived", as_of="see source"))
            notes.append(f"example price for {k}: ${v}/h, derived ({src}); give yours with --price {k}=USD")
    return (prices.with_published(add) if add else prices), tuple(notes)


def example_decision(prices: Optional[PriceBook] = None, power: Optional[PowerModel] = None,
                     engineering: Optional[Mapping[str, float]] = None, systems: Sequence[str] = EXAMPLE_SYSTEMS,
                     baseline: str = "p5.48xlarge", progress: Optional[Callable[[str], None]] = None) -> Decision:
    """``trnsim evaluate --example``: the Llama-style example module captured for compatibility (when torch
    is installed), then the example jobs on Trainium against GPUs."""
    prices, notes = example_prices_book(prices or PriceBook.load(), systems)
    compat, custom, cuda = None, 0, 0
    from ..frontends.torch import TorchMissingError, require_torch
    try:
        require_torch()
    except TorchMissingError:
        notes += ("torch is not installed: the example module was not captured, so no compatibility step "
                  "(pip install 'trnsim[torch]')",)
    else:
        from ..frontends.torch.check import check_model
        from .evaluate import _compat_dict
        from .. import examples
        from ..examples.llama_example import CAPTURE_LAYERS, EXAMPLE_INPUT_SHAPE, LLAMA_13B
        path = os.path.join(os.path.dirname(os.path.abspath(examples.__file__)), "llama_example.py")
        if progress:
            progress("capturing the example model (compatibility)")
        report = check_model(path + ":LlamaForCausalLM", [EXAMPLE_INPUT_SHAPE], "int64", train=True)
        compat = _compat_dict(report)
        custom, cuda = len(report.needs_custom_kernel), len(report.cuda_findings)
        notes += (f"compatibility: {CAPTURE_LAYERS} of the {LLAMA_13B['layers']} identical blocks of a "
                  "Llama-2-13B-sized module captured on the meta device (every block has the same operators)",)
    return decide(load_jobs(), systems, baseline, prices, power, engineering, custom, cuda, compat, notes,
                  progress)


def decide(jobs: Sequence[Job], systems: Sequence[str] = EXAMPLE_SYSTEMS, baseline: str = "p5.48xlarge",
           prices: Optional[PriceBook] = None, power: Optional[PowerModel] = None,
           engineering: Optional[Mapping[str, float]] = None, custom_ops: int = 0, cuda_sites: int = 0,
           compatibility: Optional[Mapping] = None, notes: Sequence[str] = (),
           progress: Optional[Callable[[str], None]] = None) -> Decision:
    """Run every job and add the migration cost of the jobs that would move."""
    prices = prices or PriceBook.load()
    refs = [resolve_system(s) for s in systems]
    base = resolve_system(baseline).key
    results = tuple(run_job(j, refs, base, prices, power, progress) for j in jobs)
    figs = load_defaults(engineering)
    items = [(it.item, it.usd) for it in porting_items(custom_ops, cuda_sites, figs)]
    d = Decision(results, base, tuple(items), compatibility, tuple(notes))
    for j, sys_, _ in d.moves:
        row = next(r for r in j.comparison.rows if r.system == sys_)
        it = compile_item(row.choice.instances, row.econ.price.usd_per_hour, figs)
        items.append((f"{it.item}: {j.job.key} on {sys_}", it.usd))
    return Decision(results, base, tuple(items), compatibility, tuple(notes))


__all__ = ["Decision", "Job", "JobResult", "Unpriced", "decide", "load_jobs", "run_job", "workload_of",
           "EXAMPLE_SYSTEMS"]

"""The planner's frozen result: the drop table (rule -> count, with one example), the ranked best
configurations, and every evaluated row for a notebook."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple

from .evaluate import Evaluated
from .rules import RULES


@dataclass(frozen=True)
class Drop:
    """How many configurations one rule removed, with the first one it removed and why."""
    rule: str
    count: int
    example: str
    reason: str

    @property
    def meaning(self) -> str:
        """What the rule checks."""
        return RULES.get(self.rule, "rejected by the estimator")

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict."""
        return dict(rule=self.rule, count=self.count, meaning=self.meaning, example=self.example, reason=self.reason)


@dataclass(frozen=True)
class Ranked:
    """One configuration of the ranking with its figures and its score under the objective."""
    rank: int
    config: Mapping[str, Any]
    label: str
    score: float
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_per_core_gib: float
    hbm_per_core_gib: float
    comm_exposed_s: float
    bubble_s: float
    micro_batches: int
    global_batch: int = 0     # sequences per step of this layout

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__, config=dict(self.config))


@dataclass(frozen=True)
class PlanResult:
    """Outcome of one search: what was enumerated, dropped (by rule) and ranked."""
    model: str
    system: str
    counts: Tuple[int, ...]
    seq: int
    global_batch: int          # 0: each layout's own (``Ranked.global_batch``) from ``batch_tokens``
    precision: str
    objective: str
    objective_unit: str
    enumerated: int
    memory_checked: int
    estimated: int
    dropped: Tuple[Drop, ...]
    best: Tuple[Ranked, ...]
    backend: str
    workers: int
    wall_s: float
    eval_wall_s: float
    space: Mapping[str, Any]
    notes: Tuple[str, ...] = ()
    batch_tokens: float = 0.0
    rows: Tuple[Evaluated, ...] = field(default=(), repr=False)   # every memory-checked configuration
    scores: Tuple[float, ...] = field(default=(), repr=False)     # objective per row (inf if not estimated)

    @property
    def configs_per_s(self) -> float:
        """Enumerated configurations per second of wall time, the whole search included."""
        return self.enumerated / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def evaluated_per_s(self) -> float:
        """Memory-checked configurations (most of them fully estimated) per second of evaluation."""
        return self.memory_checked / self.eval_wall_s if self.eval_wall_s > 0 else 0.0

    def drop_counts(self) -> Dict[str, int]:
        """Rule -> configurations dropped by it."""
        return {d.rule: d.count for d in self.dropped}

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict (the rows are left out; write them with ``write_parquet``)."""
        return dict(model=self.model, system=self.system, counts=list(self.counts), seq=self.seq,
                    global_batch=self.global_batch, batch_tokens=self.batch_tokens, precision=self.precision, objective=self.objective,
                    objective_unit=self.objective_unit, enumerated=self.enumerated,
                    memory_checked=self.memory_checked, estimated=self.estimated,
                    dropped=[d.to_dict() for d in self.dropped], best=[b.to_dict() for b in self.best],
                    backend=self.backend, workers=self.workers, wall_s=self.wall_s, eval_wall_s=self.eval_wall_s,
                    configs_per_s=self.configs_per_s, evaluated_per_s=self.evaluated_per_s,
                    space=dict(self.space), notes=list(self.notes))

    def records(self) -> List[Dict[str, Any]]:
        """One flat dict per memory-checked configuration (config fields, status, figures, score)."""
        out = []
        for r, s in zip(self.rows, self.scores):
            d = r.config.as_dict()
            d.update({k: getattr(r, k) for k in r._fields if k != "config"})
            d["score"] = s
            out.append(d)
        return out

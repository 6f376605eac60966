"""Pick each system's configuration: the layouts come from the planner (``trnsim.plan``), over the slice of
its space in ``data/search.toml`` (or its whole default space with ``full_search``). ``choose`` is the entry
point, ``chooser(full_search)`` picks the variant.

Training: the fewest instances (powers of two) on which some layout fits, then enough instances to meet
the deadline (capped by ``max_instances``); at each size the planner's fastest layout (tokens per step
rounded up to whole data-parallel rounds, ranked per token). Serving: per TP degree the planner's rules allow,
the largest batch meeting the TPOT / TTFT SLOs, replicas to carry the rate, the cheapest wins.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from ..errors import ConfigError
from ..model.config import ModelConfig, load_model
from .systems import SystemRef
from .workload import Workload

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "search.toml")


@functools.lru_cache(maxsize=1)
def _raw() -> dict:
    with open(DATA, "rb") as f:
        return _toml.load(f)


def setting(section: str, key: str) -> Any:
    """A value of ``data/search.toml`` (``section.key``), without its source."""
    node = _raw()[section][key]
    return node["value"] if isinstance(node, Mapping) and "value" in node else node


class NoFitError(ConfigError):
    """No configuration of a system fits or meets the SLO."""
    rule = "no-config"


@dataclass(frozen=True)
class Choice:
    """The configuration picked for one system and what it achieves on the workload."""
    system: SystemRef
    config: Mapping
    instances: int
    time_s: float                  # training: time to train; serving: the serving period
    tokens: float
    busy: float                    # fraction of time accelerators are busy (energy)
    error_band: float              # relative, on time (and so on cost and energy)
    metrics: Mapping               # task-specific figures (tokens/s, MFU, TTFT, TPOT, ...)
    notes: Tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {"system": self.system.key, "config": dict(self.config), "instances": self.instances,
                "time_s": self.time_s, "tokens": self.tokens, "busy": self.busy, "error_band": self.error_band,
                "metrics": dict(self.metrics), "notes": list(self.notes)}


# ------------------------------------------------------------------------------------------- training
TRAIN_SPACE = ("pp_max", "cp", "ep_max", "vp", "sp", "zero", "micro_batch", "recompute", "recompute_first_fit")


def _pow2(lo: int, hi: int) -> List[int]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


def train_space(ref: SystemRef) -> Dict[str, Any]:
    """Compare's slice of the planner's space on ``ref``: ``data/search.toml`` [train], TP capped at the
    system's fastest domain (a Trainium instance, an NVLink domain), the system's default LNC."""
    from ..model.system import make_system
    s = make_system(ref.key)
    space = {k: setting("train", k) for k in TRAIN_SPACE}
    return dict(space, tp_max=min(int(setting("train", "tp_max")), s.fast_domain), lnc=[s.lnc])


def _best_at(cfg: ModelConfig, ref: SystemRef, w: Workload, nodes: int, space: Optional[Dict[str, Any]]):
    """The planner's fastest layout on ``nodes`` x ``ref`` as a full training estimate (None if none fits)."""
    from ..model.estimate import estimate_training
    from ..plan import PlanError, plan
    try:
        r = plan(cfg, ref.key, count=nodes, seq=w.seq, batch_tokens=w.batch_tokens, precision=w.precision,
                 objective="time", top=1, workers=1, space=space, keep_rows=False, framework=w.framework,
                 lora_rank=w.lora_rank if w.lora else None, lora_targets=w.lora_targets if w.lora else None)
    except PlanError as e:
        if e.rule == "plan-empty":
            return None
        raise
    c = r.best[0].config
    return estimate_training(cfg, ref.key, nodes=nodes, tp=c["tp"], pp=c["pp"], cp=c["cp"], ep=c["ep"], vp=c["vp"],
                             sp=c["sp"], zero=c["zero"], lnc=c["lnc"], seq=w.seq, global_batch=r.best[0].global_batch,
                             micro_batch=c["micro_batch"], recompute=c["recompute"], precision=w.precision,
                             check_memory=False, framework=w.framework, **w.lora)


def _scale_out(best_at: Callable, best, nodes: int, w: Workload):
    """Scale out to meet the deadline: per round, the instances the ideal speed-up asks for, reached by
    doubling and stopping at the first count that meets the deadline (the fewest instances that do)."""
    for _ in range(int(setting("train", "scale_rounds"))):
        t = w.total_tokens / best.tokens_per_s
        if t <= w.deadline_s or nodes >= w.max_instances:
            break
        want = min(w.max_instances, nodes * 2 ** max(1, math.ceil(math.log2(t / w.deadline_s))))
        found, n = None, nodes
        while n < want:
            n = min(want, n * 2)
            cand = best_at(n)
            if cand is not None:
                found = (cand, n)
                if w.total_tokens / cand.tokens_per_s <= w.deadline_s:
                    break
        if found is None:
            break
        best, nodes = found
    return best, nodes


def search_training(ref: SystemRef, w: Workload, full_search: bool = False) -> Choice:
    """Instances and layout for training ``w.tokens`` on ``ref`` within the deadline (see module doc)."""
    cfg = load_model(w.model) if isinstance(w.model, str) else w.model
    space = None if full_search else train_space(ref)
    best_at = functools.partial(_best_at, cfg, ref, w, space=space)
    best, nodes = None, 0
    for n in _pow2(1, w.max_instances):
        best = best_at(n)
        if best is not None:
            nodes = n
            break
    if best is None:
        raise NoFitError(f"{cfg.name} does not fit on up to {w.max_instances} x {ref.key} with any layout tried",
                         limit=f"max_instances={w.max_instances}", value=ref.key,
                         hint="raise --max-instances or drop the system")
    best, nodes = _scale_out(best_at, best, nodes, w)
    time_s = w.total_tokens / best.tokens_per_s
    notes = [] if time_s <= w.deadline_s else \
        [f"misses the {w.deadline_s / 86400:g}-day deadline at the --max-instances cap ({w.max_instances})"]
    cfgd = {**{k: best.parallel[k] for k in ("tp", "pp", "dp", "cp", "sp", "zero")}, "recompute": best.recompute,
            "global_batch": best.global_batch, "seq": best.seq, "precision": best.precision,
            "lnc": best.lnc, "nodes": nodes}
    if best.micro_batch != 1:   # the planner's whole space also searches micro-batches
        cfgd["micro_batch"] = best.micro_batch
    if full_search:
        cfgd["planner"] = "full space"
    for k in ("framework", "lora"):   # named when the estimator reports them
        if best.parallel.get(k):
            cfgd[k] = best.parallel[k] if k != "lora" else f"r{best.parallel[k]['rank']}:{','.join(best.parallel[k]['targets'])}"
    metrics = {"tokens_per_s": best.tokens_per_s, "step_time_s": best.step_time_s, "mfu": best.mfu,
               "memory_per_core_gib": best.memory_per_core_gib, "accelerators": best.cores}
    return Choice(system=ref, config=cfgd, instances=nodes, time_s=time_s, tokens=w.total_tokens, busy=1.0,
                  error_band=float(best.error_band["step_time_s"]), metrics=metrics,
                  notes=tuple(notes) + tuple(best.notes))


# ------------------------------------------------------------------------------------------- serving
def _infer_fn(ref: SystemRef, cfg: ModelConfig, w: Workload) -> Tuple[Callable, int, int]:
    """(estimate(tp, batch), accelerator ranks per instance, max tp)."""
    from ..model.estimate import estimate_inference
    from ..model.system import make_system
    s = make_system(ref.key)
    return (lambda tp, b: estimate_inference(cfg, s, tp=tp, batch=b, input_len=w.input_len,
                                             output_len=w.output_len, precision=w.precision),
            s.cores_per_node, s.fast_domain)


def search_inference(ref: SystemRef, w: Workload) -> Choice:
    """TP degree, batch and replicas serving ``w.rate`` requests/s at the SLOs at the lowest cost per token
    (instances are whole: the cost of a partly used instance is paid in full)."""
    cfg = load_model(w.model) if isinstance(w.model, str) else w.model
    from ..plan.hints import serving_tps
    est, per_inst, max_tp = _infer_fn(ref, cfg, w)
    best = None
    fitting = 0
    for tp in serving_tps(cfg, min(max_tp, int(setting("infer", "tp_max")))):
        try:
            one = est(tp, 1)
        except ConfigError:
            continue
        fitting += 1
        if w.slo_ttft_ms and one.ttft_ms > w.slo_ttft_ms:
            continue
        for b in setting("infer", "batches"):
            try:
                e = est(tp, b)
            except ConfigError:
                break
            if w.slo_tpot_ms and e.tpot_ms > w.slo_tpot_ms:
                break
            cycle_s = e.ttft_ms / 1e3 + w.output_len * e.tpot_ms / 1e3   # a batch: prefill, then decode
            rps = b / cycle_s
            replicas = math.ceil(w.rate / rps)
            instances = max(1, math.ceil(replicas * tp / per_inst))
            key = (instances, e.tpot_ms)   # fewest whole instances, then the fastest tokens
            cand = (key, tp, b, e, one, rps, replicas, instances)
            if best is None or cand[0] < best[0]:
                best = cand
        if fitting >= int(setting("infer", "fitting_tps")):
            break
    if best is None:
        slo = ", ".join(f"{k}={v} ms" for k, v in (("TPOT", w.slo_tpot_ms), ("TTFT", w.slo_ttft_ms)) if v)
        raise NoFitError(f"no TP degree of {ref.key} serves {cfg.name} " +
                         (f"within the SLO ({slo})" if slo else "(memory)"), value=ref.key,
                         limit=slo or "fits in HBM", hint="relax --slo-tpot-ms / --slo-ttft-ms or drop the system")
    _, tp, b, e, one, rps, replicas, instances = best
    busy = min(1.0, w.rate / (replicas * rps)) * replicas * tp / (instances * per_inst)
    metrics = {"ttft_ms": one.ttft_ms, "tpot_ms": e.tpot_ms, "batch": b, "replicas": replicas,
               "requests_per_s_per_replica": rps, "capacity_requests_per_s": replicas * rps,
               "output_tokens_per_s": w.rate * w.output_len, "ttft_ms_full_batch": e.ttft_ms}
    return Choice(system=ref, config={"tp": tp, "pp": 1, "batch": b, "replicas": replicas,
                                      "precision": e.precision, "lnc": e.lnc},
                  instances=instances, time_s=w.total_tokens / (w.rate * w.output_len), tokens=w.total_tokens,
                  busy=busy, error_band=float(e.error_band["tpot_ms"]), metrics=metrics, notes=tuple(e.notes))


def choose(ref: SystemRef, w: Workload) -> Choice:
    """The configuration of ``ref`` for ``w``: training layouts from the planner over compare's slice of its
    space (``data/search.toml``), serving from the TP degrees its rules allow."""
    return search_training(ref, w) if w.task in ("train", "finetune") else search_inference(ref, w)


def choose_full(ref: SystemRef, w: Workload) -> Choice:
    """Like ``choose``, but training layouts from the planner's whole default space (``--planner``; slower)."""
    return search_training(ref, w, full_search=True) if w.task == "train" else search_inference(ref, w)


def chooser(full_search: bool = False) -> Callable[[SystemRef, Workload], Choice]:
    """``choose``, or ``choose_full`` with ``full_search``."""
    return choose_full if full_search else choose

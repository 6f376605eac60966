"""Pick each system's configuration: a small search over parallel layouts (training) or TP degree and
batch (serving). ``choose`` is the entry point; ``choose_with_planner`` (``--planner``) asks ``trnsim.plan``
for the Trainium training layouts.

Training: the fewest instances (powers of two) on which some layout fits, then enough instances to meet
the deadline (capped by ``max_instances``); at each size the fastest fitting layout. Serving: per TP
degree, the largest batch meeting the TPOT / TTFT SLOs, replicas to carry the rate, the cheapest wins.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Tuple

from ..errors import ConfigError
from ..model.config import ModelConfig, load_model
from .systems import SystemRef
from .workload import Workload

PP_CHOICES = (1, 2, 4, 8, 16)
RECOMPUTE = ("none", "selective", "full")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
def _pow2(lo: int, hi: int) -> List[int]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


def _tp_choices(cfg: ModelConfig, ref: SystemRef, fast_domain: int) -> List[int]:
    tps = [t for t in _pow2(1, min(fast_domain, 64)) if cfg.heads % t == 0
           and (cfg.is_mla or cfg.n_kv % t == 0 or t % cfg.n_kv == 0)]
    return tps or [1]


class _Estimator:
    """The estimate and memory functions behind the training search, on any system (Trainium or GPU)."""

    def __init__(self, ref: SystemRef, cfg: ModelConfig, w: Workload):
        from ..model.system import make_system
        self.ref, self.cfg, self.w = ref, cfg, w
        s = make_system(ref.key)
        self.per_node, self.fast = s.cores_per_node, s.fast_domain
        self._sys: Dict[int, object] = {}

    def system(self, nodes: int):
        """The system on ``nodes`` instances (built once per node count)."""
        if nodes not in self._sys:
            from ..model.system import make_system
            self._sys[nodes] = make_system(self.ref.key, nodes)
        return self._sys[nodes]

    def fits(self, nodes: int, tp: int, pp: int, rc: str) -> bool:
        """Whether the layout's training memory fits (cheap: no op graph)."""
        from ..model.memory import training_memory
        from ..model.parallel import Parallel, ParallelError, resolve
        s = self.system(nodes)
        try:
            par = resolve(Parallel(tp=tp, pp=pp, zero=1, sp=tp > 1), self.cfg, s)
        except ParallelError:
            return False
        from ..model.frameworks import get_framework
        from ..model.lora import make_lora
        fw = get_framework(self.w.framework, gpu=s.rank_name != "NeuronCore")
        lora = make_lora(self.w.lora_rank, self.w.lora_targets) if self.w.lora else None
        over = {k: v for k, v in s.memory_overrides().items() if k != "memory.reserved_bytes_per_core"}
        return training_memory(self.cfg, par, 1, self.w.seq, rc, float(s.hbm_bytes_per_core), over, lora,
                               fw).fits

    def estimate(self, nodes: int, tp: int, pp: int, rc: str):
        """One training-step estimate of the layout (memory already checked)."""
        from ..model.estimate import estimate_training
        ranks = self.per_node * nodes
        dp = ranks // (tp * pp)
        gb = max(1, math.ceil(self.w.batch_tokens / self.w.seq / dp)) * dp
        return estimate_training(self.cfg, self.system(nodes), tp=tp, pp=pp, zero=1 if dp > 1 else 0, sp=tp > 1,
                                 seq=self.w.seq, global_batch=gb, recompute=rc, precision=self.w.precision,
                                 check_memory=False, framework=self.w.framework, **self.w.lora)


def _best_at(est: _Estimator, nodes: int):
    """The fastest fitting layout on ``nodes`` (None if none fits)."""
    best = None
    for tp in _tp_choices(est.cfg, est.ref, est.fast):
        tried = 0
        for pp in (p for p in PP_CHOICES if est.cfg.layers % p == 0):
            rc = next((r for r in RECOMPUTE if est.fits(nodes, tp, pp, r)), None)
            if rc is None:
                continue
            try:
                e = est.estimate(nodes, tp, pp, rc)
            except ConfigError:
                continue
            if best is None or e.tokens_per_s > best.tokens_per_s:
                best = e
            tried += 1
            if tried == 2:   # deeper pipelines only add bubble once a shallower one fits
                break
    return best


def search_training(ref: SystemRef, w: Workload) -> Choice:
    """Instances and layout for training ``w.tokens`` on ``ref`` within the deadline (see module doc)."""
    cfg = load_model(w.model) if isinstance(w.model, str) else w.model
    est = _Estimator(ref, cfg, w)
    best, nodes = None, 0
    for n in _pow2(1, w.max_instances):
        best = _best_at(est, n)
        if best is not None:
            nodes = n
            break
    if best is None:
        raise NoFitError(f"{cfg.name} does not fit on up to {w.max_instances} x {ref.key} with any layout tried",
                         limit=f"max_instances={w.max_instances}", value=ref.key,
                         hint="raise --max-instances or drop the system")
    for _ in range(3):   # scale out to meet the deadline
        t = w.total_tokens / best.tokens_per_s
        if t <= w.deadline_s or nodes >= w.max_instances:
            break
        want = min(w.max_instances, nodes * 2 ** max(1, math.ceil(math.log2(t / w.deadline_s))))
        bigger = _best_at(est, want)
        if bigger is None:
            break
        best, nodes = bigger, want
    time_s = w.total_tokens / best.tokens_per_s
    notes = [] if time_s <= w.deadline_s else \
        [f"misses the {w.deadline_s / 86400:g}-day deadline at the --max-instances cap ({w.max_instances})"]
    cfgd = {**{k: best.parallel[k] for k in ("tp", "pp", "dp", "cp", "sp", "zero")}, "recompute": best.recompute,
            "global_batch": best.global_batch, "seq": best.seq, "precision": best.precision,
            "lnc": best.lnc, "nodes": nodes}
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
    est, per_inst, max_tp = _infer_fn(ref, cfg, w)
    best = None
    fitting = 0
    for tp in _tp_choices(cfg, ref, max_tp):
        try:
            one = est(tp, 1)
        except ConfigError:
            continue
        fitting += 1
        if w.slo_ttft_ms and one.ttft_ms > w.slo_ttft_ms:
            continue
        for b in BATCHES:
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
        if fitting >= 3:
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
    """The configuration of ``ref`` for ``w`` by this module's search (fast: a compare of eight systems takes
    about a second); ``choose_with_planner`` asks ``trnsim.plan`` instead where it can answer."""
    return search_training(ref, w) if w.task in ("train", "finetune") else search_inference(ref, w)


def choose_with_planner(ref: SystemRef, w: Workload) -> Choice:
    """Like ``choose``, but a Trainium training layout comes from ``trnsim.plan.plan`` (its full search
    space, ~10 s per system) at the instance count this module's search picked; the faster of the two wins."""
    mine = choose(ref, w)
    if ref.is_gpu or w.task != "train":
        return mine
    try:
        from ..plan import plan
    except ImportError:
        return mine
    c = mine.config
    try:
        best = plan(w.model, ref.key, count=mine.instances, seq=c["seq"], global_batch=c["global_batch"],
                    precision=w.precision, objective="time", top=1).best
    except ConfigError:
        return mine
    if not best or best[0].tokens_per_s <= mine.metrics["tokens_per_s"]:
        return mine
    b = best[0]
    cfg = {**{k: b.config[k] for k in ("tp", "pp", "dp", "cp", "sp", "zero", "recompute", "lnc")},
           "global_batch": c["global_batch"], "seq": c["seq"], "precision": w.precision, "nodes": mine.instances,
           "planner": "trnsim.plan"}
    metrics = {**mine.metrics, "tokens_per_s": b.tokens_per_s, "step_time_s": b.step_time_s, "mfu": b.mfu}
    return Choice(system=ref, config=cfg, instances=mine.instances, time_s=w.total_tokens / b.tokens_per_s,
                  tokens=w.total_tokens, busy=1.0, error_band=mine.error_band, metrics=metrics,
                  notes=mine.notes + ("layout from trnsim.plan",))

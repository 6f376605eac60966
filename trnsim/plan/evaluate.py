"""Worker side of the planner: a batch of configurations -> a memory pre-check, then the model-level
training estimate for those that fit.  Runs in a pool process, a Ray worker or the caller's process;
each process keeps its systems, op costs and collective models between batches of the same job, so
per-op costs and collective times are memoised across configurations, not only inside one estimate."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import TrnsimError
from ..model.comm import default_comm
from ..model.config import ModelConfig, load_model
from ..model.context import make_context
from ..model.datafiles import figure, load
from ..model.memory import GIB, expert_params_per_core, params_per_core, training_memory
from ..model.ops import Op, OpTime
from ..model.parallel import Parallel
from ..model.system import make_system
from ..model.train import estimate_training
from .rules import Config, layout_batch, same_but_recompute

# costs factory: (target, lnc, hardware_file) -> OpCosts; must be picklable (a module-level function or
# functools.partial of one) because every worker process calls it once per LNC
CostsFactory = Callable[[str, int, Optional[str]], Any]


@dataclass(frozen=True)
class Job:
    """Everything a worker needs besides the configurations: the fixed inputs of every estimate."""
    key: str                  # unique per plan() call: workers cache their state under it
    model: Union[str, ModelConfig]
    instance: str
    seq: int
    global_batch: int         # 0: each layout's own, from batch_seqs (rules.layout_batch)
    precision: str = "bf16"
    sparsity: Optional[str] = None
    costs: Optional[CostsFactory] = None     # None: the catalog roofline
    comm: Optional[str] = None               # None: the model layer's default collectives model
    hardware_file: Optional[str] = None
    overrides: Optional[Mapping[str, Any]] = field(default=None, hash=False)
    efficiency: Optional[Mapping[str, float]] = field(default=None, hash=False)
    batch_seqs: float = 0.0   # sequences per step to round up to whole dp x micro-batch rounds
    recompute_first_fit: bool = False   # estimate only a layout's first recompute option that fits
    framework: Optional[str] = None          # None: the estimator's default (NxD / Megatron)
    lora_rank: Optional[int] = None          # LoRA fine-tuning (frozen base) when set
    lora_targets: Optional[str] = None


class Evaluated(NamedTuple):
    """What a worker returns per configuration: ``status`` "ok" or the rule it broke, and its figures."""
    config: Config
    status: str
    reason: str = ""
    memory_gib: float = 0.0
    hbm_gib: float = 0.0
    step_time_s: float = 0.0
    tokens_per_s: float = 0.0
    mfu: float = 0.0
    hfu: float = 0.0
    micro_batches: int = 0
    comm_exposed_s: float = 0.0
    bubble_s: float = 0.0
    global_batch: int = 0


class _MemoCosts:
    """Op costs memoised for the life of a worker (the estimator's own memo lasts one estimate);
    ``calibration_key`` keeps the calibration the wrapped costs would get."""

    def __init__(self, inner, calibration_key: str):
        self.inner = inner
        self.calibration_key = calibration_key
        self._memo: Dict[Op, OpTime] = {}

    def time(self, op: Op) -> OpTime:
        """Time of ``op`` from the memo, else from the wrapped costs."""
        t = self._memo.get(op)
        if t is None:
            t = self._memo[op] = self.inner.time(op)
        return t


class _Per(NamedTuple):
    """What every estimate on one (count, LNC) shares: the system, its HBM per rank, op costs, collectives,
    the estimator figures with the system's own (a GPU's runtime reserve) and the user's on top."""
    system: Any
    hbm: float
    costs: Any
    comm: Any
    overrides: Dict[str, Any]
    reserved: float


class _State:
    """One job's per-process state: the model, and per (count, LNC) the system, op costs and collectives."""

    def __init__(self, job: Job):
        self.job = job
        self.cfg = job.model if isinstance(job.model, ModelConfig) else load_model(job.model)
        self._per: Dict[Tuple[int, int], _Per] = {}
        # every estimator figure pre-resolved: the model layer looks figures up per layer and per collective,
        # and a dict hit is far cheaper than its walk of the TOML tree
        self.figures = _flat_figures(load("estimator"))
        f = lambda k: float(figure("estimator", k, {**self.figures, **(job.overrides or {})}))  # noqa: E731
        # bytes per parameter of the states training_memory counts: always held, and sharded by ZeRO-1
        self.held = f("training.weight_bytes") + f("training.grad_bytes")
        self.shardable = f("training.master_weight_bytes") + f("training.optimizer_state_bytes")
        self.reserved = f("memory.reserved_bytes_per_core")
        # the cheap floor and pre-check below use the historical layout (ZeRO-1 over dp, fp32 gradients, the
        # estimator's reserve); another framework's layout or LoRA is left to the estimator's own check
        from ..model.train_frameworks import get_framework
        gpu = make_system(job.instance, 1, None, job.hardware_file).rank_name != "NeuronCore"
        fw = get_framework(job.framework, gpu=gpu)
        self.classic = (not job.lora_rank and fw.grad_bytes == f("training.grad_bytes") and not fw.main_grad_bytes
                        and not fw.shard_over_cp and fw.reserve_bytes == self.reserved)

    def states_bytes(self, par: Parallel, reserved: float) -> float:
        """Weights, gradients, optimizer states and the runtime reserve of one rank: a lower bound of
        ``training_memory(...).total`` that needs no activation model (so it is cheap)."""
        p = params_per_core(self.cfg, par)
        pe = expert_params_per_core(self.cfg, par)
        sharded = (p - pe) / par.dp + pe / max(1, par.dp // par.ep) if par.zero else p
        return p * self.held + sharded * self.shardable + reserved

    def per(self, count: int, lnc: int) -> _Per:
        """The shared inputs of every estimate on ``count`` instances at ``lnc``."""
        got = self._per.get((count, lnc))
        if got is None:
            j = self.job
            system = make_system(j.instance, count, lnc, j.hardware_file)
            if j.costs is None:   # the system's own op costs (a roofline, a GPU's calibrated costs), memoised
                ctx = make_context(self.cfg, system, count, lnc, j.precision, j.sparsity, None, j.comm,
                                   j.hardware_file, j.efficiency)
                costs = _MemoCosts(ctx.costing.costs, "roofline")
            else:
                costs = j.costs(system.target, lnc, j.hardware_file)
            # one collectives model per worker: FabricComm memoises collective times across estimates
            comm = default_comm(system, j.hardware_file, j.comm) if j.comm else default_comm(system, j.hardware_file)
            over = {**self.figures, **system.memory_overrides(), **(j.overrides or {})}
            reserved = float(figure("estimator", "memory.reserved_bytes_per_core", over))
            if "memory.reserved_bytes_per_core" not in (j.overrides or {}):
                # the estimator takes the training framework's reserve unless the caller names one
                over.pop("memory.reserved_bytes_per_core", None)
            got = self._per[(count, lnc)] = _Per(system, float(system.hbm_bytes_per_core), costs, comm, over,
                                                 reserved)
        return got


def _flat_figures(raw: Mapping) -> Dict[str, Any]:
    """``{"section.key": value}`` for every figure of a data file."""
    return {f"{sec}.{k}": v["value"] for sec, table in raw.items() if isinstance(table, dict)
            for k, v in table.items() if isinstance(v, dict) and "value" in v}


# errors of the machinery rather than verdicts on a configuration: they stop the plan
_NOT_A_VERDICT = frozenset(["opcost-cache", "opcost-timer"])

_STATES: Dict[str, _State] = {}
_MAX_STATES = 4   # a long-lived Ray worker serves several plans; keep the newest few


def _state(job: Job) -> _State:
    st = _STATES.get(job.key)
    if st is None:
        while len(_STATES) >= _MAX_STATES:
            _STATES.pop(next(iter(_STATES)))
        st = _STATES[job.key] = _State(job)
    return st


def evaluate_one(job: Job, c: Config) -> Evaluated:
    """Memory pre-check of one configuration, then (if it fits) its training-step estimate."""
    st = _state(job)
    per = st.per(c.count, c.lnc)
    hbm = per.hbm
    par = Parallel(tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, ep=c.ep, vp=c.vp, sp=c.sp, zero=c.zero)
    try:
        floor = st.states_bytes(par, per.reserved) if st.classic else 0.0
        if floor > hbm:   # rejected without the activation model; the figure is a lower bound, and says so
            return Evaluated(c, "memory-fit", f"weights, gradients and optimizer states alone need "
                             f"{floor / GIB:.1f} GiB per rank, has {hbm / GIB:.1f} GiB",
                             memory_gib=floor / GIB, hbm_gib=hbm / GIB)
        mem = training_memory(st.cfg, par, c.micro_batch, job.seq, c.recompute, hbm, per.overrides) \
            if st.classic else None
        if mem is not None and not mem.fits:
            return Evaluated(c, "memory-fit", f"needs {mem.total / GIB:.1f} GiB per rank, has {hbm / GIB:.1f} GiB",
                             memory_gib=mem.total / GIB, hbm_gib=hbm / GIB)
        gb = layout_batch(c.dp, c.micro_batch, job.global_batch, job.batch_seqs)
        e = estimate_training(st.cfg, per.system, nodes=c.count, tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, ep=c.ep,
                              vp=c.vp, sp=c.sp, zero=c.zero, lnc=c.lnc, seq=job.seq, global_batch=gb,
                              micro_batch=c.micro_batch, recompute=c.recompute,
                              precision=job.precision, sparsity=job.sparsity, costs=per.costs, comm=per.comm,
                              hardware_file=job.hardware_file, overrides=per.overrides,
                              efficiency=job.efficiency, check_memory=mem is None, framework=job.framework,
                              lora_rank=job.lora_rank, lora_targets=job.lora_targets)
    except TrnsimError as err:   # a rule only the estimator knows: charged to that rule
        if err.rule in _NOT_A_VERDICT:
            raise                # the cache or the timer failed: an error, never a dropped config
        return Evaluated(c, err.rule, err.message)
    return Evaluated(c, "ok", "", memory_gib=e.memory_per_core_gib, hbm_gib=hbm / GIB,
                     step_time_s=e.step_time_s, tokens_per_s=e.tokens_per_s, mfu=e.mfu, hfu=e.hfu,
                     micro_batches=e.micro_batches, comm_exposed_s=e.breakdown["comm_exposed"],
                     bubble_s=e.breakdown["pipeline_bubble"], global_batch=gb)


def evaluate_batch(job: Job, configs: Sequence[Config]) -> List[Evaluated]:
    """Evaluate a batch of configurations (one task of a backend); with ``recompute_first_fit`` a layout's
    recompute options after the first that fits (grid order) are dropped unestimated."""
    out: List[Evaluated] = []
    for c in configs:
        if job.recompute_first_fit and out and out[-1].status in ("ok", "recompute-dominated") \
                and same_but_recompute(c, out[-1].config):
            out.append(Evaluated(c, "recompute-dominated", f"rc={out[-1].config.recompute} of the same layout "
                                 "fits and recomputes less"))
            continue
        out.append(evaluate_one(job, c))
    return out

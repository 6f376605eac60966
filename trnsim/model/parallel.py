"""Parallel layouts: degrees (TP, PP with virtual stages, DP, ZeRO-1, SP, CP, EP), their rules, and
the mapping of groups onto ranks (TP innermost in the fastest domain, then CP, PP, DP outermost).

Ranks are what the frameworks count (``system.SystemModel``): logical NeuronCores on Trainium (32 on a
trn1.32xlarge, 64 on a trn2.48xlarge with LNC=2), GPUs on a GPU system.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional

from . import layout_rules as rules
from .config import ModelConfig
from .system import ParallelError, System, SystemModel, make_system


@dataclass(frozen=True)
class Parallel:
    """Parallel degrees of one run. ``dp`` 0 means: whatever the cores left over allow."""
    tp: int = 1
    pp: int = 1
    dp: int = 0
    cp: int = 1
    ep: int = 1
    vp: int = 1             # virtual pipeline stages per rank (interleaved 1F1B)
    sp: bool = False        # sequence parallel (needs tp > 1)
    zero: int = 0           # ZeRO stage 0-3 (1: optimizer states, 2: + gradients, 3: + weights sharded)

    @property
    def etp(self) -> int:
        """Expert tensor-parallel degree: tp when the experts spread over data-parallel ranks only (ep divides
        dp), else 1: the experts spread over the TP ranks too (Megatron's expert_tensor_parallel_size = 1)."""
        return self.tp if not self.dp or self.dp % self.ep == 0 else 1

    @property
    def model_parallel(self) -> int:
        """Ranks of one model replica (tp x pp x cp)."""
        return self.tp * self.pp * self.cp

    def to_dict(self) -> dict:
        """The degrees as a dict."""
        return dict(self.__dict__)


def _bad(msg: str, rule: str, limit, value, hint: Optional[str] = None):
    raise ParallelError(msg, rule=rule, limit=limit, value=value, hint=hint)


def resolve(par: Parallel, cfg: ModelConfig, system: SystemModel, ranks: Optional[int] = None,
            pad_heads: bool = False) -> Parallel:
    """Fill in dp and check every divisibility rule (``layout_rules``) against the model and the machine; with
    ``pad_heads`` (serving) a tp that does not divide the heads is accepted: the heads are padded, as Neuron
    does."""
    unit = "logical NeuronCores" if system.rank_name == "NeuronCore" else f"{system.rank_name}s"
    for k in ("tp", "pp", "cp", "ep", "vp"):
        if getattr(par, k) < 1:
            _bad(f"--{k} must be at least 1", f"parallel-{k}", ">= 1", getattr(par, k))
    if par.zero not in (0, 1, 2, 3):
        _bad("--zero must be 0, 1, 2 or 3 (ZeRO stage)", "parallel-zero", (0, 1, 2, 3), par.zero)
    total = system.cores if ranks is None else ranks
    lnc = f", LNC={system.lnc}" if system.rank_name == "NeuronCore" else ""
    where = f" ({system.nodes} x {system.key}{lnc})" if ranks is None else ""
    bad = rules.structure(rules.ModelFacts.of(cfg), total, par.tp, par.pp, par.cp, par.ep, par.vp, par.sp,
                          par.dp, where, unit, pad_heads=pad_heads)
    if bad:
        _bad(bad.message, bad.rule, bad.limit, bad.value, bad.hint)
    dp = par.dp or total // par.model_parallel
    return replace(par, dp=dp)


def check_batch(par: Parallel, seq: int, global_batch: int, micro_batch: int) -> int:
    """Number of micro-batches per step on one DP rank; checks batch and sequence divisibility."""
    if micro_batch < 1 or global_batch < 1 or seq < 1:
        _bad("seq, global batch and micro batch must be positive", "batch", ">= 1",
             min(seq, global_batch, micro_batch))
    bad = rules.batch(par.dp, par.tp, par.cp, par.sp, seq, global_batch, micro_batch)
    if bad:
        _bad(bad.message, bad.rule, bad.limit, bad.value, bad.hint)
    return global_batch // (par.dp * micro_batch)


def expert_groups(par: Parallel) -> tuple:
    """(ranks of the first expert-parallel group, ranks holding the same experts): EP over dp ranks, or over
    tp x dp ranks when ``par.etp`` is 1 and ep exceeds dp."""
    stride = par.tp * par.cp * par.pp
    if par.etp == par.tp or par.tp == 1:
        ep = [i * stride for i in range(par.ep)]
        same = [i * stride * par.ep for i in range(max(1, par.dp // par.ep))]
    else:
        per = par.ep // par.tp                 # data-parallel groups one EP group spans
        ep = [t + i * stride for i in range(per) for t in range(par.tp)]
        same = [i * stride * per for i in range(max(1, par.dp // per))]
    return ep, same


def group_ranks(par: Parallel, kind: str) -> List[int]:
    """Ranks of the first group of ``kind`` (tp/cp/pp/dp/ep) in the TP-innermost, DP-outermost layout."""
    stride = {"tp": 1, "cp": par.tp, "pp": par.tp * par.cp, "dp": par.tp * par.cp * par.pp,
              "ep": par.tp * par.cp * par.pp}[kind]
    size = {"tp": par.tp, "cp": par.cp, "pp": par.pp, "dp": par.dp, "ep": par.ep}[kind]
    return [i * stride for i in range(size)]


__all__ = ["Parallel", "ParallelError", "System", "check_batch", "group_ranks", "make_system", "resolve"]

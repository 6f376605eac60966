"""The divisibility rules of a parallel layout, once: ``model.parallel.resolve`` / ``check_batch`` raise on
the first one broken, the planner (a layer up) counts them over its grid.  Plain integer arithmetic on a
model's few structural facts, because the planner asks them for every point of its grid."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, NamedTuple, Optional

# rule -> what it means, in the order they are checked (a layout is charged to the first it breaks)
RULES: Dict[str, str] = {
    "parallel-cores": "tp x pp x cp (x dp) does not tile the system's ranks",
    "parallel-tp-heads": "tp does not divide the attention heads",
    "parallel-tp-kv-heads": "tp and the KV heads do not divide one another",
    "parallel-pp-layers": "pp x vp exceeds the layers",
    "parallel-ep": "expert parallelism needs an MoE model",
    "parallel-ep-experts": "ep does not divide the routed experts",
    "parallel-ep-dp": "ep divides neither dp nor dp x tp (experts over data-parallel, or tp x dp, ranks)",
    "parallel-sp": "sequence parallel needs tp > 1",
    "batch-dp": "the global batch is not a multiple of dp x micro batch",
    "parallel-cp-seq": "cp does not divide the sequence length",
    "parallel-sp-seq": "sequence parallel needs tp x cp to divide the sequence length",
}


@dataclass(frozen=True)
class ModelFacts:
    """What the layout rules need to know about a model."""
    name: str
    heads: int
    kv_heads: int
    is_mla: bool
    layers: int
    experts: int      # routed experts; 0 for a dense model

    @classmethod
    def of(cls, cfg) -> "ModelFacts":
        """The facts of a ``ModelConfig``."""
        return cls(name=cfg.name, heads=cfg.heads, kv_heads=cfg.n_kv, is_mla=cfg.is_mla, layers=cfg.layers,
                   experts=cfg.experts if cfg.is_moe else 0)


class Broken(NamedTuple):
    """One broken rule: its name, the message with the numbers, the limit, the value seen, a hint."""
    rule: str
    message: str
    limit: object
    value: object
    hint: Optional[str] = None


def structure(m: ModelFacts, ranks: int, tp: int, pp: int, cp: int = 1, ep: int = 1, vp: int = 1,
              sp: bool = False, dp: int = 0, where: str = "", unit: str = "ranks", pad_heads: bool = False
              ) -> Optional[Broken]:
    """The first rule the degrees break against the model and ``ranks`` ranks, or None.  ``dp`` 0: the
    ranks the model-parallel group leaves (``ranks // (tp x pp x cp)``); ``unit`` names the ranks (logical
    NeuronCores, GPUs) and ``where`` the system, for the message."""
    mp = tp * pp * cp
    if ranks % mp:
        return Broken("parallel-cores", f"tp x pp x cp = {mp} does not divide the {ranks} {unit}",
                      f"a divisor of {ranks}", mp)
    full = ranks // mp
    if dp and dp != full:
        return Broken("parallel-cores", f"tp x pp x cp x dp = {mp * dp} but the system has {ranks} {unit}{where}",
                      ranks, mp * dp, f"use --dp {full} or change --nodes")
    dp = dp or full
    if m.heads % tp and not pad_heads:   # serving pads the heads instead
        return Broken("parallel-tp-heads", f"tp={tp} does not divide the {m.heads} attention heads of {m.name}",
                      f"a divisor of {m.heads}", tp)
    if not m.is_mla and m.kv_heads % tp and tp % m.kv_heads and not pad_heads:
        return Broken("parallel-tp-kv-heads", f"tp={tp} and the {m.kv_heads} KV heads of {m.name} must divide "
                      "one another", f"a divisor or multiple of {m.kv_heads}", tp)
    if pp * vp > m.layers:   # an uneven split is a layout: the heaviest stage takes the extra layers
        return Broken("parallel-pp-layers", f"pp x vp = {pp * vp} exceeds the {m.layers} layers of {m.name}",
                      f"at most {m.layers}", pp * vp)
    if ep > 1:
        if not m.experts:
            return Broken("parallel-ep", f"expert parallelism needs an MoE model; {m.name} is dense", 1, ep)
        if m.experts % ep:
            return Broken("parallel-ep-experts", f"ep={ep} does not divide the {m.experts} experts of {m.name}",
                          f"a divisor of {m.experts}", ep)
        if dp % ep and (dp * tp) % ep:
            return Broken("parallel-ep-dp", f"ep={ep} must divide dp={dp} (experts over data-parallel ranks) or "
                          f"dp x tp = {dp * tp} (experts over the TP ranks too, expert tensor parallel 1)",
                          f"a divisor of {dp} or {dp * tp}", ep)
    if sp and tp == 1:
        return Broken("parallel-sp", "sequence parallel needs tp > 1", "tp > 1", tp)
    return None


def batch(dp: int, tp: int, cp: int, sp: bool, seq: int, global_batch: int, micro_batch: int
          ) -> Optional[Broken]:
    """The first batch or sequence rule a training step breaks, or None."""
    if global_batch % (dp * micro_batch):
        return Broken("batch-dp", f"global batch {global_batch} is not a multiple of dp x micro batch = "
                      f"{dp * micro_batch}", f"a multiple of {dp * micro_batch}", global_batch)
    if seq % cp:
        return Broken("parallel-cp-seq", f"cp={cp} does not divide the sequence length {seq}",
                      f"a divisor of {seq}", cp)
    if sp and seq % (tp * cp):
        return Broken("parallel-sp-seq", f"sequence parallel needs tp x cp = {tp * cp} to divide seq {seq}",
                      f"a divisor of {seq}", tp * cp)
    return None

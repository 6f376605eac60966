"""Structural rules a layout must meet before it is worth a memory check: the model layer's divisibility
rules (same names and order as ``model.parallel.resolve`` / ``check_batch``), then two of the planner's own.
Checked in plain integer arithmetic, because the planner asks them for every point of the grid."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, NamedTuple, Optional, Tuple

# rule -> what it means, in the order the planner checks them (a config is charged to the first it breaks)
RULES: Dict[str, str] = {
    "parallel-cores": "tp x pp x cp does not divide the system's logical NeuronCores",
    "parallel-tp-heads": "tp does not divide the attention heads",
    "parallel-tp-kv-heads": "tp and the KV heads do not divide one another",
    "parallel-pp-layers": "pp x vp exceeds the layers",
    "parallel-ep": "expert parallelism needs an MoE model",
    "parallel-ep-experts": "ep does not divide the routed experts",
    "parallel-ep-dp": "ep divides neither dp nor dp x tp (experts spread over data-parallel, or tp x dp, ranks)",
    "parallel-sp": "sequence parallel needs tp > 1",
    "batch-dp": "the global batch is not a multiple of dp x micro batch",
    "parallel-cp-seq": "cp does not divide the sequence length",
    "parallel-sp-seq": "sequence parallel needs tp x cp to divide the sequence length",
    "parallel-vp-pp": "interleaved virtual stages (vp > 1) need pp > 1",
    "duplicate-zero": "ZeRO-1 with dp = 1 shards nothing: the same layout as ZeRO-0, counted once",
    "memory-fit": "does not fit in the HBM of one logical NeuronCore",
}


class Config(NamedTuple):
    """One point of the search: instances, LNC and every parallel degree (dp follows from the rest)."""
    count: int
    lnc: int
    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    sp: bool
    zero: int
    micro_batch: int
    recompute: str
    dp: int = 0

    def label(self) -> str:
        """Short text of the layout, e.g. ``tp=8 pp=4 dp=32 mb=1 rc=full lnc=2``."""
        parts = [f"tp={self.tp}", f"pp={self.pp}"] + ([f"dp={self.dp}"] if self.dp else [])
        parts += [f"{k}={v}" for k, v in (("vp", self.vp), ("cp", self.cp), ("ep", self.ep)) if v > 1]
        parts += ["sp"] if self.sp else []
        parts += [f"zero={self.zero}", f"mb={self.micro_batch}", f"rc={self.recompute}", f"lnc={self.lnc}"]
        return " ".join(parts) + (f" x{self.count}" if self.count > 1 else "")

    def as_dict(self) -> Dict[str, object]:
        """Every field as a plain dict."""
        return dict(self._asdict())


@dataclass(frozen=True)
class ModelFacts:
    """What the structural rules need to know about a model."""
    name: str
    heads: int
    kv_heads: int
    is_mla: bool
    layers: int
    experts: int

    @classmethod
    def of(cls, cfg) -> "ModelFacts":
        """The facts of a ``ModelConfig``."""
        return cls(name=cfg.name, heads=cfg.heads, kv_heads=cfg.n_kv, is_mla=cfg.is_mla, layers=cfg.layers,
                   experts=cfg.experts if cfg.is_moe else 0)


def violation(c: Config, m: ModelFacts, cores: int, seq: int, global_batch: int
              ) -> Optional[Tuple[str, str]]:
    """The first rule ``c`` breaks as (rule, reason with the numbers), or None (``c.dp`` is recomputed)."""
    mp = c.tp * c.pp * c.cp
    if cores % mp:
        return "parallel-cores", f"tp x pp x cp = {mp} does not divide {cores} cores"
    dp = cores // mp
    if m.heads % c.tp:
        return "parallel-tp-heads", f"tp={c.tp} does not divide {m.heads} heads"
    if not m.is_mla and m.kv_heads % c.tp and c.tp % m.kv_heads:
        return "parallel-tp-kv-heads", f"tp={c.tp} and {m.kv_heads} KV heads do not divide one another"
    if c.pp * c.vp > m.layers:   # an uneven split is a layout (the heaviest stage takes the extra layers)
        return "parallel-pp-layers", f"pp x vp = {c.pp * c.vp} exceeds {m.layers} layers"
    if c.ep > 1:
        if not m.experts:
            return "parallel-ep", f"ep={c.ep} on dense {m.name}"
        if m.experts % c.ep:
            return "parallel-ep-experts", f"ep={c.ep} does not divide {m.experts} experts"
        if dp % c.ep and (dp * c.tp) % c.ep:   # experts over dp ranks, or over tp x dp (expert TP 1)
            return "parallel-ep-dp", f"ep={c.ep} divides neither dp={dp} nor dp x tp={dp * c.tp}"
    if c.sp and c.tp == 1:
        return "parallel-sp", "sp with tp=1"
    if global_batch % (dp * c.micro_batch):
        return "batch-dp", f"global batch {global_batch} is not a multiple of dp x mb = {dp * c.micro_batch}"
    if seq % c.cp:
        return "parallel-cp-seq", f"cp={c.cp} does not divide seq {seq}"
    if c.sp and seq % (c.tp * c.cp):
        return "parallel-sp-seq", f"tp x cp = {c.tp * c.cp} does not divide seq {seq}"
    if c.vp > 1 and c.pp == 1:
        return "parallel-vp-pp", f"vp={c.vp} with pp=1"
    if c.zero and dp == 1:
        return "duplicate-zero", "zero=1 with dp=1"
    return None

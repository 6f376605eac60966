"""Structural rules a layout must meet before it is worth a memory check: the model layer's layout rules
(``model.layout_rules``, the one copy ``resolve`` / ``check_batch`` raise from), then two of the planner's own
that only keep the search from estimating one layout twice."""
from __future__ import annotations

import math
from typing import Dict, NamedTuple, Optional, Tuple

from ..model.layout_rules import RULES as LAYOUT_RULES
from ..model.layout_rules import ModelFacts, batch, structure

# rule -> what it means, in the order the planner checks them (a config is charged to the first it breaks):
# the model layer's layout rules, then the planner's own
RULES: Dict[str, str] = {
    **LAYOUT_RULES,
    "parallel-vp-pp": "interleaved virtual stages (vp > 1) need pp > 1",
    "duplicate-zero": "ZeRO-1 with dp = 1 shards nothing: the same layout as ZeRO-0, counted once",
    "recompute-dominated": "an earlier recompute option of the same layout fits, and recomputing more is never "
                           "faster (searched with recompute_first_fit)",
    "memory-fit": "does not fit in the HBM of one rank (logical NeuronCore or GPU)",
}
PLANNER_ONLY = ("parallel-vp-pp", "duplicate-zero", "recompute-dominated")


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


def same_but_recompute(a: Config, b: Config) -> bool:
    """Whether two configurations are one layout with different recompute options."""
    return a._replace(recompute="") == b._replace(recompute="")


def layout_batch(dp: int, micro_batch: int, global_batch: int, batch_seqs: float) -> int:
    """The global batch of a layout: ``global_batch`` when given, else the fewest whole ``dp x micro_batch``
    rounds holding ``batch_seqs`` sequences (a tokens-per-step target divided by the sequence length)."""
    if global_batch:
        return global_batch
    return max(1, math.ceil(batch_seqs / (dp * micro_batch))) * dp * micro_batch


def violation(c: Config, m: ModelFacts, cores: int, seq: int, global_batch: int, batch_seqs: float = 0.0,
              zero_also_searched: bool = True) -> Optional[Tuple[str, str]]:
    """The first rule ``c`` breaks as (rule, reason with the numbers), or None (``c.dp`` is recomputed).
    ``global_batch`` 0: each layout's own (``layout_batch`` of ``batch_seqs``).  ZeRO-1 at dp = 1 is a
    duplicate only where ZeRO-0 is ``also searched``; else it is that layout's one copy."""
    bad = structure(m, cores, c.tp, c.pp, c.cp, c.ep, c.vp, c.sp)
    if bad is None:
        dp = cores // (c.tp * c.pp * c.cp)
        bad = batch(dp, c.tp, c.cp, c.sp, seq, layout_batch(dp, c.micro_batch, global_batch, batch_seqs),
                    c.micro_batch)
    if bad is not None:
        return bad.rule, bad.message
    if c.vp > 1 and c.pp == 1:
        return "parallel-vp-pp", f"vp={c.vp} with pp=1"
    if c.zero and dp == 1 and zero_also_searched:
        return "duplicate-zero", "zero=1 with dp=1"
    return None

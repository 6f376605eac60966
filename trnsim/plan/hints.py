"""The nearest layouts that fit, for an estimate refused for memory: the "try --tp 16 --zero 1" of its
message.  The same rules (``rules.violation``) and memory model as the planner's search, over a small
neighbourhood of the refused layout: fewest changed flags first, then the fewest model-parallel ranks.
Also the TP degrees a serving replica may take (``serving_tps``, what compare's serving search walks)."""
from __future__ import annotations

from typing import Callable, List, Mapping, Optional, Tuple

from ..model.config import ModelConfig
from ..model.layout_rules import ModelFacts, structure
from ..model.memory import training_memory
from ..model.parallel import Parallel
from .rules import Config, violation


def _doubles(x: int, per: int, ranks: int) -> List[int]:
    """``x`` and its doublings while ``value x per`` ranks still fit in ``ranks``."""
    out, v = [x], x * 2
    while v * per <= ranks:
        out.append(v)
        v *= 2
    return out


def _flags(changes: Tuple[Tuple[str, bool], ...]) -> List[str]:
    return [f for f, on in changes if on]


def nearest_training(cfg: ModelConfig, par: Parallel, ranks: int, hbm_per_rank: float, micro_batch: int,
                     seq: int, recompute: str, global_batch: int = 0, overrides: Optional[Mapping] = None,
                     limit: int = 2, tp_cap: int = 0) -> List[str]:
    """Up to ``limit`` flag sets (``"--tp 16 --zero 1"``) near ``par`` that pass every layout rule and fit:
    ZeRO-1, doubled TP (up to ``tp_cap`` ranks, the fastest domain; 0: all) or PP, full recompute.
    ``global_batch`` 0: dp x micro batch of each candidate."""
    facts = ModelFacts.of(cfg)
    found = []
    zeros = sorted({par.zero, 1} if par.dp > 1 or par.zero else {par.zero})
    for zero in zeros:
        for tp in _doubles(par.tp, par.pp * par.cp, ranks):
            if tp_cap and par.tp < tp > tp_cap:
                break
            for pp in _doubles(par.pp, tp * par.cp, ranks):
                for rc in sorted({recompute, "full"}, key=lambda r: r != recompute):
                    mp = tp * pp * par.cp
                    dp = ranks // mp if ranks % mp == 0 else 0
                    c = Config(1, 1, tp, pp, par.vp, par.cp, par.ep, par.sp, zero, micro_batch, rc, dp)
                    if not dp or violation(c, facts, ranks, seq, global_batch or dp * micro_batch):
                        continue
                    cand = Parallel(tp=tp, pp=pp, dp=dp, cp=par.cp, ep=par.ep, vp=par.vp, sp=par.sp, zero=zero)
                    if not training_memory(cfg, cand, micro_batch, seq, rc, hbm_per_rank, overrides).fits:
                        continue
                    flags = _flags(((f"--tp {tp}", tp != par.tp), (f"--pp {pp}", pp != par.pp),
                                    ("--zero 1", zero != par.zero), ("--recompute full", rc != recompute)))
                    if flags:   # the refused layout itself is no suggestion
                        found.append((len(flags), tp * pp, " ".join(flags)))
    found.sort()
    return [f for _, _, f in found[:limit]]


def nearest_inference(tp: int, pp: int, ranks: int, fits: Callable[[int, int], bool], limit: int = 1,
                      tp_cap: int = 0) -> List[str]:
    """Up to ``limit`` flag sets (``"--tp 16"``) of a serving replica larger than tp x pp within ``ranks`` ranks
    (TP within ``tp_cap``, the fastest domain; 0: all) that ``fits(tp, pp)`` accepts (the estimator's own
    serving rules and memory fit): fewest changed flags, then fewest ranks, then the shallower pipeline."""
    found = []
    for t in _doubles(tp, pp, ranks):
        if tp_cap and tp < t > tp_cap:
            break
        for p in _doubles(pp, t, ranks):
            if (t, p) == (tp, pp) or not fits(t, p):
                continue
            flags = _flags(((f"--tp {t}", t != tp), (f"--pp {p}", p != pp)))
            found.append((len(flags), t * p, p, " ".join(flags)))   # on a tie, the shallower pipeline
    found.sort()
    return [f for *_, f in found[:limit]]


def serving_tps(cfg: ModelConfig, cap: int) -> List[int]:
    """TP degrees of a serving replica, powers of two up to ``cap``, that the layout rules allow (at least 1)."""
    facts = ModelFacts.of(cfg)
    out, t = [], 1
    while t <= cap:
        if structure(facts, t, t, 1) is None:
            out.append(t)
        t *= 2
    return out or [1]

"""What every estimate starts from: the model, the system, the precision, the op costs, the collectives
model and the calibration, resolved and checked once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from .colltable import add_group
from .comm import DEFAULT_COMM, CommModel, default_comm
from .config import ModelConfig, load_model
from .costing import Costing
from .efficiency import Calibration
from .ops import OpCosts, RooflineOpCosts
from .precision import Precision
from .system import SystemModel, make_system
from .transformer import Layout


@dataclass
class Context:
    """Resolved inputs of one estimate."""
    cfg: ModelConfig
    system: SystemModel
    prec: Precision
    roof: Optional[RooflineOpCosts]
    costing: Costing
    comm: CommModel
    calib: Calibration
    comm_name: str
    _comm_memo: dict = field(default_factory=dict)

    def layout(self, par, act_bytes: float = 2.0, weight_bytes: Optional[float] = None) -> Layout:
        """The per-rank Layout of a parallel plan in this context."""
        return Layout(tp=par.tp, sp=par.sp, ep=par.ep, cp=par.cp, pp=par.pp, mm_dtype=self.prec.op_dtype,
                      weight_bytes=self.prec.weight_bytes if weight_bytes is None else weight_bytes,
                      act_bytes=act_bytes)

    def comm_s(self, op: str, size: float, ranks) -> float:
        """Seconds of one collective: one call into the system's collective model, nothing added
        (memoised: a flow-level model may be slow)."""
        if len(ranks) <= 1 or size <= 0:
            return 0.0
        key = (op, float(size), tuple(ranks))
        t = self._comm_memo.get(key)
        if t is None:
            t = self._comm_memo[key] = self.comm.time_s(op, size, list(ranks))
        return t

    def charge(self, op: str, size: float, ranks, calls: float, tally: Optional[dict] = None,
               groups: Optional[dict] = None) -> float:
        """Seconds of ``calls`` identical collectives, recorded per kind in ``tally`` (calls, seconds and the
        buffer bytes summed over the calls) and per (op, size, group) in ``groups`` (calls: the size x group
        table, rows made only when the result is)."""
        t = calls * self.comm_s(op, size, ranks)
        if t > 0:
            if tally is not None:
                add_collective(tally, op, calls, t, calls * size)
            if groups is not None:
                add_group(groups, op, size, ranks, calls)
        return t


def add_collective(tally: dict, op: str, calls: float, seconds: float, nbytes: float) -> None:
    """Add ``calls`` collectives of kind ``op`` to a per-kind tally ``{op: {calls, seconds, bytes}}``."""
    e = tally.setdefault(op, {"calls": 0.0, "seconds": 0.0, "bytes": 0.0})
    e["calls"] += calls
    if float(e["calls"]).is_integer():
        e["calls"] = int(e["calls"])
    e["seconds"] += seconds
    e["bytes"] += nbytes


def make_context(model: Union[str, ModelConfig], instance: Union[str, SystemModel], nodes: int = 1,
                 lnc: Optional[int] = None, precision: str = "bf16", sparsity: Optional[str] = None,
                 costs: Optional[OpCosts] = None, comm: Union[None, str, CommModel] = None,
                 hardware_file: Optional[str] = None, efficiency: Optional[Mapping[str, float]] = None,
                 training: bool = True) -> Context:
    """Resolve every input of an estimate on any system (a catalog key or a ``SystemModel``); defaults: the
    system's own op costs and its collective model."""
    cfg = model if isinstance(model, ModelConfig) else load_model(model)
    system = instance if not isinstance(instance, str) else make_system(instance, nodes, lnc, hardware_file)
    prec = system.precision(precision, sparsity)
    roof = system.roofline(prec)
    how = "roofline"
    if costs is None:
        costs = system.op_costs(prec, training, efficiency)
    else:
        how = getattr(costs, "calibration_key", "simulated")
    calib = system.calibration(how, training, efficiency)
    if comm is None or isinstance(comm, str):
        comm = default_comm(system, hardware_file, comm or DEFAULT_COMM)
    return Context(cfg=cfg, system=system, prec=prec, roof=roof, costing=Costing(costs, roof, calib), comm=comm,
                   calib=calib, comm_name=type(comm).__name__)


__all__ = ["Context", "make_context"]

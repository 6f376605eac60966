"""What every estimate starts from: the model, the system, the precision, the op costs, the collectives
model and the calibration, resolved and checked once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from .comm import DEFAULT_COMM, AlphaBetaComm, CommModel, default_comm
from .config import ModelConfig, load_model
from .costing import Costing
from .efficiency import Calibration, calibration_for
from .ops import OpCosts, RooflineOpCosts
from .parallel import System, make_system
from .precision import Precision, resolve
from .transformer import Layout


@dataclass
class Context:
    """Resolved inputs of one estimate."""
    cfg: ModelConfig
    system: System
    prec: Precision
    roof: RooflineOpCosts
    costing: Costing
    comm: CommModel
    calib: Calibration
    comm_name: str
    _comm_memo: dict = field(default_factory=dict)

    def layout(self, par, act_bytes: float = 2.0, weight_bytes: Optional[float] = None) -> Layout:
        """The per-core Layout of a parallel plan in this context."""
        return Layout(tp=par.tp, sp=par.sp, ep=par.ep, cp=par.cp, pp=par.pp, mm_dtype=self.prec.op_dtype,
                      weight_bytes=self.prec.weight_bytes if weight_bytes is None else weight_bytes,
                      act_bytes=act_bytes)

    def comm_s(self, op: str, size: float, ranks) -> float:
        """Calibrated seconds of one collective (memoised: a flow-level model may be slow)."""
        if len(ranks) <= 1 or size <= 0:
            return 0.0
        key = (op, float(size), tuple(ranks))
        t = self._comm_memo.get(key)
        if t is None:
            # the calibrated fixed cost of launching one collective (runtime + synchronisation) comes on top
            t = self.comm.time_s(op, size, list(ranks)) / self.calib.factor("comm") + self.calib.overhead_s
            self._comm_memo[key] = t
        return t


def make_context(model: Union[str, ModelConfig], instance: str, nodes: int = 1, lnc: Optional[int] = None,
                 precision: str = "bf16", sparsity: Optional[str] = None, costs: Optional[OpCosts] = None,
                 comm: Union[None, str, CommModel] = None, hardware_file: Optional[str] = None,
                 efficiency: Optional[Mapping[str, float]] = None) -> Context:
    """Resolve every input of an estimate; defaults: roofline op costs and the fabric's comm."""
    cfg = model if isinstance(model, ModelConfig) else load_model(model)
    system = make_system(instance, nodes, lnc, hardware_file)
    prec = resolve(precision, sparsity, system.core, system.chip)
    roof = RooflineOpCosts(system.core, system.chip, system.lnc, sparse_speedup=prec.sparse_speedup)
    how = "roofline"
    if costs is None:
        costs = roof
    else:
        how = getattr(costs, "calibration_key", "simulated")
    calib = calibration_for(system.target, how, efficiency)
    if comm is None or isinstance(comm, str):
        comm = default_comm(system, hardware_file, comm or DEFAULT_COMM)
    name = type(comm).__name__
    if calib.comm_model and name != calib.comm_model:
        from dataclasses import replace as _replace
        calib = _replace(calib, note=(calib.note + "; " if calib.note else "") +
                         f"calibrated with {calib.comm_model}, collectives now timed by {name}")
    return Context(cfg=cfg, system=system, prec=prec, roof=roof, costing=Costing(costs, roof, calib), comm=comm,
                   calib=calib, comm_name=name)


__all__ = ["AlphaBetaComm", "Context", "make_context"]

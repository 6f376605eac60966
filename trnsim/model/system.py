"""The system an estimate runs on, as one declared protocol that Trainium instances / UltraServers and GPU
systems both implement: ranks, memory per rank, device peak rates, op costs, calibration and the collective
model.  ``make_system`` resolves any catalog key (trn1.32xlarge, trn2-ultraserver, p5.48xlarge,
gb300-nvl72, ...) to one.

Ranks are what the frameworks count: logical NeuronCores on Trainium (32 on a trn1.32xlarge, 64 on a
trn2.48xlarge with LNC=2), GPUs on a GPU system (the GPUs of one NVLink domain consecutive).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Mapping, Optional, Protocol, runtime_checkable

from ..errors import ConfigError
from ..hardware import load_catalog
from ..hardware.schema import ChipSpec, CoreSpec, InstanceSpec
from .comm import CommModel
from .efficiency import Calibration, calibration_for
from .ops import OpCosts, RooflineOpCosts
from .precision import Precision, resolve as resolve_precision


class ParallelError(ConfigError):
    """Parallel degrees that do not divide the model or the machine."""
    rule = "parallel"


@runtime_checkable
class SystemModel(Protocol):
    """What the estimators read of a machine; ``TrainiumSystem`` and ``gpu.system.GpuSystem`` implement it."""
    key: str            # catalog key: what prices, power and the fabric look the system up by
    nodes: int          # instances (or racks) joined by the scale-out network
    lnc: int            # ranks per device are device cores / lnc (1 on a GPU)
    rank_name: str      # "NeuronCore" or "GPU": the word refusals use

    @property
    def cores(self) -> int:
        """Ranks of the whole system."""
        ...

    @property
    def cores_per_node(self) -> int:
        """Ranks of one instance."""
        ...

    @property
    def lncs(self) -> tuple:
        """The LNC settings the system may run at (what a layout search enumerates; (1,) on a GPU)."""
        ...

    @property
    def fast_domain(self) -> int:
        """Ranks joined by the fastest fabric (a Trainium instance, an NVLink domain)."""
        ...

    @property
    def hbm_bytes_per_core(self) -> float:
        """Device memory of one rank."""
        ...

    @property
    def target(self) -> str:
        """The device generation the calibration is keyed by (trn1, trn2, h100-sxm, ...)."""
        ...

    def usable_chip_bytes(self, reserved_per_rank: float) -> float:
        """Memory of one chip (a GPU) left for weights and KV after each rank's runtime reserve."""
        ...

    def memory_overrides(self) -> Mapping[str, float]:
        """Estimator figures this system replaces (a GPU's own runtime reserve)."""
        ...

    def precision(self, name: str, sparsity: Optional[str] = None) -> Precision:
        """How matmuls run in format ``name`` on this system (an error where the device lacks it)."""
        ...

    def peak_flops_per_rank(self, prec: Precision) -> float:
        """Vendor-stated dense peak of one rank in ``prec`` (MFU's denominator)."""
        ...

    def op_costs(self, prec: Precision, training: bool,
                 efficiency: Optional[Mapping[str, float]] = None) -> OpCosts:
        """The default per-op cost provider on one rank."""
        ...

    def roofline(self, prec: Precision) -> Optional[RooflineOpCosts]:
        """The roofline that classifies ops for the calibration (None: factors are inside the op costs)."""
        ...

    def calibration(self, how: str, training: bool, efficiency: Optional[Mapping[str, float]] = None
                    ) -> Calibration:
        """Efficiency factors, error bands and the calibration rows they come from."""
        ...

    def collectives(self, hardware_file: Optional[str] = None, simulate: bool = False) -> CommModel:
        """The collective model: seconds of one collective over this system's ranks, runtime included."""
        ...


@dataclass(frozen=True)
class TrainiumSystem:
    """``nodes`` Trainium / Inferentia instances (or UltraServers) of one kind, at one LNC setting."""
    instance: InstanceSpec
    chip: ChipSpec
    core: CoreSpec
    nodes: int = 1
    lnc: int = 1
    rank_name: str = "NeuronCore"

    @property
    def key(self) -> str:
        """The instance's catalog key."""
        return self.instance.key

    @property
    def cores_per_chip(self) -> int:
        """Logical NeuronCores per chip."""
        return self.chip.cores // self.lnc

    @property
    def cores_per_node(self) -> int:
        """Logical NeuronCores per instance."""
        return self.cores_per_chip * self.instance.chips

    @property
    def lncs(self) -> tuple:
        """The LNC settings the core supports."""
        return tuple(sorted(self.core.lnc))

    @property
    def cores(self) -> int:
        """Logical NeuronCores of the whole system."""
        return self.cores_per_node * self.nodes

    @property
    def fast_domain(self) -> int:
        """Logical NeuronCores of one instance (NeuronLink inside, EFA between)."""
        return self.cores_per_node

    @property
    def hbm_bytes_per_core(self) -> int:
        """HBM bytes of one logical NeuronCore."""
        return self.chip.hbm_bytes // self.chip.cores * self.lnc

    @property
    def target(self) -> str:
        """trn1 / trn2 / trn3."""
        return self.chip.target

    def usable_chip_bytes(self, reserved_per_rank: float) -> float:
        """HBM of one chip less the runtime reserve of each of its physical cores."""
        return self.chip.hbm_bytes - self.chip.cores * reserved_per_rank

    def memory_overrides(self) -> Mapping[str, float]:
        """None: the estimator's figures are the Trainium ones."""
        return {}

    def precision(self, name: str, sparsity: Optional[str] = None) -> Precision:
        """The format checked against the generation (MX needs trn3, sparsity trn2+)."""
        return resolve_precision(name, sparsity, self.core, self.chip)

    def peak_flops_per_rank(self, prec: Precision) -> float:
        """Stated dense peak of the chip in ``prec`` shared by its logical cores."""
        pf = self.chip.peak_flops
        rate = {"bf16": pf.bf16, "fp8": pf.fp8 or pf.bf16, "mxfp8": pf.mxfp8, "mxfp4": pf.mxfp8}[prec.name]
        return (rate or pf.bf16) / self.chip.cores * self.lnc

    def op_costs(self, prec: Precision, training: bool,
                 efficiency: Optional[Mapping[str, float]] = None) -> OpCosts:
        """The catalog roofline (the api layer injects simulated kernel costs instead)."""
        return self.roofline(prec)

    def roofline(self, prec: Precision) -> RooflineOpCosts:
        """Roofline of one logical core at the format's sparse speed-up."""
        return RooflineOpCosts(self.core, self.chip, self.lnc, sparse_speedup=prec.sparse_speedup)

    def calibration(self, how: str, training: bool, efficiency: Optional[Mapping[str, float]] = None
                    ) -> Calibration:
        """The generation's factors for op costs obtained ``how`` (data/calibration.toml; inference takes the
        generation's serving-fitted section where it has one)."""
        return calibration_for(self.target, how, efficiency, serving=not training)

    def collectives(self, hardware_file: Optional[str] = None, simulate: bool = False) -> CommModel:
        """trnsim.fabric with its runtime constants: what ``trnsim collective`` prints."""
        from ..fabric import FabricComm
        return FabricComm(self.key, instances=self.nodes, lnc=self.lnc, hardware_file=hardware_file,
                          simulate=simulate)


# The Trainium system under its historical name (``model.parallel.System``).
System = TrainiumSystem


def make_system(key: str, nodes: int = 1, lnc: Optional[int] = None,
                hardware_file: Optional[str] = None) -> SystemModel:
    """The system named ``key``: a Trainium instance / UltraServer (LNC defaults to the largest the core
    supports, Neuron's trn2 default) or a GPU system from the same catalog (LNC must be 1 or absent)."""
    if nodes < 1:
        raise ParallelError("--nodes must be at least 1", rule="nodes", limit=">= 1", value=nodes)
    cat = load_catalog(hardware_file)
    try:
        inst = cat.instance(key)
    except ConfigError:
        from .gpu.system import gpu_system, gpu_system_names, is_gpu_system
        if not is_gpu_system(key, hardware_file):
            known = sorted(cat.instances) + gpu_system_names(hardware_file)
            near = difflib.get_close_matches(str(key), known, n=3, cutoff=0.5)
            raise ConfigError(f"unknown system {key!r}: not a Trainium instance or UltraServer, nor a GPU system",
                              rule="instance", limit=known, value=key,
                              hint=(f"did you mean {', '.join(near)}? " if near else "") + "see `trnsim hw list`") \
                from None
        if lnc not in (None, 1):
            raise ParallelError(f"LNC={lnc} applies to NeuronCores; a GPU system has one rank per GPU",
                                rule="lnc", limit=[1], value=lnc) from None
        return gpu_system(key, nodes, hardware_file)
    chip = cat.chips[inst.chip]
    core = cat.cores[chip.core]
    lnc = max(core.lnc) if lnc is None else int(lnc)
    if lnc not in core.lnc:
        raise ParallelError(f"LNC={lnc} is not available on {chip.name}", rule="lnc", limit=list(core.lnc),
                            value=lnc)
    return TrainiumSystem(instance=inst, chip=chip, core=core, nodes=int(nodes), lnc=lnc)

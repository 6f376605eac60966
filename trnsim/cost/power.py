"""Power and energy inputs: accelerator power from the hardware catalog (Trainium chips' ``tdp_watts`` in
chips.toml, GPUs' in gpus.toml, both overridable by one ``--hardware`` file), host overhead, PUE and
utilization scaling from cost/data/power.toml.  Formulas are in the header of power.toml."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Dict, Mapping, Optional

from ..errors import ConfigError, HardwareFileError
from ..hardware.catalog import load_catalog
from ..hardware.figures import Figure, read_toml, unwrap_figures
from ..hardware.gpus import load_gpu_catalog
from .prices import canonical_system

POWER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "power.toml")


class PowerError(ConfigError):
    """A power figure is missing or out of range."""
    rule = "power"


@dataclass(frozen=True)
class PowerModel:
    """PUE, host overhead, idle fraction and Trainium chip watts (from the catalog, with the caller's
    overrides; GPU watts come from the catalog's GPUs)."""
    pue: float
    host_overhead_fraction: float
    idle_fraction: float
    chip_watts: Mapping[str, float]
    system_watts: Mapping[str, float] = field(default_factory=dict)  # measured IT watts, busy, per system
    provenance: Mapping[str, Figure] = field(default_factory=dict, compare=False, repr=False)
    hardware_file: Optional[str] = None   # the --hardware file merged over the catalog

    def __post_init__(self):
        _check("pue", self.pue, 1.0, 5.0)
        _check("host_overhead_fraction", self.host_overhead_fraction, 0.0, 5.0)
        _check("idle_fraction", self.idle_fraction, 0.0, 1.0)
        for k, v in self.chip_watts.items():
            _check(f"chip_watts[{k}]", v, 1e-9, 1e6)
        for k, v in self.system_watts.items():
            _check(f"system_watts[{k}]", v, 1e-9, 1e8)

    def with_overrides(self, pue: Optional[float] = None, host_overhead_fraction: Optional[float] = None,
                       idle_fraction: Optional[float] = None,
                       chip_watts: Optional[Mapping[str, float]] = None,
                       system_watts: Optional[Mapping[str, float]] = None) -> "PowerModel":
        """A copy with the caller's figures (``chip_watts={"trn2": 450}`` adds to / replaces the file's;
        ``system_watts={"p5.48xlarge": 9000}``: a measured busy IT draw that replaces chips + host)."""
        kw = {k: v for k, v in (("pue", pue), ("host_overhead_fraction", host_overhead_fraction),
                                ("idle_fraction", idle_fraction)) if v is not None}
        if chip_watts:
            kw["chip_watts"] = {**self.chip_watts, **{k.lower(): float(v) for k, v in chip_watts.items()}}
        if system_watts:
            kw["system_watts"] = {**self.system_watts,
                                  **{canonical_system(k): float(v) for k, v in system_watts.items()}}
        return replace(self, **kw)


def _check(name: str, v, lo: float, hi: float) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise PowerError(f"{name} out of range", limit=f"{lo}..{hi}", value=v)


def load_power_model(path: Optional[str] = None, hardware_file: Optional[str] = None) -> PowerModel:
    """Power defaults from power.toml (or ``path``), chip watts from the hardware catalog (with
    ``hardware_file`` merged over it); a missing or malformed figure is an error naming its key."""
    p = path or POWER_FILE
    raw = read_toml(p, "power-file")
    prov: Dict[str, Figure] = {}
    tags = raw.get("sources", {})
    vals = unwrap_figures({k: v for k, v in raw.items() if k != "sources"}, "", p, prov, tags, "data-file")
    d = vals.get("defaults", {})
    for k in ("pue", "host_overhead_fraction", "idle_fraction"):
        if k not in d:
            raise HardwareFileError(f"{p}: missing defaults.{k}", rule="power-file-missing",
                                    value=f"defaults.{k}")
    if "chips" in vals:
        raise HardwareFileError(f"{p}: chip power lives in the hardware catalog", rule="power-file-chips",
                                limit="chips.<chip>.tdp_watts in a --hardware file", value="chips",
                                hint="write [chips.<chip>] tdp_watts = { value = W, source = ... } in a hardware file")
    chips = {k: c.tdp_watts for k, c in load_catalog(hardware_file).chips.items() if c.tdp_watts > 0}
    try:
        return PowerModel(pue=d["pue"], host_overhead_fraction=d["host_overhead_fraction"],
                          idle_fraction=d["idle_fraction"], chip_watts=chips, provenance=prov,
                          hardware_file=hardware_file)
    except PowerError as e:
        raise HardwareFileError(f"{p}: {e.message}", rule="power-file-range", limit=e.limit,
                                value=e.value) from None


@dataclass(frozen=True)
class SystemPower:
    """Running power of one system (instance or rack) at a utilization, before and after PUE."""
    system: str
    accelerator: str
    accelerators: int
    watts_per_accelerator: float
    utilization: float
    accelerator_watts: float
    host_watts: float
    it_watts: float
    pue: float
    facility_watts: float

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return asdict(self)


def accelerator_of(system: str, model: PowerModel) -> tuple:
    """``(accelerator name, count, watts each)`` for a Trainium/Inferentia instance or a GPU system."""
    key = canonical_system(system)
    gpus = load_gpu_catalog(user_file=model.hardware_file)
    if gpus.has_system(key):
        s = gpus.system(key)
        return s.gpu, s.gpus, gpus.gpus[s.gpu].tdp_watts
    try:
        inst = load_catalog(model.hardware_file).instance(key)
    except ConfigError:
        raise PowerError(f"unknown system {system!r}: not a Trainium/Inferentia instance or GPU system",
                         value=system, hint="see `trnsim hw list`") from None
    if inst.chip not in model.chip_watts:
        raise PowerError(f"no power figure for chip {inst.chip} of {key}", limit=sorted(model.chip_watts),
                         value=inst.chip, hint=f"pass chip_watts={{'{inst.chip}': WATTS}}")
    return inst.chip, inst.chips, model.chip_watts[inst.chip]


def system_power(system: str, utilization: float = 1.0, model: Optional[PowerModel] = None) -> SystemPower:
    """Power of one ``system`` with its accelerators busy ``utilization`` of the time (0..1)."""
    _check("utilization", utilization, 0.0, 1.0)
    m = model or load_power_model()
    name, n, w = accelerator_of(system, m)
    acc = n * w * (m.idle_fraction + (1.0 - m.idle_fraction) * utilization)
    host = m.host_overhead_fraction * n * w
    measured = m.system_watts.get(canonical_system(system))
    if measured is not None:
        # a measured busy draw: keep the model's accelerator/host split and idle scaling, rescaled to it
        scale = measured / (n * w * (1.0 + m.host_overhead_fraction))
        acc, host = acc * scale, host * scale
    it = acc + host
    return SystemPower(system=canonical_system(system), accelerator=name, accelerators=n,
                       watts_per_accelerator=w, utilization=utilization, accelerator_watts=acc,
                       host_watts=host, it_watts=it, pue=m.pue, facility_watts=it * m.pue)

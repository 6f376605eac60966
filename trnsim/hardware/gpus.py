"""GPUs and GPU systems in the hardware catalog: ``data/gpus.toml`` -> frozen ``GpuSpec`` / ``GpuSystemSpec`` with
provenance.

The built-in file is reached through the hardware catalog, so a ``--hardware`` / ``TRNSIM_HARDWARE`` file
with a ``[gpus]`` section overrides GPU figures exactly as it overrides Trainium ones.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from ..errors import ConfigError, HardwareFileError
from .catalog import instance_name_key, load_catalog
from .loader import DATA_DIR, build
from .figures import Figure, read_toml, unwrap_figures

GPU_FILE = os.path.join(DATA_DIR, "gpus.toml")
PRECISIONS = ("bf16", "fp8", "fp4")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: dense tensor FLOP/s per precision (None = not supported), HBM, NVLink, TDP."""
    key: str
    name: str
    bf16_flops: float
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    nvlink_bandwidth_bytes_per_s: float
    tdp_watts: float
    fp8_flops: Optional[float] = None
    fp4_flops: Optional[float] = None
    provenance: Mapping[str, Figure] = field(default_factory=dict, compare=False, repr=False)

    def peak_flops(self, precision: str) -> float:
        """Dense tensor FLOP/s at ``precision`` (bf16 | fp8 | fp4); an error if the GPU lacks it."""
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown GPU precision {precision!r}", rule="precision",
                              limit=PRECISIONS, value=precision)
        v = getattr(self, f"{precision}_flops")
        if not v:
            have = [p for p in PRECISIONS if getattr(self, f"{p}_flops")]
            raise ConfigError(f"{self.name} has no {precision} tensor rate", rule="precision",
                              limit=have, value=precision, hint=f"use one of {have}")
        return float(v)


@dataclass(frozen=True)
class GpuSystemSpec:
    """A priced GPU system (an EC2 instance or a rack): ``gpus`` x ``gpu``, NVLink domain, network."""
    key: str
    name: str
    kind: str  # "instance" or "rack"
    gpu: str
    gpus: int
    nvlink_domain: int
    network_bandwidth_bits_per_s: float
    vcpus: int = 0
    host_memory_bytes: float = 0.0
    system_power_watts: Optional[float] = None
    aliases: Tuple[str, ...] = ()
    provenance: Mapping[str, Figure] = field(default_factory=dict, compare=False, repr=False)

    @property
    def network_bits_per_s_per_gpu(self) -> float:
        """Scale-out bandwidth of one GPU (system figure / GPUs)."""
        return self.network_bandwidth_bits_per_s / self.gpus


@dataclass(frozen=True)
class GpuCatalog:
    """All GPUs and GPU systems, plus the source tags they cite."""
    gpus: Mapping[str, GpuSpec]
    systems: Mapping[str, GpuSystemSpec]
    tags: Mapping[str, Mapping[str, str]]

    def system(self, name: str) -> GpuSystemSpec:
        """A system by key or alias, case-insensitively."""
        want = instance_name_key(name)
        for s in self.systems.values():
            if want in [instance_name_key(s.key)] + [instance_name_key(a) for a in s.aliases]:
                return s
        raise ConfigError(f"unknown GPU system {name!r}", rule="gpu-system", limit=sorted(self.systems),
                          value=name)

    def gpu(self, name: str) -> GpuSpec:
        """A GPU by key (h100-sxm, b200, ...) or by the name of a system that holds it."""
        key = str(name).strip().lower()
        if key in self.gpus:
            return self.gpus[key]
        try:
            return self.gpus[self.system(name).gpu]
        except ConfigError:
            raise ConfigError(f"unknown GPU {name!r}", rule="gpu", limit=sorted(self.gpus),
                              value=name) from None

    def has_system(self, name: str) -> bool:
        """Whether ``name`` is a GPU system key or alias."""
        try:
            self.system(name)
            return True
        except ConfigError:
            return False


def parse_gpu_catalog(raw: Mapping, file: str) -> GpuCatalog:
    """Validate the ``gpus.toml`` layout; any malformed entry raises HardwareFileError naming its key."""
    for sect in ("tags", "gpus", "systems"):
        if not isinstance(raw.get(sect), Mapping):
            raise HardwareFileError(f"{file}: missing [{sect}] table", rule="hardware-file-missing",
                                    value=sect)
    unknown = set(raw) - {"tags", "gpus", "systems"}
    if unknown:
        raise HardwareFileError(f"{file}: unknown top-level keys {sorted(unknown)}",
                                rule="hardware-file-unknown-key", limit=["tags", "gpus", "systems"],
                                value=sorted(unknown))
    tags = raw["tags"]
    gpus: Dict[str, GpuSpec] = {}
    for key, table in raw["gpus"].items():
        prov: Dict[str, Figure] = {}
        vals = _table(table, f"gpus.{key}", file, prov, tags)
        spec = build(GpuSpec, vals, f"gpus.{key}", file, key=key, provenance=prov)
        for p in PRECISIONS:
            v = getattr(spec, f"{p}_flops")
            if v is not None and v <= 0:
                raise HardwareFileError(f"{file}: gpus.{key}.{p}_flops must be positive",
                                        rule="hardware-file-range", limit="> 0", value=v)
        for name in ("hbm_bandwidth_bytes_per_s", "tdp_watts", "hbm_bytes"):
            if getattr(spec, name) <= 0:
                raise HardwareFileError(f"{file}: gpus.{key}.{name} must be positive",
                                        rule="hardware-file-range", limit="> 0", value=getattr(spec, name))
        gpus[key] = spec
    systems: Dict[str, GpuSystemSpec] = {}
    for key, table in raw["systems"].items():
        prov = {}
        vals = _table(table, f"systems.{key}", file, prov, tags)
        spec = build(GpuSystemSpec, vals, f"systems.{key}", file, key=key, provenance=prov)
        where = f"{file}: systems.{key}"
        if spec.gpu not in gpus:
            raise HardwareFileError(f"{where}.gpu names unknown GPU {spec.gpu!r}",
                                    rule="hardware-file-reference", limit=sorted(gpus), value=spec.gpu)
        if spec.kind not in ("instance", "rack"):
            raise HardwareFileError(f"{where}.kind must be instance or rack", rule="hardware-file-range",
                                    limit=("instance", "rack"), value=spec.kind)
        if spec.gpus < 1 or spec.nvlink_domain < 1 or spec.nvlink_domain > spec.gpus:
            raise HardwareFileError(f"{where}: need 1 <= nvlink_domain <= gpus", rule="hardware-file-range",
                                    limit=f"1..{spec.gpus}", value=spec.nvlink_domain)
        systems[key] = spec
    return GpuCatalog(gpus=gpus, systems=systems, tags=tags)


def _table(table, path: str, file: str, prov: Dict[str, Figure], tags) -> dict:
    if not isinstance(table, Mapping):
        raise HardwareFileError(f"{file}: [{path}] must be a table", rule="hardware-file-type",
                                value=type(table).__name__)
    return unwrap_figures(table, path, file, prov, tags)


@functools.lru_cache(maxsize=8)
def _cached(path: Optional[str], user_file: Optional[str], stamp: tuple = ()) -> GpuCatalog:
    if path:
        return parse_gpu_catalog(read_toml(path, "hardware-file"), path)
    raw = load_catalog(user_file).extra.get("gpus")
    if raw is None:
        raise HardwareFileError(f"no GPU data: {GPU_FILE} is missing", rule="hardware-file", value=GPU_FILE)
    return parse_gpu_catalog(raw, GPU_FILE + (f" + {user_file}" if user_file else ""))


def load_gpu_catalog(path: Optional[str] = None, user_file: Optional[str] = None) -> GpuCatalog:
    """The GPU catalog: ``path`` alone if given, else the built-in file with the user's hardware file
    (``user_file`` or ``TRNSIM_HARDWARE``) merged over it."""
    if user_file is None and path is None:
        user_file = os.environ.get("TRNSIM_HARDWARE") or None
    stamp = ()
    if path and os.path.exists(path):  # an edited file is read again
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
    return _cached(os.path.abspath(path) if path else None,
                   os.path.abspath(user_file) if user_file else None, stamp)

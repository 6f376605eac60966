"""Which systems ``trnsim compare`` can price and estimate: Trainium / Inferentia instances and UltraServers
from the hardware catalog, GPU instances and racks from ``gpus.toml``; each resolved to one ``SystemRef``."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..errors import ConfigError
from ..hardware.catalog import load_catalog
from ..hardware.gpus import load_gpu_catalog

DEFAULT_TRAIN = ("trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge")
DEFAULT_INFER = ("inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge", "p5en.48xlarge")


class SystemError_(ConfigError):
    """A system name the catalogs do not know."""
    rule = "system"


@dataclass(frozen=True)
class SystemRef:
    """One comparable system: ``kind`` trainium | gpu, its catalog key, accelerators per priced unit."""
    name: str          # as the user wrote it
    key: str           # catalog key (what prices and power are looked up by)
    kind: str
    accelerators: int  # chips (Trainium) or GPUs per priced unit (instance / UltraServer / rack)
    accelerator: str   # trn1 / trn2 / trn3 / inf2 / h100-sxm / ...
    label: str


def resolve_system(name: str, hardware_file: Optional[str] = None) -> SystemRef:
    """A system by key or alias from the Trainium catalog, else the GPU catalog; else an error with the
    closest names."""
    cat = load_catalog(hardware_file)
    try:
        inst = cat.instance(name)
        label = f"{inst.key} ({inst.chips} x {inst.chip})"
        return SystemRef(name=name, key=inst.key, kind="trainium", accelerators=inst.chips, accelerator=inst.chip,
                         label=label)
    except ConfigError:
        pass
    gpus = load_gpu_catalog()
    if gpus.has_system(name):
        s = gpus.system(name)
        return SystemRef(name=name, key=s.key, kind="gpu", accelerators=s.gpus, accelerator=s.gpu, label=s.name)
    known = sorted(set(cat.instances) | set(gpus.systems))
    near = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    raise SystemError_(f"unknown system {name!r}", limit=known, value=name,
                       hint=(f"did you mean {', '.join(near)}? " if near else "") + "see `trnsim hw list`")


def parse_systems(text: Optional[str], task: str) -> List[SystemRef]:
    """``"trn2.48xlarge,p5.48xlarge"`` (or the task's default list) -> distinct SystemRefs in order."""
    from ..checks import check_params
    check_params(systems=text, task=task)
    if isinstance(text, (list, tuple)):
        text = ",".join(str(t) for t in text)
    names: Sequence[str] = [s.strip() for s in text.split(",") if s.strip()] if text else \
        (DEFAULT_TRAIN if task in ("train", "finetune") else DEFAULT_INFER)
    out: List[SystemRef] = []
    for n in names:
        ref = resolve_system(n)
        if ref.key in [r.key for r in out]:
            raise SystemError_(f"system {n!r} is listed twice (as {ref.key})", rule="system-duplicate",
                               value=n)
        out.append(ref)
    if not out:
        raise SystemError_("no systems to compare", value=text, hint="--systems trn2.48xlarge,p5.48xlarge")
    return out


def parse_delays(items: Sequence[str]) -> dict:
    """``["trn3-gen2=90d", "p5.48xlarge=12h"]`` -> catalog key -> seconds (units s, m, h, d; default days)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    out = {}
    for it in items or ():
        name, sep, val = str(it).partition("=")
        val = val.strip().lower()
        unit = val[-1] if val and val[-1] in units else "d"
        num = val[:-1] if val and val[-1] in units else val
        try:
            secs = float(num) * units[unit]
        except ValueError:
            secs = -1.0
        if not sep or secs < 0:
            raise SystemError_(f"--start-delay takes SYSTEM=DURATION (e.g. trn3-gen2=90d), got {it!r}",
                               rule="start-delay", limit="SYSTEM=N[s|m|h|d]", value=it)
        out[resolve_system(name.strip()).key] = secs
    return out

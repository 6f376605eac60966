"""The hardware catalog: data files -> frozen specs, with every figure's source kept."""
from __future__ import annotations

import functools
import os
import types
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from ..errors import ConfigError, HardwareFileError
from .loader import build, load_merged, read_toml, resolve_bases, unwrap
from .rules import check_core, check_descriptive, check_extra, check_extra_ranges, follow_links
from .schema import TOPOLOGIES, ChipSpec, CoreSpec, InstanceSpec

BUILTIN_FILES = ("cores.toml", "chips.toml", "instances.toml", "numerics.toml", "sources.toml")


@dataclass(frozen=True)
class Catalog:
    """Every core, chip and instance of the built-in data (plus a user's file), by key."""
    cores: Mapping[str, CoreSpec]
    chips: Mapping[str, ChipSpec]
    numerics: Mapping[str, object]
    source_tags: Mapping[str, str]
    extra: Mapping[str, dict] = field(default_factory=dict)
    instances: Mapping[str, InstanceSpec] = field(default_factory=dict)

    @functools.cached_property
    def targets(self) -> Mapping[str, str]:
        """Every accepted target spelling -> its canonical target (from the cores' ``targets``)."""
        return types.MappingProxyType({name: c.target for c in self.cores.values()
                                       for name in c.targets})

    def canonical_target(self, name: str) -> str:
        """Map an accepted spelling (trn2, gen3, v3, trn2.48xlarge) to its canonical target."""
        key = str(name).strip().lower()
        aliases = self.targets
        for k in (key, key.split(".")[0]):  # an instance type names its family
            if k in aliases:
                return aliases[k]
        canon = sorted(set(aliases.values()))
        raise ConfigError(f"unknown target {name!r}", rule="target",
                          limit=f"one of {', '.join(canon)} (or {', '.join(sorted(set(aliases) - set(canon)))})",
                          value=name, hint="a new generation is a hardware file: see trnsim hw list "
                          "and --hardware / TRNSIM_HARDWARE")

    def chip_for(self, target: str) -> ChipSpec:
        """The chip a target name designates: trn1 -> Trn1, trn2 -> Trn2, trn3 -> Trn3 (or a chip key)."""
        key = str(target).strip().lower()
        if key in self.chips:
            return self.chips[key]
        t = self.canonical_target(key)
        for c in self.chips.values():
            if c.target == t:
                return c
        raise ConfigError(f"no chip for target {target!r}", rule="target", limit=sorted(self.chips),
                          value=target)

    def core_for(self, target: str) -> CoreSpec:
        """The core a target (or core key, or chip key) designates."""
        key = str(target).strip().lower()
        if key in self.cores:
            return self.cores[key]
        return self.cores[self.chip_for(target).core]

    def instance(self, name: str) -> InstanceSpec:
        """An instance or UltraServer by key or alias, case-insensitively ("Trn2 UltraServer" works)."""
        want = instance_name_key(name)
        for spec in self.instances.values():
            if want == instance_name_key(spec.key) or want in (instance_name_key(a) for a in spec.aliases):
                return spec
        raise ConfigError(f"unknown instance or UltraServer {name!r}", rule="instance",
                          limit=sorted(self.instances), value=name)

    def expand_source(self, src: str) -> str:
        """Replace source tags by the document paths they stand for."""
        words = []
        for w in src.split(" "):
            bare = w.strip("[](),;")
            words.append(f"{w} ({self.source_tags[bare]})" if bare in self.source_tags else w)
        return " ".join(words)


def _build_all(raw: dict, origin: dict, user: Optional[dict] = None, builtin: Optional[dict] = None,
               user_file: str = "") -> Catalog:
    sources: Dict[str, str] = {}
    tags = raw.get("sources", {}).get("tags", {})
    user, builtin = user or {}, builtin or {}
    resolved = resolve_bases(raw.get("cores", {}), origin.get("cores", "cores"))
    if user.get("cores"):
        before = resolve_bases(builtin.get("cores", {}), "cores")
        follow_links(resolved, before, user["cores"], user_file)
    cores_raw = unwrap(resolved, "", sources, origin.get("cores", "cores"))
    cores = {}
    for key, table in cores_raw.items():
        if not isinstance(table, Mapping):
            raise HardwareFileError(f"{origin['cores']}: [{key}] must be a table",
                                    rule="hardware-file-type", value=type(table).__name__)
        core_sources = {k: v for k, v in sources.items() if k.startswith(key + ".")}
        cores[key] = build(CoreSpec, table, key, origin["cores"], key=key, sources=core_sources)
        check_core(cores[key], origin["cores"])
    chip_sources: Dict[str, str] = {}
    chips_raw = unwrap(resolve_bases(raw.get("chips", {}), origin.get("chips", "chips")), "",
                       chip_sources, origin.get("chips", "chips"))
    chips = {}
    for key, table in chips_raw.items():
        spec = build(ChipSpec, table, key, origin["chips"], key=key,
                     sources={k: v for k, v in chip_sources.items() if k.startswith(key + ".")})
        if spec.core not in cores:
            raise HardwareFileError(f"{origin['chips']}: chip {key} names unknown core {spec.core!r}",
                                    rule="hardware-file-reference", limit=sorted(cores), value=spec.core)
        chips[key] = spec
    _check_targets(cores, chips, origin.get("cores", "cores"), origin.get("chips", "chips"))
    num_sources: Dict[str, str] = {}
    numerics = unwrap(raw.get("numerics", {}), "", num_sources, origin.get("numerics", "numerics"))
    _check_numerics(numerics, origin.get("numerics", "numerics"))
    instances = _build_instances(raw.get("instances", {}), origin.get("instances", "instances"), chips)
    # after the type checks, so a malformed figure is reported as such first
    for section in ("cores", "chips", "instances"):
        if user.get(section):
            base = builtin.get(section, {})
            check_descriptive(section, raw.get(section, {}),
                              base if section == "instances" else resolve_bases(base, section),
                              user[section], user_file)
    extra = {k: v for k, v in raw.items()
             if k not in ("cores", "chips", "instances", "numerics", "sources")}
    for section, table in list(extra.items()) + [("numerics", raw.get("numerics", {}))]:
        where = origin.get(section, section)
        if isinstance(user.get(section), Mapping):
            check_extra(section, builtin.get(section, {}), user[section], user_file)
        if isinstance(table, Mapping):
            check_extra_ranges(section, table, where)
    return Catalog(cores=cores, chips=chips, numerics=numerics, source_tags=dict(tags), extra=extra,
                   instances=instances)


def _check_targets(cores: Mapping[str, CoreSpec], chips: Mapping[str, ChipSpec], core_file: str,
                   chip_file: str) -> None:
    """Target names are unique across cores; every chip's target is its core's canonical target."""
    seen: Dict[str, str] = {}
    for key, core in cores.items():
        for name in core.targets:
            if name != name.strip().lower() or not name:
                raise HardwareFileError(f"{core_file}: {key}.targets entry {name!r} must be lower case",
                                        rule="hardware-file-range", value=name)
            if name in seen and seen[name] != key:
                raise HardwareFileError(f"{core_file}: target {name!r} of core {key} is already a "
                                        f"target of core {seen[name]}", rule="hardware-file-reference",
                                        value=name, hint="each spelling may select one generation only")
            seen[name] = key
    for key, chip in chips.items():
        want = cores[chip.core].target
        if chip.target != want:
            raise HardwareFileError(f"{chip_file}: chip {key} has target {chip.target!r} but its core "
                                    f"{chip.core} is selected by {want or 'no target'}",
                                    rule="hardware-file-reference", limit=want or None,
                                    value=chip.target,
                                    hint=f"set targets = [\"{chip.target}\", ...] on core {chip.core}"
                                    if not want else f"set target = \"{want}\" on chip {key}")


def instance_name_key(name: str) -> str:
    """Normalised spelling used to match instance names: lower case, spaces/underscores as dashes."""
    return "-".join(str(name).strip().lower().replace("_", " ").split())


def _build_instances(table: Mapping, file: str, chips: Mapping[str, ChipSpec]) -> Dict[str, InstanceSpec]:
    srcs: Dict[str, str] = {}
    raw = unwrap(table, "", srcs, file)
    out: Dict[str, InstanceSpec] = {}
    for key, t in raw.items():
        if not isinstance(t, Mapping):
            raise HardwareFileError(f"{file}: [{key}] must be a table", rule="hardware-file-type",
                                    value=type(t).__name__)
        spec = build(InstanceSpec, t, key, file, key=key,
                     sources={k: v for k, v in srcs.items() if k.startswith(key + ".")})
        _check_instance(spec, file, chips)
        out[key] = spec
    seen: Dict[str, str] = {}
    for key, spec in out.items():
        for n in (key,) + spec.aliases:
            k = instance_name_key(n)
            if k in seen and seen[k] != key:
                raise HardwareFileError(f"{file}: instance name {n!r} of {key} is already used by "
                                        f"{seen[k]}", rule="hardware-file-reference", value=n)
            seen[k] = key
    for key, spec in out.items():
        if not spec.node:
            continue
        node = out.get(spec.node)
        if node is None:
            raise HardwareFileError(f"{file}: {key}.node names unknown instance {spec.node!r}",
                                    rule="hardware-file-reference", limit=sorted(out), value=spec.node)
        if node.chip != spec.chip or node.chips * spec.nodes != spec.chips:
            raise HardwareFileError(
                f"{file}: {key} has {spec.chips} {spec.chip} chips but {spec.nodes} x {spec.node} "
                f"gives {spec.nodes * node.chips} {node.chip} chips", rule="hardware-file-reference",
                limit=spec.chips, value=spec.nodes * node.chips)
    return out


def _check_instance(spec: InstanceSpec, file: str, chips: Mapping[str, ChipSpec]) -> None:
    k = spec.key

    def bad(msg: str, rule: str = "hardware-file-range", limit=None, value=None):
        raise HardwareFileError(f"{file}: {k}.{msg}", rule=rule, limit=limit, value=value)

    if spec.chip not in chips:
        bad(f"chip names unknown chip {spec.chip!r}", "hardware-file-reference", sorted(chips), spec.chip)
    if spec.kind not in ("instance", "ultraserver"):
        bad("kind must be instance or ultraserver", limit=("instance", "ultraserver"), value=spec.kind)
    if spec.chips < 1:
        bad("chips must be at least 1", limit=">= 1", value=spec.chips)
    if spec.nodes < 1 or spec.chips % spec.nodes:
        bad(f"nodes must divide chips ({spec.chips})", limit=f"a divisor of {spec.chips}", value=spec.nodes)
    topo, dims = spec.topology, spec.topology_dims
    if topo not in TOPOLOGIES:
        bad("topology is not a known topology", limit=TOPOLOGIES, value=topo)
    want_dims: Dict[str, Tuple[int, ...]] = {"torus2d": (2,), "torus3d": (3,), "ring": (0, 1),
                                             "single": (0, 1), "switch": (0,)}
    if len(dims) not in want_dims[topo]:
        bad(f"topology_dims must have {' or '.join(map(str, want_dims[topo]))} entries for {topo}",
            limit=want_dims[topo], value=list(dims))
    if dims and _prod(dims) != spec.chips:
        bad(f"topology_dims {list(dims)} hold {_prod(dims)} chips, not chips = {spec.chips}",
            limit=spec.chips, value=_prod(dims))
    if topo == "single" and spec.chips != 1:
        bad("topology single needs chips = 1", limit=1, value=spec.chips)
    if topo == "switch" and spec.switch_levels < 1:
        bad("switch_levels must be at least 1 for topology switch", limit=">= 1", value=spec.switch_levels)
    if topo not in ("single", "switch") and spec.chip_link_bandwidth_bytes_per_s <= 0:
        bad(f"chip_link_bandwidth_bytes_per_s must be set for topology {topo}", limit="> 0",
            value=spec.chip_link_bandwidth_bytes_per_s)


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def _check_numerics(n: Mapping, file: str) -> None:
    allowed = {"conversion.float_to_int_rounding": ("rne", "trunc"),
               "conversion.float_to_int_overflow": ("saturate", "wrap"),
               "mx.quantize_scale": ("ocp_x2", "ocp")}  # nki/ops/mx_format.SCALE_RULES
    for k, choices in allowed.items():
        sect, _, leaf = k.partition(".")
        v = n.get(sect, {}).get(leaf)
        if v not in choices:
            raise HardwareFileError(f"{file}: {k} must be one of {choices}",
                                    rule="hardware-file-range", limit=choices, value=v)


@functools.lru_cache(maxsize=8)
def _load_cached(user_file: Optional[str]) -> Catalog:
    names = BUILTIN_FILES + _extra_builtin_files()
    raw, origin = load_merged(names, user_file)
    if not user_file:
        return _build_all(raw, origin)
    # the user's own entries, and the built-in ones they change, decide which figures follow
    # which and which overrides are refused (hardware/rules.py)
    builtin, _ = load_merged(names, None)
    return _build_all(raw, origin, read_toml(user_file), builtin, user_file)


def _extra_builtin_files() -> tuple:
    """Other data files shipped in the package (links, GPUs...) are loaded raw into ``extra``."""
    from .loader import DATA_DIR
    return tuple(sorted(f for f in os.listdir(DATA_DIR)
                        if f.endswith(".toml") and f not in BUILTIN_FILES))


def load_catalog(user_file: Optional[str] = None) -> Catalog:
    """The built-in catalog, with ``user_file`` (TOML, same layout) merged over it."""
    if user_file is None:
        user_file = os.environ.get("TRNSIM_HARDWARE") or None
    return _load_cached(os.path.abspath(user_file) if user_file else None)


def get_core(target: str = "trn2", user_file: Optional[str] = None) -> CoreSpec:
    """CoreSpec for trn1/trn2/trn3 (or gen2/gen3/gen4, v2/v3/v4, a chip key)."""
    return load_catalog(user_file).core_for(target)


def get_chip(target: str = "trn2", user_file: Optional[str] = None) -> ChipSpec:
    """ChipSpec for a target name or chip key."""
    return load_catalog(user_file).chip_for(target)

"""Rules over the figures of a hardware file: which must be positive, which follow another figure
(the SBUF partition count drives ``tile_size.pmax``...), which must agree, and which are descriptive
only (shown by ``trnsim hw``, read by no estimate or check) and so may not be overridden.

A user file that changes a figure either changes what the model does or is refused by name: an
accepted but ignored override is the bug these rules exist to prevent.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import HardwareFileError

# (class name, field) -> range.  "positive": > 0 (a zero clock divides by zero, a zero size or
# bandwidth is no machine); "fraction": in (0, 1]; "unit": in [0, 1).  Unlisted numbers: >= 0.
_POS = "positive"
RANGES: Dict[str, Dict[str, str]] = {
    "OnChipMemory": {"partitions": _POS, "bytes_per_partition": _POS, "banks": _POS, "loop_buffers": _POS},
    "TileSizes": {f: _POS for f in ("pmax", "psum_fmax", "gemm_stationary_fmax", "gemm_moving_fmax",
                                    "bn_stats_fmax", "psum_num_banks", "psum_min_align", "sbuf_min_align")},
    "TensorEngineRules": {f: _POS for f in ("max_contraction", "max_stationary_free", "max_moving_free",
                                            "max_moving_free_16bit_out", "tile_granularity",
                                            "max_row_tiles", "max_column_tiles")},
    "AccessRules": {f: _POS for f in ("max_free_elements_sbuf", "max_free_elements_psum", "max_free_dims",
                                      "bn_stats_fmax", "max8_min", "max8_max")},
    "Clocks": {f: _POS for f in ("tensor_hz", "vector_hz", "scalar_hz", "gpsimd_hz", "profiler_base_hz")},
    "CoreSpec": {"generation": _POS, "dma_engines": _POS, "dma_queues_per_engine": _POS},
    "TensorTiming": {**{f: _POS for f in ("fp32_passes", "fp8_speedup", "double_row_speedup", "mx_speedup",
                                          "fp32_transpose_speedup", "onezero_speedup")},
                     "throttle_start": "fraction", "throttle_min_utilization": "fraction"},
    "VectorTiming": {f: _POS for f in ("elems_per_cycle", "two_input_factor", "bf16_copy_speedup",
                                       "bf16_psum_or_strided_speedup", "bf16_tensor_tensor_speedup",
                                       "strided_penalty")},
    "ScalarTiming": {f: _POS for f in ("elems_per_cycle", "bf16_speedup", "strided_penalty")},
    "GpSimdTiming": {"elems_per_cycle_32bit": _POS},
    "ReorderTiming": {"window_instructions": _POS},
    "DmaTiming": {"engine_bytes_per_ns": _POS, "partitions_per_engine": _POS, "efficiency_floor": "unit",
                  "transpose_hbm_efficiency": "fraction", "transpose_sbuf_efficiency": "fraction"},
    "ChipSpec": {"cores": _POS, "hbm_bytes": _POS, "hbm_bandwidth_bytes_per_s": _POS, "hbm_stacks": _POS},
}
# the orders a capacity check may take live ranges from (nki/core/liveness.py)
LIVENESS_RULES = ("program_order", "hoist_last_reader")
# how automatically allocated SBUF tiles get physical bytes for timing (nki/core/placement.py)
PLACEMENT_POLICIES = ("private", "reuse_lru", "site_buffers")
# how a partition-dim operand broadcast is executed (nki/core/broadcast_lowering.py)
BROADCAST_LOWERINGS = ("tensor", "dma", "free")
BROADCAST_REUSE = ("resident", "none")   # whether consumers of one broadcast view share its copy
_RANGE_TEXT = {"positive": "> 0", "fraction": "in (0, 1]", "unit": "in [0, 1)"}


def check_range(cls_name: str, name: str, value: Any, path: str, file: str) -> None:
    """Refuse a number outside its field's range (see ``RANGES``), naming the file and the figure."""
    kind = RANGES.get(cls_name, {}).get(name)
    if kind is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    ok = {"positive": value > 0, "fraction": 0 < value <= 1, "unit": 0 <= value < 1}[kind]
    if not ok:
        raise HardwareFileError(f"{file}: {path} must be {_RANGE_TEXT[kind]}", rule="hardware-file-range",
                                limit=_RANGE_TEXT[kind], value=value)


# derived figure <- the figure it follows, per core.  When a user file sets the driver but not the
# derived figure, the derived one keeps its ratio to the driver (pmax = partitions; psum_fmax =
# bank bytes / 4; v4's max_moving_free spans 8 banks and keeps spanning 8).
LINKS: Tuple[Tuple[str, str], ...] = (
    ("psum.partitions", "sbuf.partitions"),
    ("tile_size.pmax", "sbuf.partitions"),
    ("tensor.max_contraction", "sbuf.partitions"),
    ("tile_size.psum_num_banks", "psum.banks"),
    ("psum.bytes_per_partition", "psum.banks"),
    ("tile_size.psum_fmax", "psum.bank_bytes"),
    ("tensor.max_moving_free", "psum.bank_bytes"),
    ("tensor.max_moving_free_16bit_out", "psum.bank_bytes"),
    ("psum.bytes_per_partition", "psum.bank_bytes"),
    ("access.bn_stats_fmax", "tile_size.bn_stats_fmax"),
)

# figures no estimate or check reads (shown by `trnsim hw` only): an override would be ignored
DESCRIPTIVE = {
    "cores": ("psum.reserved_bytes_per_partition", "tensor.max_row_tiles", "tensor.max_column_tiles",
              "access.max_free_dims", "clocks.profiler_base_hz", "dma_queues_per_engine"),
    "chips": ("hbm_stacks", "neuronlink_ports", "cc_cores"),
    "instances": ("vcpus", "host_memory_bytes", "switch_level_bandwidth_bytes_per_s"),
}


def _get(table: Mapping, path: str) -> Optional[Any]:
    for k in path.split("."):
        if not isinstance(table, Mapping) or k not in table:
            return None
        table = table[k]
    return table


def _value(entry: Any) -> Any:
    return entry["value"] if isinstance(entry, Mapping) and "value" in entry else entry


def _set(table: dict, path: str, entry: Any) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        table = table.setdefault(k, {})
    table[keys[-1]] = entry


def follow_links(merged: Dict[str, dict], before: Mapping[str, Mapping], user: Mapping[str, Mapping],
                 file: str) -> None:
    """In the resolved core tables ``merged``, move each figure the user file left alone along with
    the figure it follows (``LINKS``) when the user file changed that one; ``before`` holds each
    core's tables without the user file (its base's, for a new core)."""
    for key, own in user.items():
        if key not in merged or not isinstance(own, Mapping):
            continue
        ref = before.get(key) or before.get(str(own.get("base", "")))
        if ref is None:
            continue
        for derived, driver in LINKS:
            if _get(own, derived) is not None or _get(own, driver) is None:
                continue
            new_d, old_d, old = (_value(_get(merged[key], driver)), _value(_get(ref, driver)),
                                 _value(_get(merged[key], derived)))
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                       for v in (new_d, old_d, old)) or old_d == 0 or new_d == old_d:
                # not a number: the type and range checks that follow report it
                continue
            val = Fraction(old) * Fraction(new_d) / Fraction(old_d)
            if val.denominator != 1 or val <= 0:
                raise HardwareFileError(
                    f"{file}: {key}.{driver} = {new_d} leaves {key}.{derived} (which follows it) at "
                    f"{float(val):g}, not a whole number", rule="hardware-file-link", value=new_d,
                    hint=f"set {key}.{derived} too")
            _set(merged[key], derived, {"value": int(val), "source": f"derived: follows {driver} ({file})"})


def check_descriptive(section: str, merged: Mapping[str, Mapping], before: Mapping[str, Mapping],
                      user: Mapping[str, Mapping], file: str) -> None:
    """Refuse a user file's change to a descriptive figure (``DESCRIPTIVE``) of a known entry or of
    a new entry's base: the model would ignore it."""
    for key, own in user.items():
        if not isinstance(own, Mapping):
            continue
        ref = before.get(key) or before.get(str(own.get("base", "")))
        if ref is None:
            continue
        for path in DESCRIPTIVE.get(section, ()):
            mine = _get(own, path)
            if mine is None:
                continue
            old = _value(_get(ref, path))
            if _value(mine) != old:
                raise HardwareFileError(
                    f"{file}: {section}.{key}.{path} is descriptive (shown by trnsim hw, read by no "
                    f"estimate or check): an override would be silently ignored, so it is refused",
                    rule="hardware-file-not-overridable", limit=f"the built-in {old}", value=_value(mine),
                    hint=f"remove {path} from the file")


def check_core(core, file: str) -> None:
    """Figures of one core that describe the same thing must agree (the checks read one of them)."""
    s = core
    same = (("sbuf.partitions", s.sbuf.partitions), ("psum.partitions", s.psum.partitions),
            ("tile_size.pmax", s.tile_size.pmax), ("tensor.max_contraction", s.tensor.max_contraction))
    pairs = [same,
             (("psum.banks", s.psum.banks), ("tile_size.psum_num_banks", s.tile_size.psum_num_banks)),
             (("psum.bank_bytes", s.psum.bank_bytes), ("tile_size.psum_fmax x 4", s.tile_size.psum_fmax * 4)),
             (("psum.bytes_per_partition", s.psum.bytes_per_partition),
              ("psum.banks x psum.bank_bytes", s.psum.banks * s.psum.bank_bytes)),
             (("tile_size.bn_stats_fmax", s.tile_size.bn_stats_fmax), ("access.bn_stats_fmax", s.access.bn_stats_fmax))]
    for group in pairs:
        (n0, v0), rest = group[0], group[1:]
        for n, v in rest:
            if v != v0:
                raise HardwareFileError(
                    f"{file}: core {s.key}: {n} = {v} disagrees with {n0} = {v0} (the same hardware "
                    f"figure, read by different checks)", rule="hardware-file-consistency",
                    limit=f"{n0} = {v0}", value=f"{n} = {v}", hint=f"set {n0}; the others follow it")
    mm = s.tensor.max_moving_free * 4
    if mm % s.psum.bank_bytes or mm > s.psum.bytes_per_partition:
        raise HardwareFileError(f"{file}: core {s.key}: tensor.max_moving_free x 4 bytes = {mm} must be a "
                                f"whole number of PSUM banks ({s.psum.bank_bytes} B) within the partition",
                                rule="hardware-file-consistency", limit=f"k x {s.psum.bank_bytes} <= "
                                f"{s.psum.bytes_per_partition}", value=mm)
    # SBUF keeps program order: its spill plan (nki/core/spill.py) inserts DMAs by program position
    for mem, allowed in (("sbuf", LIVENESS_RULES[:1]), ("psum", LIVENESS_RULES)):
        rule = getattr(s, mem).liveness
        if rule not in allowed:
            raise HardwareFileError(f"{file}: core {s.key}: {mem}.liveness must be one of {allowed}",
                                    rule="hardware-file-range", limit=allowed, value=rule)
    if s.sbuf.placement not in PLACEMENT_POLICIES:
        raise HardwareFileError(f"{file}: core {s.key}: sbuf.placement must be one of {PLACEMENT_POLICIES}",
                                rule="hardware-file-range", limit=PLACEMENT_POLICIES,
                                value=s.sbuf.placement)
    if s.broadcast.partition not in BROADCAST_LOWERINGS:
        raise HardwareFileError(f"{file}: core {s.key}: broadcast.partition must be one of "
                                f"{BROADCAST_LOWERINGS}", rule="hardware-file-range",
                                limit=BROADCAST_LOWERINGS, value=s.broadcast.partition)
    if s.broadcast.partition_reuse not in BROADCAST_REUSE:
        raise HardwareFileError(f"{file}: core {s.key}: broadcast.partition_reuse must be one of "
                                f"{BROADCAST_REUSE}", rule="hardware-file-range",
                                limit=BROADCAST_REUSE, value=s.broadcast.partition_reuse)
    for mem, allowed in (("sbuf", ("fail", "spill")), ("psum", ("fail",))):  # no PSUM spill model
        got = getattr(s, mem).legacy_overflow
        if got not in allowed:
            raise HardwareFileError(f"{file}: core {s.key}: {mem}.legacy_overflow must be one of {allowed}",
                                    rule="hardware-file-range", limit=allowed, value=got)
    if s.sbuf.reserved_bytes_per_partition >= s.sbuf.bytes_per_partition:
        raise HardwareFileError(f"{file}: core {s.key}: sbuf.reserved_bytes_per_partition leaves no SBUF",
                                rule="hardware-file-range", limit=f"< {s.sbuf.bytes_per_partition}",
                                value=s.sbuf.reserved_bytes_per_partition)
    d = s.timing.dma
    for name in ("efficiency", "hbm_efficiency"):
        ys, xs = getattr(d, name), getattr(d, name + "_bytes")
        if name == "hbm_efficiency" and not ys and not xs:
            continue    # no curve of its own: the efficiency curve serves HBM transfers too
        if len(ys) != len(xs) or not xs or list(xs) != sorted(set(xs)) or any(x <= 0 for x in xs) \
                or any(not 0 < e <= 1 for e in ys):
            raise HardwareFileError(f"{file}: core {s.key}: timing.dma.{name} needs one fraction in (0, 1] "
                                    f"per entry of the increasing positive timing.dma.{name}_bytes",
                                    rule="hardware-file-range", limit=len(xs), value=len(ys))
    if not s.lnc or any(n <= 0 for n in s.lnc) or 1 not in s.lnc:
        raise HardwareFileError(f"{file}: core {s.key}: lnc must list positive core counts, 1 among them",
                                rule="hardware-file-range", limit="e.g. [1, 2]", value=list(s.lnc))


# The data files beside the catalog (loaded raw into ``Catalog.extra``, plus numerics): figures no
# code reads, stated to document how the model is built; an override would be ignored, so refused.
# "*" stands for any entry key (a GPU system).
DESCRIPTIVE_EXTRA = {
    # the fabric code hard-codes these choices (fabric/topology, fabric/flows): they say what it does
    "fabric": ("links.intra_chip_source", "switch.non_blocking", "switch.port_figure", "efa.non_blocking"),
    # a single-rank collective is always one on-chip DMA copy (timing/collectives.py)
    "in_kernel_collectives": ("local_copy_uses_dma",),
    # float writes follow ml_dtypes (RNE, its overflow rules); stochastic rounding is an option
    "numerics": ("conversion.float_to_float_rounding", "conversion.fp8_overflow"),
    # shown by `trnsim hw` / compare tables only; power comes from cost/ data, not this figure
    "gpus": ("systems.*.vcpus", "systems.*.host_memory_bytes", "systems.*.system_power_watts"),
}
# sections whose user overrides must name figures the built-in file has ("*": a new entry may be
# added there, with the keys its siblings have); gpus.toml's loader checks its own entries' keys
KNOWN_KEYS_ONLY = {"fabric": ("runtime.*",), "in_kernel_collectives": (), "numerics": ()}
# name -> name tables a user file may extend with new names (a new GPU's NCCL generation, a new system's
# network), each entry a string
OPEN_MAPS = {"fabric": ("nccl.gpu_generation", "nccl.network_name")}
# range of extra figures the loaders read without a check of their own
RANGES_EXTRA = {"in_kernel_collectives": {"issue_overhead_s": "nonnegative", "channels": "count"}}


def _leaves(table: Mapping, pre: str = ""):
    """(dotted path, entry) of every figure or plain value in a raw TOML table."""
    for k, v in table.items():
        p = f"{pre}.{k}" if pre else k
        if isinstance(v, Mapping) and "value" not in v:
            yield from _leaves(v, p)
        else:
            yield p, v


def _matches(pattern: str, path: str) -> bool:
    a, b = pattern.split("."), path.split(".")
    return len(a) == len(b) and all(x == "*" or x == y for x, y in zip(a, b))


def check_extra(section: str, builtin: Mapping, user: Mapping, file: str) -> None:
    """A user file's ``[section]`` of an extra data file: names only known figures (or new entries
    where the section takes them), changes no descriptive figure, and keeps every number finite."""
    open_prefixes = KNOWN_KEYS_ONLY.get(section)
    for path, entry in _leaves(user):
        value = _value(entry)
        if isinstance(value, float) and not math.isfinite(value):
            raise HardwareFileError(f"{file}: {section}.{path} must be a finite number",
                                    rule="hardware-file-range", limit="finite", value=value)
        ref = _get(builtin, path)
        if ref is None and path.rpartition(".")[0] in OPEN_MAPS.get(section, ()):
            if not isinstance(value, str):
                raise HardwareFileError(f"{file}: {section}.{path} must be a name (a string)",
                                        rule="hardware-file-type", limit="string", value=repr(value))
            continue
        if open_prefixes is not None and ref is None:
            keys = path.split(".")
            sib = [_get(builtin, ".".join(keys[:-2])) for p in open_prefixes
                   if _matches(p, ".".join(keys[:-1]))]
            known = {k for t in sib if isinstance(t, Mapping) for e in t.values()
                     if isinstance(e, Mapping) for k in e}
            if not sib or keys[-1] not in known:
                raise HardwareFileError(f"{file}: {section}.{path} is not a figure trnsim reads",
                                        rule="hardware-file-unknown-key", value=path,
                                        limit=sorted(known) if sib else None,
                                        hint=f"see trnsim/hardware/data/{section}.toml for the names")
        for pat in DESCRIPTIVE_EXTRA.get(section, ()):
            if _matches(pat, path) and ref is not None and value != _value(ref):
                raise HardwareFileError(
                    f"{file}: {section}.{path} is descriptive (it states how the model is built; no "
                    f"code reads it): an override would be silently ignored, so it is refused",
                    rule="hardware-file-not-overridable", limit=f"the built-in {_value(ref)}",
                    value=value, hint=f"remove {path} from the file")


def check_extra_ranges(section: str, merged: Mapping, file: str) -> None:
    """Range of the extra figures in ``RANGES_EXTRA`` (built-in and user values alike)."""
    for name, kind in RANGES_EXTRA.get(section, {}).items():
        v = _value(_get(merged, name))
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        ok = number and math.isfinite(v) and (v >= 0 if kind == "nonnegative" else
                                              (isinstance(v, int) and v >= 1))
        if not ok:
            want = ">= 0" if kind == "nonnegative" else "a whole number >= 1"
            raise HardwareFileError(f"{file}: {section}.{name} must be {want}",
                                    rule="hardware-file-range", limit=want, value=v)

"""``trnsim hw list`` / ``trnsim hw show NAME``: the hardware catalog, every figure with its source."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ConfigError
from ..hardware import Catalog, load_catalog
from ..hardware.schema import ChipSpec, CoreSpec, InstanceSpec
from rich.markup import escape

from .output import console, print_json, table

# per-chip figure -> the chip attribute it multiplies, for instance totals (chips x chip)
_TOTALS = (
    ("hbm_bytes", lambda c: c.hbm_bytes),
    ("hbm_bandwidth_bytes_per_s", lambda c: c.hbm_bandwidth_bytes_per_s),
    ("bf16_flops", lambda c: c.peak_flops.bf16),
    ("fp8_flops", lambda c: c.peak_flops.fp8),
    ("mxfp8_flops", lambda c: c.peak_flops.mxfp8),
    ("sparse_flops", lambda c: c.peak_flops.sparse),
    ("fp32_flops", lambda c: c.peak_flops.fp32),
)


def register(subparsers) -> None:
    """Add ``hw list`` and ``hw show`` to the ``trnsim`` command line."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--hardware", metavar="FILE",
                        help="TOML file merged over the built-in hardware data (also TRNSIM_HARDWARE)")
    hw = subparsers.add_parser("hw", help="hardware catalog: cores, chips, instances, UltraServers",
                               description="Show the hardware catalog; every figure carries its source.")
    sub = hw.add_subparsers(dest="hw_command", metavar="HW_COMMAND")
    p = sub.add_parser("list", parents=[common], help="cores, chips, instances with headline figures")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("show", parents=[common], help="every figure of one core, chip or instance")
    p.add_argument("name", metavar="NAME",
                   help="core key (v3), target (trn2, gen3), chip key or instance key")
    p.set_defaults(func=cmd_show)
    hw.set_defaults(func=lambda args: (hw.print_help(), 1)[1])


# ------------------------------------------------------------------------------------------ list
def cmd_list(args) -> int:
    """Print every core, chip and instance with its headline figures."""
    cat = load_catalog(args.hardware)
    data = list_data(cat)
    if args.json:
        print_json(data)
        return 0
    out = console()
    out.print(_keyed(table("NeuronCores", ["key", "name", "TensorE", "VectorE", "SBUF", "PSUM",
                                           "chips"],
                           _esc([(c["key"], c["name"], _fmt("tensor_hz", c["tensor_hz"]),
                             _fmt("vector_hz", c["vector_hz"]), _fmt("sbuf_bytes", c["sbuf_bytes"]),
                             _fmt("psum_bytes", c["psum_bytes"]), ", ".join(c["chips"]))
                            for c in data["cores"]]))))
    out.print(_keyed(table("Chips (TFLOPS as stated by the vendor)",
                           ["key", "cores", "HBM", "HBM BW", "BF16", "FP8", "chip link", "target"],
                           _esc([(c["key"], f"{c['cores']} x {c['core']}", _fmt("hbm_bytes", c["hbm_bytes"]),
                             _fmt("_bytes_per_s", c["hbm_bandwidth_bytes_per_s"]),
                             _fmt("flops", c["bf16_flops"]), _fmt("flops", c["fp8_flops"]),
                             _link(c["chip_link_bandwidth_bytes_per_s"]), c["target"])
                            for c in data["chips"]]))))
    out.print(_keyed(table("Instances and UltraServers (BF16 as stated; link per chip)",
                           ["key", "chips", "topology", "HBM", "BF16", "chip link", "EFA"],
                           _esc([(i["key"], f"{i['chips']} x {i['chip']}", _topo(i),
                             _fmt("hbm_bytes", i["hbm_bytes"]), _fmt("flops", i["bf16_flops_stated"]),
                             _link(i["chip_link_bandwidth_bytes_per_s"]),
                             _fmt("_bits_per_s", i["efa_bandwidth_bits_per_s"]))
                            for i in data["instances"]]))))
    return 0


def _esc(rows):
    """Cells as plain text: '[u-trn2x64, ...]' must not be read as rich markup."""
    return [[escape(str(x)) for x in r] for r in rows]


def _keyed(t):
    t.columns[0].no_wrap = True  # keys are what users type next; never wrap them
    return t


def _link(v: float) -> str:
    return "none" if not v else _fmt("_bytes_per_s", v)


def list_data(cat: Catalog) -> Dict[str, List[Dict[str, Any]]]:
    """Headline figures of the whole catalog as plain JSON-able values (SI units)."""
    cores = [dict(key=c.key, name=c.name, generation=c.generation, nc_version=c.nc_version,
                  targets=list(c.targets),
                  tensor_hz=c.clocks.tensor_hz, vector_hz=c.clocks.vector_hz,
                  scalar_hz=c.clocks.scalar_hz, gpsimd_hz=c.clocks.gpsimd_hz,
                  sbuf_bytes=c.sbuf.total_bytes, psum_bytes=c.psum.total_bytes,
                  dma_engines=c.dma_engines,
                  chips=sorted(k for k, ch in cat.chips.items() if ch.core == c.key))
             for c in cat.cores.values()]
    chips = [dict(key=c.key, name=c.name, core=c.core, cores=c.cores, target=c.target,
                  hbm_bytes=c.hbm_bytes, hbm_bandwidth_bytes_per_s=c.hbm_bandwidth_bytes_per_s,
                  bf16_flops=c.peak_flops.bf16, fp8_flops=c.peak_flops.fp8,
                  fp32_flops=c.peak_flops.fp32,
                  chip_link_bandwidth_bytes_per_s=c.chip_link_bandwidth_bytes_per_s,
                  neuronlink_ports=c.neuronlink_ports, cc_cores=c.cc_cores)
             for c in cat.chips.values()]
    instances = []
    for i in cat.instances.values():
        chip = cat.chips[i.chip]
        instances.append(dict(
            key=i.key, name=i.name, kind=i.kind, chip=i.chip, chips=i.chips, nodes=i.nodes,
            vcpus=i.vcpus, host_memory_bytes=i.host_memory_bytes, topology=i.topology,
            topology_dims=list(i.topology_dims), switch_levels=i.switch_levels,
            cores=i.chips * chip.cores, hbm_bytes=i.chips * chip.hbm_bytes,
            bf16_flops_stated=i.stated.bf16_flops,
            chip_link_bandwidth_bytes_per_s=i.chip_link_bandwidth_bytes_per_s,
            inter_node_link_bandwidth_bytes_per_s=i.inter_node_link_bandwidth_bytes_per_s,
            efa_bandwidth_bits_per_s=i.efa_bandwidth_bits_per_s, aliases=list(i.aliases)))
    return {"cores": cores, "chips": chips, "instances": instances}


# ------------------------------------------------------------------------------------------ show
def cmd_show(args) -> int:
    """Print every figure of one core, chip or instance, with its source document."""
    cat = load_catalog(args.hardware)
    data = show_data(cat, args.name)
    if args.json:
        print_json(data)
        return 0
    out = console()
    _print_show(out, data)
    for sub in ("core",):
        if isinstance(data.get(sub), dict):
            _print_show(out, data[sub])
    return 0


def resolve(cat: Catalog, name: str) -> Tuple[str, Any]:
    """``(kind, spec)`` for a core key, chip key, instance key/alias or target name."""
    key = str(name).strip().lower()
    if key in cat.cores:
        return "core", cat.cores[key]
    if key in cat.chips:
        return "chip", cat.chips[key]
    try:
        spec = cat.instance(name)
        return spec.kind, spec
    except ConfigError:
        pass
    if "." not in key:  # a target spelling (gen3, trn1n, ...); a dotted name is an instance
        try:
            return "chip", cat.chip_for(key)
        except ConfigError:
            pass
    valid = {"cores": sorted(cat.cores), "chips": sorted(cat.chips),
             "targets": sorted(cat.targets),
             "instances": sorted(cat.instances)}
    listing = "; ".join(f"{k}: {', '.join(v)}" for k, v in valid.items())
    from ..checks import did_you_mean
    near = did_you_mean(name, [n for v in valid.values() for n in v])
    raise ConfigError(f"unknown hardware name {name!r}. Valid names are {listing}",
                      rule="hw-name", value=name,
                      hint=(near + " " if near else "") + "instances also accept their aliases, e.g. 'Trn2 UltraServer'")


def show_data(cat: Catalog, name: str) -> Dict[str, Any]:
    """Every figure of the named spec as JSON-able data, sources expanded to document paths."""
    kind, spec = resolve(cat, name)
    data: Dict[str, Any] = {"kind": kind, "key": spec.key, "name": spec.name, "query": name,
                            "figures": figures(cat, spec)}
    if isinstance(spec, ChipSpec):
        data["core"] = show_data(cat, spec.core)
        data["instances"] = sorted(k for k, i in cat.instances.items() if i.chip == spec.key)
    elif isinstance(spec, CoreSpec):
        data["chips"] = sorted(k for k, ch in cat.chips.items() if ch.core == spec.key)
    elif isinstance(spec, InstanceSpec):
        data["totals"] = instance_totals(cat, spec)
    return data


def instance_totals(cat: Catalog, inst: InstanceSpec) -> List[Dict[str, Any]]:
    """Chip figure x chip count next to the figure the instance table prints (None = not printed)."""
    chip = cat.chips[inst.chip]
    rows = [{"figure": "cores", "per_chip": chip.cores, "chip_x_count": chip.cores * inst.chips,
             "stated": None, "stated_over_derived": None}]
    for fig, get in _TOTALS:
        per = get(chip)
        derived = None if per is None else per * inst.chips
        stated = getattr(inst.stated, fig)
        ratio = stated / derived if stated is not None and derived else None
        rows.append({"figure": fig, "per_chip": per, "chip_x_count": derived, "stated": stated,
                     "stated_over_derived": ratio})
    return rows


def figures(cat: Catalog, spec) -> List[Dict[str, Any]]:
    """Flatten a spec into rows ``{path, value, source, document, note}``."""
    rows: List[Dict[str, Any]] = []
    _walk(cat, spec, spec, "", rows)
    return rows


def _walk(cat: Catalog, root, obj, prefix: str, rows: list) -> None:
    for f in dataclasses.fields(obj):
        if f.name in ("key", "sources"):
            continue
        path = f"{prefix}{f.name}"
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            _walk(cat, root, v, path + ".", rows)
            continue
        raw: Optional[str] = root.sources.get(f"{root.key}.{path}")
        src, note = (None, None)
        if raw is not None:
            src, _, note = raw.partition(" — ")
        rows.append({"path": path, "value": list(v) if isinstance(v, tuple) else v,
                     "source": src, "document": cat.expand_source(src) if src else None,
                     "note": note or None,
                     "status": _status(src, v)})


def _status(src: Optional[str], v: Any) -> str:
    """stated (a sourced figure), not stated (None), name (a bare name), default (schema default)."""
    if src:
        return "stated"
    if v is None:
        return "not stated"
    if isinstance(v, str) or (isinstance(v, tuple) and v and all(isinstance(x, str) for x in v)):
        return "name"
    return "default"


def _print_show(out, data: Dict[str, Any]) -> None:
    # one figure per block rather than a table: sources and notes are long, terminals narrow
    out.print(escape(f"{data['kind']} {data['key']}: {data['name']}"), style="bold")
    for r in data["figures"]:
        out.print(escape(f"  {r['path']} = {_fmt(r['path'], r['value'])}"))
        if r["status"] == "not stated":
            out.print("      source: n/s (not stated in the docs)", style="dim")
        elif r["status"] == "default":
            out.print("      source: not in the data file (schema default)", style="dim")
        elif r["document"]:
            out.print(escape(f"      source: {r['document']}"), style="dim")
        if r["note"]:
            out.print(escape(f"      note: {r['note']}"), style="dim")
    if data.get("totals"):
        rows = [(t["figure"], _fmt(t["figure"], t["chip_x_count"]), _fmt(t["figure"], t["stated"]),
                 "" if t["stated_over_derived"] is None else f"{t['stated_over_derived']:.4f}")
                for t in data["totals"]]
        out.print(_keyed(table("chip figure x chip count vs the figure the docs print",
                               ["figure", "chip x count", "stated", "stated / derived"], _esc(rows))))
    out.print()


# ------------------------------------------------------------------------------------------ format
def _topo(i: Dict[str, Any]) -> str:
    if i["topology_dims"] and i["topology"] != "ring":
        return f"{i['topology']} {'x'.join(map(str, i['topology_dims']))}"
    if i["topology"] == "switch":
        return f"switch {i['switch_levels']}-level"
    return i["topology"]


def _fmt(path: str, v: Any) -> str:
    """Human units chosen from the figure's name (bytes, B/s, bit/s, Hz, FLOP/s)."""
    if v is None:
        return "n/s"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(path, x) for x in v) + "]"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    name = path.rsplit(".", 1)[-1]
    if name.endswith("_bits_per_s"):
        return f"{v / 1e9:,.6g} Gbps"
    if name.endswith("_bytes_per_s"):  # in the unit the docs print: GiB/s figures are exact in 2^30
        if v >= 2 ** 30 and float(v) % 2 ** 30 == 0:
            return f"{v / 2 ** 30:,.6g} GiB/s"
        return f"{v / 1e12:,.6g} TB/s" if v >= 1e13 else f"{v / 1e9:,.6g} GB/s"
    if name.endswith("_hz"):
        return f"{v / 1e9:.4g} GHz"
    if "flops" in name or path.split(".")[0] == "peak_flops":
        return f"{v / 1e15:,.6g} PFLOPS" if v >= 1e16 else f"{v / 1e12:,.6g} TFLOPS"
    if name.endswith("bytes") and isinstance(v, int) and v >= 1024:
        for unit, div in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
            if v >= div:
                return f"{v / div:,.6g} {unit}"
    return f"{v:,}" if isinstance(v, int) else f"{v:.6g}"

"""The simulation grid of each reference kernel (``data/grids.toml``): axes, their grid values and
the extrapolation slopes outside them."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple, Union

from ...errors import ConfigError
from ...hardware.loader import read_toml

GRIDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "grids.toml")


@dataclass(frozen=True)
class Axis:
    """One shape dimension of a kernel's grid."""
    name: str
    values: Tuple[int, ...]
    below: float = 0.0      # log-log slope under the smallest value
    above: Union[str, float] = "linear"  # past the largest value: "linear" or a log-log slope
    discrete: bool = False  # must match a value exactly


@dataclass(frozen=True)
class KernelGrid:
    """Grid of one reference kernel: its axes (in order) and the dtypes a full build covers."""
    kernel: str
    axes: Tuple[Axis, ...]
    dtypes: Tuple[str, ...]

    def points(self):
        """Every grid point as a dict {axis: value}, first axis slowest."""
        out = [{}]
        for ax in self.axes:
            out = [dict(p, **{ax.name: v}) for p in out for v in ax.values]
        return out


def _bad(msg: str, value) -> ConfigError:
    return ConfigError(msg, rule="opcost-grid", value=value,
                       hint="see trnsim/model/opcost/data/grids.toml for the expected layout")


def parse_grids(raw: Mapping) -> Dict[str, KernelGrid]:
    """Build ``KernelGrid``s from the TOML layout (a table per kernel with ``dtypes`` and ``axes``)."""
    grids = {}
    for kernel, spec in raw.items():
        if not isinstance(spec, Mapping) or "axes" not in spec:
            raise _bad(f"grid {kernel!r} has no axes", kernel)
        axes = []
        for a in spec["axes"]:
            vals = tuple(sorted(int(v) for v in a.get("values", ())))
            if not vals or vals[0] < (0 if a.get("discrete") else 1):
                raise _bad(f"grid {kernel}.{a.get('name')} needs positive values", vals)
            above = a.get("above", "linear")
            if above != "linear" and not isinstance(above, (int, float)):
                raise _bad(f"grid {kernel}.{a['name']}: above must be \"linear\" or a slope", above)
            axes.append(Axis(str(a["name"]), vals, float(a.get("below", 0.0)),
                             above if above == "linear" else float(above), bool(a.get("discrete", False))))
        grids[kernel] = KernelGrid(kernel, tuple(axes), tuple(spec.get("dtypes", ("bfloat16",))))
    return grids


def load_grids(source: Union[None, str, Mapping] = None) -> Dict[str, KernelGrid]:
    """The built-in grids, or a TOML path / dict of the same layout merged over them."""
    grids = parse_grids(read_toml(GRIDS_FILE))
    if source is not None:
        raw = read_toml(source) if isinstance(source, str) else source
        grids.update(parse_grids(raw))
    return grids


def grid_for(grids: Mapping[str, KernelGrid], kernel: str) -> KernelGrid:
    """The grid of ``kernel``, or a ConfigError naming the known kernels."""
    g: Optional[KernelGrid] = grids.get(kernel)
    if g is None:
        raise ConfigError(f"no simulation grid for kernel {kernel!r}", rule="opcost-grid",
                          limit=sorted(grids), value=kernel)
    return g

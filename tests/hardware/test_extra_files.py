"""The data files beside the core/chip/instance catalog (fabric.toml, in_kernel_collectives.toml,
numerics.toml, gpus.toml): every figure a user hardware file overrides is either read (the override
shows in what the model uses) or refused by name as descriptive; unknown names and out-of-range
numbers are refused.  One test group per file."""
import itertools
import os
import tomllib

import numpy as np
import pytest

from trnsim.errors import HardwareFileError
from trnsim.hardware import load_catalog
from trnsim.hardware.loader import DATA_DIR
from trnsim.hardware.rules import DESCRIPTIVE_EXTRA

_n = itertools.count()


def _write(tmp_path, text: str) -> str:
    p = tmp_path / f"extra_{next(_n)}.toml"
    p.write_text(text)
    return str(p)


def _leaves(table, pre=""):
    for k, v in table.items():
        p = f"{pre}.{k}" if pre else k
        if isinstance(v, dict) and "value" not in v:
            yield from _leaves(v, p)
        elif isinstance(v, dict):
            yield p, v["value"]


def _builtin(name):
    with open(os.path.join(DATA_DIR, name), "rb") as f:
        return tomllib.load(f)


def _changed(v):
    """A different value of the same type (TOML text)."""
    if isinstance(v, bool):
        return str(not v).lower()
    if isinstance(v, int):
        return str(v - 1 if v > 1 else v + 1)
    if isinstance(v, float):
        return repr(min(v * 2, 1.0) if 0 < v < 1 else (v * 0.5 if v >= 1 else v + 0.5))
    if isinstance(v, list):
        return "[" + ", ".join(_changed(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_changed(x)}" for k, x in v.items()) + " }"
    return '"something-else"'


def _override(tmp_path, section, path, value):
    table, _, leaf = f"{section}.{path}".rpartition(".")
    return _write(tmp_path, f'[{table}]\n{leaf} = {{ value = {value}, source = "choice: test" }}\n')


def _descriptive(section, path):
    from trnsim.hardware.rules import _matches
    return any(_matches(p, path) for p in DESCRIPTIVE_EXTRA.get(section, ()))


def _refused(path_to_file, rule):
    with pytest.raises(HardwareFileError) as e:
        load_catalog(path_to_file)
    assert e.value.rule == rule, str(e.value)
    assert path_to_file in str(e.value)
    return e.value


# --------------------------------------------------------------------------------- fabric.toml
def _fabric_value(cfg, path):
    keys = path.split(".")
    if keys[0] == "runtime":
        return getattr(cfg.runtime(keys[1]), keys[2])
    if keys[0] == "nccl":  # GPU generations: checked into cfg.nccl_runtimes, kept as read in cfg.nccl
        assert keys[1] in cfg.nccl_runtimes
        return cfg.nccl[keys[1]][keys[2]]
    return getattr(cfg, keys[-1])


@pytest.mark.parametrize("path,value", list(_leaves(_builtin("fabric.toml"))), ids=lambda x: str(x))
def test_fabric_figure_is_read_or_refused(tmp_path, path, value):
    from trnsim.fabric.config import load_fabric_config
    hw = _override(tmp_path, "fabric", path, _changed(value))
    if _descriptive("fabric", path):
        e = _refused(hw, "hardware-file-not-overridable")
        assert path in str(e)
        return
    new, old = _fabric_value(load_fabric_config(hw), path), _fabric_value(load_fabric_config(None), path)
    assert new != old and new == tomllib.loads(f"x = {_changed(value)}")["x"]


def test_fabric_step_latency_drives_a_collective_time(tmp_path):
    from trnsim.fabric.collectives import collective
    hw = _override(tmp_path, "fabric", "latency.step_s", "1.5e-3")   # 1.5 us -> 1.5 ms per step
    base = collective("trn1.32xlarge", "all_reduce", 1024, ranks=32, hardware_file=None)
    slow = collective("trn1.32xlarge", "all_reduce", 1024, ranks=32, hardware_file=hw)
    assert slow.time_us > base.time_us + 1e3   # at least one step's extra latency (a ring has 2(n-1))


def test_fabric_unknown_names_and_non_finite_numbers_are_refused(tmp_path):
    e = _refused(_override(tmp_path, "fabric", "latency.stepp_s", "1e-6"), "hardware-file-unknown-key")
    assert "latency.stepp_s" in str(e)
    _refused(_override(tmp_path, "fabric", "runtime.trn2.launch_overhead", "1e-6"),
             "hardware-file-unknown-key")
    _refused(_override(tmp_path, "fabric", "latency.step_s", "inf"), "hardware-file-range")
    # a new chip family's runtime table is accepted with the names its siblings have
    from trnsim.fabric.config import load_fabric_config
    names = ("launch_overhead_s", "step_overhead_s", "bandwidth_efficiency", "rdh_efficiency", "mesh_efficiency",
             "efa_efficiency", "p2p_efficiency", "core_dma_bytes_per_s", "core_pair_bytes_per_s",
             "graph_call_overhead_s")
    hw = _write(tmp_path, '[fabric.runtime.trn9]\n' + ''.join(
                f'{k} = {{ value = {5e10 if "bytes" in k else 2e-5 if k.endswith("_s") else 0.5}, '
                'source = "choice: test" }\n' for k in names) +
                'default_lnc = { value = 2, source = "choice: test" }\n')
    assert load_fabric_config(hw).runtime("trn9").bandwidth_efficiency == 0.5


# ------------------------------------------------------------------ in_kernel_collectives.toml
@pytest.mark.parametrize("path,value", list(_leaves(_builtin("in_kernel_collectives.toml"))),
                         ids=lambda x: str(x))
def test_in_kernel_collective_figure_drives_the_time_or_is_refused(tmp_path, path, value):
    from trnsim.timing.collectives import collective_time_s, figures
    hw = _override(tmp_path, "in_kernel_collectives", path, "2" if path == "channels" else _changed(value))
    if _descriptive("in_kernel_collectives", path):
        _refused(hw, "hardware-file-not-overridable")
        return
    args = ("all_reduce", 1 << 20, 8, 8)
    assert collective_time_s(figures("trn2", hw), *args) != collective_time_s(figures("trn2", None), *args)


def test_in_kernel_collective_ranges(tmp_path):
    _refused(_override(tmp_path, "in_kernel_collectives", "channels", "0"), "hardware-file-range")
    _refused(_override(tmp_path, "in_kernel_collectives", "issue_overhead_s", "-1e-6"),
             "hardware-file-range")
    _refused(_override(tmp_path, "in_kernel_collectives", "chanels", "2"), "hardware-file-unknown-key")


# ----------------------------------------------------------------------------- numerics.toml
def _to_int(hw, x):
    """A float -> int32 engine conversion of ``x`` with the catalog of hardware file ``hw``."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki.language as nl
    from trnsim.nki.harness import Kernel
    from trnsim.options import Options

    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.load(a), dtype=nl.int32))
        return out
    return Kernel(k, api="legacy").run(np.array(x, np.float32), options=Options(target="trn2", hardware_file=hw)).outputs


def _mx_scale_byte(hw):
    """The QuantizeMX scale byte of one e4m3fn group whose largest |value| is 6.0 (trn3)."""
    from trnsim.nki.core import alloc, dtypes as dt
    from trnsim.nki.core.conventions import PRESETS
    from trnsim.nki.harness import Kernel
    from trnsim.nki.ops import dma, mx
    from trnsim.options import Options

    def k(x):
        s = alloc.ndarray((32, 4), x.dtype, alloc.sbuf, conv=PRESETS["new"])
        dma.copy(s, x)
        d = alloc.ndarray((32, 1), dt.float8_e4m3fn_x4, alloc.sbuf, conv=PRESETS["new"])
        sc = alloc.ndarray((4, 1), dt.uint8, alloc.sbuf, conv=PRESETS["new"])
        mx.quantize_mx(d, s, sc)
        o = alloc.ndarray((4, 1), dt.uint8, alloc.shared_hbm, conv=PRESETS["new"])
        dma.copy(o, sc)
        return o
    x = np.full((32, 4), 6.0, np.float16)
    out = Kernel(k, api="new").run(x, options=Options(target="trn3", hardware_file=hw)).outputs
    return int(np.asarray(out).reshape(-1)[0])


@pytest.mark.parametrize("path,value", list(_leaves(_builtin("numerics.toml"))), ids=lambda x: str(x))
def test_numerics_figure_is_read_or_refused(tmp_path, path, value):
    if _descriptive("numerics", path):
        _refused(_override(tmp_path, "numerics", path, '"something-else"'), "hardware-file-not-overridable")
        return
    if path == "mx.quantize_scale":
        # floor(log2 6.0) = 2, Emax(e4m3fn) = 8: 2 - (8 - 1) + 127 = 122 (ISA), 2 - 8 + 127 = 121 (OCP)
        assert _mx_scale_byte(None) == 122
        assert _mx_scale_byte(_override(tmp_path, "numerics", path, '"ocp"')) == 121
        _refused(_override(tmp_path, "numerics", path, '"emax"'), "hardware-file-range")
        return
    # the two read figures change an engine's float -> int conversion (hand values)
    x = [[2.5, 3.7, -2.5, 3e10]]
    assert _to_int(None, x).tolist() == [[2, 4, -2, 2**31 - 1]]          # RNE, saturating
    new = {"conversion.float_to_int_rounding": '"trunc"', "conversion.float_to_int_overflow": '"wrap"'}[path]
    got = _to_int(_override(tmp_path, "numerics", path, new), x).tolist()
    if path.endswith("rounding"):
        assert got == [[2, 3, -2, 2**31 - 1]]
    else:
        assert got[0][:3] == [2, 4, -2] and got[0][3] != 2**31 - 1
    _refused(_override(tmp_path, "numerics", path, '"nearest"'), "hardware-file-range")


def test_numerics_unknown_name_is_refused(tmp_path):
    _refused(_override(tmp_path, "numerics", "conversion.float_to_int_roundng", '"rne"'),
             "hardware-file-unknown-key")


# --------------------------------------------------------------------------------- gpus.toml
def _gpu_leaves():
    raw = _builtin("gpus.toml")
    for sect in ("gpus", "systems"):
        key = sorted(raw[sect])[0]
        for path, value in _leaves(raw[sect][key], f"{sect}.{key}"):
            yield path, value


@pytest.mark.parametrize("path,value", list(_gpu_leaves()), ids=lambda x: str(x))
def test_gpu_figure_is_read_or_refused(tmp_path, path, value):
    from trnsim.hardware.gpus import load_gpu_catalog
    new = str(value * 2) if path.endswith(".gpus") else _changed(value)  # nvlink_domain <= gpus
    hw = _override(tmp_path, "gpus", path, new)
    if _descriptive("gpus", path):
        _refused(hw, "hardware-file-not-overridable")
        return
    sect, key, leaf = path.split(".")
    cat, base = load_gpu_catalog(user_file=hw), load_gpu_catalog(user_file=None)
    pick = (lambda c: c.gpus[key]) if sect == "gpus" else (lambda c: c.systems[key])
    assert getattr(pick(cat), leaf) != getattr(pick(base), leaf)


def test_gpu_non_finite_figure_is_refused(tmp_path):
    key = sorted(_builtin("gpus.toml")["gpus"])[0]
    _refused(_override(tmp_path, "gpus", f"gpus.{key}.bf16_flops", "nan"), "hardware-file-range")

"""Hardware overrides are honoured or refused by name: range checks, figures that follow the figure
they depend on, figures that must agree, descriptive figures that may not be overridden, and for
each kind of override a kernel whose behaviour it changes."""
import ast
import dataclasses
import os
import typing

import numpy as np
import pytest

import trnsim
from trnsim import api
from trnsim.errors import CapacityError, HardwareFileError, PartitionError, TrnsimError
from trnsim.hardware import get_core, load_catalog, schema
from trnsim.hardware.rules import DESCRIPTIVE, RANGES

KERNELS = '''
import neuronxcc.nki.language as nl

def load(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out

def psum_tile(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    nl.store(out, nl.copy(acc))
    return out

def psum_five(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ts = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(5)]
    acc = ts[0]
    for t in ts[1:]:
        acc = nl.add(acc, t)
    nl.store(out, acc)
    return out

def tile_sizes(a):
    return (nl.tile_size.pmax, nl.tile_size.psum_fmax)

def vector_chain(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in range(16):
        t = nl.multiply(t, t)
    nl.store(out, t)
    return out
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    p = tmp_path_factory.mktemp("k") / "kernels.py"
    p.write_text(KERNELS)
    return str(p)


def _run(kernels, name, hw, shape=(128, 512)):
    k = api.load_kernel(kernels, name)
    a = np.ones(shape, dtype=np.float32)
    return api.time_kernel(k, a, target="trn2", hardware=hw)


def _err(path) -> HardwareFileError:
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(path)
    assert path in str(ei.value)
    return ei.value


# ------------------------------------------------------------------------------------ ranges
@pytest.mark.parametrize("section,value", [("clocks", 0), ("clocks", -1.4e9)])
def test_zero_or_negative_clock_is_refused(hw_file, section, value):
    err = _err(hw_file(f"""
        [cores.v3.{section}]
        vector_hz = {{ value = {value}, source = "choice: test" }}
        """))
    assert err.rule == "hardware-file-range" and err.value == value and "v3.clocks.vector_hz" in str(err)
    assert err.limit in ("> 0", ">= 0")


def _positive_fields():
    """(class, field, dotted path in a v3 core or a trn2 chip) for every figure that must be > 0."""
    paths = {}

    def walk(cls, pre):
        for f in dataclasses.fields(cls):
            tp = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, pre + f.name + ".")
            elif RANGES.get(cls.__name__, {}).get(f.name) == "positive":
                paths[(cls.__name__, f.name)] = pre + f.name
    walk(schema.CoreSpec, "cores.v3.")
    walk(schema.ChipSpec, "chips.trn2.")
    return sorted(paths.values())


@pytest.mark.parametrize("path", _positive_fields())
def test_every_positive_figure_refuses_zero(hw_file, path):
    table, _, leaf = path.rpartition(".")
    err = _err(hw_file(f"""
        [{table}]
        {leaf} = {{ value = 0, source = "choice: test" }}
        """))
    # refused for its range, or (a figure others must agree with) for the disagreement
    assert err.rule in ("hardware-file-range", "hardware-file-consistency", "hardware-file-link"), err
    assert leaf in str(err)


def test_fractions_are_range_checked(hw_file):
    err = _err(hw_file("""
        [cores.v3.timing.dma]
        transpose_hbm_efficiency = { value = 1.5, source = "choice: test" }
        """))
    assert err.rule == "hardware-file-range" and err.limit == "in (0, 1]" and err.value == 1.5


# ------------------------------------------------------------ figures that follow / must agree
def test_sbuf_partitions_drive_the_partition_checks(hw_file, kernels):
    hw = hw_file("""
        [cores.v3.sbuf]
        partitions = { value = 64, source = "choice: test" }
        """)
    c = get_core("trn2", hw)
    assert (c.psum.partitions, c.tile_size.pmax, c.tensor.max_contraction) == (64, 64, 64)
    assert c.source("tile_size.pmax").startswith("derived: follows sbuf.partitions")
    _run(kernels, "load", None)  # 128 partitions load fine on the built-in trn2
    with pytest.raises(PartitionError) as ei:
        _run(kernels, "load", hw)
    assert ei.value.limit == 64 and ei.value.value == 128
    assert _run(kernels, "load", hw, (64, 512)).latency_us > 0
    k = api.load_kernel(kernels, "tile_sizes")
    from trnsim.nki.harness import run_traced
    from trnsim.options import Options
    got = run_traced(k, np.ones((1,), np.float32),
                     options=Options.from_env(target="trn2", hardware_file=hw)).outputs
    assert tuple(got) == (64, 512)


def test_psum_bank_bytes_drive_the_psum_tile_check(hw_file, kernels):
    hw = hw_file("""
        [cores.v3.psum]
        bank_bytes = { value = 1024, source = "choice: test" }
        """)
    c = get_core("trn2", hw)
    assert (c.tile_size.psum_fmax, c.tensor.max_moving_free, c.psum.bytes_per_partition) == (256, 256, 8192)
    _run(kernels, "psum_tile", None)
    with pytest.raises(CapacityError) as ei:
        _run(kernels, "psum_tile", hw)
    assert "1024" in str(ei.value.limit) and "2048" in str(ei.value.value)


def test_psum_bank_count_drives_the_psum_capacity(hw_file, kernels):
    hw = hw_file("""
        [cores.v3.psum]
        banks = { value = 4, source = "choice: test" }
        """)
    c = get_core("trn2", hw)
    assert (c.tile_size.psum_num_banks, c.psum.bytes_per_partition) == (4, 4 * 2048)
    _run(kernels, "psum_five", None)  # five 2 KiB tiles live at once fit 8 banks
    with pytest.raises(CapacityError) as ei:
        _run(kernels, "psum_five", hw)
    assert ei.value.rule == "psum-capacity" and "8192" in str(ei.value.limit)


def test_a_figure_set_alone_that_another_drives_is_refused(hw_file):
    err = _err(hw_file("""
        [cores.v3.tile_size]
        pmax = { value = 64, source = "choice: test" }
        """))
    assert err.rule == "hardware-file-consistency"
    assert "tile_size.pmax = 64" in str(err) and "sbuf.partitions = 128" in str(err)


def test_a_follower_that_would_not_be_whole_is_refused(hw_file):
    err = _err(hw_file("""
        [cores.v3.psum]
        bank_bytes = { value = 1001, source = "choice: test" }
        """))
    assert err.rule == "hardware-file-link" and err.value == 1001


def test_clock_override_changes_the_latency(hw_file, kernels, monkeypatch):
    # every op on its traced engine (Vector): the compiler's engine assignment would move the
    # chain to GpSimd/Scalar once Vector is slower (timing/assign.py)
    monkeypatch.setenv("TRNSIM_ENGINE_POLICY", "fixed")
    hw = hw_file("""
        [cores.v3.clocks]
        vector_hz = { value = 0.48e9, source = "choice: test (half the v3 clock)" }
        """)
    assert get_core("trn2", hw).clocks.vector_hz == 0.48e9
    base = _run(kernels, "vector_chain", None).latency_us
    slow = _run(kernels, "vector_chain", hw).latency_us
    assert slow > 1.3 * base  # 16 dependent Vector ops of 512 elements dominate the kernel


# ------------------------------------------------------------------------ descriptive figures
@pytest.mark.parametrize("section,key,path,value", [
    ("cores", "v3", "dma_queues_per_engine", 8), ("cores", "v3", "clocks.profiler_base_hz", 1e9),
    ("chips", "trn2", "hbm_stacks", 8), ("instances", '"trn2.48xlarge"', "vcpus", 96)])
def test_descriptive_figures_are_not_overridable(hw_file, section, key, path, value):
    table, _, leaf = f"{section}.{key}.{path}".rpartition(".")
    err = _err(hw_file(f"""
        [{table}]
        {leaf} = {{ value = {value}, source = "choice: test" }}
        """))
    assert err.rule == "hardware-file-not-overridable" and err.value == value and leaf in str(err)


def test_a_descriptive_figure_restated_unchanged_is_fine(hw_file):
    q = get_core("trn2").dma_queues_per_engine
    load_catalog(hw_file(f"""
        [cores.v3]
        dma_queues_per_engine = {{ value = {q}, source = "DMAOV" }}
        """))


def _attribute_names_read_outside_hardware():
    """Every attribute name read anywhere in trnsim outside hardware/ and `trnsim hw`'s display."""
    root = os.path.dirname(trnsim.__file__)
    names = set()
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if not f.endswith(".py") or f"{os.sep}hardware{os.sep}" in p \
                    or p.endswith(os.path.join("cli", "hw_cmd.py")):
                continue
            for node in ast.walk(ast.parse(open(p, encoding="utf-8").read())):
                if isinstance(node, ast.Attribute):
                    names.add(node.attr)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and node.value.isidentifier():  # getattr(spec, "name"), row keys
                    names.add(node.value)
    return names


NAMES = ("nc_version", "targets", "node", "aliases", "name", "dmi_product_name")


def test_every_figure_is_read_or_declared_descriptive():
    """A figure no code reads would be an override accepted and ignored: each one must be read
    somewhere outside the catalog, or be listed in DESCRIPTIVE (and so refused as an override)."""
    read = _attribute_names_read_outside_hardware()
    props = {"usable_bytes_per_partition": "reserved_bytes_per_partition",
             "efa_bits_per_s_per_chip": "efa_bandwidth_bits_per_s"}
    read |= {v for k, v in props.items() if k in read}
    ignored = []
    for section, cls in (("cores", schema.CoreSpec), ("chips", schema.ChipSpec),
                         ("instances", schema.InstanceSpec)):
        def walk(c, pre):
            for f in dataclasses.fields(c):
                tp = typing.get_type_hints(c)[f.name]
                if f.name in ("sources", "key"):
                    continue
                if dataclasses.is_dataclass(tp):
                    yield from walk(tp, pre + f.name + ".")
                else:
                    yield pre + f.name
        for path in walk(cls, ""):
            leaf = path.split(".")[-1]
            if path in DESCRIPTIVE.get(section, ()) or leaf in read:
                continue
            if path.startswith("stated."):  # read by `trnsim hw check`, the docs' totals vs chip x count
                continue
            if path in NAMES:  # labels that select or name an entry, not figures of the hardware
                continue
            ignored.append(f"{section}.{path}")
    assert not ignored, f"figures read by no code and not declared descriptive: {ignored}"


def test_errors_are_trnsim_errors(hw_file):
    with pytest.raises(TrnsimError):
        load_catalog(hw_file("""
            [cores.v3.sbuf]
            partitions = { value = -4, source = "choice: test" }
            """))

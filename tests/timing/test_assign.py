"""Engine assignment of instructions left to the compiler (issue 13): what the NKI layer records,
the ``earliest_finish`` policy against hand-computed schedules, the overrides, and the C scheduler
held to the Python reference on traces with ``engine_auto`` instructions."""
import dataclasses

import numpy as np
import pytest

from trnsim.errors import ConfigError
from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.options import Options
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, dependencies, native, schedule
from trnsim.timing.deps import dependencies_py
from trnsim.timing.scheduler import schedule_py

LOC = SourceLoc("assign.py", 1, "k")
needs_native = pytest.mark.skipif(not native.available(),
                                  reason="trnsim.timing._native is not built (or TRNSIM_NATIVE=0)")


def model(target, policy=None, **figs):
    core = get_core(target)
    if figs:  # engine figures changed for one test: {"vector": {"bubble_overlap": 0.0}, ...}
        t = core.timing
        t = dataclasses.replace(t, **{e: dataclasses.replace(getattr(t, e), **f)
                                      for e, f in figs.items()})
        core = dataclasses.replace(core, timing=t)
    return CostModel(core, get_chip(target), engine_policy=policy)


def sbuf(tensor, free, dtype="float32", start=0):
    w = 4 if dtype == "float32" else 2
    return Region("sbuf", tensor, f"t{tensor}", 0, 128, start, start + free * w, 128 * free,
                  dtype, free * w, False)


def ins(i, engine, opcode, reads, writes, free, auto=None, dtype="float32"):
    attrs = (("engine_auto", auto),) if auto else ()
    return Instruction(i, engine, opcode, tuple(reads), tuple(writes), 128, free, dtype, dtype,
                       attrs, LOC, 0)


def trace(instrs):
    return Trace("trn2", [x._replace(index=k) for k, x in enumerate(instrs)])


COPY_ENGINES = ("vector", "scalar", "gpsimd")  # tensor_copy in the registry order


def three_copies():
    """Three independent fp32 copies of 1024 elements per partition, left to the compiler."""
    return trace([ins(k, "vector", "tensor_copy", [sbuf(1 + k, 1024)], [sbuf(10 + k, 1024)], 1024,
                      COPY_ENGINES) for k in range(3)])


def test_earliest_finish_by_hand_trn2():
    # trn2: Vector 0.96 GHz at 2 fp32 elements/partition/cycle (the 256-wide path [ARCH3]),
    # Scalar and GpSimd 1.2 GHz at 1; a copy costs the 60-cycle access bubble [ARCH2] plus its
    # elements / rate; half the bubble (30 cycles) hides behind a queued predecessor.
    tl = schedule_py(three_copies(), model("trn2", "earliest_finish"))
    vec = (60 + 1024 / 2) / 0.96              # 595.83 ns on Vector (564.58 when queued)
    act = (60 + 1024) / 1.2                   # 903.33 ns on Scalar or GpSimd
    # 1st: Vector (595.8) beats Scalar and GpSimd (903.3); 2nd: Scalar and GpSimd tie at 903.3
    # (registry order picks Scalar) and beat Vector (595.8 + 564.6 = 1160.4); 3rd: GpSimd (903.3)
    # beats Vector (1160.4) and Scalar (903.3 + 1054 / 1.2 = 1781.7)
    assert list(tl.engine) == ["vector", "scalar", "gpsimd"]
    assert tl.busy_end == pytest.approx([vec, act, act])
    assert tl.start == pytest.approx([0.0, 0.0, 0.0])


def test_fixed_policy_keeps_the_traced_engine():
    tl = schedule_py(three_copies(), model("trn2", "fixed"))
    assert list(tl.engine) == ["vector"] * 3
    # one engine in order: 60 + 1024 / 2 = 572 cycles, then 542 twice (30 of the 60-cycle
    # bubble hidden)
    assert tl.busy_end[-1] == pytest.approx((572 + 542 + 542) / 0.96)


def test_margin_keeps_the_default_engine():
    # Vector at 1 fp32 element/partition/cycle (v2's rate): (60 + 1024) / 0.96 = 1129.2 ns, so
    # Scalar (903.3 ns) would win by 225.8 ns only: not enough
    m = model("trn2", "earliest_finish", vector={"elems_per_cycle": 1.0})
    assert list(schedule_py(three_copies(), m).engine)[0] == "scalar"
    m.switch_margin_ns = 1000.0
    tl = schedule_py(three_copies(), m)
    assert list(tl.engine)[0] == "vector"


def test_instruction_without_engine_auto_never_moves():
    tr = trace([ins(k, "vector", "tensor_copy", [sbuf(1 + k, 1024)], [sbuf(10 + k, 1024)], 1024)
                for k in range(3)])
    assert list(schedule_py(tr, model("trn2", "earliest_finish")).engine) == ["vector"] * 3


def test_policy_overrides(monkeypatch, tmp_path):
    core, chip = get_core("trn2"), get_chip("trn2")
    assert CostModel(core, chip).policy == core.timing.assign.policy == "earliest_finish"
    monkeypatch.setenv("TRNSIM_ENGINE_POLICY", "fixed")
    assert CostModel(core, chip).policy == "fixed"
    assert Options.from_env().engine_policy == "fixed"
    assert CostModel(core, chip, engine_policy="earliest_finish").policy == "earliest_finish"
    monkeypatch.delenv("TRNSIM_ENGINE_POLICY")
    hw = tmp_path / "hw.toml"
    hw.write_text('[cores.v3.timing.assign]\npolicy = { value = "fixed", source = "test" }\n')
    from trnsim.hardware import load_catalog
    cat = load_catalog(str(hw))
    assert CostModel(cat.cores["v3"], chip).policy == "fixed"
    with pytest.raises(ConfigError) as e:
        CostModel(core, chip, engine_policy="round_robin")
    assert e.value.rule == "engine-policy" and e.value.value == "round_robin"


# -- the access bubble and the GpSimd two-input rule ------------------------------------------------

def test_bubble_overlap_only_when_queued_trn1():
    m = model("trn1", "fixed")  # Vector 1.12 GHz
    a = ins(0, "vector", "tensor_copy", [sbuf(1, 512)], [sbuf(2, 512)], 512)
    b = ins(1, "vector", "tensor_copy", [sbuf(3, 512)], [sbuf(4, 512)], 512)   # independent
    c = ins(2, "vector", "tensor_copy", [sbuf(4, 512)], [sbuf(5, 512)], 512)   # reads b's result
    tl = schedule_py(trace([a, b, c]), m)
    full, queued = (60 + 512) / 1.12, (30 + 512) / 1.12
    assert tl.busy_end[0] == pytest.approx(full)
    assert tl.busy_end[1] - tl.start[1] == pytest.approx(queued)
    # c waits for b's result (100-cycle latency): the engine is idle, the bubble is paid in full
    assert tl.start[2] == pytest.approx(full + queued + 100 / 1.12)
    assert tl.busy_end[2] - tl.start[2] == pytest.approx(full)


def test_bubble_overlap_zero_is_the_old_rule():
    m = model("trn1", "fixed", vector={"bubble_overlap": 0.0})
    tr = trace([ins(k, "vector", "tensor_copy", [sbuf(1 + k, 512)], [sbuf(10 + k, 512)], 512)
                for k in range(2)])
    assert schedule_py(tr, m).busy_end[1] == pytest.approx(2 * (60 + 512) / 1.12)


def test_bubble_never_below_min_ii():
    m = model("trn1", "fixed")
    # 8 elements: max(64, 60 + 8) = 68 cycles; at most 68 - 64 = 4 cycles can hide
    c = m.compute(ins(0, "vector", "tensor_copy", [sbuf(1, 8)], [sbuf(2, 8)], 8))
    assert c.occupancy_ns == pytest.approx(68 / 1.12)
    assert c.hidden_ns == pytest.approx(4 / 1.12)


def test_gpsimd_two_input_factor():
    m = model("trn1", "fixed")  # GpSimd 1.4 GHz, 1 fp32 element per partition per cycle
    tt = ins(0, "gpsimd", "tensor_tensor", [sbuf(1, 512), sbuf(2, 512)], [sbuf(3, 512)], 512)
    assert m.compute(tt).occupancy_ns == pytest.approx((60 + 2 * 512) / 1.4)
    cp = ins(0, "gpsimd", "tensor_copy", [sbuf(1, 512)], [sbuf(3, 512)], 512)
    assert m.compute(cp).occupancy_ns == pytest.approx((60 + 512) / 1.4)


# -- dependencies: a movable reader does not stand for another engine's -------------------------

def test_auto_reads_do_not_collapse():
    r = sbuf(1, 512)
    a = ins(0, "vector", "tensor_copy", [r], [sbuf(2, 512)], 512, COPY_ENGINES)
    b = ins(1, "vector", "tensor_copy", [r], [sbuf(3, 512)], 512, COPY_ENGINES)
    w = ins(2, "vector", "tensor_copy", [sbuf(4, 512)], [r], 512)  # overwrites what a, b read
    tr = trace([a, b, w])
    deps = dependencies_py(tr)
    assert set(deps[2]) == {0, 1}  # a may run on another engine than b: both WAR edges stay
    fixed = trace([x._replace(attrs=()) for x in (a, b)] + [w])
    assert set(dependencies_py(fixed)[2]) == {1}  # same engine, in order: b stands for a


# -- the NKI layer records the capable engines --------------------------------------------------

def _kernel_trace(target):
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.add(t, t)                                              # tensor_tensor
        v = nisa.tensor_scalar(u, np.multiply, 2.0)                   # tensor_scalar (basic op)
        w = nisa.tensor_scalar(v, np.subtract, 1.0)                   # tensor_scalar (other op)
        x = nisa.tensor_copy(w)                                       # tensor_copy
        y = nisa.tensor_tensor(x, w, op=np.add, engine=nisa.vector_engine)  # engine fixed
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        z = nisa.tensor_copy(ps)                                      # reads PSUM
        nl.store(out, nl.add(y, z))
        return out

    r = k.run(np.ones((128, 512), np.float32), options=Options(target=target, timing_only=True))
    return [(i.opcode, i.attr("engine_auto")) for i in r.traces[0].instructions
            if i.engine != "dma" and i.opcode != "memset"]


@pytest.mark.parametrize("target,scalar_ts,scalar_any,scalar_copy", [
    ("trn1", False, False, False), ("trn2", True, False, True), ("trn3", True, True, True)])
def test_nki_records_capable_engines(target, scalar_ts, scalar_any, scalar_copy):
    got = _kernel_trace(target)
    # ISA: tensor_tensor on Vector or GpSimd; tensor_scalar/tensor_copy on Scalar from v3, any
    # tensor_scalar op on Scalar from v4 (v3: multiply[, add] or add); GpSimd cannot read PSUM
    assert got[0] == ("tensor_tensor", ("vector", "gpsimd"))
    assert got[1] == ("tensor_scalar", ("vector", "scalar", "gpsimd") if scalar_ts
                      else ("vector", "gpsimd"))
    assert got[2] == ("tensor_scalar", ("vector", "scalar", "gpsimd") if scalar_any
                      else ("vector", "gpsimd"))
    assert got[3] == ("tensor_copy", ("vector", "scalar", "gpsimd") if scalar_copy
                      else ("vector", "gpsimd"))
    assert got[4] == ("tensor_tensor", None)
    assert got[5] == got[3]  # reads PSUM: the timing model drops GpSimd (below)


def test_timing_drops_engines_that_cannot_touch_the_operands():
    m = model("trn2", "earliest_finish")
    psum = sbuf(1, 512)._replace(memory="psum", tensor=-1)
    cp = ins(0, "vector", "tensor_copy", [psum], [sbuf(2, 512)], 512, COPY_ENGINES)
    assert m.auto_engines(cp) == ("vector", "scalar")  # GpSimd has no PSUM access [ISA]
    assert m.auto_engines(cp._replace(reads=(sbuf(3, 512),))) == COPY_ENGINES
    tt = ins(0, "vector", "tensor_tensor", [sbuf(1, 512), sbuf(2, 512)], [sbuf(3, 512)], 512,
             ("vector", "gpsimd"))
    assert m.auto_engines(tt) == ()  # float tensor_tensor runs on Vector [ISA]: not balanced
    m.balance_two_input = True
    assert m.auto_engines(tt) == ("vector", "gpsimd")
    assert model("trn2", "fixed").auto_engines(cp) == ()


# -- the C scheduler against the reference ------------------------------------------------------

def _random_auto_trace(rng, n=400):
    out = []
    caps = {"tensor_copy": COPY_ENGINES, "tensor_tensor": ("vector", "gpsimd"),
            "tensor_scalar": ("vector", "scalar", "gpsimd"), "activation": None}
    for i in range(n):
        op = str(rng.choice(list(caps)))
        free = int(rng.choice([1, 8, 128, 300, 512, 2048]))
        dtype = str(rng.choice(["float32", "bfloat16"]))
        mem = "psum" if rng.random() < 0.15 else "sbuf"
        src = [sbuf(int(rng.integers(1, 12)), free, dtype, int(rng.choice([0, 4096])))]
        if op == "tensor_tensor":
            src.append(sbuf(int(rng.integers(1, 12)), free, dtype))
        dst = sbuf(int(rng.integers(1, 12)), free, dtype, int(rng.choice([0, 4096])))
        if mem == "psum":
            dst = dst._replace(memory="psum", tensor=-1, start=0, stop=free * 4)
        auto = caps[op] if rng.random() < 0.8 else None
        eng = "scalar" if op == "activation" else "vector"
        out.append(ins(i, eng, op, src, [dst], free, auto, dtype))
        if rng.random() < 0.1:  # a DMA now and then
            out.append(Instruction(len(out), "dma", "dma_copy", (Region("hbm", 100, "h", 0, 128, 0,
                                   free * 4, 128 * free, "float32", free * 4, False),),
                                   (sbuf(int(rng.integers(1, 12)), free),), 128, free, "float32",
                                   "float32", (), LOC, 0))
    return trace(out)


@needs_native
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("policy", ["fixed", "earliest_finish"])
def test_native_matches_reference_with_auto(target, policy):
    rng = np.random.default_rng(13)
    for _ in range(3):
        tr = _random_auto_trace(rng)
        m = model(target, policy)
        m.switch_margin_ns = float(rng.choice([0.0, 50.0]))
        m.balance_two_input = bool(rng.random() < 0.5)
        assert [sorted(d) for d in dependencies(tr)] == [sorted(d) for d in dependencies_py(tr)]
        a = schedule_py(tr, m)
        b = schedule(tr, m, backend="native")
        for f in ("start", "end", "busy_end", "engine_code"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        if policy == "earliest_finish":
            assert len(set(a.engine)) >= 3  # work really moved


# -- masked partial tiles --------------------------------------------------------------------------

def test_masked_tile_costs_its_active_elements():
    # a tensor_copy of a 512-wide tile with 100 columns active: 60 + 100 cycles on trn1's Vector
    m = model("trn1", "fixed")
    base = ins(0, "vector", "tensor_copy", [sbuf(1, 512)], [sbuf(2, 512)], 512)
    part = base._replace(attrs=(("active_free", 100),))
    assert m.compute(part).occupancy_ns == pytest.approx((60 + 100) / 1.12)
    assert m.compute(base).occupancy_ns == pytest.approx((60 + 512) / 1.12)
    full = model("trn1", "fixed", vector={"masked_active_only": False})
    assert full.compute(part).occupancy_ns == pytest.approx((60 + 512) / 1.12)


def test_nki_records_the_active_size():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        u = nisa.tensor_copy(t, mask=(i_f < 100))                   # 100 of 512 columns
        v = nisa.tensor_copy(u, mask=(i_p < 64))                    # rows only: full width
        w = nisa.activation(op=nl.exp, data=v, mask=(i_f >= 448))   # the last 64 columns
        nl.store(out, w)
        return out

    r = k.run(np.ones((128, 512), np.float32), options=Options(target="trn2", timing_only=True))
    got = [i.attr("active_free") for i in r.traces[0].instructions if i.engine != "dma"]
    assert got == [100, None, 64]

"""Timing of in-kernel collectives (timing/collectives.py): the collective instruction of a
multi-rank run takes the ring closed forms, computed here by hand from the catalog's figures."""
import numpy as np
import pytest

import trnsim.frontends.nki as nki
from trnsim.frontends.nki.collectives import run_ranks
from trnsim.hardware import load_catalog
from trnsim.ir.opcodes import lookup

from collective_staging import stage as _stage

ncc, nisa, nl = nki.collectives, nki.isa, nki.language


@nki.jit
def all_reduce_k(inp, rg, op):
    src, dst, out = _stage(inp, inp.shape)
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=op)
    nisa.dma_copy(dst=out, src=dst)
    return out


@nki.jit
def all_gather_k(inp, rg, n):
    src, dst, out = _stage(inp, (inp.shape[0] * n, inp.shape[1]))
    ncc.all_gather(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0)
    nisa.dma_copy(dst=out, src=dst)
    return out


def _x(ranks, *shape):
    return np.random.default_rng(0).standard_normal((ranks,) + shape).astype(np.float32)


def _collective(run):
    return [i for i in run.traces[0] if lookup(i.opcode).cost_class == "collective"]


def _figures(chip_key):
    """The figures the timing reads, straight from the catalog's data (not through the code): the rate one
    rank gets when two ranks of the chip exchange (each rank's DMA rate, bounded by the core-pair path,
    at the runtime's default LNC), one NeuronLink port at the rings' fraction, the step latency, cores."""
    cat = load_catalog()
    chip = cat.chips[chip_key]
    fab = cat.extra["fabric"]
    rt = {k: v["value"] for k, v in fab["runtime"][chip_key].items()}
    eff = rt["bandwidth_efficiency"]
    both = fab["links"]["figure_counts_both_directions"]["value"]
    port = chip.chip_link_bandwidth_bytes_per_s / chip.neuronlink_ports / (2 if both else 1)
    lnc = rt["default_lnc"]
    two = min(2 * rt["core_dma_bytes_per_s"] * lnc, 2 * rt["core_pair_bytes_per_s"] * lnc) / 2
    return (two, port * eff, fab["latency"]["step_s"]["value"], chip.cores)


def _collective_ns(res, rank=0):
    est = res.estimate()[rank]
    tl = est.cores[0].timeline
    tr = res.runs[rank].traces[0]
    i = next(j for j, ins in enumerate(tr) if lookup(ins.opcode).cost_class == "collective")
    return tl.end[i] - tl.end[i - 1]  # the copy before it is the only thing it waits for


def test_ring_all_reduce_over_two_ranks_of_one_chip_takes_the_ring_formula():
    pair, _, step, _ = _figures("trn2")
    n, S = 2, 128 * 64 * 4
    x = _x(n, 128, 64)
    res = run_ranks(all_reduce_k, n, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), nl.add))
    # two ranks of one chip: each moves at its share of the core-to-core path
    B = pair
    want_s = 2 * (n - 1) * step + 2 * (n - 1) / n * S / B
    assert _collective_ns(res) == pytest.approx(want_s * 1e9, rel=1e-9)
    # the fabric's own closed form (its flow simulator's oracle) says the same
    from trnsim.fabric.closed_form import ring_all_reduce_s
    assert want_s == pytest.approx(ring_all_reduce_s(n, S, B, step), rel=1e-12)


def test_all_gather_across_two_chips_uses_one_neuronlink_port_per_rank_group():
    _, port, step, cores = _figures("trn2")
    per_chip = cores // 2  # LNC=2: logical cores per chip
    n = 2 * per_chip       # the ranks fill two chips
    x = _x(n, 2, 64)
    S = n * 2 * 64 * 4     # gathered bytes
    res = run_ranks(all_gather_k[2], n,
                    per_rank=lambda r: (x[r], ncc.ReplicaGroup([list(range(n))]), n))
    ins = _collective(res.runs[0])[0]
    assert ins.attr("chips") == 2
    B = port / per_chip    # the ranks of one chip share its port
    want_s = (n - 1) * step + (n - 1) * (S / n) / B
    assert _collective_ns(res) == pytest.approx(want_s * 1e9, rel=1e-9)


def test_timing_figures_come_from_the_hardware_file(tmp_path):
    f = tmp_path / "what_if.toml"
    f.write_text('[in_kernel_collectives]\nissue_overhead_s = { value = 4e-6, source = "choice: '
                 'test" }\n[fabric.latency]\nstep_s = { value = 3e-6, source = "choice: test" }\n')
    pair, _, _, _ = _figures("trn2")
    n, S = 2, 16 * 8 * 4
    x = _x(n, 16, 8)
    res = run_ranks(all_reduce_k, n, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), nl.add))
    est = res.estimate(hardware_file=str(f))[0]
    tr = res.runs[0].traces[0]
    i = next(j for j, ins in enumerate(tr) if ins.opcode == "all_reduce")
    got = est.cores[0].timeline.end[i] - est.cores[0].timeline.end[i - 1]
    want_s = 4e-6 + 2 * 3e-6 + 2 * (n - 1) / n * S / pair
    assert got == pytest.approx(want_s * 1e9, rel=1e-9)

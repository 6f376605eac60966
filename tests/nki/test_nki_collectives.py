"""In-kernel collectives (nki.collectives): real values across ranks checked against numpy, the
documented replica-group semantics, errors for mismatches / bad groups / deadlocks, and the trace
instruction (timing: tests/timing/test_collective_timing.py)."""
import numpy as np
import pytest

import trnsim.frontends.nki as nki
from trnsim.errors import KernelError, LaunchError, MemoryAccessError, TrnsimError
from trnsim.frontends.nki.collectives import run_ranks
from trnsim.ir.opcodes import lookup
from trnsim.nki.world import CollectiveDeadlockError, CollectiveMismatchError

from collective_staging import hbm as _hbm, stage as _stage

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


@nki.jit
def reduce_scatter_k(inp, rg, n):
    src, dst, out = _stage(inp, (inp.shape[0] // n, inp.shape[1]))
    ncc.reduce_scatter(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0, op=nl.add)
    nisa.dma_copy(dst=out, src=dst)
    return out


@nki.jit
def all_to_all_k(inp, rg):
    src, dst, out = _stage(inp, inp.shape)
    ncc.all_to_all(srcs=[src], dsts=[dst], replica_group=rg, collective_dim=0)
    nisa.dma_copy(dst=out, src=dst)
    return out


@nki.jit
def permute_k(inp, fill, pairs):
    src, dst, out = _stage(inp, inp.shape)
    nisa.dma_copy(dst=dst, src=fill)
    ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=pairs)
    nisa.dma_copy(dst=out, src=dst)
    return out


def _x(ranks, *shape, seed=0):
    return np.random.default_rng(seed).standard_normal((ranks,) + shape).astype(np.float32)


# -- values ---------------------------------------------------------------------------------------

def test_all_reduce_sums_every_ranks_own_input():
    x = _x(4, 128, 64)
    rg = ncc.ReplicaGroup([[0, 1, 2, 3]])
    res = run_ranks(all_reduce_k, 4, per_rank=lambda r: (x[r], rg, nl.add))
    for out in res.outputs:
        np.testing.assert_allclose(out, x.sum(0), rtol=1e-5, atol=1e-5)


def test_all_reduce_max_and_min():
    x = _x(2, 16, 8, seed=1)
    rg = ncc.ReplicaGroup([[0, 1]])
    mx = run_ranks(all_reduce_k, 2, per_rank=lambda r: (x[r],), rg=rg, op=nl.maximum)
    mn = run_ranks(all_reduce_k, 2, per_rank=lambda r: (x[r],), rg=rg, op=nl.minimum)
    for a, b in zip(mx.outputs, mn.outputs):
        np.testing.assert_array_equal(a, np.maximum(x[0], x[1]))
        np.testing.assert_array_equal(b, np.minimum(x[0], x[1]))


def test_bf16_all_reduce_accumulates_in_fp32_and_rounds_once():
    import ml_dtypes
    x = _x(4, 8, 32, seed=2).astype(ml_dtypes.bfloat16)
    rg = ncc.ReplicaGroup([[0, 1, 2, 3]])
    res = run_ranks(all_reduce_k, 4, per_rank=lambda r: (x[r], rg, nl.add))
    want = x.astype(np.float32).sum(0).astype(ml_dtypes.bfloat16)
    for out in res.outputs:
        assert out.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


def test_rank_lists_reduce_independently():
    x = _x(4, 8, 16, seed=3)
    rg = ncc.ReplicaGroup([[0, 1], [2, 3]])
    res = run_ranks(all_reduce_k, 4, per_rank=lambda r: (x[r], rg, nl.add))
    for r, out in enumerate(res.outputs):
        lo = 0 if r < 2 else 2
        np.testing.assert_allclose(out, x[lo] + x[lo + 1], rtol=1e-6)


def test_replica_group_from_partition_op_matches_the_documented_examples():
    op = ncc.rg_partition_op
    assert ncc.ReplicaGroup.from_partition_op(8, op.bitwise_and, 0).groups == [list(range(8))]
    assert ncc.ReplicaGroup.from_partition_op(8, op.div, 4).groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert ncc.ReplicaGroup.from_partition_op(8, op.mod, 4).groups == [[0, 4], [1, 5], [2, 6],
                                                                       [3, 7]]


def test_all_gather_concatenates_in_rank_order():
    x = _x(4, 16, 32, seed=4)
    rg = ncc.ReplicaGroup([[0, 1, 2, 3]])
    res = run_ranks(all_gather_k, 4, per_rank=lambda r: (x[r], rg, 4))
    for out in res.outputs:
        np.testing.assert_array_equal(out, x.reshape(64, 32))


def test_all_gather_follows_the_rank_list_order_not_rank_numbers():
    x = _x(2, 4, 8, seed=5)
    rg = ncc.ReplicaGroup([[1, 0]])
    res = run_ranks(all_gather_k, 2, per_rank=lambda r: (x[r], rg, 2))
    for out in res.outputs:
        np.testing.assert_array_equal(out, np.concatenate([x[1], x[0]]))


def test_sbuf_all_gather_along_the_free_dim():
    @nki.jit
    def k(inp, rg, n):
        H, W = inp.shape
        a = nl.ndarray((H, W), dtype=inp.dtype, buffer=nl.sbuf)
        b = nl.ndarray((H, W * n), dtype=inp.dtype, buffer=nl.sbuf)
        out = _hbm((H, W * n), inp.dtype)
        nisa.dma_copy(dst=a, src=inp)
        ncc.all_gather(srcs=[a], dsts=[b], replica_group=rg, collective_dim=1)
        nisa.dma_copy(dst=out, src=b)
        return out

    x = _x(2, 128, 64, seed=6)
    res = run_ranks(k, 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), 2))
    for out in res.outputs:
        np.testing.assert_array_equal(out, np.concatenate([x[0], x[1]], axis=1))


def test_reduce_scatter_gives_rank_k_chunk_k_of_the_sum():
    x = _x(4, 64, 16, seed=7)
    rg = ncc.ReplicaGroup([[0, 1, 2, 3]])
    res = run_ranks(reduce_scatter_k, 4, per_rank=lambda r: (x[r], rg, 4))
    total = x.sum(0)
    for r, out in enumerate(res.outputs):
        np.testing.assert_allclose(out, total[16 * r:16 * (r + 1)], rtol=1e-5, atol=1e-5)


def test_all_to_all_sends_chunk_j_to_rank_j():
    x = _x(4, 8, 4, seed=8)
    rg = ncc.ReplicaGroup([[0, 1, 2, 3]])
    res = run_ranks(all_to_all_k, 4, per_rank=lambda r: (x[r], rg))
    for j, out in enumerate(res.outputs):
        want = np.concatenate([x[i][2 * j:2 * (j + 1)] for i in range(4)])
        np.testing.assert_array_equal(out, want)


def test_collective_permute_moves_data_along_the_pairs_only():
    x = _x(3, 4, 8, seed=9)
    fill = np.full((4, 8), -1.0, np.float32)
    res = run_ranks(permute_k, 3, per_rank=lambda r: (x[r],), fill=fill, pairs=[(0, 2), (2, 1)])
    np.testing.assert_array_equal(res.outputs[0], np.full((4, 8), -1.0, np.float32))  # no source
    np.testing.assert_array_equal(res.outputs[1], x[2])
    np.testing.assert_array_equal(res.outputs[2], x[0])


@nki.jit
def ring_gather_k(inp, table, rg, n):
    """A ring all-gather through collective_permute_implicit: at step i, the buffer holds the data
    of rank current_processing_rank_id(i); that id picks the output row (scalar_offset)."""
    H, W = inp.shape
    bufs = [_hbm((H, W), inp.dtype, f"buf{i}") for i in range(2)]
    out = _hbm((n, H, W), inp.dtype)
    ids = _hbm((n, 1), nl.int32)
    nisa.dma_copy(dst=bufs[0], src=inp)
    for step in range(n):
        cur = bufs[step % 2]
        who = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=step,
                                                                         replica_group=rg)
        nisa.dma_copy(dst=ids[step:step + 1, :],
                      src=table.ap(pattern=[[1, 1], [1, 1]], scalar_offset=who, indirect_dim=1))
        nisa.dma_copy(dst=out.ap(pattern=[[W, H], [1, W]], scalar_offset=who, indirect_dim=0),
                      src=cur)
        if step < n - 1:
            ncc.collective_permute_implicit(srcs_by_channel=[[cur]],
                                            dsts_by_channel=[[bufs[(step + 1) % 2]]],
                                            replica_group=rg)
    return out, ids


def test_implicit_ring_permute_and_processing_rank_ids():
    n = 4
    x = _x(n, 8, 16, seed=10)
    table = np.arange(n, dtype=np.int32).reshape(1, n)
    rg = ncc.ReplicaGroup([list(range(n))])
    res = run_ranks(ring_gather_k, n, per_rank=lambda r: (x[r], table, rg, n))
    for r, (out, ids) in enumerate(res.outputs):
        np.testing.assert_array_equal(out, x)  # every rank ends with every rank's data in place
        # step i processes the rank i places before this one in the ring (it sends forward)
        assert ids.reshape(-1).tolist() == [(r - i) % n for i in range(n)]


def test_implicit_reduce_sends_the_reduced_pair_forward():
    @nki.jit
    def k(a, b, rg):
        s0, s1 = _hbm(a.shape, a.dtype, "s0"), _hbm(a.shape, a.dtype, "s1")
        d = _hbm(a.shape, a.dtype, "d")
        out = _hbm(a.shape, a.dtype)
        nisa.dma_copy(dst=s0, src=a)
        nisa.dma_copy(dst=s1, src=b)
        ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[s0]], srcs1_by_channel=[[s1]],
                                               dsts_by_channel=[[d]], replica_group=rg,
                                               op=nl.maximum)
        nisa.dma_copy(dst=out, src=d)
        return out

    a, b = _x(3, 4, 4, seed=11), _x(3, 4, 4, seed=12)
    res = run_ranks(k, 3, per_rank=lambda r: (a[r], b[r], ncc.ReplicaGroup([[0, 1, 2]])))
    for r, out in enumerate(res.outputs):
        p = (r - 1) % 3
        np.testing.assert_array_equal(out, np.maximum(a[p], b[p]))


def test_rank_id_is_a_register_usable_as_scalar_offset():
    @nki.jit
    def k(t):
        _, H, W = t.shape
        out = _hbm((H, W), t.dtype)
        nisa.dma_copy(dst=out, src=t.ap(pattern=[[W, H], [1, W]], scalar_offset=ncc.rank_id(),
                                        indirect_dim=0))
        return out

    t = _x(3, 4, 8, seed=13)
    res = run_ranks(k, 3, t)
    for r, out in enumerate(res.outputs):
        np.testing.assert_array_equal(out, t[r])


def test_lnc2_ranks_meet_core_by_core():
    @nki.jit
    def k(inp, rg):
        H, W = inp.shape
        c = nl.program_id(0)
        half = H // 2
        # shared_hbm is shared by the two LNC cores: each core stages its own half (one
        # staging tensor written by both cores would be a race, and trnsim reports it)
        src, dst = _hbm((H, W), inp.dtype, "src"), _hbm((H, W), inp.dtype, "dst")
        out = _hbm((H, W), inp.dtype)
        mine = slice(c * half, (c + 1) * half)
        nisa.dma_copy(dst=src[mine, :], src=inp[mine, :])
        ncc.all_reduce(srcs=[src[mine, :]], dsts=[dst[mine, :]], replica_group=rg, op=nl.add)
        nisa.dma_copy(dst=out[mine, :], src=dst[mine, :])
        return out

    x = _x(2, 16, 8, seed=14)
    res = run_ranks(k[2], 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]])))
    for out in res.outputs:
        np.testing.assert_allclose(out, x[0] + x[1], rtol=1e-6)
    assert all(len(r.traces) == 2 for r in res.runs)  # two core traces per rank


def test_single_rank_launch_copies_over_its_own_group():
    x = _x(1, 4, 8, seed=15)[0]
    out = all_reduce_k(x, ncc.ReplicaGroup([[0]]), nl.add)
    np.testing.assert_array_equal(out, x)


# -- errors ---------------------------------------------------------------------------------------

def test_mismatched_shapes_across_ranks_name_both_ranks():
    x = _x(2, 8, 8, seed=16)
    rg = ncc.ReplicaGroup([[0, 1]])
    with pytest.raises(CollectiveMismatchError) as ei:
        run_ranks(all_reduce_k, 2, per_rank=lambda r: (x[r][:4 + 4 * r], rg, nl.add))
    e = ei.value
    assert e.rule == "collective-mismatch"
    assert "rank 0" in str(e) and "rank 1" in str(e) and "(4, 8)" in str(e) and "(8, 8)" in str(e)
    assert "test_nki_collectives.py" in str(e)


def test_mismatched_dtypes_across_ranks():
    x = _x(2, 8, 8, seed=17)
    rg = ncc.ReplicaGroup([[0, 1]])
    with pytest.raises(CollectiveMismatchError, match="float16"):
        run_ranks(all_reduce_k, 2,
                  per_rank=lambda r: (x[r].astype(np.float16 if r else np.float32), rg, nl.add))


def test_ranks_calling_different_collectives():
    @nki.jit
    def k(inp, rg):
        src, dst = _hbm(inp.shape, inp.dtype, "src"), _hbm(inp.shape, inp.dtype, "dst")
        nisa.dma_copy(dst=src, src=inp)
        if int(ncc.rank_id()) == 0:  # host branching on a rank: simulation-only, to break it
            ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.add)
        else:
            ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.maximum)
        return dst

    with pytest.raises(CollectiveMismatchError, match="arguments") as ei:
        run_ranks(k, 2, np.zeros((2, 2), np.float32), ncc.ReplicaGroup([[0, 1]]))
    assert "'add'" in str(ei.value) and "'maximum'" in str(ei.value)


@pytest.mark.parametrize("groups,rule", [
    ([[0, 1, 2]], "replica-group-rank"),      # rank 2 in a 2-rank launch
    ([[0], [1, 0]], "replica-group-overlap"),
    ([[0, 1], [2]], "replica-group-size"),
    ([[1]], "replica-group-rank"),            # rank 0 in no rank-list
])
def test_bad_replica_groups(groups, rule):
    n = 3 if rule == "replica-group-size" else 2
    x = _x(n, 2, 2)
    with pytest.raises(LaunchError) as ei:
        run_ranks(all_reduce_k, n, per_rank=lambda r: (x[r],), rg=ncc.ReplicaGroup(groups),
                  op=nl.add)
    assert ei.value.rule == rule


def test_group_naming_other_ranks_in_a_single_rank_launch_says_how_to_launch_more():
    with pytest.raises(LaunchError, match="1 rank") as ei:
        all_reduce_k(np.zeros((2, 2), np.float32), ncc.ReplicaGroup([[0, 1]]), nl.add)
    assert "run_ranks" in ei.value.hint


def test_wrong_destination_shape_for_all_gather():
    x = _x(2, 4, 4)
    with pytest.raises(TrnsimError) as ei:
        run_ranks(all_gather_k, 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), 3))
    assert ei.value.rule == "collective-shape" and "(8, 4)" in str(ei.value)


def test_recv_without_a_matching_send_is_a_deadlock_naming_both_ranks():
    @nki.jit
    def k(inp):
        src, dst = _hbm(inp.shape, inp.dtype, "src"), _hbm(inp.shape, inp.dtype, "dst")
        nisa.dma_copy(dst=src, src=inp)
        nisa.dma_copy(dst=dst, src=inp)
        if int(ncc.rank_id()) == 1:  # only rank 1 takes part: rank 0 never sends
            ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=[(0, 1)])  # RECV
        return dst

    with pytest.raises(CollectiveDeadlockError) as ei:
        run_ranks(k, 2, np.zeros((2, 2), np.float32))
    msg = str(ei.value)
    recv_line = next(i for i, l in enumerate(open(__file__), 1) if l.rstrip().endswith("# RECV"))
    import inspect
    def_line = inspect.getsourcelines(k.fn)[1]  # where the kernel (its decorator) starts
    assert f"rank 1 waits in collective_permute (receive from rank 0) at {__file__}:{recv_line}" \
        in msg
    assert "rank 0, which finished the kernel" in msg and f":{def_line}" in msg
    assert ei.value.rule == "collective-deadlock"


def test_a_rank_that_skips_a_group_collective_deadlocks_the_others():
    @nki.jit
    def k(inp, rg):
        src, dst = _hbm(inp.shape, inp.dtype, "src"), _hbm(inp.shape, inp.dtype, "dst")
        nisa.dma_copy(dst=src, src=inp)
        nisa.dma_copy(dst=dst, src=inp)
        if int(ncc.rank_id()) != 2:
            ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.add)
        return dst

    with pytest.raises(CollectiveDeadlockError, match="rank 2, which finished the kernel"):
        run_ranks(k, 3, np.zeros((2, 2), np.float32), ncc.ReplicaGroup([[0, 1, 2]]))


def test_io_tensors_and_sbuf_all_to_all_are_refused():
    @nki.jit
    def io(inp, rg):
        dst = _hbm(inp.shape, inp.dtype, "dst")
        ncc.all_reduce(srcs=[inp], dsts=[dst], replica_group=rg, op=nl.add)
        return dst

    with pytest.raises(MemoryAccessError) as ei:
        io(np.zeros((2, 2), np.float32), ncc.ReplicaGroup([[0]]))
    assert ei.value.rule == "collective-io-tensor"

    @nki.jit
    def sb(inp, rg):
        a = nl.ndarray(inp.shape, dtype=inp.dtype, buffer=nl.sbuf)
        b = nl.ndarray(inp.shape, dtype=inp.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=inp)
        ncc.all_to_all(srcs=[a], dsts=[b], replica_group=rg, collective_dim=0)
        return inp

    with pytest.raises(MemoryAccessError) as ei:
        sb(np.zeros((2, 2), np.float32), ncc.ReplicaGroup([[0]]))
    assert ei.value.rule == "collective-memory" and ei.value.limit == "hbm"


def test_collectives_outside_a_kernel_and_variable_length_ones():
    from trnsim.errors import UnsupportedError
    assert ncc.rank_id() == 0
    with pytest.raises(KernelError) as ei:
        ncc.all_reduce([], [], ncc.ReplicaGroup([[0, 1]]), nl.add)
    assert ei.value.rule == "err_nki_api_outside_of_nki_kernel"
    with pytest.raises(UnsupportedError, match="all_to_all_v"):
        ncc.all_to_all_v([], [], ncc.ReplicaGroup([[0]]), None)


# -- trace and timing -----------------------------------------------------------------------------

def _collective(run):
    return [i for i in run.traces[0] if lookup(i.opcode).cost_class == "collective"]


def test_the_collective_is_one_registered_instruction_with_bytes_and_peers():
    x = _x(2, 128, 64)
    res = run_ranks(all_gather_k, 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), 2))
    (ins,) = _collective(res.runs[1])
    assert ins.opcode == "all_gather" and ins.engine == "dma" == lookup("all_gather").engine
    assert ins.attr("bytes") == 2 * 128 * 64 * 4  # the gathered destination
    assert ins.attr("peers") == (0, 1) and ins.attr("ranks") == 2
    assert [r.name for r in ins.reads] == ["src"] and [w.name for w in ins.writes] == ["dst"]


def test_timing_only_ranks_trace_the_same_collectives_without_values():
    from trnsim.options import Options
    x = _x(2, 128, 64)
    opts = Options.from_env().replace(timing_only=True)
    res = run_ranks(all_reduce_k, 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), nl.add),
                    options=opts)
    full = run_ranks(all_reduce_k, 2, per_rank=lambda r: (x[r], ncc.ReplicaGroup([[0, 1]]), nl.add))
    assert [i.opcode for i in res.runs[0].traces[0]] == [i.opcode for i in full.runs[0].traces[0]]
    assert res.latency_us() == pytest.approx(full.latency_us(), rel=1e-12)

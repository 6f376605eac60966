"""End-to-end checks of small legacy kernels against numpy references computed in the test."""
import ml_dtypes
import numpy as np
import pytest

import trnsim
from trnsim.errors import (CapacityError, IndexingError, MemoryAccessError, OutOfBoundsError,
                           PartitionError, ReadOnlyError)


def _legacy():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    return nki, nl, nisa


def test_tiled_matmul_bf16_matches_numpy_fp32_accumulation():
    from trnsim.examples.matmul import matmul_tiled
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 512), dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = matmul_tiled(a, b)
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == (128, 512)
    ref = a.astype(np.float32).T @ b.astype(np.float32)  # exact products, fp32 sums
    # one bf16 rounding of the fp32 result: |err| <= half an ulp of bf16 (2^-8 relative)
    assert np.all(np.abs(out.astype(np.float32) - ref) <= np.abs(ref) * 2.0 ** -8 + 1e-6)


def test_elementwise_activation_reduce_against_numpy():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x, y):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x)
        b = nl.load(y)
        s = nisa.activation(nl.exp, nl.multiply(a, b), scale=0.5, bias=None)
        r = nisa.tensor_reduce(nl.add, s, axis=(1,))
        nl.store(out, value=r)
        return out

    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 64), dtype=np.float32)
    y = rng.standard_normal((128, 64), dtype=np.float32)
    got = k(x, y)
    ref = np.exp((x * y) * np.float32(0.5)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_masked_affine_select_and_iota():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:128, 0:128]
        t = nl.load(x)
        s = nisa.affine_select(pred=(ip >= jf), on_true_tile=t, on_false_value=-1.0)
        nl.store(out, value=s)
        return out

    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    got = k(x)
    ref = np.where(np.tri(128, dtype=bool), x, -1.0)
    np.testing.assert_array_equal(got, ref)


def test_spmd_grid_program_ids_cover_output():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        j = nl.program_id(1)
        t = nl.load(x[i, j])
        nl.store(out[i, j], value=t + float(10 * i + j))
        return out

    x = np.zeros((2, 3, 128, 4), np.float32)
    got = k[2, 3](x)
    ref = (10 * np.arange(2)[:, None] + np.arange(3)[None, :]).astype(np.float32)[:, :, None, None]
    np.testing.assert_array_equal(got, np.broadcast_to(ref, x.shape))


def test_trace_records_engines_regions_and_source_lines():
    nki, nl, nisa = _legacy()
    import inspect

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)                       # LOAD_LINE
        nl.store(out, value=nl.exp(t))
        return out

    tr = trnsim.trace(k, np.ones((128, 512), np.float32))
    ops = [(i.engine, i.opcode) for i in tr]
    assert ops == [("dma", "dma_copy"), ("scalar", "activation"), ("dma", "dma_copy")]
    load = tr[0]
    src_line = [n for n, l in enumerate(inspect.getsource(k.fn).splitlines())
                if "LOAD_LINE" in l][0] + k.fn.__code__.co_firstlineno
    assert load.source.line == src_line
    (hbm,) = load.reads
    (sb,) = load.writes
    # HBM regions are rows x bytes within a row (a row is the tensor's last dimension)
    assert hbm.memory == "hbm" and (hbm.partition, hbm.partitions) == (0, 128)
    assert (hbm.start, hbm.stop) == (0, 512 * 4) and hbm.bytes == 128 * 512 * 4
    assert sb.memory == "sbuf" and sb.partitions == 128 and sb.stop - sb.start == 512 * 4
    # the activation reads exactly what the load wrote
    assert tr[1].reads[0].overlaps(sb)


def test_partition_limit_error_names_rule_and_line():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)
        return x

    with pytest.raises(PartitionError) as e:
        k(np.zeros((4, 4), np.float32))
    msg = str(e.value)
    assert "err_num_partition_exceed_arch_limit" in msg and "256" in msg and "128" in msg
    assert "test_basics.py" in msg


def test_out_of_bounds_unless_masked():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x, masked):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i = nl.arange(128)[:, None]
        j = nl.arange(8)[None, :]
        if masked:
            t = nl.load(x[i + 64, j], mask=(i + 64 < 100))
        else:
            t = nl.load(x[i + 64, j])
        nl.store(out[i, j], value=t, mask=(i + 64 < 100))
        return out

    x = np.arange(100 * 8, dtype=np.float32).reshape(100, 8)
    got = k(x, True)
    np.testing.assert_array_equal(got[:36], x[64:100])
    with pytest.raises(OutOfBoundsError):
        k(x, False)


def test_gpsimd_cannot_read_psum_in_new_rules_and_inputs_are_read_only():
    nki, nl, nisa = _legacy()

    @nki.jit
    def writes_input(x):
        t = nl.load(x)
        nl.store(x, value=t)
        return x

    with pytest.raises(ReadOnlyError):
        writes_input(np.zeros((128, 4), np.float32))

"""``nisa.tensor_copy(dtype=)``: the new API (SDK 2.28.1 docs: ``tensor_copy(dst, src, engine,
name)``) has no ``dtype=`` and converts to ``dst.dtype``; the legacy API
(``tensor_copy(src, *, mask, dtype, engine)``, SDK 2.26.1 docs) takes it.  nki-samples' matmul
tutorial (8370e11) mixes the two, so the refusal must say which signature applies and cite it."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.frontends.nki as nki
import trnsim.frontends.nki.isa as nisa
import trnsim.frontends.nki.language as nl
import trnsim.frontends.nki_legacy as lnki
import trnsim.frontends.nki_legacy.isa as lisa
import trnsim.frontends.nki_legacy.language as lnl
from trnsim.errors import TrnsimError
from trnsim.options import Options

OPTS = Options(target="trn2")
P, F = 128, 8
# values whose bf16 rounding is a tie (1 + 2^-8 -> 1.0, even) or not (1 + 3 * 2^-9 -> 1 + 2^-7)
VALS = np.tile(np.array([1 + 2 ** -8, 1 + 3 * 2 ** -9, -2.5, 0.0], np.float32), (P, F // 4))


@nki.jit
def copy_with_dtype(a):
    out = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    s = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    d = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.tensor_copy(dst=d, src=s, dtype=nl.bfloat16)  # the tutorial's spelling
    nisa.dma_copy(dst=out, src=d)
    return out


@nki.jit
def copy_to_dst_dtype(a):
    out = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    s = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    d = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.tensor_copy(dst=d, src=s)
    nisa.dma_copy(dst=out, src=d)
    return out


@lnki.jit
def legacy_copy_with_dtype(a):
    out = lnl.ndarray((P, F), dtype=lnl.bfloat16, buffer=lnl.shared_hbm)
    lnl.store(out, value=lisa.tensor_copy(lnl.load(a), dtype=lnl.bfloat16))
    return out


def _bf16_rne(x):
    """Hand rounding to bf16: keep 7 mantissa bits, ties to even, on the fp32 bit pattern."""
    b = x.view(np.uint32).astype(np.uint64)
    lsb = (b >> 16) & 1
    r = ((b + 0x7FFF + lsb) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def test_new_api_dtype_keyword_is_refused_with_the_documented_signature():
    with pytest.raises(TrnsimError) as e:
        copy_with_dtype.run(VALS, options=OPTS)
    err = e.value
    assert err.rule == "new-api-keyword" and err.value == "dtype=bfloat16"
    msg = str(err)
    assert "tensor_copy(dst, src, engine=engine.unknown, name=None)" in msg
    assert "v2.28.1/nki/api/generated/nki.isa.tensor_copy.html" in msg
    assert "converts to dst.dtype" in msg
    assert "test_tensor_copy_dtype.py" in str(err.where)  # the kernel's own line


def test_new_api_converts_to_dst_dtype_and_legacy_dtype_does_the_same():
    want = _bf16_rne(VALS)
    assert want[0, :4].tolist() == [1.0, 1 + 2 ** -7, -2.5, 0.0]
    new = copy_to_dst_dtype.run(VALS, options=OPTS).outputs
    old = legacy_copy_with_dtype.run(VALS, options=OPTS).outputs
    for got in (new, old):
        assert got.dtype == np.dtype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(got.astype(np.float32), want)

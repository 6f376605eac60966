"""Where the two NKI APIs differ only in argument conventions (an affine index expression vs an
access pattern, a returned tile vs a ``dst``), each front end converts and both reach the same
instruction: same values (checked against numpy), same traced opcode and engine."""
import numpy as np

import trnsim.frontends.nki as nki
import trnsim.frontends.nki.isa as nisa
import trnsim.frontends.nki.language as nl
import trnsim.frontends.nki_legacy as lnki
import trnsim.frontends.nki_legacy.isa as lisa
import trnsim.frontends.nki_legacy.language as lnl
from trnsim.options import Options

P, F, CM = 128, 16, 3
OPTS = Options(target="trn2")


@lnki.jit
def legacy_iota(x):
    out = lnl.ndarray((P, F), dtype=lnl.int32, buffer=lnl.shared_hbm)
    ip, jf = lnl.mgrid[0:P, 0:F]
    lnl.store(out, value=lisa.iota(ip * CM + jf, dtype=lnl.int32))  # an affine expression
    return out


@nki.jit
def new_iota(x):
    out = nl.ndarray((P, F), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[1, F]], offset=0, channel_multiplier=CM)  # an access pattern
    nisa.dma_copy(dst=out, src=t)
    return out


def _iota_instructions(res):
    return [(i.engine, i.opcode) for t in res.traces for i in t.instructions if i.opcode == "iota"]


def test_iota_of_both_faces_is_one_instruction_with_the_same_values():
    want = CM * np.arange(P)[:, None] + np.arange(F)[None, :]
    x = np.zeros((P, F), np.float32)
    res_l = legacy_iota.run(x, options=OPTS)
    res_n = new_iota.run(x, options=OPTS)
    np.testing.assert_array_equal(res_l.outputs, want)
    np.testing.assert_array_equal(res_n.outputs, want)
    assert _iota_instructions(res_l) == _iota_instructions(res_n) == [("gpsimd", "iota")]


def test_affine_select_of_both_faces_keeps_the_same_triangle():
    x = np.arange(P * P, dtype=np.float32).reshape(P, P)
    want = np.where(np.tri(P, dtype=bool), x, -1.0)  # keep where p >= j

    @lnki.jit
    def legacy(a):
        out = lnl.ndarray((P, P), dtype=lnl.float32, buffer=lnl.shared_hbm)
        ip, jf = lnl.mgrid[0:P, 0:P]
        lnl.store(out, value=lisa.affine_select(pred=(ip >= jf), on_true_tile=lnl.load(a),
                                                on_false_value=-1.0))
        return out

    @nki.jit
    def new(a):
        out = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
        # p - j >= 0: channel_multiplier 1, step -1 along the free dim
        nisa.affine_select(dst=s, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=t,
                           on_false_value=-1.0, cmp_op=nl.greater_equal)
        nisa.dma_copy(dst=out, src=s)
        return out

    res_l = legacy.run(x, options=OPTS)
    res_n = new.run(x, options=OPTS)
    np.testing.assert_array_equal(res_l.outputs, want)
    np.testing.assert_array_equal(res_n.outputs, want)
    ops = [[(i.engine, i.opcode) for i in r.traces[0].instructions if i.opcode == "affine_select"]
           for r in (res_l, res_n)]
    assert ops[0] == ops[1] == [("gpsimd", "affine_select")]

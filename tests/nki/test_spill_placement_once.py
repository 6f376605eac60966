"""Under ``placement = "reuse_lru"`` with spills modelled (new API), a kernel that needs no spill
is placed once: the placement the fragmentation check computes is the one the timing map gets."""
import numpy as np

import trnsim.nki.core.placement as placement
from trnsim.options import Options


def _lru_file(tmp_path):
    p = tmp_path / "lru.toml"
    p.write_text("".join(f'[cores.{c}.sbuf]\nplacement = {{ value = "reuse_lru", source = "test" }}\n'
                         for c in ("v2", "v3", "v4")))
    return str(p)


def _kernel():
    import trnsim.compat
    trnsim.compat.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in range(4):
            t = nl.ndarray((128, 25600), dtype=x.dtype, buffer=nl.sbuf)   # 100 KiB / partition
            nisa.dma_copy(dst=t, src=x[i])
            nisa.dma_copy(dst=out[i], src=t)
        return out

    return k


def test_placement_is_computed_once_with_the_same_offsets(tmp_path, monkeypatch):
    """trn2: 224 KiB = 229376 B per partition; tile i lives over instructions 2i, 2i + 1.
    Least recently released first, never-used bytes oldest: t0 [0, 102400); t1 takes never-used
    [102400, 204800); t2 finds [204800, 229376) too small, so [0, 102400) (released after 1);
    t3 [102400, 204800) (released after 3)."""
    calls = []
    real = placement.place_lru
    monkeypatch.setattr(placement, "place_lru", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = np.ones((4, 128, 25600), np.float32)
    run = _kernel().run(x, options=Options(target="trn2", timing_only=True,
                                           hardware_file=_lru_file(tmp_path)))
    meta = run.traces[0].meta
    assert "sbuf_spill_cause" not in meta and meta.get("sbuf_spill_dmas", 0) == 0
    flat = meta["sbuf_placement"]
    assert [flat[k + 2] for k in range(0, len(flat), 3)] == [0, 102400, 0, 102400]
    assert len(calls) == 1   # was 2: once looking for fragmentation, once to place

"""The functional core's bookkeeping cost per instruction, without BLAS in the way.

    python bench/functional_overhead.py [--json] [--clock wall|cpu]

Times the hot statement of a tiled matmul kernel, ``acc += nisa.nc_matmul(a[k, :, c], b[k, :, d])``,
inside a running kernel, on 8x8-column tiles (so the product itself costs a few microseconds),
and the same numpy work on its own (an 8x8 product and the in-place add). The difference is what
the simulator adds per matmul instruction: operand checks, views, reads, the fresh result tile,
the trace record and the PSUM accumulation; and the same statement after 2 MB of memory traffic
(what a kernel's numeric work does to the caches between two statements). Also the same for a
PSUM -> SBUF block update ``res[i] = nl.add(res[i], acc, dtype=bf16)`` on a 128x512 tile. Each
figure is the best of 5 batches.
"""
import argparse
import json
import time


_CLOCK = time.perf_counter  # --clock cpu: time.process_time (see functional_matmul.py)
# bytes copied to evict the caches between statements: about what one 128x512 PSUM accumulation
# (operands, accumulator) and one block update touch, more than an L2 per core (a host choice)
_EVICT_BYTES = 2 << 20


def _best(f, n: int) -> float:
    f()
    best = float("inf")
    for _ in range(5):
        t = _CLOCK()
        for _ in range(n):
            f()
        best = min(best, (_CLOCK() - t) / n * 1e6)
    return best


def measure(n: int = 2000) -> dict:
    import trnsim.compat
    trnsim.compat.install()
    import ml_dtypes
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    from trnsim.options import Options

    out = {}
    src = np.ones(_EVICT_BYTES // 4, np.float32)
    dst_ = np.empty_like(src)

    def evict():
        np.copyto(dst_, src)

    @nki.jit
    def kernel(lhsT, rhs):
        res_hbm = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((8, nl.par_dim(128), 256), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((8, nl.par_dim(128), 256), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(8):
            a[k] = nl.load(lhsT[k * 128:(k + 1) * 128, :])
            b[k] = nl.load(rhs[k * 128:(k + 1) * 128, :])
        acc = nl.zeros((8, 8), nl.float32, buffer=nl.psum)

        def step():
            nonlocal acc
            acc += nisa.nc_matmul(a[3, :, 8:16], b[3, :, 8:16])
        out["matmul_accumulate_us"] = _best(step, n)
        # inside a real kernel each statement follows MBs of numeric work (BLAS, operand
        # conversions, block updates) that evict the interpreter's own data from the caches:
        # the same statement after a copy of _EVICT_BYTES, less the copy alone
        out["matmul_accumulate_evicted_us"] = _best(lambda: (step(), evict()), n // 4) - \
            _best(evict, n // 4)

        big = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        res = nl.zeros((2, nl.par_dim(128), 512), dtype=lhsT.dtype, buffer=nl.sbuf)

        def update():
            res[1] = nl.add(res[1], big, dtype=res.dtype)
        out["block_update_us"] = _best(update, n // 10)
        nl.store(res_hbm, value=nl.add(big[:, 0:512], 0.0))
        return res_hbm

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 256), dtype=np.float32).astype(ml_dtypes.bfloat16)
    kernel.run(x, x, options=Options(target="trn1", fast_forward="off"))

    # the numpy work of the same statements on their own
    s = rng.standard_normal((128, 8), dtype=np.float32)
    m = rng.standard_normal((128, 8), dtype=np.float32)
    acc = np.zeros((8, 8), np.float32)
    out["numpy_matmul_accumulate_us"] = _best(lambda: acc.__iadd__(s.T @ m), n)
    r = rng.standard_normal((128, 512), dtype=np.float32).astype(ml_dtypes.bfloat16)
    p = rng.standard_normal((128, 512), dtype=np.float32)
    dst = np.empty_like(r)

    def numpy_update():
        np.copyto(dst, (r.astype(np.float32) + p).astype(ml_dtypes.bfloat16))
    out["numpy_block_update_us"] = _best(numpy_update, n // 10)
    out["overhead_per_matmul_us"] = out["matmul_accumulate_us"] - out["numpy_matmul_accumulate_us"]
    out["overhead_per_block_update_us"] = out["block_update_us"] - out["numpy_block_update_us"]
    return {k: round(v, 1) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time, steadier on a loaded shared machine")
    args = ap.parse_args()
    global _CLOCK
    _CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.json:
        print(json.dumps(measure(), indent=2))
        return
    from trnsim.cli.output import console, error_console
    from rich.markup import escape
    from rich.table import Table
    con = console()
    with error_console().status("timing the hot statements"):
        res = measure()
    t = Table(title="functional core: microseconds per statement (best of 5 batches)")
    t.add_column("statement")
    t.add_column("trnsim", justify="right")
    t.add_column("numpy alone", justify="right")
    t.add_column("bookkeeping", justify="right")
    t.add_row(escape("acc += nc_matmul(a[k,:,c], b[k,:,d])  (8x8 tiles)"),
              f"{res['matmul_accumulate_us']}", f"{res['numpy_matmul_accumulate_us']}",
              f"{res['overhead_per_matmul_us']}")
    t.add_row(escape("  the same, after 2 MB of other memory traffic"),
              f"{res['matmul_accumulate_evicted_us']}", "", "")
    t.add_row(escape("res[i] = nl.add(res[i], acc, dtype=bf16)  (128x512)"),
              f"{res['block_update_us']}", f"{res['numpy_block_update_us']}",
              f"{res['overhead_per_block_update_us']}")
    con.print(t)


if __name__ == "__main__":
    main()

"""``trnsim demo``: run a built-in example kernel and check it against numpy."""
from __future__ import annotations

import time

import ml_dtypes
import numpy as np


def register(sub) -> None:
    """Add ``trnsim demo`` to the command line."""
    p = sub.add_parser("demo", help="run a built-in example kernel (tiled bf16 matmul) and check it")
    p.add_argument("--target", default=None, help="trn1 | trn2 | trn3, or a target of the --hardware "
                   "file (default: $TRNSIM_TARGET or trn2)")
    p.add_argument("--hardware", metavar="FILE.toml", help="hardware figures merged over the catalog "
                   "(a what-if generation, e.g. trnsim/hardware/examples/trn4-projection.toml)")
    p.add_argument("--size", default="512x1024x1024", help="MxKxN (multiples of 128/128/512)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop the run with an error after this many seconds of wall time (default: none)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def demo_size(text: str, opts) -> tuple:
    """``MxKxN`` for the demo kernel: positive multiples of the target's stationary / partition /
    moving tile sizes (the kernel tiles by exactly these), within the chip's HBM."""
    from ..errors import ConfigError
    from ..hardware import load_catalog
    from ..validate import check_host_memory, check_input_size
    import ml_dtypes
    where = f"--size {text}"
    parts = str(text).lower().split("x")
    try:
        M, K, N = (int(x) for x in parts)
    except ValueError:
        raise ConfigError("--size takes MxKxN, e.g. 512x1024x1024", rule="demo-size", value=text,
                          limit="MxKxN", where=where) from None
    cat = load_catalog(opts.hardware_file)
    ts = cat.core_for(opts.target).tile_size
    for name, v, tile, field in (("M", M, ts.gemm_stationary_fmax, "gemm_stationary_fmax"),
                                 ("K", K, ts.pmax, "pmax"), ("N", N, ts.gemm_moving_fmax, "gemm_moving_fmax")):
        if v <= 0 or v % tile:
            raise ConfigError(f"{name} = {v} is not a positive multiple of the {opts.target} tile "
                              f"size {tile} (tile_size.{field}) that the demo kernel tiles by",
                              rule="demo-size", limit=f"a multiple of {tile}", value=v, where=where)
    hbm = cat.chip_for(opts.target).hbm_bytes
    bf16 = np.dtype(ml_dtypes.bfloat16)
    check_input_size("lhsT", (K, M), bf16, hbm_bytes=hbm, host_bytes=None, where=where)
    check_input_size("rhs", (K, N), bf16, hbm_bytes=hbm, host_bytes=None, where=where)
    check_host_memory(demo_host_bytes(M, K, N), f"the demo at {M}x{K}x{N}", where, hint="use a smaller --size")
    return M, K, N


# Bytes per element the functional demo holds at its peak, counted from ``run`` below and the simulator:
# each input as bf16 (2) in the caller and in simulated HBM (2), its fp32 draw (4) and fp32 reference
# copy (4); the output as bf16 in HBM and returned (2 + 2), as fp32 (4) and the fp32 reference product
# and its bf16-rounded copies (4 + 2 + 4).
DEMO_INPUT_BYTES = 2 + 2 + 4 + 4
DEMO_OUTPUT_BYTES = 2 + 2 + 4 + 4 + 2 + 4


def demo_host_bytes(M: int, K: int, N: int) -> int:
    """Host memory the demo needs at MxKxN (inputs lhsT KxM and rhs KxN, output MxN)."""
    return DEMO_INPUT_BYTES * (K * M + K * N) + DEMO_OUTPUT_BYTES * M * N


def run(args) -> int:
    """Run the tiled matmul example, compare it with numpy, print the figures; 1 if it is off."""
    from ..compat import install
    from ..options import Options
    install()
    from ..examples.matmul import matmul_tiled
    opts = Options.from_env(**({"target": args.target} if args.target else {}),
                            **({"hardware_file": args.hardware} if args.hardware else {}))
    M, K, N = demo_size(args.size, opts)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((K, M), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N), dtype=np.float32).astype(ml_dtypes.bfloat16)
    from .output import Spinner
    t0 = time.perf_counter()
    from ..lifetime import time_limit
    with Spinner(not args.json), time_limit(args.timeout, f"the demo at {M}x{K}x{N}"):
        res = matmul_tiled.run(a, b, options=opts)
    wall = time.perf_counter() - t0
    out = res.outputs.astype(np.float32)
    ref = (a.astype(np.float32).T @ b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    err = float(np.abs(out - ref).max())
    ulp = float(np.abs(ref).max()) * 2.0 ** -8
    trace = res.traces[0]
    counts = trace.counts()
    summary = {"kernel": "matmul_tiled", "target": opts.target, "shape": [M, K, N],
               "max_abs_error_vs_numpy": err, "bf16_ulp_at_max": ulp, "ok": err <= ulp,
               "instructions": len(trace), "by_opcode": counts, "sim_seconds": round(wall, 3)}
    from ..timing import estimate_run
    summary["latency_us"] = round(estimate_run(res).latency_us, 3)
    if args.json:
        from .output import print_json
        print_json(summary)
    else:
        from .output import console, table
        rows = [(k, v) for k, v in summary.items() if k != "by_opcode"]
        rows += [(f"  {op}", n) for op, n in counts.items()]
        console().print(table(f"trnsim demo: tiled bf16 matmul {M}x{K} @ {K}x{N} on {opts.target}",
                              ["figure", "value"], rows))
    return 0 if err <= ulp else 1

"""The cost of recording: CPU wall time of a tutorial-style GPT training loop under
`trnsim exec --instance` (every aten call recorded, each new graph costed) against the same script on
plain CPU torch (the torch_xla shim only, no recording).  Target of issue 12: < 1.5x.

    python bench/xla_overhead.py                  # DIM=128, SEQ=64, BATCH=8, 8 steps, best of 3
    python bench/xla_overhead.py --dim 256 --steps 6 --repeat 2 --json

Both runs use one intra-op thread (OMP_NUM_THREADS=1), so a busy machine disturbs them alike; the loop's
own wall time (printed by the script as `loop_s`) is compared, not interpreter start-up.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from trnsim.cli.output import console
from rich.table import Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "frontends", "torch_xla", "scripts", "tiny_gpt_train.py")


def run_once(record: bool, env: dict) -> float:
    """Loop wall seconds of one run of the script, recorded or plain."""
    from trnsim.compat import shim_env
    e = shim_env(dict(os.environ, **env))
    if record:
        e.update(TRNSIM_XLA_INSTANCE="trn1.32xlarge", TRNSIM_XLA_QUIET="1")
    else:
        e.pop("TRNSIM_XLA_INSTANCE", None)
    p = subprocess.run([sys.executable, SCRIPT], env=e, capture_output=True, text=True, check=True)
    return float(re.search(r"loop_s ([\d.]+)", p.stdout).group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {"GPT_DIM": str(a.dim), "GPT_SEQ": str(a.seq), "GPT_BATCH": str(a.batch), "GPT_STEPS": str(a.steps),
               "OMP_NUM_THREADS": "1", "NEURON_COMPILE_CACHE_URL": cache}
        plain, rec = [], []
        for _ in range(a.repeat):   # interleaved, so load changes hit both
            plain.append(run_once(False, env))
            rec.append(run_once(True, env))
    out = {"dim": a.dim, "seq": a.seq, "batch": a.batch, "steps": a.steps, "repeat": a.repeat,
           "plain_loop_s": min(plain), "recorded_loop_s": min(rec), "ratio": min(rec) / min(plain),
           "plain_runs": plain, "recorded_runs": rec, "target": 1.5}
    if a.json:
        print(json.dumps(out, indent=2))
        return
    t = Table(title=f"trnsim exec recording overhead: GPT dim {a.dim}, seq {a.seq}, batch {a.batch}, "
              f"{a.steps} steps (best of {a.repeat})", title_justify="left")
    for c in ("run", "loop wall (s)", "per step (ms)", "all runs (s)"):
        t.add_column(c)
    for name, v in (("plain CPU torch", plain), ("trnsim exec --instance", rec)):
        t.add_row(name, f"{min(v):.3f}", f"{1e3 * min(v) / a.steps:.1f}", ", ".join(f"{x:.2f}" for x in v))
    con = console()
    con.print(t)
    con.print(f"ratio {out['ratio']:.2f}x (target < {out['target']}x)")


if __name__ == "__main__":
    main()

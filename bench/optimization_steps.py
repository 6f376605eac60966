"""Predicted latency of public NKI tutorial kernels before and after each optimization step the
tutorials describe, under the engine-assignment policies (issue 13, section 1).

The kernels are not ours to ship: pass the path of your own nki-samples checkout (the commit with
the tutorials, e.g. 8370e11).  Three tutorials, each a ladder of versions the tutorial calls faster
at every step:
  fused_mamba       mamba_v1 -> v2 (loop reordering) at seq_len 512, channels 4096, and mamba_v2 -> v3
                    (seq_len tiling) at seq_len 8192, channels 4096: each step at the size the
                    tutorial profiles it (batch 1, state 16), fp32, on each of --mamba-targets
                    (default trn1, where the tutorial measured: NeuronCore-v2, and trn2); with
                    --mamba-seqs a second table times v1, v2, v3 at every listed
                    seq_len (channels 4096) on each target, refusals shown as errors
  attention         attn_fwd_v4 (loop fusion) -> v5 (delayed softmax division) -> v6 (ScalarE
                    instruction combination) -> v7 (downcast before transpose) -> v8
                    (tensor_scalar_reduce on VectorE) at the tutorial's benchmark size (seqlen 4096,
                    bf16), trn2; attention_v3_v4: v3 -> ... -> v8 at seqlen 512 fp32, the largest
                    size where v3's PSUM blocks fit without the compiler's block rotation
  layernorm         layernorm_v1 -> v2 (bn_stats/bn_aggr + one tensor_scalar), fp32 [300, 1000],
                    trn1: trnsim's own rewrite of the aws-neuron-sdk LayerNorm tutorial
                    (bench/layernorm_kernels.py, calibration rows K038/K039; needs no checkout)
For each step the table shows what the tutorial says of it (every step faster, except attention v8,
which its comment calls slower than v7), the predicted latency and the direction (faster/slower): ``before``
is the model before issue 13 (a hardware override, BEFORE below), ``fixed`` the new cost rules
with every instruction on its traced engine, ``earliest_finish`` the engine assignment, both with
each engine's stream in program order, and ``window`` the default model: the assignment plus the
compiler's reordering within each Vector/Scalar/GpSimd stream (timing/reorder.py).  ``--windows
2,4,8`` adds a column per reordering window (instructions; a hardware override each).

    python bench/optimization_steps.py /path/to/nki-samples [--json] [--only mamba,attention,layernorm]
        [--windows 2,4,8] [--mamba-targets trn1,trn2] [--mamba-seqs 512,1024,2048,4096,7168,8192]
"""
import argparse
import importlib.util
import json
import os
import sys
import time

# column -> (engine_policy, stream_order) overrides (None: the hardware data's)
POLICIES = {"fixed": ("fixed", "in_order"), "earliest_finish": ("earliest_finish", "in_order"),
            "window": (None, None)}
# the model before issue 13 as a hardware override: no access-bubble overlap, GpSimd two-input
# ops at one-input cost, every instruction on its traced engine
BEFORE = "".join(f"""
[cores.{v}.timing.vector]
bubble_overlap = {{ value = 0.0, source = "choice: before issue 13" }}
[cores.{v}.timing.scalar]
bubble_overlap = {{ value = 0.0, source = "choice: before issue 13" }}
[cores.{v}.timing.gpsimd]
bubble_overlap = {{ value = 0.0, source = "choice: before issue 13" }}
two_input_factor = {{ value = 1.0, source = "choice: before issue 13" }}
[cores.{v}.timing.assign]
policy = {{ value = "fixed", source = "choice: before issue 13" }}
[cores.{v}.timing.reorder]
policy = {{ value = "in_order", source = "choice: before issue 13" }}
""" for v in ("v2", "v3", "v4"))
WINDOW = "".join(f"""
[cores.{v}.timing.reorder]
window_instructions = {{{{ value = {{w}}, source = "choice: bench window sweep" }}}}
""" for v in ("v2", "v3", "v4"))
COLUMNS = ("before",) + tuple(POLICIES)
# what each tutorial says of a step where it is not "faster": attention v8 (tensor_scalar_reduce)
# "does lead to a slowdown compared to the v7 kernel" (attention_kernels.py, its v8 comment)
TUTORIAL_SAYS = {"attention": {"v8": "slower"}, "attention_v3_v4": {"v8": "slower"}}


def _load(path, name):
    """Import a tutorial module from the user's checkout (its own directory on sys.path)."""
    d = os.path.dirname(path)
    if d not in sys.path:
        sys.path.insert(0, d)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mamba_args(ch, seq):
    """The tutorial's inputs (batch 1, state 16, fp32) for ``channels`` x ``seq_len``."""
    import numpy as np
    b, st = 1, 16
    d = np.ones((b, ch, seq), np.float32)
    return (d, d, -np.ones((ch, st), np.float32), np.ones((b, st, seq), np.float32),
            np.ones((b, st, seq), np.float32))


def _mamba_module(root):
    p = os.path.join(root, "src", "nki_samples", "tutorials", "fused_mamba", "mamba_nki_kernels.py")
    return _load(p, "tut_mamba") if os.path.exists(p) else None


def mamba_sizes(root, targets, seqs, progress=None):
    """Predicted latency (us) of mamba v1, v2, v3 at each seq_len, channels 4096, per target; an error's rule instead of a
    refused size."""
    import trnsim.compat
    trnsim.compat.install()
    import warnings
    from trnsim.errors import TrnsimError
    from trnsim.options import Options
    from trnsim.timing.estimate import estimate
    m = _mamba_module(root)
    rows = []
    for target in targets:
        for seq in seqs:
            for v in ("v1", "v2", "v3"):
                row = {"target": target, "version": v, "seq_len": seq, "channels": 4096}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        tr = getattr(m, f"mamba_{v}").run(
                            *_mamba_args(4096, seq),
                            options=Options(target=target, timing_only=True)).traces
                    e = estimate(tr, target)
                    row["us"] = round(e.latency_us, 1)
                    row["spill_dmas"] = sum(t.meta.get("sbuf_spill_dmas", 0) for t in tr)
                except TrnsimError as ex:
                    row["error"] = ex.rule
                rows.append(row)
                if progress is not None:
                    progress(f"mamba {v} {target} seq {seq}")
    return rows


def _ladders(root, mamba_targets=("trn1", "trn2")):
    """(name, target, [(version label, kernel, args, kwargs)]) for each tutorial found."""
    import numpy as np
    tut = os.path.join(root, "src", "nki_samples", "tutorials")
    out = {}
    m = _mamba_module(root)
    if m is not None:
        # each step at the size the tutorial profiles it: v1 -> v2 after raising channels to
        # 4096 (seq_len 512), v2 -> v3 after raising seq_len to 8192 (fused_mamba.rst)
        for target in mamba_targets:
            for name, (lo, hi), (ch, seq) in (("mamba_v1_v2", ("v1", "v2"), (4096, 512)),
                                              ("mamba_v2_v3", ("v2", "v3"), (4096, 8192))):
                args = _mamba_args(ch, seq)
                out[f"{name}_{target}"] = (
                    target, [(v, getattr(m, f"mamba_{v}"), args, {}) for v in (lo, hi)],
                    f"channels {ch}, seq_len {seq}, batch 1, state 16: the tutorial's {lo} -> {hi} "
                    "size")
    p = os.path.join(tut, "attention_fwd_performance", "attention_kernels.py")
    if os.path.exists(p):
        m = _load(p, "tut_attention")
        # the tutorial benchmarks v3..v8 at seqlen 4096 in bf16 (its test_attention.py, benchmark
        # mode); v3 keeps (seqlen/128) x (seqlen/512) PSUM blocks there, which trnsim refuses without
        # the compiler's block rotation, so v3 -> v4 is also timed at seqlen 512 (fp32, the largest
        # where v3's PSUM blocks fit) and v4 -> v8 at the tutorial's own size
        import ml_dtypes
        small = np.zeros((128, 512), np.float32)
        out["attention_v3_v4"] = ("trn2", [(v, getattr(m, f"attn_fwd_{v}"), (small,) * 3, {})
                                           for v in ("v3", "v4", "v5", "v6", "v7", "v8")],
                                  "d_head 128, seqlen 512, fp32")
        big = np.zeros((128, 4096), ml_dtypes.bfloat16)
        out["attention"] = ("trn2", [(v, getattr(m, f"attn_fwd_{v}"), (big,) * 3, {})
                                     for v in ("v4", "v5", "v6", "v7", "v8")],
                            "d_head 128, seqlen 4096, bf16: the tutorial's benchmark size")
    return out


def _own_ladders():
    """The LayerNorm tutorial steps as trnsim's bench kernels (no checkout needed)."""
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from layernorm_kernels import layernorm_v1, layernorm_v2
    x = np.zeros((300, 1000), np.float32)
    g = np.zeros(1000, np.float32)
    return {"layernorm": ("trn1", [("v1", layernorm_v1, (x, 1e-5, g, g), {}),
                                   ("v2", layernorm_v2, (x, 1e-5, g, g), {})],
                          "fp32 [300, 1000]")}


def _direction(prev: float, now: float, tol: float = 0.005) -> str:
    """'faster' / 'slower' beyond a relative ``tol`` (0.5 %), else 'same'."""
    if now < prev * (1 - tol):
        return "faster"
    if now > prev * (1 + tol):
        return "slower"
    return "same"


def _hw_file(text):
    import tempfile
    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    return f.name


def run(root, only=None, progress=None, windows=(), mamba_targets=("trn1", "trn2")):
    """Per tutorial, per version: predicted latency (us) under each policy (and each reordering
    window in ``windows``), and the step's direction; ``progress(label)`` is called as each
    version finishes."""
    import trnsim.compat
    trnsim.compat.install()
    from trnsim.options import Options
    from trnsim.timing.estimate import estimate
    before = _hw_file(BEFORE)
    wfiles = {f"window_{w}": _hw_file(WINDOW.format(w=w)) for w in windows}
    columns = COLUMNS + tuple(wfiles)
    res = {}
    ladders = _ladders(root, mamba_targets) if root else {}
    ladders.update(_own_ladders())
    for name, (target, steps, size) in ladders.items():
        if only and name not in only and name.split("_")[0] not in only:
            continue
        rows = []
        for label, kern, args, kw in steps:
            t0 = time.perf_counter()
            tr = kern.run(*args, options=Options(target=target, timing_only=True), **kw).traces
            row = {"version": label, "target": target, "size": size,
                   "sim_seconds": round(time.perf_counter() - t0, 2)}
            row["before_us"] = round(estimate(tr, target, before).latency_us, 2)
            for col, (pol, order) in POLICIES.items():
                row[f"{col}_us"] = round(estimate(tr, target, engine_policy=pol,
                                                  stream_order=order).latency_us, 2)
            for col, hw in wfiles.items():
                row[f"{col}_us"] = round(estimate(tr, target, hw).latency_us, 2)
            if rows:
                for pol in columns:
                    row[f"{pol}_step"] = _direction(rows[-1][f"{pol}_us"], row[f"{pol}_us"])
                row["tutorial_step"] = TUTORIAL_SAYS.get(name, {}).get(label, "faster")
            rows.append(row)
            if progress is not None:
                progress(f"{name} {label}")
        res[name] = rows
    for f in (before,) + tuple(wfiles.values()):
        os.unlink(f)
    return res


def table(res):
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
    for name, rows in res.items():
        t = Table(title=f"{name} tutorial ({rows[0]['target']}, {rows[0]['size']}): predicted "
                        "latency per step against what the tutorial says of it")
        t.add_column("version")
        t.add_column("tutorial")
        columns = [k[:-3] for k in rows[0] if k.endswith("_us")]
        for pol in columns:
            t.add_column(f"{pol} us", justify="right")
            t.add_column("step")
        for r in rows:
            cells = [r["version"], r.get("tutorial_step", "")]
            for pol in columns:
                cells += [f"{r[f'{pol}_us']:.1f}", r.get(f"{pol}_step", "")]
            t.add_row(*cells)
        con.print(t)


def sizes_table(rows):
    """The mamba size sweep: one row per (target, seq_len), v1 / v2 / v3 latency and v2 -> v3."""
    from trnsim.cli.output import console
    from rich.table import Table
    t = Table(title="fused mamba, channels 4096, batch 1, state 16, fp32: predicted latency (us) "
                    "per seq_len")
    for c in ("target", "seq_len", "v1 us", "v2 us", "v3 us", "v1 -> v2", "v2 -> v3"):
        t.add_column(c, justify="right")
    by = {}
    for r in rows:
        by.setdefault((r["target"], r["seq_len"]), {})[r["version"]] = r
    for (target, seq), vs in by.items():
        def cell(v):
            r = vs.get(v)
            if r is None:
                return ""
            return f"{r['us']:.1f}" if "us" in r else f"error ({r['error']})"
        def step(a, b):
            if "us" in vs.get(a, {}) and "us" in vs.get(b, {}):
                return _direction(vs[a]["us"], vs[b]["us"])
            return ""
        t.add_row(target, str(seq), cell("v1"), cell("v2"), cell("v3"), step("v1", "v2"),
                  step("v2", "v3"))
    console().print(t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nki_samples", nargs="?", default=os.environ.get("NKI_SAMPLES"),
                    help="path of your nki-samples checkout (or set NKI_SAMPLES)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated: mamba,attention,layernorm")
    ap.add_argument("--windows", default="", help="comma-separated reordering windows to add, e.g. 2,4,8")
    ap.add_argument("--mamba-targets", default="trn1,trn2",
                    help="comma-separated targets of the mamba steps (default trn1,trn2)")
    ap.add_argument("--mamba-seqs", default="",
                    help="comma-separated seq_lens of a mamba size sweep, e.g. 512,2048,8192")
    args = ap.parse_args(argv)
    root = args.nki_samples
    skipped = None
    if not root or not os.path.isdir(os.path.join(root, "src", "nki_samples", "tutorials")):
        skipped = ("mamba and attention skipped: no nki-samples checkout at "
                   f"{root or '(none given)'} (pass its path, e.g. python bench/optimization_steps.py "
                   "~/nki-samples); the tutorial kernels are not shipped with trnsim")
        root = None
    only = {s for s in args.only.split(",") if s}
    from trnsim.cli.output import error_console
    err = error_console()
    if skipped:
        err.print(skipped)
    with err.status("timing the tutorial kernels") as status:
        windows = [int(w) for w in args.windows.split(",") if w]
        mt = tuple(t for t in args.mamba_targets.split(",") if t)
        res = run(root, only, progress=lambda lab: status.update(f"done: {lab}"), windows=windows,
                  mamba_targets=mt)
        seqs = [int(x) for x in args.mamba_seqs.split(",") if x]
        sizes = mamba_sizes(root, mt, seqs, lambda lab: status.update(f"done: {lab}")) \
            if seqs and root else []
    if args.json:
        extra = {"mamba_sizes": sizes} if sizes else {}
        print(json.dumps(dict(res, **extra, **({"skipped": skipped} if skipped else {})), indent=2))
    else:
        table(res)
        if sizes:
            sizes_table(sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

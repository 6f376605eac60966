"""trnsim's reference prefill attention kernel next to the public NKI attention kernels, one head at the
shape of each trn2 attention row of bench/data/single_ops.csv (timing-only, trn2): latency per head,
busy time per engine, DMA-active time, and the row's published time per head.

    python bench/attention_kernels.py [--nki-library PATH] [--nki-samples PATH] [--json]

The public kernels are not ours to ship: pass your own checkouts (nki-library: ``nkilib.core.attention
.attention_cte``; nki-samples at 8370e11: ``reference/attention.py`` ``flash_fwd``).  Without them only
our kernel is timed.  A row's per-head figure is its published latency over the heads one physical
core runs (``select.kernel_call``'s repeats): the kernel-level overlap between consecutive heads is
left out (attention_cte simulated with 1, 2 and 4 heads in one call: 242.9, 241.0, 240.1 us a head
with the SBUF->SBUF DMA-transpose rate fitted on P234).
"""
import argparse
import importlib
import importlib.util
import json
import os
import sys
import warnings

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_ops import build_op, load_rows  # noqa: E402

from trnsim.kernels.timer import run_reference  # noqa: E402
from trnsim.model.opcost.select import kernel_call  # noqa: E402


def _figures(est):
    """Latency, engine busy, DMA-active and PE-throttled time of one core (us)."""
    c = est.cores[0]
    return {"us": round(est.latency_us, 1),
            "busy_us": {k: round(v / 1e3, 1) for k, v in c.engine_busy_ns().items() if k != "sync"},
            "dma_active_us": round(c.dma_active_ns() / 1e3, 1),
            "pe_throttled_us": round(c.timeline.throttled_ns / 1e3, 1)}


def _zeros(*shape):
    return np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), shape)


def _cte(root):
    sys.path.insert(0, os.path.join(root, "src", "nkilib_src"))
    return importlib.import_module("nkilib.core.attention.attention_cte").attention_cte


def _flash(root):
    p = os.path.join(root, "src", "nki_samples", "reference", "attention.py")
    spec = importlib.util.spec_from_file_location("nks_reference_attention", p)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def time_public(kind, mod, q, kv, d, causal):
    """Estimate of one head of a public kernel (``cte`` or ``flash``) on trn2, timing-only."""
    from trnsim.options import Options
    from trnsim.timing.estimate import estimate
    opts = Options(target="trn2", timing_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "cte":
            tr = mod.run(_zeros(1, q, d), _zeros(1, d, kv), _zeros(1, kv, d), scale=1.0,
                         causal_mask=bool(causal), tp_q=True, options=opts).traces
        else:
            tr = mod.flash_fwd[1, 1].run(_zeros(1, 1, d, q), _zeros(1, 1, d, kv), _zeros(1, 1, kv, d), None,
                                         use_causal_mask=bool(causal), mixed_precision=True,
                                         config=mod.FlashConfig(training=False), options=opts).traces
    return estimate(tr, "trn2")


def run(nki_library=None, nki_samples=None):
    """One result per distinct trn2 attention row shape."""
    from trnsim import compat
    compat.install()
    public = {}
    if nki_library:
        public["attention_cte"] = ("cte", _cte(nki_library))
    if nki_samples:
        public["flash_fwd"] = ("flash", _flash(nki_samples))
    out, seen = [], {}
    for r in load_rows():
        if r["device"] != "trn2" or r["op"] != "attention" or r["status"] != "use" or r["q_len"] <= 1:
            continue
        call = kernel_call(build_op(r), r["lnc"] or 1)
        s = call.shape
        key = tuple(sorted(s.items()))
        res = {"row": r["id"] + (f"/{r['variant']}" if r["variant"] else ""), "shape": s,
               "heads_per_core": call.repeats,
               "published_us_per_head": round(r["published_us"] / call.repeats, 1)}
        if key not in seen:
            seen[key] = {"ours": _figures(run_reference("attention", s, "bfloat16", "trn2"))}
            for name, (kind, mod) in public.items():
                seen[key][name] = _figures(time_public(kind, mod, s["q_len"], s["kv_len"], s["head_dim"],
                                                       s["causal"]))
        res.update(seen[key])
        out.append(res)
    return out


def main():
    """Command line: print the comparison (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nki-library", help="an aws-neuron/nki-library checkout")
    ap.add_argument("--nki-samples", help="an aws-neuron/nki-samples checkout (8370e11)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run(a.nki_library, a.nki_samples)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['row']:13s} {r['shape']}  {r['heads_per_core']:g} heads/core  "
              f"published {r['published_us_per_head']} us/head")
        for name in ("ours", "attention_cte", "flash_fwd"):
            if name in r:
                f = r[name]
                err = f["us"] / r["published_us_per_head"] - 1
                print(f"    {name:14s} {f['us']:8.1f} us/head ({err:+.1%})  busy {f['busy_us']}  "
                      f"dma active {f['dma_active_us']}  PE throttled {f['pe_throttled_us']}")


if __name__ == "__main__":
    main()

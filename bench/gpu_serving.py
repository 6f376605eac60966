"""Every GPU serving row of found-2026-11b.csv: predicted vs published, |error|, median, bias, refused count.

    python bench/gpu_serving.py            # the current estimator
    python bench/gpu_serving.py --json     # machine-readable rows and summary
    python bench/gpu_serving.py --before   # also print the recorded figures of the estimator before the
                                           # serving rework (bench/data/gpu_serving_before.json)

How each row is read (setup, scenario, metric) is bench/data/gpu_serving_rows.toml; the scenario arithmetic
(steady-state continuous batching, Little's law, closed loops) is the bench's reading of each benchmark
method and stays the same before and after: only the estimator's step times and memory check change.
Signed "speed error" is positive where trnsim is faster than published (time metrics: published/predicted
- 1; throughput metrics: predicted/published - 1); bias is its median.
"""
import argparse
import csv
import inspect
import json
import math
import os
import statistics
import sys
import tomllib

from trnsim.errors import TrnsimError
from trnsim.model import estimate_inference

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TIME_METRICS = ("ttft", "itl", "tpot", "static_ttft", "intercept", "slope")
ACCEPTED = set(inspect.signature(estimate_inference).parameters)


def published() -> dict:
    """Row id -> the published value (thousands separators dropped; 'x / y' cells take x)."""
    out = {}
    with open(os.path.join(HERE, "found-2026-11b.csv"), newline="") as f:
        for r in csv.DictReader(f):
            out[r["id"]] = (float(r["value"].replace(",", "").split("/")[0]), r)
    return out


class Engine:
    """Step times and memory of one row's deployment from the estimator (one replica)."""

    def __init__(self, row: dict):
        self.row = row
        self.memo = {}
        kw = dict(model=row["model"], instance=row["system"], tp=row["tp"], precision=row["precision"],
                  nodes=row.get("nodes", 1))
        for k in ("framework", "kv", "attention_dp", "ep"):
            name = {"kv": "kv_dtype"}.get(k, k)
            if k in row and name in ACCEPTED:
                kw[name] = row[k]
        if "nodes" in kw and kw["nodes"] == 1:
            kw.pop("nodes")
        self.kw = kw
        self.new_api = "framework" in ACCEPTED

    def est(self, batch: int, inp: int, out: int, check: bool = False):
        """The estimator's record for ``batch`` x ``inp`` -> ``out`` tokens (memoised)."""
        key = (batch, inp, out, check)
        if key not in self.memo:
            self.memo[key] = estimate_inference(batch=batch, input_len=inp, output_len=out,
                                                check_memory=check, **self.kw)
        return self.memo[key]

    def fits(self, batch: int, inp: int, out: int) -> bool:
        """Whether ``batch`` sequences of ``inp + out`` tokens fit the memory check."""
        try:
            self.est(batch, inp, out, check=True)
            return True
        except TrnsimError:
            return False

    def capacity(self, inp: int, out: int, cap: int) -> int:
        """Largest batch <= cap that fits (0: none)."""
        if not self.fits(1, inp, out):
            return 0
        lo, hi = 1, cap
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(mid, inp, out) else (lo, mid - 1)
        return lo

    def decode_s(self, batch: int, ctx: int) -> float:
        """One decode step of ``batch`` sequences at context ``ctx``."""
        return self.est(max(1, int(round(batch))), ctx, 1).tpot_ms / 1e3

    def prefill_s(self, batch: int, inp: int) -> float:
        """Prefill of ``batch`` prompts of ``inp`` tokens."""
        return self.est(batch, inp, 1).ttft_ms / 1e3

    def fw(self, key: str, default: float) -> float:
        """A framework figure from the estimate's serving notes, else the pre-rework default."""
        e = self.est(1, 128, 1)
        return float(getattr(e, "framework", None) and e.framework.get(key, default) or default)


def offline_tps(en: Engine, row: dict, batch: int) -> float:
    """Output tokens/s of one replica at steady state with ``batch`` sequences in flight (continuous batching:
    each step decodes every sequence; new prompts are prefilled in chunks of the framework's token budget)."""
    inp, out = row["input"], row["output"]
    chunk = en.fw("prefill_chunk_tokens", 8192)
    per_chunk = max(1, int(chunk // inp))
    pre_per_req = en.prefill_s(per_chunk, inp) / per_chunk if inp <= chunk else en.prefill_s(1, inp)
    t_dec = en.decode_s(batch, inp + out // 2)
    return batch * out / (out * t_dec + batch * pre_per_req)


def predict(row: dict):
    """(predicted value, note) for one row; (None, reason) if the estimator refuses the setup."""
    en = Engine(row)
    sc, inp, out = row["scenario"], row["input"], row["output"]
    reps = row.get("replicas", 1)
    gpus = row["tp"] * reps
    try:
        if sc == "offline":
            cap = int(en.fw("max_batch", 2048))
            cap = min(cap, row.get("requests", cap), row.get("concurrency", cap * reps) // reps)
            b = en.capacity(inp, out, cap)
            if b == 0:
                return None, "refused: batch 1 does not fit"
            v = offline_tps(en, row, b) * reps
            note = f"batch {b}/replica"
        elif sc == "static":
            b = row["batch"]
            en.est(b, inp, out, check=True)
            t = en.prefill_s(b, inp) + (out - 1) * en.decode_s(b, inp + out // 2)
            v, note = b * out / t * reps, f"batch {b}"
        elif sc == "static_ttft":
            en.est(1, inp, out, check=True)
            v, note = en.est(1, inp, out).ttft_ms, ""
        elif sc == "ttft":
            en.est(1, inp, out, check=True)
            v = en.prefill_s(1, inp) * 1e3 + en.fw("request_overhead_s", 0.0) * 1e3
            note = "light load"
        elif sc in ("rate", "server_tps"):
            rate = row["rate"] / reps
            c = 1.0
            for _ in range(30):   # Little's law fixed point: concurrency = rate x request latency
                t_pre = en.prefill_s(1, inp)
                t_dec = en.decode_s(max(1, c), inp + out // 2)
                busy = min(0.95, rate * t_pre)        # share of time spent prefilling new prompts
                tpot = t_dec / (1.0 - busy)
                c_new = min(rate * (t_pre + out * tpot), row.get("concurrency", 1 << 30) / reps)
                if abs(c_new - c) < 0.01 * c:
                    break
                c = 0.5 * (c + c_new)
            en.est(max(1, int(math.ceil(c))), inp, out, check=True)
            cap_rps = c / (t_pre + out * tpot)
            if sc == "server_tps":
                v = min(rate, cap_rps) * out * reps
            else:
                v = tpot * 1e3
            note = f"concurrency {c:.0f}/replica"
        elif sc == "closed":
            c = row["concurrency"]
            en.est(c, inp, out, check=True)
            t_pre = en.prefill_s(1, inp) + en.fw("request_overhead_s", 0.0)
            itl = en.decode_s(c, inp + out // 2)
            if c > 1:   # the other users' prompts interrupt decoding: c prefills per cycle of every user
                cycle = t_pre + out * itl
                itl = itl * (1.0 + (c - 1) * t_pre / cycle)
            cycle = t_pre + (out - 1) * itl
            v = {"ttft": t_pre * 1e3, "itl": itl * 1e3, "tps": c * out / cycle,
                 "tps_user": out / cycle}[row["metric"]]
            note = f"concurrency {c}"
        elif sc in ("slope", "intercept"):
            xs = [inp, row["sweep"] // 4, row["sweep"] // 2, row["sweep"]]
            en.est(1, row["sweep"], out, check=True)
            ys = [en.decode_s(1, x) * 1e3 for x in xs]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            v, note = (slope, "ms/token") if sc == "slope" else (my - slope * mx, "ms")
        elif sc == "prefill_node":
            b = row["batch"]
            en.est(b, inp, 1, check=True)
            v, note = b * inp / en.prefill_s(b, inp) * 8, "tokens/s per node"
        elif sc == "decode_node":
            b = row["batch"]
            en.est(b, inp, 1, check=True)
            v, note = b / en.decode_s(b, inp) * 8, "tokens/s per node"
        else:
            raise ValueError(sc)
    except TrnsimError as e:
        return None, "refused: " + str(e).split(";")[0][:90]
    if row.get("per") == "gpu":
        v /= gpus
    return v, note


def is_time(row: dict) -> bool:
    """Whether the row's metric is a time (smaller is faster)."""
    return row["scenario"] in TIME_METRICS or row.get("metric") in ("ttft", "itl", "tpot")


def run() -> dict:
    """Predict every row; return rows and the summary figures."""
    pub = published()
    with open(os.path.join(HERE, "gpu_serving_rows.toml"), "rb") as f:
        rows = tomllib.load(f)
    out = []
    for rid, row in rows.items():
        value, src = pub[rid]
        if row.get("metric") == "tpot" and "ns" in src["metric"]:
            value /= 1e6   # MLPerf logs nanoseconds
        pred, note = predict(row)
        rec = dict(id=rid, gpu=src["generation"], model=row["model"], scenario=row["scenario"],
                   metric=row.get("metric", ""), published=value, predicted=pred, note=note,
                   excluded=row.get("excluded", ""), holdout=bool(row.get("holdout")))
        if pred is not None:
            rec["error"] = abs(pred - value) / value
            rec["speed_error"] = (value / pred - 1.0) if is_time(row) else (pred / value - 1.0)
        out.append(rec)
    return dict(rows=out, summary=summarise(out))


def summarise(rows: list) -> dict:
    """Median |error|, bias (median speed error), refused count, for all, fitted and held-out rows."""
    def block(rs):
        scored = [r for r in rs if not r["excluded"] and r["predicted"] is not None]
        errs = [r["error"] for r in scored]
        return dict(rows=len(rs), scored=len(scored),
                    refused=sum(1 for r in rs if not r["excluded"] and r["predicted"] is None),
                    median_abs_error=statistics.median(errs) if errs else None,
                    bias=statistics.median([r["speed_error"] for r in scored]) if scored else None,
                    within_15=sum(1 for e in errs if e <= 0.15))
    return dict(all=block(rows), fitted=block([r for r in rows if not r["holdout"]]),
                holdout=block([r for r in rows if r["holdout"]]))


def show(res: dict, title: str) -> None:
    """Print the rows and the summary."""
    print(f"\n{title}")
    print(f"{'id':5} {'gpu':5} {'model':15} {'scenario':13} {'published':>11} {'predicted':>11} {'|err|':>6} "
          f"{'speed':>7}  note")
    for r in res["rows"]:
        p = "refused" if r["predicted"] is None else f"{r['predicted']:.4g}"
        e = "" if r["predicted"] is None else f"{100 * r['error']:.0f}%"
        s = "" if r["predicted"] is None else f"{100 * r['speed_error']:+.0f}%"
        flag = ("excluded: " + r["excluded"]) if r["excluded"] else (("holdout; " if r["holdout"] else "") + r["note"])
        print(f"{r['id']:5} {r['gpu']:5} {r['model'][:15]:15} {(r['scenario'] + ' ' + r['metric'])[:13]:13} "
              f"{r['published']:>11.4g} {p:>11} {e:>6} {s:>7}  {flag[:80]}")
    for k, b in res["summary"].items():
        med = "n/a" if b["median_abs_error"] is None else f"{100 * b['median_abs_error']:.1f} %"
        bias = "n/a" if b["bias"] is None else f"{100 * b['bias']:+.1f} %"
        print(f"{k:8}: rows {b['rows']}, scored {b['scored']}, refused {b['refused']}, median |error| {med}, "
              f"bias {bias} (+ = trnsim faster), within 15 %: {b['within_15']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--before", action="store_true", help="also print the recorded pre-rework figures")
    ap.add_argument("--record-before", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    res = run()
    path = os.path.join(HERE, "gpu_serving_before.json")
    if a.record_before:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    if a.json:
        json.dump(res, sys.stdout, indent=1)
        return
    if a.before and os.path.exists(path):
        with open(path) as f:
            show(json.load(f), "BEFORE (recorded: lumped training factors, 2-byte KV, no framework costs)")
    show(res, "NOW")


if __name__ == "__main__":
    main()

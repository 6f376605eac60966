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
        """Prefill of ``batch`` prompts of ``inp`` tokens on the GPUs (without the per-request server path)."""
        return self.est(batch, inp, 1).ttft_ms / 1e3 - self.fw("request_overhead_s", 0.0)

    def ttft_s(self, inp: int) -> float:
        """TTFT of one request through the server (the framework's per-request cost included)."""
        return self.prefill_s(1, inp) + self.fw("request_overhead_s", 0.0)

    def fw(self, key: str, default: float) -> float:
        """A framework figure from the estimate's serving notes, else the pre-rework default."""
        e = self.est(1, 128, 1)
        return float(getattr(e, "framework", None) and e.framework.get(key, default) or default)


def offline_tps(en: Engine, row: dict, batch: int) -> float:
    """Output tokens/s of one replica at steady state with ``batch`` sequences in flight (continuous batching:
    each step decodes every sequence; new prompts are prefilled in chunks of the framework's token budget)."""
    inp, out = row["input"], row["output"]
    t_dec = en.decode_s(batch, inp + out // 2)
    return batch * out / (out * t_dec + batch * prefill_per_request(en, inp))


def prefill_per_request(en: Engine, inp: int) -> float:
    """GPU time to prefill one prompt when prompts are packed into the framework's prefill token budget."""
    chunk = en.fw("prefill_chunk_tokens", 8192)
    per_chunk = max(1, int(chunk // inp))
    return en.prefill_s(per_chunk, inp) / per_chunk if inp <= chunk else en.prefill_s(1, inp)


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
        elif sc == "static_ttft":   # an engine benchmark: no server path
            en.est(1, inp, out, check=True)
            v, note = en.prefill_s(1, inp) * 1e3, "engine only"
        elif sc == "ttft":
            en.est(1, inp, out, check=True)
            v, note = en.ttft_s(inp) * 1e3, "light load"
        elif sc in ("rate", "server_tps"):
            rate = row["rate"] / reps
            cap = en.capacity(inp, out, min(int(en.fw("max_batch", 2048)), row.get("concurrency", 1 << 30) // reps))
            if cap == 0:
                return None, "refused: batch 1 does not fit"
            c = 1.0
            t_pre, busy = en.ttft_s(inp), min(0.95, rate * prefill_per_request(en, inp))
            for _ in range(30):   # Little's law fixed point: concurrency = rate x request latency
                # prompts arriving at `rate` take a share `busy` of the GPU time between decode steps
                tpot = en.decode_s(max(1, c), inp + out // 2) / (1.0 - busy)
                c_new = min(rate * (t_pre + out * tpot), cap)
                if abs(c_new - c) < 0.01 * c:
                    break
                c = 0.5 * (c + c_new)
            if sc == "server_tps":   # completed tokens: the offered load, or what the deployment sustains
                v = min(rate * out, offline_tps(en, row, cap)) * reps
            else:
                v = tpot * 1e3
            note = f"concurrency {c:.0f}/replica (memory holds {cap})"
        elif sc == "closed":
            c = row["concurrency"]
            en.est(c, inp, out, check=True)
            t_pre = en.ttft_s(inp)
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
        elif sc in ("prefill_node", "decode_node"):
            # the row's batch is per GPU; the replica spans `nodes` 8-GPU nodes, attention DP over every GPU
            b = row["batch"] * row.get("attention_dp", 1)
            en.est(b, inp, 1, check=True)
            per_replica = b * inp / en.prefill_s(b, inp) if sc == "prefill_node" else b / en.decode_s(b, inp)
            v, note = per_replica / row.get("nodes", 1), "tokens/s per node"
        else:
            raise ValueError(sc)
    except TrnsimError as e:
        return None, "refused: " + str(e).split(";")[0][:90]
    if row.get("per") == "gpu":
        v /= gpus
    return v, note


# pairs of rows with the same metric whose published order the estimate must keep: (a, b, what differs)
ORDERINGS = [("Q003", "Q004", "generation H100 < H200"), ("Q005", "Q006", "generation H100 < H200"),
             ("Q008", "Q007", "generation H100 < H200 (70B TP1)"), ("Q009", "Q010", "generation H100 < H200 (TP2)"),
             ("Q008", "Q009", "TP 1 < 2"), ("Q009", "Q011", "TP 2 < 4"), ("Q011", "Q013", "TP 4 < 8"),
             ("Q005", "Q003", "lengths 2048/128 < 128/2048"), ("Q018", "Q043", "generation H200 fp8 < B200 fp4"),
             ("Q115", "Q116", "concurrency 1 < 25"), ("Q120", "Q113", "ITL 500-token prompt < TTFT 5000-token"),
             ("Q032", "Q106", "ITL at 467 < 20k context"), ("Q072", "Q087", "generation 8xH100 < 8xB200"),
             ("Q031", "Q023", "TTFT 8B < 70B")]


def orderings(rows: list) -> list:
    """(a, b, what, held) for each ordering pair: held when predicted values order as published do."""
    by = {r["id"]: r for r in rows}
    out = []
    for a, b, what in ORDERINGS:
        ra, rb = by[a], by[b]
        if ra["predicted"] is None or rb["predicted"] is None:
            out.append((a, b, what, False))
            continue
        pub = ra["published"] < rb["published"]
        out.append((a, b, what, (ra["predicted"] < rb["predicted"]) == pub))
    return out


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
    summary = summarise(out)
    summary["orderings"] = [dict(a=a, b=b, what=w, held=h) for a, b, w, h in orderings(out)]
    return dict(rows=out, summary=summary)


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
    if "orderings" not in res["summary"]:
        res["summary"]["orderings"] = [dict(a=a, b=b, what=w, held=h) for a, b, w, h in orderings(res["rows"])]
    for o in res["summary"]["orderings"]:
        print(f"ordering {o['a']} vs {o['b']} ({o['what']}): {'held' if o['held'] else 'WRONG'}")
    for k, b in res["summary"].items():
        if k == "orderings":
            continue
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

"""Serving a request mix on one replica, as a small discrete-event simulation on trnsim.des.

Three ways requests come: ``open`` (Poisson arrivals at a rate), ``closed`` (N users, each sending its next
request when the last one finished, as benchmark clients such as vllm bench --max-concurrency and GuideLLM
drive servers) and ``offline`` (every request at once). Iteration-level scheduling as vLLM / NxDI run it:
when a slot is free a waiting prompt is prefilled (context-encoding calls of ``prefill_batch`` prompts,
whole or in chunks), otherwise every active sequence takes one decode step (with speculation, several
tokens). Step times come from ``step.StepTimes``: buckets, compiled batch and fixed costs included.
MLPerf-style scenarios: offline (max throughput) and server (the highest Poisson rate whose p99 TTFT and
p99 TPOT stay within limits).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np

from ..des import EventQueue
from ..errors import ConfigError
from .results import ServingEstimate
from .step import StepTimes

MODES = ("open", "closed", "offline")
STAGGER = ("", "even", "random")


def parse_dist(spec: str, name: str) -> Callable[[np.random.Generator], int]:
    """A length distribution: ``N`` (fixed), ``LO:HI`` (uniform integers), ``N+-D`` (uniform N-D..N+D)
    or ``exp:MEAN``."""
    s = str(spec).strip()
    try:
        if s.startswith("exp:"):
            mean = float(s[4:])
            if not 0 < mean < float("inf"):  # NaN fails both comparisons
                raise ValueError
            return lambda rng: max(1, int(round(rng.exponential(mean))))
        if "+-" in s:
            mid, d = (int(x) for x in s.split("+-"))
            s = f"{mid - d}:{mid + d}"
        if ":" in s:
            lo, hi = (int(x) for x in s.split(":"))
            if not 1 <= lo <= hi:
                raise ValueError
            return lambda rng: int(rng.integers(lo, hi + 1))
        n = int(s)
        if n < 1:
            raise ValueError
        return lambda rng: n
    except ValueError:
        raise ConfigError(f"cannot read the {name} length distribution {spec!r}", rule="length-distribution",
                          limit="N, LO:HI, N+-D or exp:MEAN (positive integers)", value=spec) from None


@dataclass(frozen=True)
class Workload:
    """Who sends requests and how long they are."""
    mode: str = "open"
    rate: float = 0.0          # requests/s (open)
    concurrency: int = 0       # users (closed)
    requests: int = 200
    input_dist: str = "128"
    output_dist: str = "128"
    seed: int = 0
    # closed loop as benchmark clients measure it (the data file's [closed_loop] section says why):
    stagger: str = ""          # "" (all users at t = 0), "even" or "random" phases over one steady-state period
    warmup: int = 0            # each user's first ``warmup`` requests are left out of the statistics
    cooldown: bool = False     # and so are each user's last ``warmup`` requests (the tail, as users stop)
    draws: int = 1             # random start phases: simulations pooled


def check_workload(w: Workload, max_batch: int) -> None:
    """Reject a workload that cannot run, naming the rule."""
    if w.mode not in MODES:
        raise ConfigError(f"unknown serving mode {w.mode!r}", rule="serving-mode", limit=MODES, value=w.mode)
    if w.requests < 1 or max_batch < 1:
        raise ConfigError("requests and max batch must be positive", rule="serving", limit=">= 1",
                          value=min(w.requests, max_batch))
    if w.mode == "open" and not 0 < w.rate < float("inf"):
        raise ConfigError("an open-loop workload needs a positive --rate", rule="serving-rate", limit="> 0",
                          value=w.rate)
    if w.mode == "closed" and w.concurrency < 1:
        raise ConfigError("a closed-loop workload needs --concurrency >= 1", rule="serving-concurrency",
                          limit=">= 1", value=w.concurrency)
    if w.stagger not in STAGGER:
        raise ConfigError(f"unknown closed-loop start stagger {w.stagger!r}", rule="serving-stagger",
                          limit=STAGGER, value=w.stagger)
    if w.draws < 1:
        raise ConfigError("the closed loop needs at least one draw of start phases", rule="serving-draws",
                          limit=">= 1", value=w.draws)
    if w.warmup < 0:
        raise ConfigError("warm-up requests per user must not be negative", rule="serving-warmup", limit=">= 0",
                          value=w.warmup)


class _Server:
    """The replica's scheduler state during one simulation."""

    def __init__(self, st: StepTimes, max_batch: int, prefill_batch: int, chunk: int, lens_in, lens_out):
        self.st, self.max_batch, self.pb, self.chunk = st, max_batch, max(1, prefill_batch), chunk
        self.lens_in, self.lens_out = lens_in, lens_out
        n = len(lens_in)
        self.waiting: List[int] = []
        self.active: dict = {}            # request -> tokens generated so far (float with speculation)
        self.prefilled: dict = {}         # request -> prompt tokens already encoded (chunked prefill)
        self.first = [0.0] * n
        self.done = [0.0] * n
        self.steps_after_first = [0] * n
        self.busy = False
        self.tokens = 0.0
        self.batch_sum = 0.0
        self.decode_steps = 0
        self.on_done: Optional[Callable] = None

    def iterate(self, q: EventQueue) -> None:
        if self.busy:
            return
        free = self.max_batch - len(self.active) - len(self.prefilled)
        if self.chunk:
            return self._mixed_step(q, free)
        if self.waiting and free > 0:
            admit = self.waiting[:min(free, self.pb)]
            del self.waiting[:len(admit)]
            n = max(self.lens_in[r] for r in admit)
            dt = self.st.prefill(n, len(admit))["total"]
            self.busy = True
            q.schedule(q.now + dt, lambda qq, a=admit: self._prefilled(qq, a))
        elif self.active:
            self._decode(q, 0.0)

    def _decode(self, q: EventQueue, extra: float) -> None:
        b = len(self.active)
        kv = max(self.lens_in[r] + int(g) for r, g in self.active.items()) + 1
        dt = self.st.decode(b, kv)["total"] + extra
        self.busy = True
        self.batch_sum += b
        q.schedule(q.now + dt, self._decoded)

    def _mixed_step(self, q: EventQueue, free: int) -> None:
        # chunked prefill: one chunk of the oldest waiting prompt rides along with the decode step
        if self.waiting and free > 0 and not self.prefilled:
            self.prefilled[self.waiting.pop(0)] = 0
        if self.prefilled:
            r = next(iter(self.prefilled))
            c = min(self.chunk, self.lens_in[r] - self.prefilled[r])
            pf = self.st.prefill(c)["total"]
            self.prefilled[r] += c
            if self.active:
                return self._decode(q, pf - self.st.prefill(c)["fixed"])
            self.busy = True
            q.schedule(q.now + pf, self._decoded)
        elif self.active:
            self._decode(q, 0.0)

    def _start(self, q: EventQueue, r: int) -> None:
        self.first[r] = q.now
        self.tokens += 1
        if self.lens_out[r] > 1:
            self.active[r] = 0.0
        else:
            self._finish(q, r)

    def _prefilled(self, q: EventQueue, admit: List[int]) -> None:
        self.busy = False
        for r in admit:
            self._start(q, r)
        self.iterate(q)

    def _decoded(self, q: EventQueue) -> None:
        self.busy = False
        if self.active:
            self.decode_steps += 1
        tps = self.st.tokens_per_step
        for r in list(self.active):
            left = self.lens_out[r] - 1 - self.active[r]
            got = min(tps, left)
            self.active[r] += got
            self.tokens += got
            self.steps_after_first[r] += 1
            if self.active[r] >= self.lens_out[r] - 1 - 1e-9:
                del self.active[r]
                self._finish(q, r)
        for r in [r for r, k in self.prefilled.items() if k >= self.lens_in[r]]:
            del self.prefilled[r]
            self._start(q, r)
        self.iterate(q)

    def _finish(self, q: EventQueue, r: int) -> None:
        self.done[r] = q.now
        if self.on_done is not None:
            self.on_done(q, r)


def _run(st: StepTimes, w: Workload, max_batch: int, prefill_batch: int, chunk: int, rng: np.random.Generator):
    """One simulation: the server's record, the send times and the request lengths."""
    draw_in, draw_out = parse_dist(w.input_dist, "input"), parse_dist(w.output_dist, "output")
    n = w.requests
    lens_in = [draw_in(rng) for _ in range(n)]
    lens_out = [draw_out(rng) for _ in range(n)]
    srv = _Server(st, max_batch, prefill_batch, chunk, lens_in, lens_out)
    arrivals = [0.0] * n
    q = EventQueue()

    def arrive(queue: EventQueue, r: int) -> None:
        arrivals[r] = queue.now
        srv.waiting.append(r)
        srv.iterate(queue)

    if w.mode == "open":
        times = np.cumsum(rng.exponential(1.0 / w.rate, size=n))
        for r, t in enumerate(times):
            q.schedule(float(t), lambda qq, r=r: arrive(qq, r))
    elif w.mode == "offline":
        for r in range(n):
            q.schedule(0.0, lambda qq, r=r: arrive(qq, r))
    else:   # closed loop: each of N users sends its next request as soon as its last one finished
        nxt = [min(w.concurrency, n)]

        def on_done(queue: EventQueue, r: int) -> None:
            if nxt[0] < n:
                k = nxt[0]
                nxt[0] += 1
                queue.schedule(queue.now, lambda qq, k=k: arrive(qq, k))
        srv.on_done = on_done
        for r, t in enumerate(start_times(st, w, max_batch, lens_in, lens_out, prefill_batch, rng)):
            q.schedule(t, lambda qq, r=r: arrive(qq, r))
    q.run()
    return srv, arrivals, lens_in, lens_out


def simulate(st: StepTimes, workload: Workload, max_batch: int, prefill_batch: int = 1, chunk: int = 0
             ) -> ServingEstimate:
    """Serve ``workload`` on one replica whose steps ``st`` times; latency percentiles and throughput. A closed
    loop with random start phases runs ``workload.draws`` phase draws and pools their measured requests."""
    w = workload
    check_workload(w, max_batch)
    n = w.requests
    draws = w.draws if (w.mode == "closed" and w.stagger == "random") else 1
    runs = [_run(st, w, max_batch, prefill_batch, chunk,
                 np.random.default_rng(w.seed if k == 0 else [w.seed, k])) for k in range(draws)]
    keep = measured(w, n)
    lat, ttft, tpot, itl, outs = [], [], [], [], []
    for srv, arrivals, lens_in, lens_out in runs:
        lat += [srv.done[r] - arrivals[r] for r in keep]
        ttft += [srv.first[r] - arrivals[r] for r in keep]
        tpot += [(srv.done[r] - srv.first[r]) / (lens_out[r] - 1) for r in keep if lens_out[r] > 1]
        itl += [(srv.done[r] - srv.first[r]) / srv.steps_after_first[r] for r in keep if srv.steps_after_first[r]]
        outs += [lens_out[r] for r in keep]
    lat, ttft, tpot, itl = sorted(lat), sorted(ttft), sorted(tpot) or [0.0], sorted(itl) or [0.0]
    srv, arrivals, lens_in, lens_out = runs[0]
    span = max(srv.done) - min(arrivals)
    cap = sustainable_rate(st, max_batch, float(np.mean(lens_in)), float(np.mean(lens_out)), prefill_batch)
    rate = w.rate if w.mode == "open" else n / span
    tokens_per_s = srv.tokens / span
    steady = len(keep) < n
    if steady:   # steady state of a closed loop: Little's law, N users / mean response time
        rate = w.concurrency / float(np.mean(lat))
        tokens_per_s = rate * float(np.mean(outs))
    over = w.mode == "open" and w.rate > cap
    if over:
        verdict = (f"overloaded: {w.rate:.3g} requests/s offered, about {cap:.3g} sustained at batch {max_batch}; "
                   "queues grow without bound")
    elif w.mode == "open":
        verdict = f"within capacity: {rate:.3g} of about {cap:.3g} requests/s sustainable"
    else:   # a closed loop or an offline batch cannot overload: the load is what the server sustains
        who = f"{w.concurrency} users" if w.mode == "closed" else "every request at once"
        verdict = (f"{who}: {rate:.3g} requests/s served, {'at' if rate >= 0.95 * cap else 'below'} the about "
                   f"{cap:.3g} requests/s the replica sustains at batch {max_batch}")
        if steady:
            part = f"first {w.warmup}" + (f" and last {w.warmup}" if w.cooldown else "")
            verdict += f"; steady state: {len(keep)} of {n} requests measured (each user's {part} left out)"
            if draws > 1:
                verdict += f", pooled over {draws} draws of random start phases"
    return ServingEstimate(
        rate_per_s=rate, requests=n, max_batch=max_batch, output_tokens_per_s=tokens_per_s,
        requests_per_s=rate if steady else n / span, latency_s_p50=percentile(lat, 50),
        latency_s_p90=percentile(lat, 90), latency_s_p99=percentile(lat, 99), ttft_ms_p50=percentile(ttft, 50) * 1e3,
        ttft_ms_p90=percentile(ttft, 90) * 1e3, ttft_ms_p99=percentile(ttft, 99) * 1e3,
        mean_batch=srv.batch_sum / max(1, srv.decode_steps), mode=w.mode, concurrency=w.concurrency,
        tpot_ms_p50=percentile(tpot, 50) * 1e3, tpot_ms_p99=percentile(tpot, 99) * 1e3,
        itl_ms_p50=percentile(itl, 50) * 1e3, sustainable_rate_per_s=cap, overloaded=over, verdict=verdict)


def start_spacing(st: StepTimes, users: int, max_batch: int, mean_in: float, mean_out: float,
                  prefill_batch: int = 1) -> float:
    """Seconds between two closed-loop users' first requests so that they arrive as they do in the steady
    state: one user's period (N users sharing the replica at batch min(N, max batch)) over N, which is one
    over the rate the replica sustains at that batch."""
    return 1.0 / sustainable_rate(st, max(1, min(users, max_batch)), mean_in, mean_out, prefill_batch)


def start_times(st: StepTimes, w: Workload, max_batch: int, lens_in, lens_out, prefill_batch: int,
                rng: np.random.Generator) -> List[float]:
    """When each closed-loop user sends its first request: all at 0, ``even``ly one steady-state spacing
    apart, or at ``random`` phases of one period (the first user at 0, the others uniform over N spacings)."""
    users = min(w.concurrency, len(lens_in))
    if not w.stagger:
        return [0.0] * users
    gap = start_spacing(st, w.concurrency, max_batch, float(np.mean(lens_in)), float(np.mean(lens_out)),
                        prefill_batch)
    if w.stagger == "even":
        return [r * gap for r in range(users)]
    return [0.0] + [float(t) for t in rng.uniform(0.0, gap * w.concurrency, size=users - 1)]


def measured(w: Workload, n: int) -> List[int]:
    """The requests a closed-loop benchmark's statistics cover: without each user's first ``w.warmup``
    requests (the ramp) and, with ``w.cooldown``, without the last ``w.warmup`` per user (users drop off
    then). Every request when that leaves none, and always outside a closed loop."""
    if w.mode != "closed":
        return list(range(n))
    # by send order, never by how long a request took (that would keep the fast ones): the first
    # warmup x N requests are the ramp; with a cooldown the last warmup x N (each user's last ones) go too
    skip = w.warmup * w.concurrency
    keep = list(range(skip, n - skip if w.cooldown else n))
    return keep or list(range(n))


def sustainable_rate(st: StepTimes, max_batch: int, mean_in: float, mean_out: float, prefill_batch: int = 1
                     ) -> float:
    """Requests/s one replica sustains with every slot busy: each request costs its share of a prefill call
    and (output - 1) / tokens-per-step decode steps shared by ``max_batch`` sequences."""
    pb = max(1, min(prefill_batch, max_batch))
    pre = st.prefill(int(round(mean_in)), pb)["total"] / pb
    steps = max(0.0, mean_out - 1) / st.tokens_per_step
    dec = st.mean_decode(max_batch, int(mean_in), int(math.ceil(steps))) * steps / max_batch
    return 1.0 / max(1e-12, pre + dec)


def mlperf(st: StepTimes, scenario: str, workload: Workload, max_batch: int, prefill_batch: int = 1,
           chunk: int = 0, ttft_limit_ms: float = 2000.0, tpot_limit_ms: float = 200.0) -> ServingEstimate:
    """MLPerf-style scenarios: ``offline`` serves every request at once (max throughput); ``server`` finds the
    highest Poisson rate whose p99 TTFT and p99 TPOT stay within the limits (bisection on the simulation)."""
    from dataclasses import replace
    if scenario == "offline":
        e = simulate(st, replace(workload, mode="offline"), max_batch, prefill_batch, chunk)
        return replace(e, scenario="offline", verdict=f"offline: {e.output_tokens_per_s:.4g} output tokens/s")
    if scenario != "server":
        raise ConfigError(f"unknown MLPerf scenario {scenario!r}", rule="serving-scenario",
                          limit=("offline", "server"), value=scenario)
    if ttft_limit_ms <= 0 or tpot_limit_ms <= 0:
        raise ConfigError("the server scenario's latency limits must be positive", rule="serving-scenario",
                          limit="> 0", value=min(ttft_limit_ms, tpot_limit_ms))
    hi = simulate(st, replace(workload, mode="open", rate=1.0), max_batch, prefill_batch,
                  chunk).sustainable_rate_per_s
    lo, best = 0.0, None

    def ok(e: ServingEstimate) -> bool:
        return e.ttft_ms_p99 <= ttft_limit_ms and e.tpot_ms_p99 <= tpot_limit_ms

    e = simulate(st, replace(workload, mode="open", rate=hi), max_batch, prefill_batch, chunk)
    if ok(e):
        best = e
    else:
        for _ in range(10):
            mid = (lo + hi) / 2
            e = simulate(st, replace(workload, mode="open", rate=mid), max_batch, prefill_batch, chunk)
            if ok(e):
                lo, best = mid, e
            else:
                hi = mid
    limits = {"ttft_ms_p99": ttft_limit_ms, "tpot_ms_p99": tpot_limit_ms}
    if best is None:
        e = simulate(st, replace(workload, mode="open", rate=max(hi, 1e-6)), max_batch, prefill_batch, chunk)
        return replace(e, scenario="server", scenario_limits=limits,
                       verdict=f"server: no rate meets p99 TTFT <= {ttft_limit_ms:g} ms and p99 TPOT <= "
                               f"{tpot_limit_ms:g} ms")
    return replace(best, scenario="server", scenario_limits=limits,
                   verdict=f"server: {best.rate_per_s:.3g} requests/s ({best.output_tokens_per_s:.4g} output "
                           f"tokens/s) within p99 TTFT <= {ttft_limit_ms:g} ms, p99 TPOT <= {tpot_limit_ms:g} ms")


def percentile(sorted_xs: List[float], p: float) -> float:
    """Linear-interpolated percentile of an ascending list (numpy's default method)."""
    pos = (len(sorted_xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)

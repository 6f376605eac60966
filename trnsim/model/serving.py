"""Continuous batching of a request mix on one replica, as a small discrete-event simulation on trnsim.des.

Requests arrive as a Poisson process; at each iteration the server admits waiting requests into free slots
and prefills them, otherwise it runs one decode step for every active request (iteration-level scheduling,
as vLLM / Neuron's continuous batching do). Step times come from the estimator, interpolated on a grid.
"""
from __future__ import annotations

import bisect
import heapq
from typing import Callable, List

import numpy as np

from ..des import EventQueue
from ..errors import ConfigError
from .context import Context
from .parallel import Parallel
from .results import ServingEstimate


def parse_dist(spec: str, name: str) -> Callable[[np.random.Generator], int]:
    """A length distribution: ``N`` (fixed), ``LO:HI`` (uniform integers) or ``exp:MEAN``."""
    s = str(spec).strip()
    try:
        if s.startswith("exp:"):
            mean = float(s[4:])
            if not 0 < mean < float("inf"):  # NaN fails both comparisons
                raise ValueError
            return lambda rng: max(1, int(round(rng.exponential(mean))))
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
                          limit="N, LO:HI or exp:MEAN (positive integers)", value=spec) from None


class _Grid:
    """Piecewise-linear interpolation of a step time over one integer axis (batch or length)."""

    def __init__(self, xs: List[int], fn: Callable[[int], float]):
        self.xs = sorted(set(xs))
        self.ys = [fn(x) for x in self.xs]

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        i = bisect.bisect_left(xs, x)
        if i <= 0:
            return ys[0] * x / xs[0] if x < xs[0] else ys[0]
        if i >= len(xs):
            return ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (x - xs[-1]) if len(xs) > 1 else ys[-1]
        x0, x1 = xs[i - 1], xs[i]
        return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def simulate_serving(ctx: Context, par: Parallel, rate: float, input_dist: str, output_dist: str,
                     requests: int, max_batch: int, seed: int = 0, *, step_seconds: Callable) -> ServingEstimate:
    """Simulate ``requests`` arrivals at ``rate`` per second; return throughput and latency percentiles.
    ``step_seconds(ctx, par, batch, q, kv, decode)`` is the estimator's forward pass (``infer.step_seconds``)."""
    if rate <= 0 or requests < 1 or max_batch < 1:
        raise ConfigError("rate, requests and max batch must be positive", rule="serving", limit="> 0",
                          value=min(rate, requests, max_batch))
    rng = np.random.default_rng(seed)
    draw_in, draw_out = parse_dist(input_dist, "input"), parse_dist(output_dist, "output")
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=requests))
    lens_in = [draw_in(rng) for _ in range(requests)]
    lens_out = [draw_out(rng) for _ in range(requests)]
    ctx_mid = int(np.mean(lens_in) + np.mean(lens_out) / 2)
    batches = sorted({1, max_batch} | {2 ** i for i in range(1, 12) if 2 ** i < max_batch})
    decode = _Grid(batches, lambda b: step_seconds(ctx, par, b, 1, max(ctx_mid, 1), True)["total"])
    lmax = max(lens_in)
    lengths = sorted({min(lens_in), lmax, max(1, (min(lens_in) + lmax) // 2)})
    prefill = _Grid(lengths, lambda n: step_seconds(ctx, par, 1, n, n, False)["total"])

    q = EventQueue()
    waiting: List[int] = []
    ends: List[tuple] = []     # heap of (decode step at which a request finishes, request)
    first_token = [0.0] * requests
    done = [0.0] * requests
    state = {"busy": False, "tokens": 0, "batch_sum": 0.0, "steps": 0}

    def iterate(queue: EventQueue) -> None:
        if state["busy"]:
            return
        free = max_batch - len(ends)
        if waiting and free > 0:
            admit, waiting[:] = waiting[:free], waiting[free:]
            dt = sum(prefill(lens_in[r]) for r in admit)
            state["busy"] = True
            queue.schedule(queue.now + dt, lambda qq, a=admit: finish_prefill(qq, a))
        elif ends:
            dt = decode(len(ends))
            state["busy"] = True
            state["batch_sum"] += len(ends)
            queue.schedule(queue.now + dt, finish_decode)

    def finish_prefill(queue: EventQueue, admit: List[int]) -> None:
        state["busy"] = False
        for r in admit:
            first_token[r] = queue.now
            state["tokens"] += 1
            if lens_out[r] > 1:
                heapq.heappush(ends, (state["steps"] + lens_out[r] - 1, r))
            else:
                done[r] = queue.now
        iterate(queue)

    def finish_decode(queue: EventQueue) -> None:
        # every active request got one token; those whose last token this was leave the batch
        state["busy"] = False
        state["steps"] += 1
        state["tokens"] += len(ends)
        while ends and ends[0][0] <= state["steps"]:
            done[heapq.heappop(ends)[1]] = queue.now
        iterate(queue)

    def arrive(queue: EventQueue, r: int) -> None:
        waiting.append(r)
        iterate(queue)

    for r, t in enumerate(arrivals):
        q.schedule(float(t), lambda qq, r=r: arrive(qq, r))
    q.run()
    lat = sorted(float(d - a) for d, a in zip(done, arrivals))
    ttft = sorted(float(f - a) for f, a in zip(first_token, arrivals))
    span = max(done) - float(arrivals[0])
    return ServingEstimate(
        rate_per_s=rate, requests=requests, max_batch=max_batch, output_tokens_per_s=state["tokens"] / span,
        requests_per_s=requests / span, latency_s_p50=percentile(lat, 50), latency_s_p90=percentile(lat, 90),
        latency_s_p99=percentile(lat, 99), ttft_ms_p50=percentile(ttft, 50) * 1e3,
        ttft_ms_p90=percentile(ttft, 90) * 1e3, ttft_ms_p99=percentile(ttft, 99) * 1e3,
        mean_batch=state["batch_sum"] / max(1, state["steps"]))


def percentile(sorted_xs: List[float], p: float) -> float:
    """Linear-interpolated percentile of an ascending list (numpy's default method)."""
    pos = (len(sorted_xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)

"""Neuron serving as it runs: graphs compiled at fixed sequence buckets and batch sizes (a request pays its
bucket; token generation runs padded to the compiled batch), fixed costs per op, per token-generation step
and per context-encoding launch, MoE routing settings, and speculative decoding's tokens per target step.
Every figure comes from ``data/neuron_serving.toml`` (with its source) unless the caller overrides it."""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

from ..errors import ConfigError
from .datafiles import figure

DISPATCH = ("all-gather", "all-to-all")
SPEC_KINDS = ("", "eagle", "draft")


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: ``kind`` "eagle" (heads on the target's hidden states) or "draft" (a separate
    model), ``tokens`` proposed per target step, ``acceptance`` per proposed token."""
    kind: str = ""
    tokens: int = 0
    acceptance: float = 0.0
    draft_model: str = ""

    @property
    def on(self) -> bool:
        """Whether speculation is used."""
        return bool(self.kind) and self.tokens > 0

    def tokens_per_step(self) -> float:
        """Expected tokens a target step emits: (1 - a^(n+1)) / (1 - a) (Leviathan et al. 2023)."""
        if not self.on:
            return 1.0
        a = self.acceptance
        n = self.tokens
        return float(n + 1) if a >= 1.0 else (1.0 - a ** (n + 1)) / (1.0 - a)


@dataclass(frozen=True)
class ServingSetup:
    """How a Neuron serving stack compiled the model and runs it (None / () = the data file's default)."""
    seq_len: int = 0                          # max model length compiled for
    prefill_buckets: Tuple[int, ...] = ()     # context-encoding sequence buckets
    decode_buckets: Tuple[int, ...] = ()      # token-generation KV-length buckets
    batch_buckets: Tuple[int, ...] = ()       # compiled token-generation batch sizes (() = max batch only)
    max_batch: int = 0                        # sequences decoded together (vLLM max-num-seqs / NxDI batch_size)
    prefill_batch: int = 0                    # prompts per context-encoding call
    moe_dispatch: str = ""
    moe_prefill: str = ""                     # "blockwise" (routed, padded blocks) or "all-experts" (dense, masked)
    bucketing: bool = True
    in_graph_collectives: bool = True         # the fabric's in-graph collectives (False: standalone runtime calls)
    prefix_hit: float = 0.0                   # share of each prompt found in the prefix cache
    chunk: int = 0                            # chunked prefill: tokens per chunk (0 = whole prompts)
    spec: Speculation = field(default_factory=Speculation)
    overrides: Mapping[str, float] = field(default_factory=dict)

    def fig(self, key: str):
        """A figure of neuron_serving.toml, or the caller's override."""
        return figure("neuron_serving", key, self.overrides)


def check_setup(s: ServingSetup) -> None:
    """Reject settings that cannot describe a deployment, naming the rule and the value."""
    if not 0.0 <= s.prefix_hit < 1.0:
        raise ConfigError("the prefix-cache hit rate must be in [0, 1)", rule="serving-prefix-hit",
                          limit="0 <= hit < 1", value=s.prefix_hit)
    if s.moe_dispatch and s.moe_dispatch not in DISPATCH:
        raise ConfigError(f"unknown MoE dispatch {s.moe_dispatch!r}", rule="serving-moe-dispatch",
                          limit=DISPATCH, value=s.moe_dispatch)
    if s.moe_prefill not in ("", "blockwise", "all-experts"):
        raise ConfigError(f"unknown MoE prefill {s.moe_prefill!r}", rule="serving-moe-prefill",
                          limit=("blockwise", "all-experts"), value=s.moe_prefill)
    if s.spec.kind not in SPEC_KINDS:
        raise ConfigError(f"unknown speculative decoding {s.spec.kind!r}", rule="serving-speculation",
                          limit=SPEC_KINDS[1:], value=s.spec.kind)
    if s.spec.kind == "draft" and not s.spec.draft_model:
        raise ConfigError("speculative decoding with a draft model needs the draft model (--draft-model)",
                          rule="serving-speculation", limit="a zoo name or config.json", value="")
    if s.spec.kind and not (s.spec.tokens >= 1 and 0.0 <= s.spec.acceptance <= 1.0):
        raise ConfigError("speculative decoding needs >= 1 proposed token and an acceptance in [0, 1]",
                          rule="serving-speculation", limit="tokens >= 1, 0 <= acceptance <= 1",
                          value=(s.spec.tokens, s.spec.acceptance))
    for name in ("seq_len", "max_batch", "prefill_batch", "chunk"):
        if getattr(s, name) < 0:
            raise ConfigError(f"{name} must not be negative", rule="serving-setup", limit=">= 0",
                              value=getattr(s, name))
    for name in ("prefill_buckets", "decode_buckets", "batch_buckets"):
        if any(int(b) < 1 for b in getattr(s, name)):
            raise ConfigError(f"{name} must be positive integers", rule="serving-buckets", limit=">= 1",
                              value=getattr(s, name))


def powers_of_two(lo: int, hi: int) -> Tuple[int, ...]:
    """lo, 2 lo, 4 lo, ... up to and including hi (hi itself closes the list)."""
    out, b = [], max(1, lo)
    while b < hi:
        out.append(b)
        b *= 2
    out.append(hi)
    return tuple(out)


def seq_len_of(s: ServingSetup, need: int) -> int:
    """The compiled max model length: the setup's, or ``need`` rounded up to a power of two."""
    if s.seq_len:
        return s.seq_len
    return 1 << max(7, math.ceil(math.log2(max(1, need))))


def pad_to(n: int, buckets: Tuple[int, ...], what: str) -> int:
    """The smallest bucket holding ``n``; past the largest one the request cannot run."""
    bs = sorted(buckets)
    i = bisect.bisect_left(bs, n)
    if i >= len(bs):
        raise ConfigError(f"{what} of {n} exceeds the largest compiled bucket {bs[-1]}", rule="serving-bucket",
                          limit=bs[-1], value=n, hint="raise --seq-len or add a larger bucket")
    return bs[i]


def prefill_len(s: ServingSetup, n: int, need: int) -> int:
    """Tokens a context-encoding call of an ``n``-token prompt computes (its bucket)."""
    if not s.bucketing:
        return n
    buckets = s.prefill_buckets or powers_of_two(int(s.fig("buckets.min_tokens")), seq_len_of(s, need))
    return pad_to(n, buckets, "a prompt")


def decode_kv(s: ServingSetup, kv: int, need: int) -> int:
    """KV length a token-generation step attends over (its bucket)."""
    if not s.bucketing:
        return kv
    buckets = s.decode_buckets or powers_of_two(int(s.fig("buckets.min_tokens")), seq_len_of(s, need))
    return pad_to(kv, buckets, "a context")


def decode_batch(s: ServingSetup, b: int) -> int:
    """Sequences a token-generation step computes: the compiled batch holding ``b``."""
    if not s.bucketing:
        return b
    if s.batch_buckets:
        return pad_to(b, s.batch_buckets, "a decode batch")
    return max(b, s.max_batch or b)


def runtime(target: str, s: Optional[ServingSetup] = None) -> dict:
    """Fixed costs of one generation: op_fixed_s, step_overhead_s, prefill_fixed_s, moe_block_fixed_s (0 where
    none), and its blockwise-matmul block size moe_block_tokens (the [moe] default where none)."""
    s = s or ServingSetup()
    out = {}
    for k in ("op_fixed_s", "step_overhead_s", "prefill_fixed_s", "moe_block_fixed_s", "moe_block_tokens"):
        key = f"runtime.{target}.{k}"
        try:
            out[k] = float(s.fig(key))
        except ConfigError:
            out[k] = 0.0
    if not out["moe_block_tokens"]:
        out["moe_block_tokens"] = float(s.fig("moe.block_tokens"))
    return out

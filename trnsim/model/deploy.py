"""Serving as deployed, on any system: the serving framework and KV-cache format of an estimate, the layout of one
replica (tensor parallel, or attention data parallel with experts over EP ranks) and chunked prefill."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional, Tuple

from ..errors import ConfigError
from .config import ModelConfig
from .frameworks import Framework, kv_bytes, load_framework, resolve_kv
from .parallel import Parallel, ParallelError, resolve


def serving_options(framework: Optional[str], kv_dtype: Optional[str], precision: str, hardware_formats: Tuple[str, ...],
                    systems: str) -> Tuple[Optional[Framework], str, float]:
    """(framework or None, KV-cache format, bytes per KV element or 0 for the activation width) of an estimate on
    ``systems`` ("gpu" | "trainium"); with neither a framework nor a format, (None, "bf16", 0.0)."""
    fw = load_framework(framework) if framework else None
    if fw is not None and fw.systems != systems:
        raise ConfigError(f"{fw.name} does not serve on {'GPUs' if systems == 'gpu' else 'Trainium'}",
                          rule="framework", value=framework,
                          limit=("trtllm", "vllm", "sglang") if systems == "gpu" else ("nxdi",))
    if kv_dtype is None and fw is None:
        return None, "bf16", 0.0
    kv = resolve_kv(fw or load_framework("nxdi"), kv_dtype, precision, hardware_formats)
    return fw, kv, kv_bytes(kv)


def replica_layout(cfg: ModelConfig, system, tp: int, pp: int, ep: int, sp: bool, attention_dp: int,
                   pad_heads: bool = False) -> Parallel:
    """The Parallel of one serving replica: experts over the TP group (ep | tp), or with ``attention_dp`` > 1
    attention over attention_dp groups of tp / attention_dp ranks and experts over ``ep`` ranks.
    ``pad_heads``: a tp that does not divide the heads is served with padded heads (as Neuron does)."""
    if attention_dp < 1 or tp % attention_dp:
        raise ParallelError(f"attention-dp={attention_dp} must divide tp={tp}", rule="parallel-attention-dp",
                            limit=f"a divisor of {tp}", value=attention_dp)
    if attention_dp > 1:
        if ep > tp * pp or (ep > 1 and not cfg.is_moe) or ep > max(cfg.experts, 1):
            raise ParallelError(f"ep={ep} needs an MoE model and at most the replica's {tp * pp} ranks and its "
                                f"{cfg.experts} experts", rule="parallel-ep", limit=tp * pp, value=ep)
        atp = tp // attention_dp
        par = resolve(Parallel(tp=atp, pp=pp, dp=1, sp=sp and atp > 1), cfg, system, ranks=atp * pp,
                      pad_heads=pad_heads)
        return replace(par, tp=tp, ep=ep, dp=1)
    if ep > 1 and tp % ep:
        raise ParallelError(f"ep={ep} must divide tp={tp} (without attention DP the experts are spread over the "
                            "TP group)", rule="parallel-ep-tp", limit=f"a divisor of {tp}", value=ep)
    # EP reuses the TP ranks when serving; resolve checks it against the experts as if over dp = ep
    par = resolve(Parallel(tp=tp, pp=pp, dp=ep, ep=ep, sp=sp), cfg, system, ranks=tp * pp * ep, pad_heads=pad_heads)
    return replace(par, dp=1)


def chunked_prefill(step: Callable[..., dict], batch: int, prompt: int, chunk: int) -> dict:
    """Prefill of ``batch`` prompts in forward steps of at most ``chunk`` tokens (0: all at once):
    ``step(batch, q, kv)`` times one step; a chunk of a long prompt attends to the part before it. The
    step dicts' numbers (nested ones too) are summed."""
    if not chunk or batch * prompt <= chunk:
        return step(batch, prompt, prompt)
    if prompt >= chunk:   # each prompt alone spans several chunks
        steps = [(1, min(chunk, prompt - i * chunk), min(prompt, (i + 1) * chunk), batch)
                 for i in range(-(-prompt // chunk))]
    else:                 # whole prompts packed into each chunk
        per = max(1, chunk // prompt)
        full, rest = divmod(batch, per)
        steps = [(b, prompt, prompt, n) for b, n in ((per, full), (rest, 1)) if b and n]
    out: dict = {}
    for b, q, kv, times in steps:
        _add(out, step(b, q, kv), times)
    return out


def _add(out: dict, d: dict, times: float) -> None:
    """out += d x times, number by number (nested dicts alike)."""
    for k, v in d.items():
        if isinstance(v, dict):
            _add(out.setdefault(k, {}), v, times)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = out.get(k, 0) + v * times


def kv_formats(system) -> Tuple[str, ...]:
    """KV-cache formats the system's hardware stores: a GPU's tensor formats, Trainium's bf16 and fp8."""
    gpu = getattr(system, "gpu", None) if getattr(system, "rank_name", "NeuronCore") == "GPU" else None
    if gpu is None:
        return ("bf16", "fp8")
    return tuple(p for p in ("bf16", "fp8", "fp4") if getattr(gpu, f"{p}_flops", None))


def serving_note(fw: Optional[Framework], kv: str, defaulted: bool) -> str:
    """One line saying how the estimate serves: framework, KV format (and whether it is the default), costs."""
    head = f"served by {fw.name}: " if fw else ""
    s = f"{head}{kv} KV cache" + (" (the framework's default)" if defaulted and fw else "")
    if fw:
        s += (f", {fw.step_overhead_s * 1e3:g} ms per step, {fw.request_overhead_s * 1e3:g} ms per request, "
              + (f"prefill in chunks of {fw.prefill_chunk_tokens} tokens" if fw.prefill_chunk_tokens
                 else "whole-prompt prefill"))
    return s

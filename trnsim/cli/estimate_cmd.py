"""``trnsim estimate train|infer``: model-level training step / inference estimates with memory fit,
breakdown and error band (thin layer over ``trnsim.api.estimate_training`` / ``estimate_inference``)."""
from __future__ import annotations

import argparse

from .. import api
from .output import Spinner, console, print_json, print_warnings, table


def register(subparsers) -> None:
    """Add ``estimate train`` and ``estimate infer`` to the ``trnsim`` command line."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", required=True, help="zoo name (trnsim models) or a config.json path")
    common.add_argument("--instance", default=None, help="instance or UltraServer (trnsim hw list)")
    common.add_argument("--nodes", type=int, default=1, help="number of instances")
    common.add_argument("--tp", type=int, default=1, help="tensor parallel degree (logical NeuronCores)")
    common.add_argument("--pp", type=int, default=1, help="pipeline parallel stages")
    common.add_argument("--ep", type=int, default=1, help="expert parallel degree (MoE)")
    common.add_argument("--lnc", type=int, default=None, help="logical NeuronCore size 1|2 (trn2/trn3)")
    common.add_argument("--precision", default="bf16", help="matmul format: bf16|fp8|mxfp8|mxfp4")
    common.add_argument("--sparsity", default=None, help="M:N structured sparsity, e.g. 4:16 (trn2/trn3)")
    common.add_argument("--comm", default="fabric", choices=("fabric", "fabric-sim"),
                        help="collectives model: the fabric's closed forms (default) or its flow simulator")
    common.add_argument("--costs", default="roofline", choices=("roofline", "simulated"),
                        help="per-op costs: catalog roofline, or simulated reference kernels (cached)")
    common.add_argument("--attention-impl", default="fused", choices=("fused", "unfused"),
                        help="with --costs simulated: attention as the fused NKI kernels (default) or the eager "
                             "unfused fallback (QK^T, softmax, PV as separate kernels, scores in HBM)")
    common.add_argument("--hardware", metavar="FILE", help="TOML merged over the hardware catalog")
    common.add_argument("--sweep", metavar="PARAM=V1,V2,...", default=None,
                        help="repeat the estimate over values of one parameter (infer: batch, input, output, "
                             "tp, pp, nodes; train: seq, tp, pp, dp, nodes, micro-batch, global-batch)")
    common.add_argument("--html", metavar="FILE", default=None, help="with --sweep: an HTML page of the sweep's "
                        "table and charts")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    est = subparsers.add_parser("estimate", help="training / inference time, memory and MFU of a model",
                                description="Estimate a training step or inference of a transformer model.")
    sub = est.add_subparsers(dest="estimate_command", metavar="KIND")
    t = sub.add_parser("train", parents=[common], help="one training step (AdamW, bf16 autocast)")
    t.add_argument("--dp", type=int, default=None, help="data parallel degree (default: the cores left)")
    t.add_argument("--cp", type=int, default=1, help="context parallel degree")
    t.add_argument("--vp", type=int, default=1, help="virtual pipeline stages per rank")
    t.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None,
                   help="sequence parallel (with tp > 1; default: the framework's, on for NxD and Megatron)")
    t.add_argument("--zero", type=int, default=None,
                   help="ZeRO stage: 1 optimizer states, 2 + gradients, 3 + weights sharded (default: the framework's)")
    t.add_argument("--framework", default=None,
                   help="memory layout and recipe defaults: nxd (Trainium default), optimum-neuron, megatron (GPU "
                        "default), fsdp, deepspeed")
    t.add_argument("--lora-rank", type=int, default=None, help="LoRA fine-tuning: adapter rank (frozen base model)")
    t.add_argument("--lora-targets", default=None, help="LoRA projections, e.g. q,k,v,o,gate,up,down (default q,k,v,o)")
    t.add_argument("--seq", type=int, default=2048, help="sequence length")
    t.add_argument("--global-batch", type=int, default=None, help="sequences per step (default dp x micro)")
    t.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch")
    t.add_argument("--recompute", default=None, choices=("none", "selective", "full"),
                   help="activation recompute (default: the framework's, selective for NxD and Megatron)")
    t.set_defaults(func=cmd_train, default_instance="trn1.32xlarge")
    i = sub.add_parser("infer", parents=[common], help="prefill (TTFT) and decode (TPOT) of a batch")
    i.add_argument("--batch", type=int, default=1, help="concurrent sequences")
    i.add_argument("--sp", action="store_true", help="sequence-parallel prefill (norms split over TP)")
    i.add_argument("--input", type=int, default=128, help="prompt tokens")
    i.add_argument("--output", type=int, default=128, help="generated tokens")
    i.add_argument("--rate", type=float, default=None, help="requests/s for a continuous-batching simulation")
    i.add_argument("--input-dist", default=None, help="prompt lengths: N, LO:HI or exp:MEAN")
    i.add_argument("--output-dist", default=None, help="output lengths: N, LO:HI or exp:MEAN")
    i.add_argument("--requests", type=int, default=200, help="requests simulated with --rate")
    i.add_argument("--max-batch", type=int, default=None, help="continuous-batching slots")
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--framework", default=None,
                   help="serving framework whose step/request costs, memory rule and KV formats apply "
                        "(Trainium: nxdi; GPUs: trtllm | vllm | sglang)")
    i.add_argument("--kv-dtype", default=None, help="KV-cache format: bf16 | fp8 | fp4 (default: the framework's)")
    i.add_argument("--replicas", type=int, default=1,
                   help="copies of the tp x pp replica sharing the load (8 GPUs as 4 x TP2: --tp 2 --replicas 4)")
    i.add_argument("--attention-dp", type=int, default=1,
                   help="attention data-parallel groups within the TP group (MoE: experts over --ep ranks)")
    add_serving_flags(i)
    i.set_defaults(func=cmd_infer, default_instance="trn2.48xlarge")
    est.set_defaults(func=lambda args: (est.print_help(), 1)[1])


def _band(x: float) -> str:
    return f"±{x:.0%}"


def _rank(e, hardware_file=None) -> str:
    """What one rank of the estimate's system is: NeuronCore or GPU."""
    from ..model.system import make_system
    return make_system(e.instance, e.nodes, e.lnc if e.lnc > 1 else None, hardware_file).rank_name


def _kinds_table(title: str, rows) -> object:
    """Collectives per kind: (label, {calls, seconds, bytes}) rows."""
    return table(title, ["collective", "calls", "ms", "us per call", "MiB per call"],
                 [(k, f"{c['calls']:,.0f}", f"{c['seconds'] * 1e3:.3f}", f"{c['seconds'] / c['calls'] * 1e6:.1f}",
                   f"{c['bytes'] / c['calls'] / 2**20:,.3f}") for k, c in rows])


def _groups_table(title: str, rows) -> object:
    """The size x group table: (phase label, CollectiveGroup) rows; the phase column only where one is given."""
    from ..fabric import format_size
    phased = any(label for label, _ in rows)
    return table(title, (["phase"] if phased else []) + ["collective", "bytes per call", "ranks", "calls",
                                                          "us per call", "total ms", "algorithm", "links"],
                 [((label,) if phased else ()) + (g.op, format_size(g.bytes), g.ranks, f"{g.calls:,.4g}",
                   f"{g.us_per_call:,.1f}", f"{g.total_ms:.3f}", g.algorithm or "-", ", ".join(g.links) or "-")
                  for label, g in rows])


def _train(args, inst: str):
    """The training estimate the command line asks for."""
    return api.estimate_training(args.model, inst, nodes=args.nodes, tp=args.tp, pp=args.pp, dp=args.dp,
                                 cp=args.cp, ep=args.ep, vp=args.vp, sp=args.sp, zero=args.zero, lnc=args.lnc,
                                 seq=args.seq, global_batch=args.global_batch, micro_batch=args.micro_batch,
                                 recompute=args.recompute, precision=args.precision, sparsity=args.sparsity,
                                 costs=args.costs, comm=args.comm, hardware_file=args.hardware,
                                 attention_impl=args.attention_impl, framework=args.framework,
                                 lora_rank=args.lora_rank, lora_targets=args.lora_targets)


def cmd_train(args) -> int:
    """Estimate one training step and print it."""
    inst = args.instance or args.default_instance
    if args.sweep:
        return _run_sweep(args, "train", inst, _train)
    with Spinner(not args.json, "estimating training step"):
        e = _train(args, inst)
    if args.json:
        print_json(e.to_dict())
        return 0
    out = console()
    b = e.error_band["step_time_s"]
    p = e.parallel
    rank = _rank(e, args.hardware)
    units = f"LNC={e.lnc}, {e.cores} cores" if rank == "NeuronCore" else f"{e.cores} GPUs"
    out.print(table(f"Training {e.model} on {e.nodes} x {e.instance} ({units}; tp={p['tp']} "
                    f"pp={p['pp']} dp={p['dp']} cp={p['cp']} ep={p['ep']} zero={p['zero']}{' sp' if p['sp'] else ''}"
                    f"{', ' + p['framework'] if p.get('framework') else ''}"
                    f"{', LoRA r=' + str(p['lora']['rank']) if p.get('lora') else ''})",
                    ["figure", "value", "error band"],
                    [("step time", f"{e.step_time_s:.3f} s", _band(b)), ("sequences/s", f"{e.seq_per_s:,.1f}", _band(b)),
                     ("tokens/s", f"{e.tokens_per_s:,.0f}", _band(b)), ("MFU", f"{e.mfu:.1%}", _band(b)),
                     ("HFU (with recompute)", f"{e.hfu:.1%}", ""),
                     ("micro-batches per step", e.micro_batches, ""),
                     (f"memory per {rank}", f"{e.memory_per_core_gib:.2f} GiB of {e.memory['hbm_per_core_gib']:.0f}",
                      "")]))
    out.print(table("Breakdown of one step (critical path)", ["part", "seconds", "share"],
                    [(k, f"{v:.4f}", f"{v / e.step_time_s:.1%}") for k, v in e.breakdown.items()]))
    if e.comm:
        out.print(table("Collectives per step", ["collective", "bytes each", "seconds", "exposed", "overlapped"],
                        [(k, f"{c['bytes'] / 2**20:,.1f} MiB", f"{c['seconds']:.4f}", f"{c['exposed']:.4f}",
                          f"{c['overlapped']:.4f}") for k, c in e.comm.items()]))
    if e.collectives:
        out.print(_kinds_table("Collectives per step, by kind", e.collectives.items()))
    if e.collective_table:
        out.print(_groups_table("Collectives by size and group (per step)", [("", g) for g in e.collective_table]))
    out.print(table(f"Memory per {rank} (GiB)", ["part", "GiB"],
                    [(k[:-4], f"{v:.3f}") for k, v in e.memory.items() if k.endswith("_gib")]))
    _footer(out, e)
    return 0


def _infer(args, inst: str):
    """The inference estimate the command line asks for."""
    return api.estimate_inference(args.model, inst, nodes=args.nodes, tp=args.tp, pp=args.pp, ep=args.ep,
                                  sp=args.sp, lnc=args.lnc, batch=args.batch, input_len=args.input,
                                  output_len=args.output, precision=args.precision, sparsity=args.sparsity,
                                  costs=args.costs, comm=args.comm, hardware_file=args.hardware, rate=args.rate,
                                  attention_impl=args.attention_impl,
                                  input_dist=args.input_dist, output_dist=args.output_dist, requests=args.requests,
                                  max_batch=args.max_batch, seed=args.seed, kv_dtype=args.kv_dtype,
                                  framework=args.framework, attention_dp=args.attention_dp, replicas=args.replicas,
                                  concurrency=args.concurrency, serving=serving_setup(args), scenario=args.scenario,
                                  ttft_limit_ms=args.ttft_limit_ms, tpot_limit_ms=args.tpot_limit_ms)


def cmd_infer(args) -> int:
    """Estimate prefill / decode (and a served request mix with --rate) and print it."""
    inst = args.instance or args.default_instance
    if args.sweep:
        return _run_sweep(args, "infer", inst, _infer)
    with Spinner(not args.json, "estimating inference"):
        e = _infer(args, inst)
    if args.json:
        print_json(e.to_dict())
        return 0
    out = console()
    eb = e.error_band
    rank = _rank(e, args.hardware)
    lnc = f"LNC={e.lnc}; " if rank == "NeuronCore" else ""
    out.print(table(f"Inference {e.model} on {e.instance} ({lnc}tp={e.parallel['tp']} pp={e.parallel['pp']}"
                    f" ep={e.parallel['ep']}; batch {e.batch}, {e.input_len} in / {e.output_len} out, {e.precision})",
                    ["figure", "value", "error band"],
                    [("TTFT", f"{e.ttft_ms:.2f} ms", _band(eb["ttft_ms"])),
                     ("TPOT", f"{e.tpot_ms:.3f} ms", _band(eb["tpot_ms"])),
                     ("output tokens/s", f"{e.output_tokens_per_s:,.1f}", _band(eb["output_tokens_per_s"])),
                     (f"memory per {rank}", f"{e.memory_per_core_gib:.2f} GiB of {e.memory['hbm_per_core_gib']:.0f}",
                      ""),
                     (f"KV cache per {rank}", f"{e.kv_cache_gib:.3f} GiB"
                      + (f" ({e.framework['kv_dtype']})" if e.framework else ""), ""),
                     ("chips needed (weights + KV)", e.chips_needed, "")]))
    out.print(table("Breakdown (decode: streaming weights, reading the KV cache, the rest of the compute, "
                    "collectives)", ["part", "value"],
                    [(k[:-3], f"{v:.3f} ms") if k.endswith("_ms") else (k, f"{v:g}") for k, v in e.breakdown.items()]))
    rows = [(f"{phase}: {k}", c) for phase, kinds in e.collectives.items() for k, c in kinds.items()]
    if rows:
        out.print(_kinds_table("Collectives per prefill / per decode step, by kind", rows))
    groups = [({"decode": "decode step"}.get(phase, phase), g) for phase, gs in e.collective_table.items() for g in gs]
    if groups:
        out.print(_groups_table("Collectives by size and group (per prefill / per decode step)", groups))
    if e.serving:
        s = e.serving
        who = {"closed": f"{s.concurrency} users (closed loop)", "offline": "all at once (offline)"}.get(
            s.mode, f"{s.rate_per_s:g}/s (Poisson)")
        out.print(table(f"Serving{' (MLPerf ' + s.scenario + ')' if s.scenario else ''}: {s.requests} requests, "
                        f"{who}, {s.max_batch} slots", ["figure", "p50", "p90", "p99"],
                        [("latency (s)", f"{s.latency_s_p50:.2f}", f"{s.latency_s_p90:.2f}", f"{s.latency_s_p99:.2f}"),
                         ("TTFT (ms)", f"{s.ttft_ms_p50:.1f}", f"{s.ttft_ms_p90:.1f}", f"{s.ttft_ms_p99:.1f}"),
                         ("TPOT (ms)", f"{s.tpot_ms_p50:.2f}", "", f"{s.tpot_ms_p99:.2f}"),
                         ("ITL (ms)", f"{s.itl_ms_p50:.2f}", "", "")]))
        out.print(f"throughput {s.output_tokens_per_s:,.1f} output tokens/s, {s.requests_per_s:.2f} requests/s, "
                  f"mean batch {s.mean_batch:.1f}; sustainable about {s.sustainable_rate_per_s:.3g} requests/s")
        if s.overloaded:   # the result misses its own constraint: said in the table, not only in --json
            print_warnings(out, [s.verdict])
        else:
            out.print(f"verdict: {s.verdict}")
    _footer(out, e)
    return 0


def _footer(out, e) -> None:
    how = ", ".join(f"{len(v)} {k}" for k, v in e.ops_by_how.items())
    out.print(f"ops costed: {how}; calibration rows: {', '.join(e.calibration_rows) or 'none'}; "
              f"estimate took {e.sim_seconds * 1e3:.0f} ms")
    for n in e.notes:
        out.print(f"note: {n}")


def add_serving_flags(p) -> None:
    """The serving options of ``estimate infer``: who sends requests, how the Neuron stack compiled the model,
    prefix caching, chunked prefill, speculative decoding, MLPerf scenarios."""
    g = p.add_argument_group("serving")
    g.add_argument("--concurrency", type=int, default=None, help="closed loop: N users, each sending its next "
                   "request when the last one finished (instead of --rate)")
    g.add_argument("--stagger", choices=("even", "random", "none"), default=None,
                   help="closed loop: how the users' first requests are spread over one steady-state period "
                   "(default: the data file's, random phases); none = all at once (users stay synchronised)")
    g.add_argument("--scenario", choices=("offline", "server"), default=None,
                   help="MLPerf-style: offline (max throughput) or server (highest Poisson rate within limits)")
    g.add_argument("--ttft-limit-ms", type=float, default=2000.0, help="server scenario: p99 TTFT limit")
    g.add_argument("--tpot-limit-ms", type=float, default=200.0, help="server scenario: p99 TPOT limit")
    g.add_argument("--seq-len", type=int, default=0, help="max model length compiled for (default: input + "
                   "output rounded up to a power of two)")
    g.add_argument("--buckets", default="", help="context-encoding buckets, e.g. 512,1024,4096 (default: "
                   "powers of two from 128 to --seq-len)")
    g.add_argument("--decode-buckets", default="", help="token-generation KV-length buckets (as --buckets)")
    g.add_argument("--batch-buckets", default="", help="compiled decode batch sizes, e.g. 1,4,16 (default: "
                   "--max-batch only)")
    g.add_argument("--prefill-batch", type=int, default=0, help="prompts per context-encoding call")
    g.add_argument("--no-buckets", action="store_true", help="exact shapes, no compiled buckets (GPU-like)")
    g.add_argument("--prefix-hit", type=float, default=0.0, help="share of each prompt found in the prefix cache")
    g.add_argument("--chunked-prefill", type=int, default=0, metavar="TOKENS",
                   help="prefill in chunks of TOKENS riding along with decode steps")
    g.add_argument("--spec", choices=("eagle", "draft"), default=None, help="speculative decoding")
    g.add_argument("--spec-tokens", type=int, default=3, help="tokens proposed per target step")
    g.add_argument("--acceptance", type=float, default=None, help="acceptance rate per proposed token "
                   "(default: the data file's figure for the kind)")
    g.add_argument("--draft-model", default="", help="--spec draft: the draft model (zoo name or config.json)")
    g.add_argument("--standalone-collectives", action="store_true",
                   help="charge collectives as standalone runtime calls (trnsim collective --standalone) instead "
                   "of the in-graph calls of compiled Neuron graphs")
    g.add_argument("--moe-dispatch", choices=("all-gather", "all-to-all"), default="",
                   help="how MoE tokens reach their experts (default: the data file's framework choice)")


def _ints(text: str, flag: str):
    from ..errors import ConfigError
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{flag} takes comma-separated integers", rule="serving-buckets",
                          limit="e.g. 512,1024,4096", value=text) from None


def serving_setup(args):
    """The ServingSetup the serving flags describe."""
    from ..model.datafiles import load
    from ..model.neuron import ServingSetup, Speculation
    spec = Speculation()
    if args.spec:
        acc = args.acceptance if args.acceptance is not None else \
            load("neuron_serving")["speculation"][f"{args.spec}_acceptance"]["value"]
        spec = Speculation(kind=args.spec, tokens=args.spec_tokens, acceptance=float(acc),
                           draft_model=args.draft_model)
    return ServingSetup(seq_len=args.seq_len, prefill_buckets=_ints(args.buckets, "--buckets"),
                        decode_buckets=_ints(args.decode_buckets, "--decode-buckets"),
                        batch_buckets=_ints(args.batch_buckets, "--batch-buckets"),
                        prefill_batch=args.prefill_batch, moe_dispatch=args.moe_dispatch,
                        bucketing=not args.no_buckets, in_graph_collectives=not args.standalone_collectives,
                        prefix_hit=args.prefix_hit, chunk=args.chunked_prefill,
                        spec=spec, overrides=_closed_loop_overrides(args))


def _closed_loop_overrides(args) -> dict:
    """``--stagger`` as an override of the data file's closed-loop choice."""
    stagger = getattr(args, "stagger", None)
    return {} if stagger is None else {"closed_loop.stagger": "" if stagger == "none" else stagger}


# the estimator keyword a sweep sets -> the command-line option that carries it
_DEST = {"input_len": "input", "output_len": "output"}


def _run_sweep(args, kind: str, inst: str, call) -> int:
    """``--sweep PARAM=V1,V2``: the same estimate per value, as a table (or JSON) and ``--html`` charts."""
    from ..outputs import write_text
    from ..sweep import PARAMS, parse_sweep, sweep, sweep_page
    from ..validate import check_output_args
    param, values = parse_sweep(args.sweep, kind)
    check_output_args(args)   # a bad --html path fails before the sweep runs, not after it
    key = PARAMS[kind][param]
    dest = _DEST.get(key, key)

    def one(**kw):
        return call(argparse.Namespace(**{**vars(args), dest: kw[key]}), inst)
    with Spinner(not args.json, f"sweeping {param}"):
        s = sweep(kind, param, values, estimate=one, model=args.model, instance=inst)
    written = [write_text(args.html, sweep_page(s), "--html")] if args.html else []
    if args.json:
        print_json({"sweep": s.to_dict(), "written": written})
        return 0
    cols, rows = s.table()
    out = console()
    out.print(table(s.title, cols, rows))
    for p in written:
        out.print(f"wrote {p}")
    return 0

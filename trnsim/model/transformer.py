"""Transformer op graphs per (logical) NeuronCore: embedding, attention (MHA/GQA/MQA, MLA, RoPE, flash-style),
SwiGLU/GELU MLP, MoE routing + experts, norms, LM head and loss; backward, recompute and the AdamW step.

Shapes are already divided by the parallelism: TP splits heads and MLP width, SP splits the tokens of norms
and elementwise ops, CP splits the sequence, EP spreads the experts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List

from .config import ModelConfig
from .graph import GraphOp, OpGraph
from .ops import Op

ACT = "bfloat16"


@dataclass(frozen=True)
class Layout:
    """What one core holds: TP/SP/EP/CP degrees, layers of its stage, and number formats."""
    tp: int = 1
    sp: bool = False
    ep: int = 1
    ep_in_tp: bool = False       # inference: experts spread over the TP group, which shares its tokens
    cp: int = 1
    pp: int = 1
    mm_dtype: str = "bfloat16"   # matmul Op dtype (precision)
    weight_bytes: float = 2.0
    act_bytes: float = 2.0
    expert_weight_bytes: float = 0.0   # routed experts stored in another format (0 = weight_bytes)
    moe_block: int = 1           # prefill: each expert's tokens padded to a multiple of this (blockwise matmul)
    moe_skew: float = 1.0        # router skew on top of the multinomial spread of tokens over EP ranks
    pe_pad: int = 1              # per-rank matmul widths padded to a multiple of this (PE array columns)
    moe_all_experts: bool = False  # prefill runs every local expert over every token (masked), not routed
    kv_bytes: float = 0.0        # KV-cache element bytes read by attention (0: act_bytes)


def _mm(name: str, m: int, k: int, n: int, lay: Layout, batch: int = 1, weight: bool = True) -> Op:
    """A matmul [m,k] x [k,n], ``batch`` times; HBM bytes count the weight once per repeat."""
    a = lay.act_bytes
    w = lay.weight_bytes if weight else a
    return Op(kind="matmul", name=name, dtype=lay.mm_dtype, m=m, k=k, n=n, batch=batch,
              flops=2.0 * m * k * n * batch, bytes=batch * (m * k * a + k * n * w + m * n * a))


def _vec(kind: str, name: str, rows: int, cols: int, lay: Layout, passes: float = 3.0, flops_per: float = 1.0) -> Op:
    """A Vector/Scalar-engine op over rows x cols elements (``passes`` tensors read or written)."""
    return Op(kind=kind, name=name, dtype=ACT, rows=rows, cols=cols, flops=flops_per * rows * cols,
              bytes=passes * rows * cols * lay.act_bytes)


def _attn(name: str, b: int, q: int, kv: int, heads: int, kv_heads: int, hd: int, hd_v: int, causal: bool,
          lay: Layout, kv_width: int = 0) -> Op:
    """Flash-style attention: S = QK^T and O = PV never leave the core; causal halves the work (with context
    parallelism too: the load-balanced split gives every rank half of its queries' keys on average).
    Keys and values are read in the KV cache's format; ``kv_width`` is the elements per token and KV head
    stored (default hd + hd_v; an absorbed MLA latent serves as both key and value)."""
    frac = 0.5 if causal and q > 1 else 1.0
    flops = 2.0 * b * heads * q * kv * (hd + hd_v) * frac
    a = lay.act_bytes
    kvb = lay.kv_bytes or a
    byts = b * (q * heads * (hd + hd_v) * a + kv * kv_heads * (kv_width or hd + hd_v) * kvb)
    return Op(kind="attention", name=name, dtype=lay.mm_dtype if lay.mm_dtype != "mxfp4" else "mxfp8",
              q_len=q, kv_len=kv, head_dim=hd, heads=heads * b, causal=causal and q > 1, batch=1,
              kv_heads=kv_heads * b, flops=flops, bytes=byts)


def local_heads(n: int, tp: int) -> int:
    """Heads one rank holds: n / tp, padded up where tp does not divide n (Neuron pads the heads with
    zeros rather than refusing), one replicated head where tp exceeds n."""
    return max(1, -(-n // tp))


def layer_forward(cfg: ModelConfig, moe: bool, b: int, q: int, kv: int, lay: Layout, decode: bool = False,
                  attn: str = "full", window: int = 0) -> List[Op]:
    """Forward ops of one transformer layer for ``b`` sequences of ``q`` query tokens over ``kv`` keys;
    ``attn`` is the layer's kind ("full", "window" of ``window`` tokens, or "linear")."""
    h, tp = cfg.hidden, lay.tp
    T = b * q
    Tn = T // tp if lay.sp and T % tp == 0 else T          # rows of norms / residuals under SP
    heads = local_heads(cfg.heads, tp)
    # norm names carry the norm type: the simulated op costs pick the layernorm or rmsnorm kernel by name
    ops: List[Op] = [_vec("norm", f"attn_{cfg.norm}", Tn, h, lay, passes=2, flops_per=5)]
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if cfg.q_lora_rank:
            ops += [_mm("attn.q_a", T, h, cfg.q_lora_rank, lay), _mm("attn.q_b", T, cfg.q_lora_rank, heads * qk, lay)]
        else:
            ops.append(_mm("attn.q", T, h, heads * qk, lay))
        ops.append(_mm("attn.kv_a", T, h, cfg.kv_lora_rank + cfg.qk_rope_head_dim, lay))
        if decode:  # absorbed MLA: attend over the compressed latent, one shared "KV head"
            lat = cfg.kv_lora_rank + cfg.qk_rope_head_dim
            ops.append(_attn("attn.core", b, q, kv, heads, 1, lat, cfg.kv_lora_rank, False, lay, kv_width=lat))
        else:
            ops.append(_mm("attn.kv_b", T, cfg.kv_lora_rank, heads * (cfg.qk_nope_head_dim + cfg.v_head_dim), lay))
            ops.append(_attn("attn.core", b, q, kv, heads, heads, qk, cfg.v_head_dim, cfg.causal, lay))
        ops.append(_mm("attn.o", T, heads * cfg.v_head_dim, h, lay))
    elif attn == "linear":
        ops += _linear_attention(cfg, b, q, lay, decode)
    else:
        kvh = local_heads(cfg.n_kv, tp)
        gate = heads if cfg.attn_output_gate else 0
        ops.append(_mm("attn.qkv", T, h, (heads + gate + 2 * kvh) * cfg.hd, lay))
        if cfg.position == "rope":
            ops.append(_vec("elementwise", "attn.rope_mul", T, (heads + kvh) * cfg.hd, lay, passes=2, flops_per=3))
        causal = cfg.causal and not decode
        ctx = kv
        if attn == "window" and window and kv > window:
            ctx = window
            # a sliding window gives every query ``window`` keys (no causal halving); a chunk gives the
            # queries of a chunk the keys before them in it (causal within the chunk)
            causal = causal and bool(cfg.attention_chunk) and not cfg.sliding_window
        ops.append(_attn("attn.core", b, q, ctx, heads, kvh, cfg.hd, cfg.hd, causal, lay))
        if gate:
            ops.append(_vec("elementwise", "attn.out_gate", T, heads * cfg.hd, lay, passes=3, flops_per=4))
        ops.append(_mm("attn.o", T, heads * cfg.hd, h, lay))
    ops.append(_vec("elementwise", "attn.residual", Tn, h, lay))
    ops.append(_vec("norm", f"mlp_{cfg.norm}", Tn, h, lay, passes=2, flops_per=5))
    if moe:
        ops += _moe(cfg, T, lay, decode)
    else:
        ops += _mlp(cfg, "mlp", T, cfg.intermediate // tp, lay)
    ops.append(_vec("elementwise", "mlp.residual", Tn, h, lay))
    return ops


def _mlp(cfg: ModelConfig, name: str, T: int, inter: int, lay: Layout, batch: int = 1) -> List[Op]:
    """A dense MLP of (already sharded) width ``inter`` over T tokens, ``batch`` times (experts)."""
    h = cfg.hidden
    if cfg.mlp == "swiglu":
        return [_mm(f"{name}.gate_up", T, h, 2 * inter, lay, batch),
                _vec("elementwise", f"{name}.swiglu", T * batch, inter, lay, passes=3, flops_per=4),
                _mm(f"{name}.down", T, inter, h, lay, batch)]
    return [_mm(f"{name}.up", T, h, inter, lay, batch),
            _vec("elementwise", f"{name}.gelu", T * batch, inter, lay, passes=2, flops_per=8),
            _mm(f"{name}.down", T, inter, h, lay, batch)]


def _linear_attention(cfg: ModelConfig, b: int, q: int, lay: Layout, decode: bool) -> List[Op]:
    """A gated-delta-rule layer: Q/K/V/Z and gates in, a short causal convolution, the recurrence over a
    fixed per-head state of key_dim x value_dim (fp32), a gated norm and the output projection. Decode reads
    and writes the state once per sequence; prefill runs the chunked form, about four state-sized matmuls
    per token and value head."""
    h, tp = cfg.hidden, lay.tp
    T = b * q
    kh, vh = local_heads(cfg.linear_key_heads, tp), local_heads(cfg.linear_value_heads, tp)
    dk, dv = cfg.linear_key_dim, cfg.linear_value_dim
    ops = [_mm("lin.in_proj", T, h, 2 * kh * dk + 2 * vh * dv + 2 * vh, lay),
           _vec("elementwise", "lin.conv", T, (2 * kh * dk + vh * dv), lay, passes=2, flops_per=2 * cfg.linear_conv)]
    state = 4.0 * b * vh * dk * dv   # fp32 state bytes of this rank's sequences
    flops = 4.0 * 2 * T * vh * dk * dv
    ops.append(Op(kind="matmul", name="lin.recurrence", dtype=lay.mm_dtype if not lay.mm_dtype.startswith("mx")
                  else "bfloat16", m=max(1, T // b), k=dk, n=dv, batch=4 * vh * b, flops=flops,
                  bytes=2 * state + T * (2 * kh * dk + 2 * vh * dv) * lay.act_bytes))
    ops += [_vec("norm", "lin.gated_norm", T, vh * dv, lay, passes=3, flops_per=7),
            _mm("lin.out_proj", T, vh * dv, h, lay)]
    return ops


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to if to > 1 else n


def moe_rank_load(cfg: ModelConfig, T: int, ep: int, skew: float = 1.0) -> tuple:
    """(token slots on the busiest EP rank, distinct experts active on it) for T tokens routed top-k.

    Slots per rank average T*k/ep; the busiest of ``ep`` ranks carries about mean + sqrt(2 mean ln ep)
    (the maximum of ep Poisson counts), times the router's ``skew``. A rank's E/ep experts are each hit
    with probability 1 - (1 - k/E)^T, which is how many expert weights a decode step must read."""
    mean = T * cfg.top_k / ep
    busiest = mean + (math.sqrt(2.0 * mean * math.log(ep)) if ep > 1 else 0.0)
    busiest = min(T * cfg.top_k, busiest * skew, T * min(cfg.top_k, cfg.experts // ep))
    local = cfg.experts // ep
    active = local * (1.0 - (1.0 - cfg.top_k / cfg.experts) ** T)
    return busiest, max(1.0, min(float(local), active, busiest))


def _moe(cfg: ModelConfig, T: int, lay: Layout, decode: bool = False) -> List[Op]:
    """Router, top-k, the routed experts of the busiest rank (imbalance, and block padding in prefill),
    shared experts."""
    ops = [_mm("moe.router", T, cfg.hidden, cfg.experts, lay),
           _vec("softmax", "moe.topk", T, cfg.experts, lay, passes=2, flops_per=5)]
    if lay.ep_in_tp:   # the EP ranks hold the same tokens: each serves its experts' share of them
        etp = max(1, lay.tp // lay.ep)
        busiest, active = moe_rank_load(cfg, T, lay.ep, lay.moe_skew)
    else:              # EP over data-parallel ranks: each receives T x top_k slots (balanced routing)
        etp = lay.tp
        local = cfg.experts // lay.ep
        busiest = T * cfg.top_k
        active = max(1, min(local, busiest))
    n_act = max(1, math.ceil(active - 1e-9))
    m = max(1, math.ceil(busiest / n_act))
    if not decode and lay.moe_all_experts:
        n_act, m = max(1, cfg.experts // lay.ep), T
    elif not decode:
        m = _pad(m, lay.moe_block)
    inter = max(1, cfg.moe_intermediate // etp)
    if not decode:   # compute-bound: a slice narrower than the PE array pays whole columns
        inter = _pad(inter, lay.pe_pad)
    elay = lay if not lay.expert_weight_bytes else \
        Layout(**{**lay.__dict__, "weight_bytes": lay.expert_weight_bytes})
    # decode: a fused MoE kernel streams every selected expert in one pass when the per-rank expert width is
    # whole PE-array columns; otherwise each selected expert is loaded and run on its own ("moe.selected")
    fused = lay.pe_pad <= 1 or inter % lay.pe_pad == 0
    ops += _mlp(cfg, "moe.experts" if fused or not decode else "moe.selected", m, inter, elay, batch=n_act)
    if cfg.shared_experts:
        width = cfg.shared_expert_intermediate or cfg.shared_experts * cfg.moe_intermediate
        ops += _mlp(cfg, "moe.shared", T, local_heads(width, lay.tp), lay)
    return ops


def embed_ops(cfg: ModelConfig, T: int, lay: Layout) -> List[Op]:
    """Token embedding gather (vocab sharded over TP)."""
    return [Op(kind="embedding", name="embed", dtype=ACT, rows=T, cols=cfg.hidden, flops=0.0,
               bytes=2.0 * T * cfg.hidden * lay.act_bytes)]


def head_ops(cfg: ModelConfig, T: int, lay: Layout, loss: bool) -> List[Op]:
    """Final norm, LM head (vocab sharded over TP), and the softmax cross-entropy when training."""
    v = max(1, cfg.vocab // lay.tp)
    ops = [_vec("norm", f"final_{cfg.norm}", T, cfg.hidden, lay, passes=2, flops_per=5),
           _mm("lm_head", T, cfg.hidden, v, lay)]
    if loss:
        ops.append(Op(kind="softmax", name="loss", dtype="float32", rows=T, cols=v, flops=5.0 * T * v,
                      bytes=2.0 * T * v * 4))
    return ops


def backward_of(op: Op, frozen: bool = False) -> List[GraphOp]:
    """Backward of a forward op: a matmul's dgrad and wgrad, flash attention's 2.5x, 2x for vector ops.
    A ``frozen`` weight (LoRA's base model) gets no weight gradient: a matmul keeps only its dgrad (the
    input gradient the layers below still need), a frozen embedding lookup has no backward at all."""
    from .datafiles import figure
    if op.kind == "matmul":
        dgrad = GraphOp(Op(kind="matmul", name=op.name + ".dgrad", dtype=op.dtype, m=op.m, k=op.n, n=op.k,
                           batch=op.batch, flops=op.flops, bytes=op.bytes), 1.0, "backward")
        if frozen:
            return [dgrad]
        return [dgrad, GraphOp(Op(kind="matmul", name=op.name + ".wgrad", dtype=op.dtype, m=op.k, k=op.m, n=op.n,
                                  batch=op.batch, flops=op.flops, bytes=op.bytes), 1.0, "backward")]
    if op.kind == "attention":
        return [GraphOp(op, float(figure("estimator", "training.flash_attention_backward_factor")), "backward")]
    if op.kind == "embedding":
        return [] if frozen else [GraphOp(op, 1.0, "backward")]
    return [GraphOp(op, 2.0, "backward")]


def adapter_ops(cfg: ModelConfig, lora, moe: bool, T: int, lay: Layout) -> List[Op]:
    """Forward LoRA adapter matmuls of one layer (x A, then (x A) B, per target); they are trained, so their
    backward is the ordinary dgrad + wgrad."""
    from .lora import adapter_matmuls
    slots = T * cfg.top_k if moe and not lay.ep_in_tp else T
    local = max(1, cfg.experts // lay.ep) if moe else 1
    active = max(1, min(local, slots))
    return [_mm(name, m, k, n, lay, batch=b) for name, m, k, n, b in
            adapter_matmuls(cfg, lora, T, lay.tp, moe, math.ceil(slots / active), active)]


def layer_counts(cfg: ModelConfig, pp: int, vp: int = 1) -> tuple:
    """(dense layers, MoE layers) on the heaviest pipeline stage. Layers that split evenly give layers / pp;
    an uneven split (Llama-3.1-405B's 126 layers, DeepSeek-V3's 61) puts ceil(layers / (pp x vp)) layers in
    each of a stage's ``vp`` chunks on the heaviest stage, MoE layers first (they are the later ones)."""
    if cfg.layers % (pp * vp) == 0:
        return (cfg.layers - cfg.moe_layers) / pp, cfg.moe_layers / pp
    heavy = min(cfg.layers, math.ceil(cfg.layers / (pp * vp)) * vp)
    moe = min(cfg.moe_layers, heavy)
    return float(heavy - moe), float(moe)


def training_graph(cfg: ModelConfig, lay: Layout, micro_batch: int, seq: int, recompute: str, lora=None,
                   vp: int = 1) -> OpGraph:
    """Ops of one micro-batch on the heaviest pipeline stage, plus the optimizer step (once per step).
    With ``lora`` (a ``model.lora.Lora``) the base weights are frozen and the adapters are trained."""
    q = seq // lay.cp
    frozen = lora is not None
    out: List[GraphOp] = []
    T = micro_batch * q
    for (moe, attn, window), n in stage_kind_counts(cfg, lay.pp, vp).items():
        fwd = [(op, frozen) for op in layer_forward(cfg, moe, micro_batch, q, seq, lay, attn=attn, window=window)]
        if frozen:
            fwd += [(op, False) for op in adapter_ops(cfg, lora, moe, T, lay)]
        for op, fz in fwd:
            out.append(GraphOp(op, n, "forward"))
            out += [GraphOp(g.op, g.count * n, g.phase) for g in backward_of(op, fz)]
            if recompute == "full" or (recompute == "selective" and op.kind == "attention"):
                out.append(GraphOp(op, n, "recompute"))
    for op in embed_ops(cfg, T, lay) + head_ops(cfg, T, lay, loss=True):
        out.append(GraphOp(op, 1.0, "head"))
        out += [GraphOp(g.op, g.count, "head") for g in backward_of(op, frozen)]
    return OpGraph(tuple(out))


def optimizer_graph(params_local: float, hbm_bytes_per_param: float) -> OpGraph:
    """The AdamW step over the parameters this core updates (fp32 master weights)."""
    cols = 4096
    rows = max(1, math.ceil(params_local / cols))
    op = Op(kind="optimizer", name="adamw", dtype="float32", rows=rows, cols=cols,
            flops=12.0 * params_local, bytes=hbm_bytes_per_param * params_local)
    return OpGraph((GraphOp(op, 1.0, "optimizer"),))


def kind_counts(cfg: ModelConfig, pp: int = 1) -> dict:
    """Layers of one pipeline stage per (moe, attention, window) kind (fractional when pp does not split
    the pattern evenly)."""
    out: dict = {}
    for k in cfg.layer_kinds():
        out[k] = out.get(k, 0.0) + 1.0 / pp
    return out


def stage_kind_counts(cfg: ModelConfig, pp: int, vp: int = 1) -> dict:
    """``kind_counts`` of the heaviest pipeline stage: an uneven split gives it ``layer_counts``' layers (MoE
    ones first), shared among the layer kinds in the model's proportions."""
    base = kind_counts(cfg, pp)
    if cfg.layers % (pp * vp) == 0:
        return base
    dense_n, moe_n = layer_counts(cfg, pp, vp)
    tot = {True: sum(v for k, v in base.items() if k[0]), False: sum(v for k, v in base.items() if not k[0])}
    want = {True: moe_n, False: dense_n}
    return {k: v * want[k[0]] / tot[k[0]] for k, v in base.items() if tot[k[0]] > 0 and want[k[0]] > 0}


def inference_graph(cfg: ModelConfig, lay: Layout, batch: int, q: int, kv: int, decode: bool) -> OpGraph:
    """Ops of one prefill (q = prompt) or one decode step (q = 1) over all layers of a stage."""
    out: List[GraphOp] = []
    for (moe, attn, window), n in kind_counts(cfg, lay.pp).items():
        out += [GraphOp(op, n, "forward")
                for op in layer_forward(cfg, moe, batch, q, kv, lay, decode, attn, window)]
    # only the last position of each sequence reaches the LM head
    out += [GraphOp(op, 1.0, "head") for op in embed_ops(cfg, batch * q, lay) + head_ops(cfg, batch, lay, False)]
    return OpGraph(tuple(out))

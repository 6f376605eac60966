"""A Llama-style decoder written the way a GPU team's training code often is: the model behind
``trnsim evaluate --example``.  Built on the meta device (no weights) and captured for the compatibility
step; its sizes match the zoo's Llama models, which the cost steps estimate.

RMSNorm, rotary position embeddings, grouped-query attention through ``scaled_dot_product_attention``
and a SwiGLU MLP, with a hard-coded CUDA device and a fused CUDA-only optimizer flag, as CUDA-first code has.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# Llama-2-13B's sizes (zoo: llama-2-13b); the capture runs CAPTURE_LAYERS of its 40 identical blocks
LLAMA_13B = dict(vocab=32000, d=5120, layers=40, heads=40, kv_heads=40, ffn=13824)
CAPTURE_LAYERS = 2
EXAMPLE_INPUT_SHAPE = (1, 2048)   # batch x sequence of token ids


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned scale."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        """Normalise the last dimension."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x, positions, base: float = 10000.0):
    """Rotate pairs of channels by position-dependent angles (RoPE)."""
    half = x.shape[-1] // 2
    freqs = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    ang = positions[:, None].float() * freqs[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    """Causal grouped-query self-attention."""

    def __init__(self, d: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, heads * self.hd, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, d, bias=False)

    def forward(self, x, positions):
        """Attention over the sequence so far."""
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = rotary(q, positions), rotary(k, positions)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(a.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    """Pre-norm decoder block: attention, then a SwiGLU MLP."""

    def __init__(self, d: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, heads, kv_heads)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, positions):
        """One block."""
        x = x + self.attn(self.attn_norm(x), positions)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaForCausalLM(nn.Module):
    """Token embedding, ``layers`` blocks, final norm and an untied LM head (Llama-2-13B sizes by default,
    ``CAPTURE_LAYERS`` blocks for the capture)."""

    def __init__(self, vocab: int = LLAMA_13B["vocab"], d: int = LLAMA_13B["d"], layers: int = CAPTURE_LAYERS,
                 heads: int = LLAMA_13B["heads"], kv_heads: int = LLAMA_13B["kv_heads"],
                 ffn: int = LLAMA_13B["ffn"]):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        """Logits for every position."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, positions)
        return self.lm_head(self.norm(x))


def training_device():
    """Where the training script put the model: hard-coded CUDA, as CUDA-first code often does."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def make_optimizer(model):
    """AdamW with the fused CUDA kernel switched on (a CUDA-only flag a port has to drop)."""
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=torch.cuda.is_available())

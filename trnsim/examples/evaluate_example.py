"""A small GPT-style language model written the way CUDA-first code often is: the built-in model of
``trnsim evaluate --example`` (about 60 M parameters; captured on the meta device, never run)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXAMPLE_INPUT_SHAPE = (4, 1024)   # batch x sequence of token ids


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        """One block."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Token embedding, ``layers`` blocks, final norm and a tied LM head."""

    def __init__(self, vocab: int = 32000, d: int = 512, layers: int = 8, heads: int = 8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        """Logits for every position."""
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.emb.weight.t()


def training_device():
    """Where the training script put the model: hard-coded CUDA, as CUDA-first code often does."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

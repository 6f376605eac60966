"""One linear layer on a [batch, seq, features] input, and one causal attention over given heads."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneLinear(nn.Module):
    def __init__(self, k=256, n=512):
        super().__init__()
        self.proj = nn.Linear(k, n)

    def forward(self, x):
        return self.proj(x)


class CausalAttention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class NoGradRegion(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)

    def forward(self, x):
        with torch.no_grad():  # export wraps this region in a higher-order op with its own subgraph
            y = self.a(x)
        return self.b(y).relu()

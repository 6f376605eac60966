"""A small GPT trained the PyTorch/XLA tutorial way (xla device, autocast, optimizer_step, mark_step).

Runs under `trnsim exec --instance trn1.32xlarge -- python tiny_gpt_train.py` (or torchrun), unchanged
from what would run on a Trainium instance.  Settings from the environment so tests stay quick.
"""
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla.amp import autocast

VOCAB, DIM, HEADS, LAYERS = 256, int(os.environ.get("GPT_DIM", 128)), 4, 2
SEQ, BATCH = int(os.environ.get("GPT_SEQ", 64)), int(os.environ.get("GPT_BATCH", 8))
STEPS = int(os.environ.get("GPT_STEPS", 8))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc, self.out = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=-1)
        q, k, v = (z.view(b, t, HEADS, DIM // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, DIM))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batch(step, device, seq=SEQ):
    # a learnable pattern: each token is the previous one plus one (mod VOCAB)
    g = torch.Generator().manual_seed(1000 * xm.get_ordinal() + step)
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=g)
    data = (start + torch.arange(seq + 1)) % VOCAB
    return data[:, :-1].to(device), data[:, 1:].to(device)


def main():
    torch.manual_seed(0)
    device = xm.xla_device()
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    t0 = time.perf_counter()
    for step in range(STEPS):
        x, y = batch(step, device)
        opt.zero_grad()
        with autocast(device, dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        xm.optimizer_step(opt)
        xm.mark_step()
        losses.append(loss.item())
        if os.environ.get("GPT_MARK_AFTER_ITEM"):
            xm.mark_step()   # as a loader that ends a step per batch would: the cut holds only the item()
        xm.master_print(f"step {step} loss {losses[-1]:.4f}")
    xm.master_print(f"first {losses[0]:.4f} last {losses[-1]:.4f} loop_s {time.perf_counter() - t0:.3f}")
    assert losses[-1] < losses[0], "loss did not decrease"


if __name__ == "__main__":
    main()

"""A training loop whose sequence length changes every step: the torch_xla recompilation pitfall
(each new shape is a new graph, so a new Neuron compilation)."""
import torch
import torch.nn as nn
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model = nn.Sequential(nn.Embedding(64, 32), nn.Linear(32, 64)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    seq = 8 + 4 * step
    tokens = torch.randint(0, 64, (2, seq)).to(device)
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.view(-1, 64), tokens.view(-1))
    loss.backward()
    xm.optimizer_step(opt)
    opt.zero_grad()
    xm.mark_step()
    xm.master_print(f"step {step} seq {seq} loss {loss.item():.3f}")

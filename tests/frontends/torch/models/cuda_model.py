"""A model written for one GPU: .cuda(), device="cuda" and torch.cuda calls in its source."""
import torch
import torch.nn as nn


class CudaMLP(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.use_amp = torch.cuda.is_available()

    def forward(self, x):
        x = x.cuda()
        scale = torch.ones(x.shape[-1], device="cuda")
        return self.fc(x) * scale.to("cuda")

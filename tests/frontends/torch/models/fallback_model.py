"""A small MLP whose forward returns a plain Python object: torch.export rejects the output, eager runs."""
import torch.nn as nn


class Output:
    def __init__(self, logits):
        self.logits = logits


class ObjectOutMLP(nn.Module):
    def __init__(self, d=32, hidden=64, out=8):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, out)

    def forward(self, x):
        return Output(self.fc2(self.act(self.fc1(x))))

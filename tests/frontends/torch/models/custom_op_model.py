"""A model calling an operator outside aten, registered here with torch.library (like a CUDA extension)."""
import torch
import torch.nn as nn


@torch.library.custom_op("trnsim_test::fused_bias_gelu", mutates_args=())
def fused_bias_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x + b)


@fused_bias_gelu.register_fake
def _(x, b):
    return torch.empty_like(x)


@torch.library.custom_op("trnsim_test::no_meta_kernel", mutates_args=())
def no_meta_kernel(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


class CustomMLP(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.bias = nn.Parameter(torch.zeros(4 * d))
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        h = torch.ops.trnsim_test.fused_bias_gelu(self.fc(x), self.bias)
        return self.out(h)


class Untraceable(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.ops.trnsim_test.no_meta_kernel(self.fc(x))

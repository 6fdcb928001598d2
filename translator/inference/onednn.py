"""Decoding on x86 CPUs: the model's linear layers multiplied by oneDNN instead of MKL.

PyTorch's CPU `nn.Linear` calls MKL's sgemm, which takes its AVX2 path on AMD processors;
oneDNN's kernels use AVX-512 wherever the CPU has it (what it is worth:
docs/deploy.md#ctranslate2-export-and-engine). It serves inference only: with gradients
enabled, or off the CPU, or in another dtype, a layer computes as `nn.Linear` does.
"""

from __future__ import annotations

import platform

import torch
from torch import nn


def available() -> bool:
    """oneDNN's linear operator is built into this PyTorch and the CPU is x86-64."""
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class OneDNNLinear(nn.Linear):
    """`nn.Linear` whose inference forward runs oneDNN's fp32 inner product. Same parameters,
    same state dict, same ties: only the kernel differs (results agree to rounding).

    Fewer than `min_rows` rows stay with MKL: oneDNN starts its threads for every product,
    and one sentence at a time on a busy CPU (a server without batching, 16 clients on 2
    cores) served 38-39 requests/s through oneDNN against 50 through MKL."""

    min_rows = 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fp32 = x.dtype == self.weight.dtype == torch.float32
        few_rows = x.numel() < self.min_rows * x.size(-1)
        if torch.is_grad_enabled() or not x.is_cpu or not fp32 or few_rows:
            return super().forward(x)
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def use_onednn(model: nn.Module, enabled: bool = True) -> int:
    """Switch the linear layers of `model` in place to `OneDNNLinear` where oneDNN is
    available (or back to `nn.Linear` with enabled=False); returns how many it switched."""
    if enabled and not available():
        return 0
    old, new = (nn.Linear, OneDNNLinear) if enabled else (OneDNNLinear, nn.Linear)
    switched = 0
    for module in model.modules():
        if type(module) is old:
            module.__class__ = new
            switched += 1
    return switched

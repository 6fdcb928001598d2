"""Dropout with a cheaper random mask on the CPU (see `Dropout`)."""

import torch
import torch.nn.functional as F
from torch import nn


class Dropout(nn.Module):
    """Inverted dropout with a cheaper mask on the CPU. There PyTorch draws one mt19937
    number per element, which made dropout 17% of a training step; here each 64-bit draw
    gives four 16-bit numbers (3.5x cheaper). The drop probability is rounded to a multiple
    of 1/65536. Other devices use F.dropout."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p
        dropped = round(p * 65536)
        self.threshold = dropped - 32768  # int16 values below this are dropped
        self.scale = 65536 / (65536 - dropped)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        n = x.numel()
        bits = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= self.threshold
        if x.dtype == torch.float32:
            return x * (keep * self.scale)  # one float mask: the fastest form, forward and back
        # bf16 (train.precision): the mask in x's dtype, so bf16 stays bf16 (a float32 mask
        # made it float32, to be cast back by the next matmul); the scale applied apart, as
        # 1/(1 - p) is not exact in bf16
        return x * self.scale * keep.to(x.dtype)

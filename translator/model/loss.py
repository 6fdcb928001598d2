"""The training objective: label-smoothed cross-entropy summed over the real target tokens
(PAD positions ignored); the caller divides by the token count it normalises over (one
batch, the batches of one update, or all ranks' batches of one update)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from translator.data.tokenizer import PAD


def sequence_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """logits (B,T,V), target (B,T) → the summed loss (a scalar, float32)."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=smoothing,
        reduction="sum",
    )

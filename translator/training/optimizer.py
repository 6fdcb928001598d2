"""The optimiser: AdamW with weight decay on the weight matrices only. LayerNorm gains,
biases and embeddings (the tied output projection too) are not decayed: that only fights
the layer's scale, and shrinks the embedding rows of rare words most."""

from __future__ import annotations

import torch
from torch import nn

from translator.config import TrainConfig


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: matrices (decayed) and everything else (not)."""
    embeddings = {
        id(module.weight) for module in model.modules() if isinstance(module, nn.Embedding)
    }
    decay, keep = [], []
    for _, param in model.named_parameters():  # a tied parameter is listed once
        if not param.requires_grad:
            continue
        matrix = param.ndim >= 2 and id(param) not in embeddings
        (decay if matrix else keep).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, train_cfg: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        parameter_groups(model, train_cfg.weight_decay),
        lr=train_cfg.lr,
        betas=(0.9, 0.98),
        eps=1e-9,
        fused=True,  # one kernel for all parameters, not a loop over them
    )
